// OneSidedMW's memory-allocation WR chain ([OSMW] §4.3, Figure 5), pre-posted
// on the MN's RNIC: a CN's SEND triggers it and it hands out one MW group with
// no MN CPU on the path. The CN side (AllocClient) posts the SEND and awaits
// the reply.
//
// QPs, per Alloc QP (one per CN in the paper; all on the MN):
//   A  Alloc QP (data PD, connected to the CN's alloc QP; managed SQ). Its RQ
//      takes the CN's request; its SQ holds the G BIND_MWs, the reply WRITE
//      and a WAIT + SEND_ENABLE tail (cross-channel).
//      Its QP access flags are 0: no READ/WRITE/atomic through the alloc lane.
//   L  worker (metadata PD, looped back to itself; managed SQ): the MN-local
//      FAA/READ/WRITE steps on the metadata.
//   C  control (metadata PD, looped back; cross-channel, not managed): WAITs
//      on completion counts and SEND_ENABLEs the next step of A or L, so each
//      step starts only after the data the previous step produced has landed
//      (the managed SQs fetch a WQE only once enabled).
// A, L and C are all cross-channel QPs (manage_send needs it), so the sim
// charges its offload penalty for 3 QPs per Alloc QP.
// L and C live in the metadata PD: a CN's SEND can name any qpn as an access
// QP, but a bind to a QP outside the data PD fails, and nothing CN-facing can
// reach the metadata MR.
//
// One chain instance (instance s, G = group size, "->" = which later WQE field
// it rewrites). Every WR on L and A is signaled except A's WAIT and ENABLE;
// C's are not (C's WAITs count the others' completions).
//
//   RECV on A    CN request -> A.reply{remote_addr,rkey} (CN_buff),
//                              A.bind[k].qpn (k = 1..G-1: the access QPs)
//   L1 masked FAA head += 8 (wraps in the ring)   -> scratch[s] (u64 LE: the
//                                                    claimed element's address)
//   L2 READ scratch[s], 8 reversed 1-byte SGEs    -> L4.remote_addr (BE)
//   L3 READ scratch[s], 8 reversed 1-byte SGEs    -> L5.remote_addr (BE)
//   L4 READ element (8 B)                          -> L6.remote_addr (entry)
//   L5 WRITE 8 zero bytes to the element (FENCE: after L4's read)
//   L6 READ entry (16 + 16G B)                     -> L7.remote_addr (owner_ptr),
//                                                     staging[s] (handle),
//                                                     A.bind[k] bytes 16..31
//                                                     (base, rkey, new rkey)
//   L7 WRITE owner_id (this chain's CN) to the entry
//   L8 NOP: the instance's ticket (below)
//   A.bind[k] BIND_MW MW k of the entry to the chunk; MW 0 to the CN's Free QP
//             (fixed when posted), MW k to the k-th access QP (from the RECV)
//   A.reply   WRITE_WITH_IMM (imm = s) to CN_buff, gathering staging[s] and
//             A.bind[k] bytes 16..31: { handle, G x (base, rkey, new rkey) }
//   A.wait    WAIT acq >= (G+1)(s+1)  (the reply was acknowledged)
//   A.enable  SEND_ENABLE L8
//
//   C:  WAIT lcq >= 8s           (instance s-1's ticket: it fully succeeded)
//       WAIT rcq >= s+1          EN L1        (a request has landed)
//       WAIT lcq >= 8s+1         EN L2..L3    (FAA result landed)
//       WAIT lcq >= 8s+3         EN L4..L5    (element address in L4, L5)
//       WAIT lcq >= 8s+4         EN L6        (entry address in L6)
//       WAIT lcq >= 8s+6         EN L7, EN A.bind[0..G-1]   (entry in L7, binds)
//       WAIT lcq >= 8s+7, WAIT acq >= (G+1)s+G   EN A.reply..A.enable (owner
//                                                 recorded, windows bound)
//
// Why the ticket: a WAIT counts every completion, flushes included. When A
// faults (a bad access qpn or CN_buff in the request) its RQ and SQ flush, so
// rcq and acq jump past every later instance's count and C would go on
// enabling L, which is healthy, to claim (and leak) one element per
// pre-posted instance. L8 is enabled only from A's tail, which a fault
// flushes, and L never flushes while healthy: the next instance's first WAIT
// never passes, and a faulted chain claims nothing more. (A.wait holds the
// ticket until the reply is acknowledged, so a reply the CN NAKs releases
// nothing either.)
//
// Placeholders that no step rewrote make the chain fault instead of doing
// harm: binds carry rkey 0 and (k >= 1) the qpn of L (outside the data PD);
// READ/WRITE of the metadata carry address 0 (outside the metadata MR); the
// reply carries rkey 0.
//
// Empty queue ([OSMW] §4.3): L5 zeroes every element it hands out, so a head
// that reaches an element no free has refilled reads 0 into L6, whose READ of
// address 0 faults: L goes to ERR and flushes; C's WAITs then see the flush
// completions and enable binds that still carry their placeholders, which
// fail, so A goes to ERR too and the reply is flushed. The CN gets no reply
// (AllocClient times out); nothing was bound or recorded (the failed claim
// did advance the head). A bad request faults the same way after its claim:
// that entry stays owned (owner_id) by the requester, half bound.
// Recovery (the MN CPU noticing, re-creating the chain QPs, fixing the head,
// reclaiming a half-bound entry) is not written yet; Faulted() is what the
// MN CPU would check.
//
// Recycling (AllocChainConfig::recycle; ODRP §4.4 "CNode-assisted MNode WR
// recycle", [OSMW] §4.3): the K = max_instances instances are posted once and
// then reused in place forever, with no MN CPU. The rings of A, L and C hold
// exactly K instances (K a power of two >= 4; A's instance is padded with
// unsignaled NOPs to P_A = bit_ceil(G+3) WQEs, C's has 16), so absolute WQE
// index i of instance s+K sits where instance s's did. What differs from round
// to round is only absolute: WAIT counts, ENABLE indices, the reply's imm and
// the RQ doorbell record. The CN knows how many requests it sent, computes
// them (ControlValues) and sends them with each request; RECVs scatter them
// into exactly those WQE fields (never a whole WQE: a CN cannot change an
// opcode, a CQ or a target QP). A request is two SENDs, so A's RQ holds 2K
// RECVs:
//   RECV 2s   (16 x 8 B)  the 16 operand0 fields (WAIT counts, ENABLE
//                         indices) of C's instance s+1 (C reaches it only
//                         after C's instance s saw both RECVs of request s)
//   RECV 2s+1 the request as above, then the reply's imm (= s), A's tail of
//             instance s (WAIT count, ticket ENABLE index) and the RQ doorbell
//             record (= 2(s+1) + 2K: the RECVs of this round become postable
//             again)
// C is managed too (otherwise its producer index, which only the MN CPU's
// doorbell moves, would stop it after K instances): its instance s ends with
// an ENABLE of itself through instance s+1. A bootstrap QP B (cross-channel,
// loopback, one WQE) enables C's first instance; it stays connected, so a
// recycling chain counts 4 offload-holding QPs, not 3.
// Placeholders are restored for the next round: L8, the ticket, is a READ of
// zeros into the rkey fields of the instance's binds (after the reply was
// acknowledged), so a bind that no L6 rewrote still fails on rkey 0. L's own
// fields carry the last round's addresses, but L runs step by step and every
// step is rewritten by the step before it.
// Faults in rounds >= 1: every WQE then sits above the producer index the
// MN CPU last rang, so a QP going to ERR flushes nothing but the WQEs in
// flight. The failing WQE's own error completion still counts: on an empty
// queue L6's error lets C enable the binds, which fail on the rkey 0 that L8
// restored (without it they would rebind last round's group, which may be
// free again: alloc_chain_test checks this), and C then stops at its WAIT
// for L7. A faulted chain claims nothing more, as in round 0.
// The RQ and C are safe to rewrite while in use because the CN sends one
// request at a time and K >= 4: request s writes C's instance s+1 while C is
// at most finishing instance s-1 (another slot).
// Wrong counts or indices from a CN (onesided_mw_test
// WrongControlValuesReplayNothing, fuzz_test): its chain may run steps early
// or run instances nobody requested. L8 therefore also restores L4..L7's
// addresses to 0 at the end of every round, and L4, L6 and L7 carry FENCE
// (each starts only once the READ that rewrote it has landed, whoever
// enabled it). An instance run out of turn then either makes a genuine claim
// (a fresh head FAA; the entry ends owned by that CN, reclaimable, and
// counted by the budget monitor through claims_started) or faults on a
// restored 0; it never acts on last round's element, entry or windows. What
// remains is capacity: a round the MN stops mid-way (Quiesce) may orphan
// the entry it was moving; AllocChain::Inspect repairs only the instance L
// stopped in.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <vector>

