// UNTESTED ON HARDWARE. See mlx5_wqe.h.
#include "fabric/mlx5/mlx5_wqe.h"

#include <algorithm>

namespace dmb::fabric::mlx5 {
namespace {

constexpr uint32_t kMax24 = 0xffffff;
constexpr uint8_t kMaxDs = 0x3f;  // 6-bit ds field (kernel qp.h MLX5_WQE_CTRL_DS_MASK)

// Offsets in struct mlx5_wqe_ctrl_seg (rdma-core mlx5dv.h).
constexpr size_t kCtrlOpmodIdxOpcode = 0, kCtrlQpnDs = 4, kCtrlSignature = 8, kCtrlFmCeSe = 11,
                 kCtrlImm = 12;
// Offsets in struct mlx5_wqe_wait_en_seg (libmlx5 wqe.h) / mlx5_wqe_qseg (DPDK).
constexpr size_t kWaitEnPi = 8, kWaitEnObjNum = 12;
// Offsets in struct mlx5_wqe_umr_ctrl_seg (rdma-core mlx5dv.h, 48 B).
constexpr size_t kUmrFlags = 0, kUmrKlmOctowords = 4, kUmrTranslationOffset = 6, kUmrMkeyMask = 8,
                 kUmrCtrlBytes = 48;
// Offsets in struct mlx5_wqe_mkey_context_seg (rdma-core mlx5dv.h, 64 B).
constexpr size_t kMkcFree = 0, kMkcAccessFlags = 2, kMkcQpnMkey = 4, kMkcStartAddr = 16,
                 kMkcLen = 24, kMkcBytes = 64;
// struct mlx5_wqe_umr_klm_seg, padded to 64 B by set_umr_data_seg.
constexpr size_t kKlmByteCount = 0, kKlmMkey = 4, kKlmAddress = 8, kKlmBytes = 64;

void PutBe16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void PutBe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void PutBe64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}

// rdma-core qp.c get_klm_octo: ALIGN(nentries, 3) / 2. One KLM -> 4 octowords.
constexpr uint16_t KlmOctowords(int nentries) {
  return static_cast<uint16_t>(((nentries + 7) & ~7) / 2);
}

size_t EncodeWaitEn(std::span<uint8_t> out, const PostingQp& sq, uint8_t opcode, uint32_t obj_num,
                    uint32_t pi) {
  if (out.size() < kWaitWqeBytes || obj_num > kMax24) return 0;
  CtrlSeg c;
  c.opcode = opcode;
  c.opmod = 0;  // MLX5_OPC_MOD_WAIT_CQ_PI for WAIT; libmlx5 uses 0 for the enables too
  c.wqe_index = sq.wqe_index;
  c.qpn = sq.qpn;
  c.ds = DsCount(kWaitWqeBytes);
  c.fm_ce_se = sq.fm_ce_se;
  if (EncodeCtrl(out, c) == 0) return 0;
  uint8_t* seg = out.data() + kCtrlSegBytes;
  std::fill_n(seg, kWaitWqeBytes - kCtrlSegBytes, uint8_t{0});
  PutBe32(seg + kWaitEnPi, pi);
  PutBe32(seg + kWaitEnObjNum, obj_num);
  return kWaitWqeBytes;
}

}  // namespace

size_t EncodeCtrl(std::span<uint8_t> out, const CtrlSeg& c) {
  if (out.size() < kCtrlSegBytes || c.qpn > kMax24 || c.ds == 0 || c.ds > kMaxDs) return 0;
  uint8_t* p = out.data();
  std::fill_n(p, kCtrlSegBytes, uint8_t{0});
  PutBe32(p + kCtrlOpmodIdxOpcode,
          uint32_t{c.opmod} << 24 | uint32_t{c.wqe_index} << 8 | uint32_t{c.opcode});
  PutBe32(p + kCtrlQpnDs, c.qpn << 8 | c.ds);
  p[kCtrlSignature] = c.signature;
  p[kCtrlFmCeSe] = c.fm_ce_se;
  PutBe32(p + kCtrlImm, c.imm);
  return kCtrlSegBytes;
}

size_t EncodeWait(std::span<uint8_t> out, const WaitArgs& a) {
  return EncodeWaitEn(out, a.sq, MLX5_OPCODE_CQE_WAIT, a.cqn, a.cq_count);
}

size_t EncodeSendEnable(std::span<uint8_t> out, const EnableArgs& a) {
  return EncodeWaitEn(out, a.sq, MLX5_OPCODE_SEND_ENABLE, a.target_qpn, a.target_index);
}

size_t EncodeRecvEnable(std::span<uint8_t> out, const EnableArgs& a) {
  return EncodeWaitEn(out, a.sq, MLX5_OPCODE_RECV_ENABLE, a.target_qpn, a.target_index);
}

size_t EncodeBindMwUmr(std::span<uint8_t> out, const BindMwArgs& a) {
  if (out.size() < kBindMwWqeBytes || a.bound_qpn > kMax24 || a.length == 0 ||
      a.length > kBindMwMaxLength) {
    return 0;
  }
  CtrlSeg c;
  c.opcode = MLX5_OPCODE_UMR;
  c.wqe_index = a.sq.wqe_index;
  c.qpn = a.sq.qpn;
  c.ds = DsCount(kBindMwWqeBytes);
  c.fm_ce_se = a.sq.fm_ce_se;
  c.imm = a.mw_rkey;  // qp.c: ctrl->imm = htobe32(wr->bind_mw.mw->rkey)
  if (EncodeCtrl(out, c) == 0) return 0;
  uint8_t* p = out.data() + kCtrlSegBytes;
  std::fill_n(p, kBindMwWqeBytes - kCtrlSegBytes, uint8_t{0});

  // set_umr_control_seg, type 2 with a length.
  uint8_t* umr = p;
  umr[kUmrFlags] = MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET | MLX5_WQE_UMR_CTRL_FLAG_INLINE |
                   MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE;
  PutBe16(umr + kUmrKlmOctowords, KlmOctowords(1));
  PutBe16(umr + kUmrTranslationOffset, 0);
  PutBe64(umr + kUmrMkeyMask, MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY |
                                  MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN |
                                  MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN |
                                  MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR |
                                  MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE |
                                  MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ |
                                  MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE |
                                  MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC);

  // set_umr_mkey_seg. free = 0 (bound). The mask leaves LOCAL_READ out
  // ("Local read is set in kernel"), so that bit of `access` has no effect.
  uint8_t* mkc = umr + kUmrCtrlBytes;
  mkc[kMkcFree] = 0;
  mkc[kMkcAccessFlags] = a.access;
  PutBe32(mkc + kMkcQpnMkey, a.bound_qpn << 8 | (a.new_rkey & 0xff));
  PutBe64(mkc + kMkcStartAddr, a.zero_based ? 0 : a.addr);
  PutBe64(mkc + kMkcLen, a.length);

  // set_umr_data_seg: one KLM entry, then zero padding to 64 B.
  uint8_t* klm = mkc + kMkcBytes;
  PutBe32(klm + kKlmByteCount, static_cast<uint32_t>(a.length));
  PutBe32(klm + kKlmMkey, a.mr_lkey);
  PutBe64(klm + kKlmAddress, a.addr);
  static_assert(kCtrlSegBytes + kUmrCtrlBytes + kMkcBytes + kKlmBytes == kBindMwWqeBytes);
  return kBindMwWqeBytes;
}

}  // namespace dmb::fabric::mlx5
