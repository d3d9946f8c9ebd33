// mlx5 send-queue WQE encoders for what upstream rdma-core verbs cannot post:
// cross-channel WAIT (CQE_WAIT), SEND_ENABLE, RECV_ENABLE, and a UMR-based
// type-2 BIND_MW whose memory-key context names the QP the window is bound to
// (possibly not the posting QP).
//
// *** UNTESTED ON HARDWARE. *** No ConnectX was available. The byte layouts
// below were read from public sources (cited per constant) and are checked by
// mlx5_wqe_test.cc against hand-written golden bytes. Whether a ConnectX-5
// accepts these WQEs has not been tested. See README.md for what is uncertain.
//
// What they are for:
//   - ODRP and OneSidedMW chains. A WAIT stalls its SQ until a CQ reaches a
//     completion count. A SEND_ENABLE or RECV_ENABLE lets a "managed" QP run
//     its SQ or RQ up to an index. Together they let the NIC run a
//     pre-posted chain with no CPU in the loop (fabric::Opcode kWait /
//     kSendEnable / kRecvEnable in the simulator).
//   - OneSidedMW's bind: a type-2 MW bound through a UMR WQE, with the QPN in
//     the mkey context chosen by the caller (rdma-core always writes the
//     posting QP's number).
//
// How they would be used (the post path is NOT implemented here):
//   1. Create the QPs with cross-channel / managed-send / managed-recv creation
//      flags (MLNX_OFED exp verbs or DevX; upstream verbs have none).
//   2. mlx5dv_init_obj(MLX5DV_OBJ_QP) -> sq.buf, sq.wqe_cnt, sq.stride (64),
//      dbrec, bf.reg.
//   3. Encode into sq.buf + (cur_post & (wqe_cnt - 1)) * 64. The encoders
//      write one contiguous run. A WQE longer than 64 B (the BIND_MW takes
//      192 B) must not wrap past the end of the SQ buffer: pad with NOPs or
//      split the copy.
//   4. cur_post += WqeBbCount(bytes). Then a write barrier, the doorbell record
//      dbrec[MLX5_SND_DBR] = htobe32(cur_post & 0xffff), and the first 8 bytes
//      of the control segment written to the BlueFlame/UAR register.
//
// All multi-byte fields are big-endian. The encoders never depend on host byte
// order, and they zero every reserved byte they cover.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dmb::fabric::mlx5 {

// ---- Sizes -----------------------------------------------------------------
// rdma-core providers/mlx5/mlx5dv.h enum: MLX5_SEND_WQE_BB = 64.
// linux include/linux/mlx5/qp.h enum: MLX5_SEND_WQE_DS = 16.
inline constexpr size_t MLX5_SEND_WQE_BB = 64;
inline constexpr size_t MLX5_SEND_WQE_DS = 16;

// ---- Control-segment opcodes (byte 3) --------------------------------------
// rdma-core providers/mlx5/mlx5dv.h enum: MLX5_OPCODE_UMR = 0x25.
inline constexpr uint8_t MLX5_OPCODE_UMR = 0x25;
// MLNX_OFED libmlx5 src/mlx5.h enum: MLX5_OPCODE_CQE_WAIT = 0x0f. The same value
// is DPDK drivers/common/mlx5/mlx5_prm.h #define MLX5_OPCODE_WAIT 0x0fu.
inline constexpr uint8_t MLX5_OPCODE_CQE_WAIT = 0x0f;
// libmlx5 src/mlx5.h: MLX5_OPCODE_SEND_ENABLE = 0x17. Also DPDK mlx5_prm.h:
// MLX5_OPCODE_SEND_EN 0x17u.
inline constexpr uint8_t MLX5_OPCODE_SEND_ENABLE = 0x17;
// libmlx5 src/mlx5.h: MLX5_OPCODE_RECV_ENABLE = 0x16. Only the libmlx5 family
// (MLNX_OFED, and a RedN-like modified copy) has it. DPDK and upstream have no RECV_EN.
inline constexpr uint8_t MLX5_OPCODE_RECV_ENABLE = 0x16;
// DPDK mlx5_prm.h: MLX5_OPC_MOD_WAIT_CQ_PI 0u (WAIT on a CQ's counter). libmlx5
// posts CQE_WAIT with opmod 0 as well.
inline constexpr uint8_t MLX5_OPC_MOD_WAIT_CQ_PI = 0;