#include "fabric/node.h"
#include "systems/onesided_mw/metadata.h"
#include "systems/status.h"

namespace dmb::systems::onesided_mw {

struct AllocChainConfig {
  uint32_t free_qpn = 0;        // MN end of the CN's Free QP: MW 0 of every group goes to it
  uint64_t owner_id = 0;        // written to owner_id (OwnerIdOfCn(cn_index))
  uint32_t max_instances = 16;  // chain instances the rings hold at once
  // Reuse the instances in place, re-armed by the CN's requests (see above).
  // max_instances must then be a power of two >= 4, armed all at once.
  bool recycle = false;
};

class AllocChain {
 public:
  // Per instance: L1..L8 on L; G binds, the reply, WAIT, ENABLE on A; the
  // WAITs and ENABLEs on C.
  static constexpr uint32_t kWorkerWrs = 8;
  static constexpr uint32_t kAllocWrs(uint32_t g) { return g + 3; }
  static constexpr uint32_t kControlWrs = 15;
  // Recycling: C's instance (the 15 above and C's ENABLE of itself), A's
  // instance padded to a power of two, RECVs per request.
  static constexpr uint32_t kControlWrsRecycle = 16;
  static uint32_t AllocSlotWrs(uint32_t g) { return std::bit_ceil(kAllocWrs(g)); }
  static constexpr uint32_t kRecvsPerRequestRecycle = 2;
  // The operand0 of each of C's WQEs of instance `s` (WAIT counts, ENABLE
  // indices; the 16th only when recycling), assuming A, L and C start at
  // index 0 and hold only this chain: what Arm posts and what a recycling CN
  // sends for the next instance.
  static std::vector<uint64_t> ControlValues(uint64_t s, uint32_t g, bool recycle);

