// OneSidedMW's memory-free WR chain ([OSMW] §4.3: "The free chain reads the
// entry, unbinds MW 0 (fails for a non-owner), unbinds the rest with the qpn
// check skipped by MN-only configuration, clears owner_id, FAA on the tail
// and re-inserts the validated entry"), pre-posted on the MN's RNIC: a CN's
// SEND on its Free QP triggers it, with no MN CPU on the path. The CN side
// (FreeClient) posts the SEND and awaits the reply.
//
// Who may free: MW 0 of every group is bound (by the allocation chain) to the
// MN end F of the allocating CN's Free QP. The chain invalidates MW 0 with a
// LOCAL_INV posted on F, naming the rkey it READ from the entry the request
// names. The RNIC lets a QP invalidate a type-2 MW only if the MW is bound to
// that very QP (F is created without invalidate_any_qp), so the LOCAL_INV
// fails unless the entry's MW 0 is bound to THIS CN's Free QP, i.e. unless
// the requester owns the entry. A SEND_WITH_INV from the CN would not do: its
// rkey is the CN's word, not the entry's, so a CN could invalidate one of its
// own MW 0s while naming someone else's entry address, and the chain could
// not tie the two together. The LOCAL_INV's rkey comes from the entry itself.
// A failed LOCAL_INV moves F to ERR and flushes F's SQ, so nothing after it
// (the success tail that releases the rest of the chain) ever runs: the
// non-owner's free changes nothing, and its free lane is dead (as a bad
// allocation request kills the alloc lane). A second free of the same entry
// fails the same way (MW 0 is no longer valid).
//
// QPs, per Free QP (one per CN; all on the MN):
//   F  MN end of the CN's Free QP (data PD, connected to the CN; managed SQ,
//      cross-channel). Its RQ takes the CN's requests; its SQ holds, per
//      instance, a WAIT for the lane's L1, the LOCAL_INV of MW 0 and a WAIT
//      + SEND_ENABLE tail. Its access flags allow READ/WRITE: MW 0 is usable
//      through it. Pass free_qp()->qp_num() to the allocation chain as
//      free_qpn. A protection error the CN causes through F (a bad
//      READ/WRITE via MW 0) moves F to ERR like any responder: the CN kills
//      its own free lane (a later instance then faults on its placeholders,
//      harmlessly).
//   R  MN end of the CN's reply QP (data PD, connected to the CN's second
//      QP, FreeClient::reply_qp(); managed SQ, cross-channel, access 0): per
//      instance a WAIT for the lane's L5 and a zero-byte SEND, "freed". The reply sits on its own
//      QP so that F, which runs in order, holds only each instance's short owner check: with the
//      reply on F (before lanes) instance s+1's check waited for instance
//      s's whole chain.
//   W lanes (FreeChainConfig::lanes), instance s runs on lane w = s mod W:
//   U_w unbinder (data PD, looped back; managed SQ; invalidate_any_qp, the
//       "MN-only configuration"): the owner check by data (BIND of MW 0, then
//       LOCAL_INV of it), LOCAL_INV of MW 1..G-1, which are bound to the
//       CN's access QPs, the copy READ that hands L2..L5 their operands, then
//       a WAIT + SEND_ENABLE tail. Its QP allows remote READ: its own
//       loopback copy is the only requester it has.
//   L_w worker (metadata PD, looped back; managed SQ): READ/WRITE/FAA on the
//       metadata.
//   C_w control (metadata PD, looped back; cross-channel, managed when
//       recycling).
// Pipelining: the W lanes run their instances' unbinds and queue steps side
// by side, so W frees are inside one Free QP at once. Only F (the owner
// check, in request order) and R (the replies) are shared. An ENABLE enables
// every WQE below its index, so F and R are safe to enable out of lane
// order: every instance of F starts with its own WAIT for its lane's L1
// (F.wait1), and every reply on R with a WAIT for its own lane's L5.
// Every one of these QPs is cross-channel; F and R face the CN, the 3W lane
// QPs (and the bootstrap QP) are MN-local loopbacks.
//
// One chain instance s on lane w, its j = s / W-th there (G = group size,
// "->" = which later WQE field it rewrites). L1..L5, F.inv0, U.bind0, U.inv
// and U.copy are signaled; WAITs and ENABLEs on F, U, L and R, the replies
// and C's WQEs are not.
//
//   RECV on F    request (entry address X, u64 BE) -> L1.remote_addr
//   L1 READ X (32 + 16G B), 2G + 3 SGEs:  owner_ptr, handle -> slot[s]+16
//                                         mw[0] record (base, rkey, new
//                                           rkey)     -> U.bind0 bytes 16..31
//                                         mw[k] base, rkey -> sink (k >= 1)
//                                         mw[k] next_rkey -> U.inv[k] rkey
//                                         owner_id    -> sink
//                                         MW 0's rkey copies -> F.inv0,
//                                                               U.inv0 rkey
//   F.wait1   WAIT lcq_w >= 5j+1       (L1 landed: F.inv0's rkey in place)
//   F.inv0    LOCAL_INV MW 0           (fails for a non-owner: see above)
//   F.wait2   WAIT fscq >= s+1         (F.inv0 succeeded)
//   F.enable  SEND_ENABLE U_w's instance
//   U.bind0   BIND_MW MW 0 to its chunk, qpn U, no access: succeeds only if
//             MW 0 is free, i.e. F.inv0 (on the CN's own Free QP) has
//             invalidated it: the owner check as DATA (below)
//   U.inv0    LOCAL_INV MW 0 (free again for the next allocation)
//   U.inv[k]  LOCAL_INV MW k           (invalidate_any_qp: any QP of the PD)
//   U.copy    READ slot[s]+16 (16 B)   -> L2.remote_addr (owner_ptr),
//                                         staged[s] (handle, L5's source)
//   U.wait    WAIT ucq_w >= (G+2)(j+1) (all of U's steps done)
//   U.enable  SEND_ENABLE L2..L4
//   L2 WRITE 8 zero bytes to owner_ptr (owner_id := 0), FENCE
//   L3 masked FAA tail += 8 (wraps as the head does) -> faa[s] (u64 LE)
//   L4 READ faa[s], 8 reversed 1-byte SGEs -> L5.remote_addr (BE), FENCE:
//      it reads L3's result (data, not a WQE), so the FENCE orders it on
//      any RNIC and no gate is needed between L3 and L4
//   L5 WRITE staged[s] (the entry's own handle) to the element at the tail,
//      FENCE
//   L6 WAIT lcq_w >= 5j+5              (L5 acknowledged)
//   L7 SEND_ENABLE R -> 2(s+1)         (the reply)
//   R.wait    WAIT lcq_w >= 5j+5       (L5 acknowledged)
//   R.reply   SEND, zero bytes: "freed"
//
//   C_w: WAIT lcq_w >= 5j          (the lane's previous instance went all
//                                   the way: its ticket)
//        WAIT frcq >= s+1          EN L1          (a request has landed)
//                                  EN F(s)        (F.wait1 holds it)
//        WAIT lcq_w >= 5j+4        EN L5..L7      (element address in L5)
// Four gated steps per free (F.wait1, U via F.enable, L2..L4 via U.enable,
// L5); before lanes there were five (a gate between L3 and L4).
//
// Replies. R runs its instances in request order, as far as the highest L7
// enabled it; an L7 of instance s also enables the replies of earlier
// instances that may still run on other lanes, so every reply carries its
// own WAIT for its instance's L5. A reply is therefore sent only for a free
// that went all the way (or whose own lane faulted and flushed: a request
// that named an address outside the metadata, the requester's own doing).
// A refused instance (F or U faulted) never reaches its L5, so its reply and
// every reply after it wait for ever: the CN times out and renews, exactly
// as with one lane.
//
// The ticket (the allocation chain's idea): a WAIT counts every completion,
// flushes included, so a gate on the CQ of a QP that can fault (F, U) would
// open when that QP flushes, and the rest of the chain would run on a free
// that was refused. So every step after a fallible LOCAL_INV is released by
// the success tail of the QP that ran it (F.enable after F.inv0, U.enable
// after U.inv), which a fault flushes instead of executing, and the reply by
// L's own tail. C_w gates only on L_w's CQ, which does not flush while L_w is
// healthy: after a fault at F or U_w, C_w stays blocked at instance s's WAIT
// lcq_w >= 5j+4 (L2..L4 were never enabled) and never reaches a later
// instance's gates. After a fault at F no later instance passes F (F runs
// in order); after one at U_w the lane is dead, later instances of other
// lanes may finish, and R stops at the refused instance's reply (above).
// A refused free leaves owner_id, the tail and the queue untouched (a fault
// at U leaves MW 0..k-1 of that entry unbound: see Recovery); nothing leaks
// and nothing is inserted twice. (free_chain_test checks that gating L2 on
// U's CQ instead breaks exactly this.) If L itself faults (a request naming
// an address outside the metadata MR, or L1 run on its placeholder after F's
// RQ flushed), every step left carries a placeholder or sits on a QP in
// ERR: nothing changes.
//
// Placeholders that no step rewrote fail safely: LOCAL_INVs and U.bind0
// name rkey 0 (index 0: no MW); L1, L2, L5 address 0 (outside the metadata
// MR); the staged handle 0 (L5 would insert a hole, never an entry).
//
// The owner check. F.inv0 succeeds only for the owner (MW 0 is bound to its
// Free QP), but what it releases (F.enable, U.enable) are ENABLE indices the
// CN sends with every recycled request, so a CN could raise one in an honest
// free of its own entry and pre-authorize its next instance, whose L2..L5
// would then clear the owner of, and enqueue, an entry it names but does
// not own (onesided_mw_test APreAuthorizedFreeNeverReleasesAnotherCnsEntry:
// the victim's owner cleared and its windows lost, before this design). So
// the operands L2..L5 act on (the owner_ptr to clear, the handle to insert)
// no longer come from L1 directly: L1 leaves them in slot[s]+16 and only
// U.copy moves them into L2 and the staged handle, and U.copy runs only
// after U.bind0 succeeded. U.bind0 binds MW 0 and a type-2 MW binds only
// when it is free: after the owner's F.inv0, never while it is still bound
// to another CN's Free QP. Whatever indices a CN sends, a refused instance
// leaves L2 at address 0 (it faults before L3..L5 run) and U dead before it
// unbinds anything. A CN naming an entry whose MW 0 is free in that moment
// is its owner in the middle of its own free; the entry is then freed once
// and the owner's own request is refused.
//
// What re-enters the queue is the handle READ from the entry (its own
// address, a constant the MN wrote), not the requester's word.
//
// Forged addresses: X outside the metadata MR faults L1 (F, U and the queue
// untouched; the chain is dead). X inside it gets past U.bind0 only if the
// 16 bytes at X + 16 are the record of a FREE MW (rkey, and a base inside
// the pool): F.inv0 freed this CN's own MW 0, or the record is of an entry
// in the free queue (whose owner_ptr and handle then are that free entry's
// own, or padding: L2 faults on 0). The damage stays with entries that are
// the requester's or nobody's.
//
// Recovery (MN CPU, OsmwMn::RenewFree): Faulted() tells a refused request
// from a slow one (the CN asks when its reply is late); Quiesce, then
// InspectRequest for every request in the lanes' slots: one whose L2 ran
// freed its entry (a partial one is finished), one whose owner check passed
// (F.enable ran) but whose L2 did not is finished by the MN; the CN learns
// which of its requests freed. F.inv0 succeeds only for the owner, so what
// the MN finishes (owner_id checked again) is an entry its owner asked to
// free, even one a fault at U left half unbound.
//
// Recycling (FreeChainConfig::recycle): as the allocation chain's (see
// alloc_chain.h): K = max_instances instances (K/W per lane, a power of two
// >= 4) reused in place; F's instance is 4 WQEs and R's 2, U_w's padded to
// bit_ceil(G+4), L_w's to 8 (L8 below), C_w's to 8 (its 6, an ENABLE of
// itself through its next instance, an unsignaled NOP), with a bootstrap QP
// that enables every C_w's first instance. A free is two SENDs on the Free
// QP, so F's RQ holds 2K RECVs:
//   RECV 2s   (7 x 8 B)   the operand0 of C_w's WQEs of instance s+W, the
//                         lane's next (ControlValues)
//   RECV 2s+1 X -> L1.remote_addr, then F.wait1's and F.wait2's counts,
//             F.enable's index, U.wait's count, U.enable's index, L6's
//             count, L7's index and R.wait's count (all of instance s:
//             TailValues), and the RQ doorbell record (2(s+1) + 2K)
// The RQ, C_w and every instance's fields are safe to rewrite while in use
// because the CN keeps at most W frees in flight (FreeClient lanes) and
// K/W >= 4: request s is sent only after reply s-W arrived, so C_w is at
// instance j (or finishing j-1) when request s writes its instance j+1,
// and F, R, U_w and L_w finished instance s-K long before.
// Stale fields: the LOCAL_INVs of a used instance keep the rkeys L1 read in
// the last round until this round's L1 rewrites them. If this round's L1
// faults (X outside the metadata MR) its error completion releases F.inv0
// with last round's MW 0 rkey: it succeeds only if that group is again bound
// to THIS CN's Free QP (the owner check still holds), so the damage stays
// with the requester's own entry; L is in ERR, so the queue is untouched.
// (Restoring rkey 0 would need a spare WR; the CN must not supply it: U's
// LOCAL_INVs skip the qpn check.)
// Wrong counts or indices from a CN: L8 (recycling) restores the
// LOCAL_INVs' and U.bind0's rkeys, L1's, L2's and L5's addresses and the staged handle to
// 0 after every round, and L2, L4 and L5 carry FENCE, so a step run out of
// turn faults (or inserts 0: a hole, which a later allocation sees as an
// empty element) instead of replaying last round's unbinds or re-inserting
// last round's entry (before this, onesided_mw_test measured 4 entries
// queued twice in 2 rounds).
#pragma once

