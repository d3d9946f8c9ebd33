// Byte-layout tests for the mlx5 WQE encoders (UNTESTED ON HARDWARE).
// Every golden array is written out by hand from the struct layouts cited in
// mlx5_wqe.h: offsets, big-endian multi-byte fields. A wrong offset, a wrong
// byte order or a wrong constant changes a byte and fails the test.
#include "fabric/mlx5/mlx5_wqe.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace dmb::fabric::mlx5 {
namespace {

// Starts with a non-zero pattern so that the tests check reserved bytes are
// zeroed.
std::vector<uint8_t> Dirty(size_t n) { return std::vector<uint8_t>(n, 0xa5); }

template <size_t N>
void ExpectBytes(const std::vector<uint8_t>& got, const std::array<uint8_t, N>& want) {
  ASSERT_GE(got.size(), N);
  for (size_t i = 0; i < N; ++i) {
    EXPECT_EQ(got[i], want[i]) << "byte " << i;
  }
}

TEST(Mlx5Wqe, CtrlSegmentPacksOpmodIndexOpcodeQpnDsAndFlags) {
  CtrlSeg c;
  c.opcode = 0x25;
  c.opmod = 0x81;
  c.wqe_index = 0xbeef;
  c.qpn = 0x123456;
  c.ds = 0x0c;
  c.signature = 0x5a;
  c.fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED;
  c.imm = 0x11223344;
  auto buf = Dirty(16);
  ASSERT_EQ(EncodeCtrl(buf, c), 16u);
  ExpectBytes(buf, std::array<uint8_t, 16>{
                       0x81, 0xbe, 0xef, 0x25,  // opmod | wqe_index (be16) | opcode
                       0x12, 0x34, 0x56, 0x0c,  // qpn (24 bits, be) | ds
                       0x5a, 0x00, 0x00, 0x0a,  // signature | rsvd | fm_ce_se (0x08|0x02)
                       0x11, 0x22, 0x33, 0x44,  // imm, big-endian
                   });
}

TEST(Mlx5Wqe, CtrlSegmentRejectsOverflowAndShortBuffers) {
  CtrlSeg c;
  c.ds = 1;
  c.qpn = 0x1000000;  // 25 bits
  auto buf = Dirty(16);
  EXPECT_EQ(EncodeCtrl(buf, c), 0u);
  c.qpn = 1;
  c.ds = 64;  // 6-bit field
  EXPECT_EQ(EncodeCtrl(buf, c), 0u);
  c.ds = 0;
  EXPECT_EQ(EncodeCtrl(buf, c), 0u);
  c.ds = 1;
  EXPECT_EQ(EncodeCtrl(std::span<uint8_t>(buf).first(15), c), 0u);
  EXPECT_EQ(EncodeCtrl(buf, c), 16u);
}

TEST(Mlx5Wqe, FlagConstantsHaveTheirSourceValues) {
  // rdma-core mlx5dv.h; a typo in a shift would slip past the golden tests that
  // do not use the flag.
  EXPECT_EQ(MLX5_WQE_CTRL_SOLICITED, 0x02);
  EXPECT_EQ(MLX5_WQE_CTRL_CQ_UPDATE, 0x08);
  EXPECT_EQ(MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE, 0x20);
  EXPECT_EQ(MLX5_WQE_CTRL_FENCE, 0x80);
  EXPECT_EQ(MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_READ, 0x04);
  EXPECT_EQ(MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE, 0x08);
  EXPECT_EQ(MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC, 0x40);
  EXPECT_EQ(MLX5_WQE_MKEY_CONTEXT_FREE, 0x40);
}

TEST(Mlx5Wqe, WaitPutsCqCountThenCqnAfterEightReservedBytes) {
  WaitArgs a;
  a.sq = {.qpn = 0x123456, .wqe_index = 0xbeef, .fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE};
  a.cqn = 0x0a0b0c;
  a.cq_count = 0x01020304;
  auto buf = Dirty(40);
  ASSERT_EQ(EncodeWait(buf, a), 32u);
  ExpectBytes(buf, std::array<uint8_t, 32>{
                       0x00, 0xbe, 0xef, 0x0f,  // opmod WAIT_CQ_PI | idx | CQE_WAIT
                       0x12, 0x34, 0x56, 0x02,  // posting qpn | ds = 2
                       0x00, 0x00, 0x00, 0x08,  // fm_ce_se = CQ_UPDATE
                       0x00, 0x00, 0x00, 0x00,  // imm
                       0x00, 0x00, 0x00, 0x00,  // wait_en_seg rsvd0[0..3]
                       0x00, 0x00, 0x00, 0x00,  // rsvd0[4..7]
                       0x01, 0x02, 0x03, 0x04,  // pi = cq_count
                       0x00, 0x0a, 0x0b, 0x0c,  // obj_num = cqn
                   });
  EXPECT_EQ(buf[32], 0xa5) << "writes nothing past the WQE";
}

TEST(Mlx5Wqe, SendEnableNamesTargetQpAndProducerIndex) {
  EnableArgs a;
  a.sq = {.qpn = 0x000777, .wqe_index = 3, .fm_ce_se = 0};
  a.target_qpn = 0xabcdef;
  a.target_index = 0x0000cafe;
  auto buf = Dirty(32);
  ASSERT_EQ(EncodeSendEnable(buf, a), 32u);
  ExpectBytes(buf, std::array<uint8_t, 32>{
                       0x00, 0x00, 0x03, 0x17,  // SEND_ENABLE at wqe_index 3
                       0x00, 0x07, 0x77, 0x02,  // posting qpn | ds = 2
                       0x00, 0x00, 0x00, 0x00,  //
                       0x00, 0x00, 0x00, 0x00,  //
                       0x00, 0x00, 0x00, 0x00,  // rsvd
                       0x00, 0x00, 0x00, 0x00,  // rsvd
                       0x00, 0x00, 0xca, 0xfe,  // pi = target producer index
                       0x00, 0xab, 0xcd, 0xef,  // obj_num = target qpn
                   });
}

TEST(Mlx5Wqe, RecvEnableDiffersFromSendEnableOnlyInOpcode) {
  EnableArgs a;
  a.sq = {.qpn = 0x42, .wqe_index = 9, .fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE};
  a.target_qpn = 0x43;
  a.target_index = 17;
  auto send = Dirty(32), recv = Dirty(32);
  ASSERT_EQ(EncodeSendEnable(send, a), 32u);
  ASSERT_EQ(EncodeRecvEnable(recv, a), 32u);
  EXPECT_EQ(send[3], 0x17);
  EXPECT_EQ(recv[3], 0x16);
  recv[3] = send[3];
  EXPECT_EQ(send, recv);
}

TEST(Mlx5Wqe, WaitAndEnableRejectShortBuffersAnd25BitObjects) {
  WaitArgs w;
  w.sq.qpn = 1;
  auto buf = Dirty(31);
  EXPECT_EQ(EncodeWait(buf, w), 0u);
  buf.resize(32);
  w.cqn = 0x1000000;
  EXPECT_EQ(EncodeWait(buf, w), 0u);
  EnableArgs e;
  e.target_qpn = 0x1000000;
  EXPECT_EQ(EncodeSendEnable(buf, e), 0u);
  EXPECT_EQ(EncodeRecvEnable(buf, e), 0u);
}

BindMwArgs GoldenBind() {
  BindMwArgs a;
  a.sq = {.qpn = 0x000102, .wqe_index = 7, .fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE};
  a.mw_rkey = 0x11223344;
  a.new_rkey = 0x112233a5;
  a.bound_qpn = 0x00abcd;  // not the posting QP
  a.mr_lkey = 0x55667788;
  a.addr = 0x00007f0012345000;
  a.length = 0x1000;
  a.access = MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ |
             MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE;
  return a;
}

TEST(Mlx5Wqe, BindMwUmrMatchesHandWrittenLayout) {
  auto buf = Dirty(200);
  ASSERT_EQ(EncodeBindMwUmr(buf, GoldenBind()), 192u);
  // mkey_mask = FREE 1<<29 | MKEY 1<<13 | QPN 1<<14 | LEN 1<<0 | START_ADDR 1<<6
  //           | LW 1<<18 | RR 1<<19 | RW 1<<20 | A 1<<21 = 0x203c6041
  // clang-format off
  ExpectBytes(buf, std::array<uint8_t, 192>{
      // ctrl
      0x00, 0x00, 0x07, 0x25,  0x00, 0x01, 0x02, 0x0c,  // UMR, idx 7 | posting qpn, ds 12
      0x00, 0x00, 0x00, 0x08,  0x11, 0x22, 0x33, 0x44,  // CQ_UPDATE | imm = MW's current rkey
      // umr ctrl: flags INLINE|CHECK_FREE|TRNSLATION_OFFSET, klm_octowords 4, offset 0, mask
      0xb0, 0x00, 0x00, 0x00,  0x00, 0x04, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00,  0x20, 0x3c, 0x60, 0x41,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      // mkey context: free 0, access RR|RW, qpn_mkey = bound qpn | new key byte, pd 0
      0x00, 0x00, 0x30, 0x00,  0x00, 0xab, 0xcd, 0xa5,
      0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x7f, 0x00,  0x12, 0x34, 0x50, 0x00,  // start_addr
      0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x10, 0x00,  // len
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      // KLM: byte_count, mkey = parent MR lkey, address; then 48 B padding
      0x00, 0x00, 0x10, 0x00,  0x55, 0x66, 0x77, 0x88,
      0x00, 0x00, 0x7f, 0x00,  0x12, 0x34, 0x50, 0x00,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  });
  // clang-format on
  EXPECT_EQ(buf[192], 0xa5);
  EXPECT_EQ(DsCount(192), 12);
  EXPECT_EQ(WqeBbCount(192), 3u);
}

TEST(Mlx5Wqe, BindMwZeroBasedClearsOnlyTheMkeyStartAddress) {
  BindMwArgs a = GoldenBind();
  auto plain = Dirty(192), zb = Dirty(192);
  ASSERT_EQ(EncodeBindMwUmr(plain, a), 192u);
  a.zero_based = true;
  ASSERT_EQ(EncodeBindMwUmr(zb, a), 192u);
  for (size_t i = 0; i < 192; ++i) {
    bool start_addr = i >= 64 + 16 && i < 64 + 24;
    EXPECT_EQ(zb[i], start_addr ? 0 : plain[i]) << "byte " << i;
  }
  EXPECT_EQ(zb[128 + 8 + 2], 0x7f) << "the KLM keeps the real address";
}

TEST(Mlx5Wqe, BindMwRejectsBadLengthsQpnsAndShortBuffers) {
  BindMwArgs a = GoldenBind();
  auto buf = Dirty(192);
  a.length = 0;
  EXPECT_EQ(EncodeBindMwUmr(buf, a), 0u);
  a.length = kBindMwMaxLength + 1;
  EXPECT_EQ(EncodeBindMwUmr(buf, a), 0u);
  a.length = kBindMwMaxLength;
  ASSERT_EQ(EncodeBindMwUmr(buf, a), 192u);
  EXPECT_EQ(buf[128], 0x80) << "2 GiB byte_count = 0x80000000";
  a.bound_qpn = 0x1000000;
  EXPECT_EQ(EncodeBindMwUmr(buf, a), 0u);
  a.bound_qpn = 1;
  EXPECT_EQ(EncodeBindMwUmr(std::span<uint8_t>(buf).first(191), a), 0u);
}

}  // namespace
}  // namespace dmb::fabric::mlx5