// ---- Control-segment fm_ce_se byte (byte 11) -------------------------------
// rdma-core mlx5dv.h enum. The kernel's include/linux/mlx5/qp.h has the same
// values but other names: 4 << 5 is MLX5_FENCE_MODE_SMALL_AND_FENCE there, and
// the kernel's MLX5_FENCE_MODE_FENCE is 2 << 5. rdma-core calls 4 << 5 "FENCE".
inline constexpr uint8_t MLX5_WQE_CTRL_SOLICITED = 1 << 1;
inline constexpr uint8_t MLX5_WQE_CTRL_CQ_UPDATE = 2 << 2;  // DPDK: MLX5_COMP_ALWAYS << 2
inline constexpr uint8_t MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE = 1 << 5;
inline constexpr uint8_t MLX5_WQE_CTRL_FENCE = 4 << 5;

// ---- UMR control segment: flags byte (byte 0) ------------------------------
// rdma-core mlx5dv.h enum MLX5_WQE_UMR_CTRL_FLAG_* ("TRNSLATION" is spelled as
// in the source). The kernel's include/linux/mlx5/device.h calls 1 << 5
// MLX5_UMR_CHECK_NOT_FREE (and CHECK_FREE is 2 << 5 there). rdma-core names
// 1 << 5 CHECK_FREE and sets it on a type-2 bind. We write what rdma-core
// writes.
inline constexpr uint8_t MLX5_WQE_UMR_CTRL_FLAG_INLINE = 1 << 7;
inline constexpr uint8_t MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE = 1 << 5;
inline constexpr uint8_t MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET = 1 << 4;
inline constexpr uint8_t MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN = 1 << 3;

// ---- UMR control segment: mkey_mask (big-endian u64 at byte 8) -------------
// rdma-core mlx5dv.h enum MLX5_WQE_UMR_CTRL_MKEY_MASK_*. The kernel's
// device.h MLX5_MKEY_MASK_{LEN,START_ADDR,KEY,QPN,LW,RR,RW,A,FREE} has the
// same bits.
inline constexpr uint64_t MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN = 1ull << 0;
inline constexpr uint64_t MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR = 1ull << 6;
inline constexpr uint64_t MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY = 1ull << 13;
inline constexpr uint64_t MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN = 1ull << 14;
inline constexpr uint64_t MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE = 1ull << 18;
inline constexpr uint64_t MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ = 1ull << 19;
inline constexpr uint64_t MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE = 1ull << 20;
inline constexpr uint64_t MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC = 1ull << 21;
inline constexpr uint64_t MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE = 1ull << 29;

// ---- Mkey context segment --------------------------------------------------
// rdma-core mlx5dv.h enum: MLX5_WQE_MKEY_CONTEXT_FREE (byte 0) and
// MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_* (byte 2). These match the kernel's
// MLX5_MKEY_STATUS_FREE and MLX5_PERM_*, and the bits of mlx5_ifc.h
// mlx5_ifc_mkc_bits (free at bit 1; a/rw/rr/lw/lr at bits 0x11-0x15).
inline constexpr uint8_t MLX5_WQE_MKEY_CONTEXT_FREE = 1 << 6;
inline constexpr uint8_t MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC = 1 << 6;
inline constexpr uint8_t MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE = 1 << 5;
inline constexpr uint8_t MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ = 1 << 4;
inline constexpr uint8_t MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE = 1 << 3;
inline constexpr uint8_t MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_READ = 1 << 2;

// ---- Encoded sizes ---------------------------------------------------------
inline constexpr size_t kCtrlSegBytes = 16;     // struct mlx5_wqe_ctrl_seg
inline constexpr size_t kWaitWqeBytes = 32;     // ctrl + mlx5_wqe_wait_en_seg
inline constexpr size_t kEnableWqeBytes = 32;   // ctrl + mlx5_wqe_wait_en_seg
inline constexpr size_t kBindMwWqeBytes = 192;  // ctrl 16 + umr ctrl 48 + mkc 64 + klm 64
// rdma-core qp.c set_bind_wr: "KLM support only 2GB".
inline constexpr uint64_t kBindMwMaxLength = 1ull << 31;

constexpr uint8_t DsCount(size_t bytes) { return static_cast<uint8_t>(bytes / MLX5_SEND_WQE_DS); }
constexpr size_t WqeBbCount(size_t bytes) {
  return (bytes + MLX5_SEND_WQE_BB - 1) / MLX5_SEND_WQE_BB;
}