#include <bit>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "fabric/node.h"
#include "systems/common/chain_wr.h"
#include "systems/common/reply_deadlines.h"
#include "systems/common/wait_list.h"
#include "systems/onesided_mw/metadata.h"
#include "systems/status.h"

namespace dmb::systems::onesided_mw {

struct FreeChainConfig {
  uint32_t max_instances = 16;  // chain instances the rings hold at once (all lanes)
  // Lanes: instance s runs its unbinds and queue steps on lane s mod lanes,
  // so up to `lanes` frees are inside the chain at once. max_instances must
  // be a multiple of lanes (recycling: max_instances / lanes a power of two
  // >= 4).
  uint32_t lanes = 1;
  // Reuse the instances in place, re-armed by the CN's requests (see above).
  bool recycle = false;
};

class FreeChain {
 public:
  // Per instance: L1..L7 on its lane's L (5 signaled); WAIT, inv0, WAIT,
  // ENABLE on F; WAIT, reply on R; bind0, inv0, G-1 LOCAL_INVs, the copy
  // READ (G+2 signaled), WAIT, ENABLE on its lane's U; the WAITs and
  // ENABLEs on its lane's C.
  static constexpr uint32_t kWorkerWrs = 7;
  static constexpr uint32_t kWorkerSignaled = 5;
  static constexpr uint32_t kFreeWrs = 4;
  static constexpr uint32_t kReplyWrs = 2;
  static constexpr uint32_t kUnbindWrs(uint32_t g) { return g + 4; }
  static constexpr uint32_t kUnbindSignaled(uint32_t g) { return g + 2; }
  static constexpr uint32_t kControlWrs = 6;
  // Recycling: per-instance WQE slots on U, L and C; RECVs per request.
  static uint32_t UnbindSlotWrs(uint32_t g) { return std::bit_ceil(kUnbindWrs(g)); }
  static constexpr uint32_t kWorkerSlotWrs = 8;
  static constexpr uint32_t kControlSlotWrs = 8;
  static constexpr uint32_t kRecvsPerRequestRecycle = 2;
  // The operand0 of C_w's gates of instance s (7 when recycling: the 6 and
  // C_w's ENABLE of itself), assuming the chain QPs start at index 0.
  static std::vector<uint64_t> ControlValues(uint64_t s, uint32_t g, bool recycle,
                                             uint32_t lanes = 1);
  // What a recycling CN sends after the handle for its s-th free: F.wait1,
  // F.wait2, F.enable, U.wait, U.enable, L6, L7, R.wait (u64 each), then the
  // RQ doorbell.
  static std::vector<uint64_t> TailValues(uint64_t s, uint32_t g, uint32_t lanes = 1);
  // L1 scatters 2G + 3 SGEs.
  static constexpr uint32_t kMaxGroupSize = 6;

