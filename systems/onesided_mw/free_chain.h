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
//      cross-channel). Its RQ takes the CN's request; its SQ holds the
//      LOCAL_INV of MW 0, a WAIT + SEND_ENABLE tail, and the reply SEND. Its
//      access flags allow READ/WRITE: MW 0 is usable through it.
//      Pass free_qp()->qp_num() to the allocation chain as free_qpn.
//      A protection error the CN causes through F (a bad READ/WRITE via
//      MW 0) moves F to ERR like any responder: the CN kills its own free
//      lane (a later instance then faults on its placeholders, harmlessly).
//   U  unbinder (data PD, looped back; managed SQ; invalidate_any_qp, the
//      "MN-only configuration"): the owner check by data (BIND of MW 0, then
//      LOCAL_INV of it), LOCAL_INV of MW 1..G-1, which are bound to the CN's
//      access QPs, the copy READ that hands L2..L5 their operands, then a
//      WAIT + SEND_ENABLE tail. Its QP allows remote READ: its own loopback
//      copy is the only requester it has.
//   L  worker (metadata PD, looped back; managed SQ): READ/WRITE/FAA on the
//      metadata.
//   C  control (metadata PD, looped back; cross-channel, not managed).
//
// One chain instance (s = instance, G = group size, "->" = which later WQE
// field it rewrites). L1..L5, F.inv0, F.reply, U.bind0, U.inv and U.copy
// are signaled; WAITs and ENABLEs on F, U, L are not; C's are not.
//
//   RECV on F    request (entry address X, u64 BE) -> L1.remote_addr
//   L1 READ X (32 + 16G B), 2G + 4 SGEs:  owner_ptr, handle -> slot[s]+16
//                                         mw[0] record (base, rkey, new
//                                           rkey)     -> U.bind0 bytes 16..31
//                                         mw[k] base, rkey -> sink (k >= 1)
//                                         mw[k] next_rkey -> U.inv[k] rkey
//                                         owner_id    -> sink
//                                         MW 0's rkey copies -> F.inv0,
//                                                               U.inv0 rkey
//   F.inv0    LOCAL_INV MW 0           (fails for a non-owner: see above)
//   F.wait    WAIT fscq >= 2s+1        (F.inv0 succeeded)
//   F.enable  SEND_ENABLE U's instance
//   U.bind0   BIND_MW MW 0 to its chunk, qpn U, no access: succeeds only if
//             MW 0 is free, i.e. F.inv0 (on the CN's own Free QP) has
//             invalidated it: the owner check as DATA (below)
//   U.inv0    LOCAL_INV MW 0 (free again for the next allocation)
//   U.inv[k]  LOCAL_INV MW k           (invalidate_any_qp: any QP of the PD)
//   U.copy    READ slot[s]+16 (16 B)   -> L2.remote_addr (owner_ptr),
//                                         staged[s] (handle, L5's source)
//   U.wait    WAIT ucq >= (G+2)(s+1)   (all of U's steps done)
//   U.enable  SEND_ENABLE L2..L3
//   L2 WRITE 8 zero bytes to owner_ptr (owner_id := 0)
//   L3 masked FAA tail += 8 (wraps as the head does) -> faa[s] (u64 LE)
//   L4 READ faa[s], 8 reversed 1-byte SGEs          -> L5.remote_addr (BE)
//   L5 WRITE staged[s] (the entry's own handle) to the element at the tail
//   L6 WAIT lcq >= 5s+5                (L5 acknowledged)
//   L7 SEND_ENABLE F.reply
//   F.reply   SEND, zero bytes: "freed"
//
//   C:  WAIT lcq >= 5s             (instance s-1 went all the way: ticket)
//       WAIT frcq >= s+1           EN L1          (a request has landed)
//       WAIT lcq >= 5s+1           EN F.inv0..F.enable (rkeys in place)
//       WAIT lcq >= 5s+3           EN L4          (FAA result landed)
//       WAIT lcq >= 5s+4           EN L5..L7      (element address in L5)
//
// The ticket (the allocation chain's idea): a WAIT counts every completion,
// flushes included, so a gate on the CQ of a QP that can fault (F, U) would
// open when that QP flushes, and the rest of the chain would run on a free
// that was refused. So every step after a fallible LOCAL_INV is released by
// the success tail of the QP that ran it (F.enable after F.inv0, U.enable
// after U.inv), which a fault flushes instead of executing, and the reply by
// L's own tail. C gates only on L's CQ, which does not flush while L is
// healthy: after a fault at F or U, C stays blocked at instance s's WAIT
// lcq >= 5s+3 (L2..L3 were never enabled) and never reaches a later
// instance's gates, so later requests (already landed or not) run nothing.
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
// Recovery (MN CPU rebuilding a faulted chain, reclaiming a half-unbound
// entry after a fault at U) is not written; Faulted() is what the MN CPU
// would check.
//
// Recycling (FreeChainConfig::recycle): as the allocation chain's (see
// alloc_chain.h): K = max_instances instances (a power of two >= 4) reused in
// place; U's instance padded to bit_ceil(G+4), L's to 8, C's to 16 (its 9,
// an ENABLE of itself through the next instance, unsignaled NOPs), with a
// bootstrap QP that enables C's first instance. A free is two SENDs on the
// Free QP, so F's RQ holds 2K RECVs:
//   RECV 2s   (10 x 8 B)  the operand0 of C's WQEs of instance s+1
//                         (ControlValues)
//   RECV 2s+1 X -> L1.remote_addr, then F.wait's count, F.enable's index,
//             U.wait's count, U.enable's index, L6's count, L7's index (all
//             of instance s), and the RQ doorbell record (2(s+1) + 2K)
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
#include <vector>

