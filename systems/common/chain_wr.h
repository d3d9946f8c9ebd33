// Work-request builders shared by the offloaded chains (systems/odrp,
// systems/onesided_mw): the cross-channel steps, padding, ODRP's EndianSwap
// READ, and posting that fails loudly (a chain that cannot be posted is an MN
// setup bug, never a silent gap in the chain).
#pragma once

#include <cerrno>
#include <cstdint>
#include <functional>
#include <string>

#include "fabric/node.h"
#include "fabric/verbs.h"

namespace dmb::systems::chain {

// WAIT until `cq` has delivered `count` completions in total (flushes count
// too). Unsignaled. `count` may be left 0 for a chain to rewrite.
inline fabric::SendWr WaitWr(const fabric::Cq* cq, uint64_t count = 0) {
  fabric::SendWr w;
  w.opcode = fabric::Opcode::kWait;
  w.flags = 0;
  w.wait_cq = cq->cq_num();
  w.wait_count = count;
  return w;
}

// SEND_ENABLE: the managed QP `target` may run its SQ below absolute WQE
// `index`. Unsignaled. `index` may be left 0 for a chain to rewrite.
inline fabric::SendWr EnableWr(const fabric::Qp* target, uint64_t index = 0) {
  fabric::SendWr w;
  w.opcode = fabric::Opcode::kSendEnable;
  w.flags = 0;
  w.enable_qpn = target->qp_num();
  w.enable_index = index;
  return w;
}

// Padding: unsignaled, counted by no WAIT.
inline fabric::SendWr NopWr() {
  fabric::SendWr w;
  w.opcode = fabric::Opcode::kNop;
  w.flags = 0;
  return w;
}

// ODRP's EndianSwap ([ODRP] §4.2, Figure 5c): READ the 8-byte word at `src`
// and scatter byte i to dst + 7 - i with 1-byte SGEs, so a little-endian
// atomic result lands big-endian in a WQE field (or the reverse).
inline fabric::SendWr SwapReadWr(uint64_t src, uint32_t rkey, uint64_t dst, uint32_t lkey,
                                 uint64_t wr_id = 0) {
  fabric::SendWr w;
  w.wr_id = wr_id;
  w.opcode = fabric::Opcode::kRead;
  w.remote_addr = src;
  w.rkey = rkey;
  for (int i = 0; i < 8; ++i) w.sg_list.push_back({dst + 7 - i, 1, lkey});
  return w;
}

// Advances a ring's head or tail by one 8-byte element inside its aligned
// ring: a masked FETCH_AND_ADD of +8 whose field-boundary mask `boundary`
// (bit log2(ring_bytes) - 1) drops the carry out of the ring offset ([ODRP]
// §4.2 "modulo by masking"). The old value (the claimed element's address,
// host LE) lands at [result, +8). Signaled.
inline fabric::SendWr RingAdvanceWr(uint64_t counter_addr, uint32_t rkey, uint64_t boundary,
                                    uint64_t result, uint32_t lkey, uint64_t wr_id = 0) {
  fabric::SendWr f;
  f.wr_id = wr_id;
  f.opcode = fabric::Opcode::kMaskedFetchAndAdd;
  f.remote_addr = counter_addr;
  f.rkey = rkey;
  f.compare_add = 8;
  f.swap = boundary;
  f.sg_list = {{result, 8, lkey}};
  return f;
}

// Posts `wr` on `qp` or throws VerbsError "<who>: posting <what> on qp N
// failed (ring full | bad WR or QP state)".
inline void PostOrThrow(fabric::Qp* qp, const fabric::SendWr& wr, const char* who,
                        const char* what) {
  if (const int rc = qp->PostSend(wr); rc != 0) {
    throw fabric::VerbsError(rc, std::string(who) + ": posting " + what + " on qp " +
                                     std::to_string(qp->qp_num()) + " failed (" +
                                     (rc == ENOMEM ? "ring full" : "bad WR or QP state") + ")");
  }
}

// An MN-local chain QP, looped back to itself, both queues on `cq`.
// Cross-channel (it may WAIT and SEND_ENABLE); `managed`: its SQ runs only as
// far as SEND_ENABLEs allow.
struct LoopbackSpec {
  fabric::Pd* pd = nullptr;
  fabric::Cq* cq = nullptr;
  uint32_t max_send_wr = 1;
  uint32_t max_send_sge = 1;
  bool managed = false;
  uint32_t access = fabric::QpInitAttr{}.access;
  bool invalidate_any_qp = false;
};
inline fabric::Qp* LoopbackQp(fabric::Cluster* cluster, fabric::Node* node, const LoopbackSpec& s) {
  fabric::QpInitAttr a;
  a.pd = s.pd;
  a.send_cq = s.cq;
  a.recv_cq = s.cq;
  a.max_send_wr = s.max_send_wr;
  a.max_recv_wr = 1;
  a.max_send_sge = s.max_send_sge;
  a.access = s.access;
  a.cross_channel = true;
  a.manage_send = s.managed;
  a.invalidate_any_qp = s.invalidate_any_qp;
  fabric::Qp* qp = node->CreateQp(a);
  cluster->Connect(qp, qp);
  return qp;
}

// Asked when a chain request's reply deadline passes (ReplyDeadlines;
// control path: the MN CPU reads the chain's QP states): true = the chain has not faulted, the
// request is only slow (a loaded link or RNIC), so the CN waits another `timeout` instead of
// declaring the chain dead. Empty: give up at the first deadline.
using LivenessCheck = std::function<Task<bool>()>;

}  // namespace dmb::systems::chain