  // Creates F, R, every lane's U, L and C and the MRs the chain scatters
  // through, and connects U, L and C to themselves. Connect free_qp() to
  // the CN's Free QP and reply_qp() to its reply QP (FreeClient::qps()),
  // then Arm.
  static Task<std::unique_ptr<FreeChain>> Create(fabric::Cluster* cluster, Metadata* md,
                                                 FreeChainConfig cfg);

  // Pre-posts `n` chain instances (MN CPU: verbs.post_send each). Throws
  // VerbsError when F or R is not connected or the rings are full.
  Task<void> Arm(uint32_t n);

  fabric::Qp* free_qp() const { return f_; }
  fabric::Qp* reply_qp() const { return r_; }
  fabric::Qp* unbind_qp(uint32_t lane = 0) const { return lanes_.at(lane).u; }
  fabric::Qp* worker_qp(uint32_t lane = 0) const { return lanes_.at(lane).l; }
  fabric::Qp* control_qp(uint32_t lane = 0) const { return lanes_.at(lane).c; }
  uint32_t lanes() const { return static_cast<uint32_t>(lanes_.size()); }
  uint64_t armed() const { return armed_; }
  uint64_t requests_taken() const {
    return f_->counters().recvs_consumed / (cfg_.recycle ? kRecvsPerRequestRecycle : 1);
  }
  // Frees that passed the owner check and released L2..L5: instances whose
  // U part ran to its ENABLE (U.bind0 fails for anything but an owner's free,
  // and a failed step stops U). A request that was refused, malformed or
  // replayed by wrong values never counts (the budget monitor's frees).
  uint64_t frees_done() const;
  bool Faulted() const;
  // Stops the chain for good (MN CPU, recovery): R, F, every C and U first,
  // then every L once every step it started has completed (a control-path
  // poll), so Inspect sees effects, not steps in flight.
  Task<void> Quiesce(fabric::Runtime* rt);
  // Quiesces the chain (read Inspect and frees_done() before) and gives its
  // QPs (and their rings), CQs, MRs and scratch back to the MN (MN CPU, after
  // a rebuild). The chain is unusable afterwards.
  Task<void> Destroy(fabric::Runtime* rt);
  // What the last instance lane `w`'s L started did, read after Quiesce (the
  // only instance of the lane that can be partial). L's steps run in order:
  // steps >= 2 means L2 cleared the entry's owner, >= 3 that L3 claimed the
  // tail element `element`, >= 5 that L5 wrote the entry there. A free
  // stopped with 2 <= steps < 5 has taken the entry out of everyone's hands
  // without queueing it: the MN finishes it (OsmwMn::RepairFree).
  struct Progress {
    uint32_t steps = 0;
    uint64_t element = 0;  // the claimed tail position (steps >= 3)
    uint64_t handle = 0;   // the entry being freed (steps >= 2)
    // InspectRequest only. `named`: the entry L1 read for it (steps >= 1).
    // `owner_checked`: F ran the request's F.enable, so its F.inv0 (the
    // owner check on the CN's own Free QP) succeeded: the CN owns `named`
    // and asked to free it, even if the chain stopped before L2.
    uint64_t named = 0;
    bool owner_checked = false;
  };
  Progress Inspect(uint32_t w = 0) const;
  // The request lane `w`'s L last started (-1: none), and what request `m`
  // did (its steps are the lane's full stride when L went past it). Valid
  // for the last lane_instances() requests of each lane (slots are reused).
  int64_t LastStarted(uint32_t w) const;
  Progress InspectRequest(uint64_t m) const;
  uint32_t lane_instances() const { return cfg_.max_instances / cfg_.lanes; }
  uint32_t worker_stride() const { return static_cast<uint32_t>(WorkerStride()); }

