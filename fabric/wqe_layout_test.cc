#include "fabric/wqe_layout.h"

#include <gtest/gtest.h>

namespace dmb::fabric {
namespace {

TEST(WqeLayout, StridesArePowersOfTwoThatHoldTheSges) {
  EXPECT_EQ(WqeLayout::SendStride(1), 64u);
  EXPECT_EQ(WqeLayout::SendStride(2), 128u);
  EXPECT_EQ(WqeLayout::SendStride(8), 256u);
  EXPECT_EQ(WqeLayout::RecvStride(1), 16u);
  EXPECT_EQ(WqeLayout::RecvStride(3), 64u);
}

TEST(WqeLayout, FieldsAreBigEndianAtDocumentedOffsets) {
  SendWr wr;
  wr.opcode = Opcode::kRead;
  wr.wr_id = 0x0102030405060708;
  wr.remote_addr = 0x1122334455667788;
  wr.rkey = 0xaabbccdd;
  wr.sg_list = {{0x99, 16, 0x1234}};
  uint8_t buf[64];
  EncodeSendWqe(wr, buf, 64);
  EXPECT_EQ(buf[WqeLayout::kOpcode], static_cast<uint8_t>(Opcode::kRead));
  EXPECT_EQ(buf[WqeLayout::kRemoteAddr], 0x11) << "most significant byte first";
  EXPECT_EQ(buf[WqeLayout::kRemoteAddr + 7], 0x88);
  EXPECT_EQ(buf[WqeLayout::kRkey], 0xaa);
  EXPECT_EQ(buf[WqeLayout::kWrId + 7], 0x08);
  DecodedSendWqe d;
  DecodeSendWqe(buf, 64, &d);
  EXPECT_EQ(d.wr_id, wr.wr_id);
  EXPECT_EQ(d.remote_addr, wr.remote_addr);
  EXPECT_EQ(d.rkey, wr.rkey);
  ASSERT_EQ(d.num_sge, 1);
  EXPECT_EQ(d.sge[0].addr, 0x99u);
  EXPECT_EQ(d.sge[0].lkey, 0x1234u);
}

TEST(WqeLayout, BindFieldsRoundTrip) {
  SendWr wr;
  wr.opcode = Opcode::kBindMw;
  wr.bind_mw_rkey = 0x100;
  wr.bind_new_rkey = 0x1ab;
  wr.bind_mr_lkey = 0x205;
  wr.bind_addr = 4096;
  wr.bind_length = 8192;
  wr.bind_access = kRemoteRead;
  wr.bind_qpn = 17;
  uint8_t buf[64];
  EncodeSendWqe(wr, buf, 64);
  DecodedSendWqe d;
  DecodeSendWqe(buf, 64, &d);
  EXPECT_EQ(d.rkey, 0x100u);
  EXPECT_EQ(d.aux, 0x1abu);
  EXPECT_EQ(d.remote_addr, 4096u);
  EXPECT_EQ(d.operand0, 8192u);
  EXPECT_EQ(d.operand1 >> 32, 0x205u);
  EXPECT_EQ(static_cast<uint32_t>(d.operand1), static_cast<uint32_t>(kRemoteRead));
  EXPECT_EQ(d.imm_inv_qpn, 17u);
}

TEST(WqeLayout, DecodeClampsSgeCountToTheStride) {
  uint8_t buf[64] = {};
  buf[WqeLayout::kNumSge + 1] = 200;  // a chain wrote junk into num_sge
  DecodedSendWqe d;
  DecodeSendWqe(buf, 64, &d);
  EXPECT_EQ(d.num_sge, 1);
}

TEST(WqeLayout, RecvWqeStopsAtZeroLengthSegment) {
  RecvWr wr;
  wr.sg_list = {{10, 4, 1}, {20, 8, 2}};
  uint8_t buf[64];
  EncodeRecvWqe(wr, buf, 64);
  Sge s[kMaxSge];
  ASSERT_EQ(DecodeRecvWqe(buf, 64, s), 2);
  EXPECT_EQ(s[1].addr, 20u);
  EXPECT_EQ(s[1].length, 8u);
}

}  // namespace
}  // namespace dmb::fabric