  // Creates A, L and C and the MRs the chain scatters through, and connects
  // L and C to themselves. Connect alloc_qp() to the CN's alloc QP, then Arm.
  static Task<std::unique_ptr<AllocChain>> Create(fabric::Cluster* cluster, Metadata* md,
                                                  AllocChainConfig cfg);

  // Pre-posts `n` chain instances (the MN CPU posts them, verbs.post_send
  // each). Throws VerbsError when A is not connected or the rings are full.
  Task<void> Arm(uint32_t n);

  fabric::Qp* alloc_qp() const { return a_; }
  fabric::Qp* worker_qp() const { return l_; }
  fabric::Qp* control_qp() const { return c_; }
  uint64_t armed() const { return armed_; }
  // Requests the RNIC has taken (RECVs consumed on A).
  uint64_t requests_taken() const {
    return a_->counters().recvs_consumed / (cfg_.recycle ? kRecvsPerRequestRecycle : 1);
  }
  // Some chain QP is in ERR (a fault: empty queue, bad request): the chain
  // serves nothing until rebuilt.
  bool Faulted() const;

  // ---- Recovery (MN CPU, control path: onesided_mw.cc) ----
  // Stops the chain for good: C first (nothing more is enabled), then L once
  // every step it started has completed, then A and B. The CN's end of A
  // sees the next SEND fail.
  Task<void> Quiesce(fabric::Runtime* rt);
  // What request `m` (absolute, 0-based) did on L, read after Quiesce. L's
  // steps run in order and each is counted when started, so `steps` says
  // exactly which effects happened: 1 the claim (head FAA), 4 the element
  // read into L6, 5 the element zeroed, 7 owner_id written, 8 the ticket
  // (the reply was acknowledged: the CN has the grant).
  struct Progress {
    uint32_t steps = 0;
    uint64_t element = 0;  // the claimed element's address (steps >= 1)
    uint64_t entry = 0;    // what the element held (steps >= 4): 0 = the queue was empty
  };
  Progress Inspect(uint64_t m) const;
  // Claims the chain started (L1s run): more than requests_taken() when a CN
  // sent wrong counts and L ran instances nobody requested (the budget
  // monitor counts these).
  uint64_t claims_started() const {
    return (l_->counters().send_wrs_executed + kWorkerWrs - 1) / kWorkerWrs;
  }