 private:
  FreeChain() = default;
  struct Lane {
    fabric::Cq* ucq = nullptr;  // U's completions
    fabric::Cq* lcq = nullptr;  // L's completions, counted by C's, F's and R's WAITs
    fabric::Qp* u = nullptr;
    fabric::Qp* l = nullptr;
    fabric::Qp* c = nullptr;
    fabric::Mr* u_ring_meta_mr = nullptr;  // U's SQ ring, metadata PD (L1 writes inv[k])
    fabric::Mr* l_ring_data_mr = nullptr;  // L's SQ ring, data PD (F's RECV writes L1)
    fabric::Mr* c_ring_data_mr = nullptr;  // recycling: C's SQ ring, data PD (F's RECVs)
  };
  // Instance s: its lane w and index j there, its first WQE index on F, R,
  // U_w and L_w, and its scratch slot.
  struct Bases {
    uint64_t s = 0, w = 0, j = 0, f0 = 0, r0 = 0, u0 = 0, l0 = 0, slot = 0;
  };
  Bases BasesOf(uint64_t s) const;
  // TailValues for this chain's strides (recycling or not).
  std::vector<uint64_t> Tail(uint64_t s) const;
  Task<void> CreateLanes();
  Task<void> CreateScratch();
  void PostFreePart(const Bases& b);
  void PostReplyPart(const Bases& b);
  void PostUnbindPart(const Bases& b);
  void PostEntryRead(const Bases& b);
  void PostWorkerSteps(const Bases& b);
  void PostRestore(const Bases& b);
  void PostRecvs(const Bases& b);
  void PostControlPart(const Bases& b);
  const Lane& LaneOf(const Bases& b) const { return lanes_[b.w]; }
  uint64_t UnbindStride() const;
  uint64_t WorkerStride() const { return cfg_.recycle ? kWorkerSlotWrs : kWorkerWrs; }