#include "fabric/node.h"
#include "systems/common/wait_list.h"
#include "systems/onesided_mw/metadata.h"
#include "systems/status.h"

namespace dmb::systems::onesided_mw {

struct FreeChainConfig {
  uint32_t max_instances = 16;  // chain instances the rings hold at once
  // Reuse the instances in place, re-armed by the CN's requests (see above).
  bool recycle = false;
};

class FreeChain {
 public:
  // Per instance: L1..L7 on L (5 signaled); inv0, WAIT, ENABLE, reply on F;
  // bind0, inv0, G-1 LOCAL_INVs, the copy READ (G+2 signaled), WAIT, ENABLE
  // on U; the WAITs and ENABLEs on C.
  static constexpr uint32_t kWorkerWrs = 7;
  static constexpr uint32_t kWorkerSignaled = 5;
  static constexpr uint32_t kFreeWrs = 4;
  static constexpr uint32_t kUnbindWrs(uint32_t g) { return g + 4; }
  static constexpr uint32_t kUnbindSignaled(uint32_t g) { return g + 2; }
  static constexpr uint32_t kControlWrs = 9;
  // Recycling: per-instance WQE slots on U, L and C; RECVs per request.
  static uint32_t UnbindSlotWrs(uint32_t g) { return std::bit_ceil(kUnbindWrs(g)); }
  static constexpr uint32_t kWorkerSlotWrs = 8;
  static constexpr uint32_t kControlSlotWrs = 16;
  static constexpr uint32_t kRecvsPerRequestRecycle = 2;
  // The operand0 of C's gates of instance s (10 when recycling: the 9 and
  // C's ENABLE of itself), assuming the chain QPs start at index 0.
  static std::vector<uint64_t> ControlValues(uint64_t s, uint32_t g, bool recycle);
  // What a recycling CN sends after the handle for its s-th free: F.wait,
  // F.enable, U.wait, U.enable, L6, L7 (u64 each), then the RQ doorbell.
  static std::vector<uint64_t> TailValues(uint64_t s, uint32_t g);
  // L1 scatters 2G + 4 SGEs.
  static constexpr uint32_t kMaxGroupSize = 6;

