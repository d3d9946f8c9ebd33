// Byte layout of work queue entries in node memory.
//
// Every WQE field is BIG-ENDIAN, as in mlx5 WQEs. Memory values that atomics
// operate on, and the original value an atomic returns into local memory, are
// host LITTLE-ENDIAN (x86-64). A chain that feeds an FAA result into a WQE field
// must swap bytes (ODRP's EndianSwap: a READ with reversed 1-byte SGEs).
//
// Send WQE (stride = 64 B, or 48 + 16 * max_send_sge rounded up to a power of 2):
//
//   off size field            used by
//    0   1   opcode           all (fabric::Opcode value)
//    1   1   flags            kSignaled | kFence
//    2   2   num_sge          all
//    4   4   imm_inv_qpn      WRITE_WITH_IMM imm; SEND_WITH_INV/LOCAL_INV rkey;
//                             BIND_MW qpn (0 = posting QP)
//    8   8   wr_id
//   16   8   remote_addr      READ/WRITE/atomic target; BIND_MW window address
//   24   4   rkey             READ/WRITE/atomic; BIND_MW current MW rkey;
//                             WAIT cq number; *_ENABLE qp number
//   28   4   aux              BIND_MW new rkey
//   32   8   operand0         CAS compare / FAA add; BIND_MW length;
//                             WAIT count; *_ENABLE index
//   40   4   operand1_hi      BIND_MW parent MR lkey
//   44   4   operand1_lo      BIND_MW access flags
//   40   8   operand1         CAS swap / masked-FAA boundary mask (overlays 40..47)
//   48  16n  data segments    { u32 length, u32 lkey, u64 addr } each
//
// Receive WQE (stride = 16 * max_recv_sge rounded up to a power of 2, >= 16):
//    0  16n  data segments    { u32 length, u32 lkey, u64 addr } each;
//                             a segment with length 0 ends the list
//
// RQ doorbell record: one big-endian u32 at recv_doorbell_addr() = number of
// RECV WQEs posted (producer counter). The RNIC reads it from memory when a
// message arrives, so a RECV scatter that rewrites it re-arms a ring.
#pragma once

#include <cstdint>
#include <cstring>

#include "fabric/verbs.h"

namespace dmb::fabric {

struct WqeLayout {
  enum Field : uint32_t {
    kOpcode = 0,
    kFlags = 1,
    kNumSge = 2,
    kImmInvQpn = 4,
    kWrId = 8,
    kRemoteAddr = 16,
    kRkey = 24,
    kAux = 28,
    kOperand0 = 32,
    kOperand1 = 40,
    kBindMrLkey = 40,
    kBindAccess = 44,
    kDataSeg0 = 48,
  };
  static constexpr uint32_t kCtrlBytes = 48;
  static constexpr uint32_t kSegBytes = 16;
  // Offset of data segment i's fields, relative to the WQE.
  static constexpr uint32_t SegLength(int i) { return kDataSeg0 + kSegBytes * i; }
  static constexpr uint32_t SegLkey(int i) { return kDataSeg0 + kSegBytes * i + 4; }
  static constexpr uint32_t SegAddr(int i) { return kDataSeg0 + kSegBytes * i + 8; }
  // Receive WQE segment offsets.
  static constexpr uint32_t RecvSegLength(int i) { return kSegBytes * i; }
  static constexpr uint32_t RecvSegLkey(int i) { return kSegBytes * i + 4; }
  static constexpr uint32_t RecvSegAddr(int i) { return kSegBytes * i + 8; }

  static uint32_t SendStride(uint32_t max_sge);
  static uint32_t RecvStride(uint32_t max_sge);
};

// Decoded send WQE (what the RNIC sees when it executes the entry).
struct DecodedSendWqe {
  Opcode opcode;
  uint8_t flags;
  uint16_t num_sge;
  uint32_t imm_inv_qpn;
  uint64_t wr_id;
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t aux;
  uint64_t operand0;
  uint64_t operand1;
  Sge sge[kMaxSge];
};

// Big-endian helpers.
inline uint16_t LoadBe16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t LoadBe32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return __builtin_bswap32(v);
}
inline uint64_t LoadBe64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}
inline void StoreBe16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void StoreBe32(uint8_t* p, uint32_t v) {
  v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}
inline void StoreBe64(uint8_t* p, uint64_t v) {
  v = __builtin_bswap64(v);
  std::memcpy(p, &v, 8);
}

// Encodes `wr` into `out` (stride bytes). `num_sge` must fit the stride.
void EncodeSendWqe(const SendWr& wr, uint8_t* out, uint32_t stride);
// Decodes a send WQE; segments beyond what the stride holds are dropped
// (num_sge is clamped).
void DecodeSendWqe(const uint8_t* in, uint32_t stride, DecodedSendWqe* out);
void EncodeRecvWqe(const RecvWr& wr, uint8_t* out, uint32_t stride);
// Returns the number of valid segments decoded into `sges`.
int DecodeRecvWqe(const uint8_t* in, uint32_t stride, Sge* sges);

}  // namespace dmb::fabric