  fabric::Cluster* cluster_ = nullptr;
  fabric::Node* mn_ = nullptr;
  Metadata* md_ = nullptr;
  FreeChainConfig cfg_;
  fabric::Cq* frcq_ = nullptr;  // F's RECVs
  fabric::Cq* fscq_ = nullptr;  // F's LOCAL_INVs
  fabric::Cq* rscq_ = nullptr;  // R (errors only)
  fabric::Cq* ccq_ = nullptr;   // every C and B (errors only)
  fabric::Qp* f_ = nullptr;
  fabric::Qp* r_ = nullptr;
  std::vector<Lane> lanes_;
  fabric::Qp* boot_ = nullptr;            // recycling: enables every C's first instance
  fabric::Mr* f_ring_meta_mr_ = nullptr;  // F's SQ ring, metadata PD (L1 writes inv0)
  fabric::Mr* scratch_meta_mr_ = nullptr;
  fabric::Mr* scratch_data_mr_ = nullptr;  // the same bytes, data PD: U's copy READ
  uint64_t scratch_ = 0;                   // [zero 8][sink 16][pad][zeros 128] then 32 B per slot
  uint64_t armed_ = 0;
  fabric::CpuCost cost_post_;
};

// The CN's two QPs of a Free pair: requests go out on `request` (the Free
// QP, where MW 0 of every group the CN allocates is usable) and replies come
// in on `reply`.
struct FreeQps {
  fabric::Qp* request = nullptr;
  fabric::Qp* reply = nullptr;
};

// The CN end of one Free QP. Creates the CN's Free QP and reply QP (not
// connected). Up to `lanes` frees in flight (the MN's chain has as many
// lanes), each with its own slot of the buffer: instance s runs on lane s
// mod lanes and waits for nothing of another lane's but the owner check's
// turn on F.
class FreeClient {
 public:
  // `mr` covers [buf_addr, +8 x lanes) with local access, BufferBytes(lanes)
  // when recycling (requests are sent from there; std::invalid_argument
  // otherwise). `send_cq`: the CQ of the Free QP's SQ, where the caller polls
  // the WRs it posts itself (data through MW 0); the free request is
  // unsignaled and lands there only if it fails. Null: a counting-only CQ
  // (nothing stored, so the caller cannot poll it).
  // Recycling chain (FreeChainConfig::recycle) with `recycle_instances`
  // instances and groups of `group_size`: the buffer needs BufferBytes(lanes)
  // (`lanes` divides recycle_instances, 4 or more instances each).
  FreeClient(fabric::Node* cn, fabric::Pd* pd, fabric::Runtime* rt, fabric::Mr* mr,
             uint64_t buf_addr, fabric::Cq* send_cq = nullptr, uint32_t recycle_instances = 0,
             uint32_t group_size = 0, uint32_t lanes = 1);
  // Destroys the Free QP, the reply QP, the reply CQ and the send CQ if it created it (a
  // caller's `send_cq` stays the caller's). Destroy a client only when no
  // Free is running on it.
  ~FreeClient();
  FreeClient(const FreeClient&) = delete;
  FreeClient& operator=(const FreeClient&) = delete;
  static constexpr uint64_t kRecycleBufferBytes = 256;  // one slot
  static uint64_t BufferBytes(uint32_t lanes) { return lanes * kRecycleBufferBytes; }