  // Creates F, U, L and C and the MRs the chain scatters through, and
  // connects U, L and C to themselves. Connect free_qp() to the CN's Free
  // QP (FreeClient::qp()), then Arm.
  static Task<std::unique_ptr<FreeChain>> Create(fabric::Cluster* cluster, Metadata* md,
                                                 FreeChainConfig cfg);

  // Pre-posts `n` chain instances (MN CPU: verbs.post_send each). Throws
  // VerbsError when F is not connected or the rings are full.
  Task<void> Arm(uint32_t n);

  fabric::Qp* free_qp() const { return f_; }
  fabric::Qp* unbind_qp() const { return u_; }
  fabric::Qp* worker_qp() const { return l_; }
  fabric::Qp* control_qp() const { return c_; }
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
  // Stops the chain for good (MN CPU, recovery): C, F and U first, then L
  // once every step it started has completed (a control-path poll), so
  // Inspect sees effects, not steps in flight.
  Task<void> Quiesce(fabric::Runtime* rt);
  // Quiesces the chain (read Inspect and frees_done() before) and gives its
  // QPs (and their rings), CQs, MRs and scratch back to the MN (MN CPU, after
  // a rebuild). The chain is unusable afterwards.
  Task<void> Destroy(fabric::Runtime* rt);
  // What the last instance L started did, read after Quiesce. L's steps run
  // in order: steps >= 2 means L2 cleared the entry's owner, >= 3 that L3
  // claimed the tail element `element`, >= 5 that L5 wrote the entry there.
  // A free stopped with 2 <= steps < 5 has taken the entry out of everyone's
  // hands without queueing it: the MN finishes it (OsmwMn::RepairFree).
  struct Progress {
    uint32_t steps = 0;
    uint64_t element = 0;  // the claimed tail position (steps >= 3)
    uint64_t handle = 0;   // the entry being freed (steps >= 2)
  };
  Progress Inspect() const;

 private:
  FreeChain() = default;
  // Instance s's first WQE index on F, U and L, and its scratch slot.
  struct Bases {
    uint64_t s = 0, f0 = 0, u0 = 0, l0 = 0, slot = 0;
  };
  void PostFreePart(const Bases& b);
  void PostUnbindPart(uint64_t s, uint64_t slot, uint64_t l0);
  void PostEntryRead(const Bases& b);
  void PostWorkerSteps(const Bases& b);
  void PostRestore(const Bases& b);
  void PostRecvs(const Bases& b);
  void PostControlPart(const Bases& b);

