#include "fabric/wqe_layout.h"

#include <algorithm>
#include <bit>

namespace dmb::fabric {

uint32_t WqeLayout::SendStride(uint32_t max_sge) {
  return std::bit_ceil(std::max<uint32_t>(64, kCtrlBytes + kSegBytes * max_sge));
}

uint32_t WqeLayout::RecvStride(uint32_t max_sge) {
  return std::bit_ceil(std::max<uint32_t>(kSegBytes, kSegBytes * max_sge));
}

void EncodeSendWqe(const SendWr& wr, uint8_t* out, uint32_t stride) {
  std::memset(out, 0, stride);
  out[WqeLayout::kOpcode] = static_cast<uint8_t>(wr.opcode);
  out[WqeLayout::kFlags] = wr.flags;
  StoreBe16(out + WqeLayout::kNumSge, static_cast<uint16_t>(wr.sg_list.size()));
  uint32_t imm_inv_qpn = 0;
  uint64_t remote_addr = wr.remote_addr;
  uint32_t rkey = wr.rkey;
  uint32_t aux = 0;
  uint64_t op0 = wr.compare_add;
  uint64_t op1 = wr.swap;
  switch (wr.opcode) {
    case Opcode::kWriteWithImm:
      imm_inv_qpn = wr.imm_data;
      break;
    case Opcode::kSendWithInv:
    case Opcode::kLocalInv:
      imm_inv_qpn = wr.invalidate_rkey;
      break;
    case Opcode::kBindMw:
      imm_inv_qpn = wr.bind_qpn;
      remote_addr = wr.bind_addr;
      rkey = wr.bind_mw_rkey;
      aux = wr.bind_new_rkey;
      op0 = wr.bind_length;
      op1 = (static_cast<uint64_t>(wr.bind_mr_lkey) << 32) | wr.bind_access;
      break;
    case Opcode::kWait:
      rkey = wr.wait_cq;
      op0 = wr.wait_count;
      break;
    case Opcode::kSendEnable:
    case Opcode::kRecvEnable:
      rkey = wr.enable_qpn;
      op0 = wr.enable_index;
      break;
    default:
      break;
  }
  StoreBe32(out + WqeLayout::kImmInvQpn, imm_inv_qpn);
  StoreBe64(out + WqeLayout::kWrId, wr.wr_id);
  StoreBe64(out + WqeLayout::kRemoteAddr, remote_addr);
  StoreBe32(out + WqeLayout::kRkey, rkey);
  StoreBe32(out + WqeLayout::kAux, aux);
  StoreBe64(out + WqeLayout::kOperand0, op0);
  StoreBe64(out + WqeLayout::kOperand1, op1);
  for (size_t i = 0; i < wr.sg_list.size(); ++i) {
    StoreBe32(out + WqeLayout::SegLength(static_cast<int>(i)), wr.sg_list[i].length);
    StoreBe32(out + WqeLayout::SegLkey(static_cast<int>(i)), wr.sg_list[i].lkey);
    StoreBe64(out + WqeLayout::SegAddr(static_cast<int>(i)), wr.sg_list[i].addr);
  }
}

void DecodeSendWqe(const uint8_t* in, uint32_t stride, DecodedSendWqe* w) {
  w->opcode = static_cast<Opcode>(in[WqeLayout::kOpcode]);
  w->flags = in[WqeLayout::kFlags];
  const uint32_t max_sge = (stride - WqeLayout::kCtrlBytes) / WqeLayout::kSegBytes;
  w->num_sge = static_cast<uint16_t>(
      std::min<uint32_t>({LoadBe16(in + WqeLayout::kNumSge), max_sge, kMaxSge}));
  w->imm_inv_qpn = LoadBe32(in + WqeLayout::kImmInvQpn);
  w->wr_id = LoadBe64(in + WqeLayout::kWrId);
  w->remote_addr = LoadBe64(in + WqeLayout::kRemoteAddr);
  w->rkey = LoadBe32(in + WqeLayout::kRkey);
  w->aux = LoadBe32(in + WqeLayout::kAux);
  w->operand0 = LoadBe64(in + WqeLayout::kOperand0);
  w->operand1 = LoadBe64(in + WqeLayout::kOperand1);
  for (int i = 0; i < w->num_sge; ++i) {
    w->sge[i].length = LoadBe32(in + WqeLayout::SegLength(i));
    w->sge[i].lkey = LoadBe32(in + WqeLayout::SegLkey(i));
    w->sge[i].addr = LoadBe64(in + WqeLayout::SegAddr(i));
  }
}

void EncodeRecvWqe(const RecvWr& wr, uint8_t* out, uint32_t stride) {
  std::memset(out, 0, stride);
  for (size_t i = 0; i < wr.sg_list.size(); ++i) {
    const int k = static_cast<int>(i);
    StoreBe32(out + WqeLayout::RecvSegLength(k), wr.sg_list[i].length);
    StoreBe32(out + WqeLayout::RecvSegLkey(k), wr.sg_list[i].lkey);
    StoreBe64(out + WqeLayout::RecvSegAddr(k), wr.sg_list[i].addr);
  }
}

int DecodeRecvWqe(const uint8_t* in, uint32_t stride, Sge* sges) {
  const int max = std::min<int>(static_cast<int>(stride / WqeLayout::kSegBytes), kMaxSge);
  int n = 0;
  for (; n < max; ++n) {
    const uint32_t len = LoadBe32(in + WqeLayout::RecvSegLength(n));
    if (len == 0) break;
    sges[n].length = len;
    sges[n].lkey = LoadBe32(in + WqeLayout::RecvSegLkey(n));
    sges[n].addr = LoadBe64(in + WqeLayout::RecvSegAddr(n));
  }
  return n;
}

}  // namespace dmb::fabric