  fabric::Qp* qp() const { return qp_; }
  fabric::Qp* reply_qp() const { return reply_qp_; }
  FreeQps qps() const { return {qp_, reply_qp_}; }
  fabric::Cq* send_cq() const { return send_cq_; }
  // The replies' CQ (Free awaits it).
  fabric::Cq* recv_cq() const { return recv_cq_; }

  // Sends the request (the handle of an AllocGrant) and awaits the chain's
  // reply; callers may overlap (beyond `lanes` they wait for a slot).
  // Replies come in request order. No reply within `timeout` means the
  // chain refused this request (not the owner, a double free, a forged
  // handle) or is dead: the client moves both QPs to ERR and returns
  // kNotOwner. The frees behind it in flight are flushed (none of them
  // passed the refused instance's owner check, or their replies wait behind
  // its reply) and return kLaneBroken: retry them on a renewed chain.
  // With a liveness check (set_liveness), a deadline that passes while the
  // MN's chain has not faulted only restarts the wait: a slow reply is not a
  // refusal. `*seq` (if given): the request's number (the chain's instance
  // number), or kNoSeq when nothing was sent.
  static constexpr uint64_t kNoSeq = ~uint64_t{0};
  Task<Status> Free(uint64_t handle, Ps timeout, uint64_t* seq = nullptr);
  void set_liveness(chain::LivenessCheck alive) { deadlines_.set_liveness(std::move(alive)); }