  fabric::Cluster* cluster_ = nullptr;
  fabric::Node* mn_ = nullptr;
  Metadata* md_ = nullptr;
  FreeChainConfig cfg_;
  fabric::Cq* frcq_ = nullptr;  // F's RECVs
  fabric::Cq* fscq_ = nullptr;  // F's LOCAL_INV and reply
  fabric::Cq* ucq_ = nullptr;   // U
  fabric::Cq* lcq_ = nullptr;   // L
  fabric::Cq* ccq_ = nullptr;   // C (errors only)
  fabric::Qp* f_ = nullptr;
  fabric::Qp* u_ = nullptr;
  fabric::Qp* l_ = nullptr;
  fabric::Qp* c_ = nullptr;
  fabric::Qp* boot_ = nullptr;            // recycling: enables C's first instance
  fabric::Mr* c_ring_data_mr_ = nullptr;  // recycling: C's SQ ring, data PD (F's RECVs)
  fabric::Mr* l_ring_data_mr_ = nullptr;  // L's SQ ring, data PD (F's RECV writes L1)
  fabric::Mr* f_ring_meta_mr_ = nullptr;  // F's SQ ring, metadata PD (L1 writes inv0)
  fabric::Mr* u_ring_meta_mr_ = nullptr;  // U's SQ ring, metadata PD (L1 writes inv[k])
  fabric::Mr* scratch_meta_mr_ = nullptr;
  fabric::Mr* scratch_data_mr_ = nullptr;  // the same bytes, data PD: U's copy READ
  uint64_t scratch_ = 0;                   // [zero 8][sink 16][pad][zeros 128] then 32 B per slot
  uint64_t armed_ = 0;
  fabric::CpuCost cost_post_;
};

// The CN end of one Free QP. Creates the CN's Free QP (not connected); MW 0
// of every group the CN allocates is usable through it. Up to `lanes` frees
// in flight, each with its own slot of the buffer: the chain's instance s+1
// starts its L1 as soon as instance s's L5 completed (C's ticket), so
// overlapping frees hide the CN round trip and the request's landing, not
// the chain's own dependent steps.
class FreeClient {
 public:
  // `mr` covers [buf_addr, +8) with local access (the request is sent from
  // there). `send_cq`: the CQ of the Free QP's SQ, where the caller polls
  // the WRs it posts itself (data through MW 0); the free request is
  // unsignaled and lands there only if it fails. Null: a counting-only CQ
  // (nothing stored, so the caller cannot poll it).
  // Recycling chain (FreeChainConfig::recycle) with `recycle_instances`
  // instances and groups of `group_size`: the buffer needs BufferBytes(lanes)
  // (`lanes` <= recycle_instances / 2).
  FreeClient(fabric::Node* cn, fabric::Pd* pd, fabric::Runtime* rt, fabric::Mr* mr,
             uint64_t buf_addr, fabric::Cq* send_cq = nullptr, uint32_t recycle_instances = 0,
             uint32_t group_size = 0, uint32_t lanes = 1);
  // Destroys the Free QP, its reply CQ and the send CQ if it created it (a
  // caller's `send_cq` stays the caller's). Destroy a client only when no
  // Free is running on it.
  ~FreeClient();
  FreeClient(const FreeClient&) = delete;
  FreeClient& operator=(const FreeClient&) = delete;
  static constexpr uint64_t kRecycleBufferBytes = 256;  // one slot
  static uint64_t BufferBytes(uint32_t lanes) { return lanes * kRecycleBufferBytes; }

  fabric::Qp* qp() const { return qp_; }
  fabric::Cq* send_cq() const { return send_cq_; }
  // The replies' CQ (Free awaits it).
  fabric::Cq* recv_cq() const { return recv_cq_; }

  // Sends the request (the handle of an AllocGrant) and awaits the chain's
  // reply; callers may overlap (beyond `lanes` they wait for a slot).
  // Replies come in request order. No reply within `timeout` means the
  // chain refused this request (not the owner, a double free, a forged
  // handle) or is dead: the client moves its QP to ERR and returns
  // kNotOwner. The frees behind it in flight are flushed without having run
  // (the chain's ticket never passed the refused instance) and return
  // kLaneBroken: retry them on a renewed chain.
  Task<Status> Free(uint64_t handle, Ps timeout);

  // Attack tests: a malicious CN's edit of the tail values (TailValues order)
  // it sends with its free `seq`.
  using Tamper = std::function<void(uint64_t seq, std::vector<uint64_t>* tail)>;
  void set_tamper(Tamper t) { tamper_ = std::move(t); }

 private:
  // Writes request `seq` into its slot and posts its reply RECV and SENDs.
  bool PostRequest(uint64_t seq, uint64_t handle);

  fabric::Node* cn_;
  fabric::Runtime* rt_;
  fabric::Mr* mr_;
  uint64_t buf_;
  fabric::Cq* send_cq_ = nullptr;
  bool owns_send_cq_ = false;
  fabric::Cq* recv_cq_ = nullptr;
  fabric::Qp* qp_ = nullptr;
  uint32_t recycle_ = 0;
  uint32_t g_ = 0;
  uint32_t lanes_ = 1;
  uint64_t next_seq_ = 0;
  uint32_t in_flight_ = 0;
  WaitList slot_free_;  // frees waiting for one of the `lanes` slots
  CoMutex reply_turn_;  // replies are consumed in request order
  Tamper tamper_;
};

}  // namespace dmb::systems::onesided_mw