// Control segment (struct mlx5_wqe_ctrl_seg, rdma-core mlx5dv.h; packing as in
// mlx5dv_set_ctrl_seg):
//   0  be32 opmod_idx_opcode = opmod << 24 | wqe_index << 8 | opcode
//   4  be32 qpn_ds           = qpn << 8 | ds   (ds: 6 bits, 16-byte units)
//   8  u8   signature
//   9  be16 dci_stream_channel_id (rdma-core) / rsvd (kernel); written 0
//  11  u8   fm_ce_se
//  12  be32 imm  (the UMR/bind WQE puts the MW's current rkey here)
struct CtrlSeg {
  uint8_t opcode = 0;
  uint8_t opmod = 0;
  uint16_t wqe_index = 0;  // SQ producer counter (WQEBBs), low 16 bits
  uint32_t qpn = 0;        // posting QP, 24 bits
  uint8_t ds = 0;          // 1..63
  uint8_t fm_ce_se = 0;
  uint8_t signature = 0;
  uint32_t imm = 0;  // host value; written big-endian
};
// Writes 16 bytes. Returns 16, or 0 if `out` is short or a field overflows.
size_t EncodeCtrl(std::span<uint8_t> out, const CtrlSeg& c);

// What every encoder needs from the posting side.
struct PostingQp {
  uint32_t qpn = 0;
  uint16_t wqe_index = 0;
  uint8_t fm_ce_se = 0;  // MLX5_WQE_CTRL_* bits
};

// WAIT (CQE_WAIT): the posting SQ stalls until CQ `cqn` has produced
// `cq_count` completions (an absolute counter, not a delta). Layout after the
// control segment: struct mlx5_wqe_wait_en_seg {u8 rsvd0[8]; be32 pi; be32
// obj_num} (libmlx5 src/wqe.h). DPDK's struct mlx5_wqe_qseg {rsvd0, rsvd1,
// max_index, qpn_cqn} is the same layout.
//   16  8 B  reserved
//   24  be32 pi      = cq_count (DPDK masks it to MLX5_CQ_INDEX_WIDTH = 24 bits)
//   28  be32 obj_num = cqn
struct WaitArgs {
  PostingQp sq;
  uint32_t cqn = 0;
  uint32_t cq_count = 0;
};
size_t EncodeWait(std::span<uint8_t> out, const WaitArgs& a);  // 32 B, ds = 2

// SEND_ENABLE / RECV_ENABLE: managed QP `target_qpn` may run its SQ (or RQ)
// up to `target_index` (exclusive, absolute). Same wait_en segment:
// pi = target_index (DPDK masks SEND_EN's to MLX5_WQ_INDEX_WIDTH = 16 bits),
// obj_num = target_qpn.
struct EnableArgs {
  PostingQp sq;
  uint32_t target_qpn = 0;
  uint32_t target_index = 0;
};
size_t EncodeSendEnable(std::span<uint8_t> out, const EnableArgs& a);  // 32 B, ds = 2
size_t EncodeRecvEnable(std::span<uint8_t> out, const EnableArgs& a);  // 32 B, ds = 2

// Type-2 BIND_MW as a UMR WQE, following rdma-core qp.c set_bind_wr:
//   0   ctrl: opcode UMR, imm = mw_rkey (the MW's current rkey)
//  16   struct mlx5_wqe_umr_ctrl_seg (48 B):
//         0 u8 flags = INLINE | TRNSLATION_OFFSET | CHECK_FREE
//         4 be16 klm_octowords = 4 (one KLM padded to 64 B)
//         6 be16 translation_offset = 0
//         8 be64 mkey_mask = FREE | MKEY | QPN | LEN | START_ADDR | 4 access bits
//  64   struct mlx5_wqe_mkey_context_seg (64 B):
//         0 u8 free = 0; 2 u8 access_flags
//         4 be32 qpn_mkey = bound_qpn << 8 | (new_rkey & 0xff)
//        16 be64 start_addr (0 if zero_based); 24 be64 len
// 128   KLM (struct mlx5_wqe_umr_klm_seg) + 48 zero bytes:
//         0 be32 byte_count = length; 4 be32 mkey = mr_lkey; 8 be64 address = addr
// rdma-core puts INITIATOR_SMALL_FENCE on the WQE *after* a bind. The caller
// must do the same.
struct BindMwArgs {
  PostingQp sq;
  uint32_t mw_rkey = 0;    // current rkey of the MW (ctrl imm)
  uint32_t new_rkey = 0;   // only its low 8 bits (the key variant) are written
  uint32_t bound_qpn = 0;  // QP allowed to use the window; rdma-core: posting QP
  uint32_t mr_lkey = 0;    // parent MR
  uint64_t addr = 0;
  uint64_t length = 0;  // 1..kBindMwMaxLength
  uint8_t access = 0;   // MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_* bits
  bool zero_based = false;
};
// Returns 192, or 0 if `out` is short, a QPN overflows 24 bits, or the length
// is 0 or over 2 GiB. (A length of 0 is rdma-core's invalidate form, which is
// not encoded here.)
size_t EncodeBindMwUmr(std::span<uint8_t> out, const BindMwArgs& a);

}  // namespace dmb::fabric::mlx5