  // ---- Renewal (OsmwMn::RenewFree) ----
  // Moves both QPs to ERR, waits until every Free in flight has returned and
  // returns how many "freed" replies came, in order: requests 0..n-1 are
  // freed; what became of the later ones only the MN knows.
  Task<uint64_t> Stop();
  // Requests >= Stop()'s count that the MN freed (it stopped them after the
  // owner check, or their reply was lost): they succeeded.
  void Settle(const std::vector<uint64_t>& freed) { settled_.insert(freed.begin(), freed.end()); }
  // True (once) when request `seq` was settled as freed.
  bool TakeSettled(uint64_t seq) { return settled_.erase(seq) > 0; }

  // Attack tests: a malicious CN's edit of the tail values (TailValues order)
  // it sends with its free `seq`.
  using Tamper = std::function<void(uint64_t seq, std::vector<uint64_t>* tail)>;
  void set_tamper(Tamper t) { tamper_ = std::move(t); }

 private:
  // Writes request `seq` into its slot and posts its reply RECV and SENDs.
  bool PostRequest(uint64_t seq, uint64_t handle);

  fabric::Node* cn_;
  fabric::Mr* mr_;
  uint64_t buf_;
  fabric::Cq* send_cq_ = nullptr;
  bool owns_send_cq_ = false;
  fabric::Cq* recv_cq_ = nullptr;
  fabric::Qp* qp_ = nullptr;
  fabric::Qp* reply_qp_ = nullptr;
  uint32_t recycle_ = 0;
  uint32_t g_ = 0;
  uint32_t lanes_ = 1;
  uint64_t next_seq_ = 0;
  uint32_t in_flight_ = 0;
  uint64_t confirmed_ = 0;  // "freed" replies in order: requests 0..confirmed_-1
  bool broken_ = false;     // a reply failed (or Stop): count no more
  WaitList slot_free_;      // frees waiting for one of the `lanes` slots
  CoMutex reply_turn_;      // replies are consumed in request order
  chain::ReplyDeadlines deadlines_;
  std::set<uint64_t> settled_;
  Tamper tamper_;
};

}  // namespace dmb::systems::onesided_mw