 private:
  AllocChain() = default;

  fabric::Cluster* cluster_ = nullptr;
  fabric::Node* mn_ = nullptr;
  Metadata* md_ = nullptr;
  AllocChainConfig cfg_;
  fabric::Cq* rcq_ = nullptr;  // A's RECVs
  fabric::Cq* acq_ = nullptr;  // A's binds and replies
  fabric::Cq* lcq_ = nullptr;  // L
  fabric::Cq* ccq_ = nullptr;  // C (unsignaled: errors only)
  fabric::Qp* a_ = nullptr;
  fabric::Qp* l_ = nullptr;
  fabric::Qp* c_ = nullptr;
  fabric::Qp* boot_ = nullptr;             // recycling: enables C's first instance
  fabric::Mr* c_ring_data_mr_ = nullptr;   // recycling: C's SQ ring, data PD (A's RECVs)
  fabric::Mr* a_ring_meta_mr_ = nullptr;   // A's SQ ring, in the metadata PD (L6 writes binds)
  fabric::Mr* scratch_meta_mr_ = nullptr;  // scratch, metadata PD (L's SGEs, remote read)
  fabric::Mr* scratch_data_mr_ = nullptr;  // scratch, data PD (A.reply gathers staging)
  uint64_t scratch_ = 0;                   // [zero 8][owner_id 8][pad] then 16 B per slot
  uint64_t armed_ = 0;
  fabric::CpuCost cost_post_;
};

// What a successful allocation hands the CN.
struct AllocGrant {
  uint32_t seq = 0;     // chain instance that served it (the reply's imm)
  uint64_t handle = 0;  // MWTable entry address: the argument of a later free
  uint64_t base = 0;    // chunk address on the MN
  // rkeys[0]: MW 0 (usable through the Free QP); rkeys[k]: through access QP k.
  std::vector<uint32_t> rkeys;
};

// The CN end of one Alloc QP. One allocation at a time.
class AllocClient {
 public:
  // `mr` covers [buf_addr, +BufferBytes(g)) with local write and remote
  // write (the reply lands there). Creates the CN's alloc QP (not connected).
  // `recycle_instances` > 0: the MN's chain recycles (AllocChainConfig::
  // recycle) with that many instances; the buffer then needs
  // RecycleBufferBytes(g).
  AllocClient(fabric::Node* cn, fabric::Pd* pd, fabric::Runtime* rt, fabric::Mr* mr,
              uint64_t buf_addr, uint32_t group_size, uint32_t recycle_instances = 0);
  static uint64_t BufferBytes(uint32_t g) { return 64 + ReplyBytes(g); }
  static uint64_t RecycleBufferBytes(uint32_t g) {
    return 64 + (ReplyBytes(g) + 63) / 64 * 64 + 256;
  }

  fabric::Qp* qp() const { return qp_; }
  uint64_t reply_addr() const { return buf_ + 64; }

  // Sends the request (MN-side qpns of the G-1 access QPs, in MW order) and
  // awaits the reply WRITE_WITH_IMM. The CQE (rather than polling a flag in
  // CN_buff) tells the CN the reply bytes have landed, without a polling loop
  // that would have to sleep in virtual time. With no reply within `timeout`
  // (the MN's chain faulted, e.g. on an empty free-MW queue) the client moves
  // its alloc QP to ERR, which flushes the pending RECV, and returns
  // kLaneBroken: the lane is dead until reconnected (so is the MN end).
  Task<Result<AllocGrant>> Allocate(std::vector<uint32_t> access_qpns, Ps timeout);

 private:
  fabric::Node* cn_;
  fabric::Runtime* rt_;
  fabric::Mr* mr_;
  uint64_t buf_;
  uint32_t g_;
  uint32_t recycle_ = 0;
  fabric::Cq* send_cq_ = nullptr;
  fabric::Cq* recv_cq_ = nullptr;
  fabric::Qp* qp_ = nullptr;
  uint32_t next_seq_ = 0;
};

}  // namespace dmb::systems::onesided_mw
