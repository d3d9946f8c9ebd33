// OneSidedMW's memory-allocation WR chain ([OSMW] §4.3, Figure 5), pre-posted
// on the MN's RNIC: a CN's SEND triggers it and it hands out one MW group with
// no MN CPU on the path. The CN side (AllocClient) posts the SEND and awaits
// the reply.
//
// QPs, per Alloc QP (one per CN in the paper; all on the MN):
//   A  Alloc QP (data PD, connected to the CN's alloc QP; managed SQ). Its RQ
//      takes the CN's requests; its SQ holds, per instance, the G BIND_MWs,
//      the reply WRITE and the ENABLE of the lane's ticket.
//      Its QP access flags are 0: no READ/WRITE/atomic through the alloc lane.
//   W lanes (AllocChainConfig::lanes), instance s runs on lane w = s mod W:
//   L_w worker (metadata PD, looped back to itself; managed SQ): the MN-local
//       FAA/READ/WRITE steps on the metadata.
//   C_w control (metadata PD, looped back; cross-channel): WAITs on completion
//       counts and SEND_ENABLEs the next step of A or L_w, so each step starts
//       only after the data the previous step produced has landed (a managed
//       SQ fetches a WQE only once enabled, so no stale prefetch of a WQE a
//       step rewrites).
// Pipelining: the W lanes run their instances' dependent metadata steps side
// by side (each lane is its own in-order QP pair), so W requests are inside
// one Alloc QP at once; only A's short bind/reply part runs one instance
// after another, in request order. A lane's instance waits for nothing of
// another lane's but the gate "instance s-1 has enabled its part of A"
// (gcq below), and for no CN round trip: the ticket is released as soon as
// the reply is posted, not when it is acknowledged.
// Every one of these QPs is cross-channel, but only A faces the CN: the
// default profile charges the offload penalty for QPs connected to another
// node, so 1 QP per Alloc QP; 1 + 2W (+1 bootstrap QP when recycling) under
// the profile's `+all_cross_channel` reading.
// L_w and C_w live in the metadata PD: a CN's SEND can name any qpn as an
// access QP, but a bind to a QP outside the data PD fails, and nothing
// CN-facing can reach the metadata MR.
//
// One chain instance s on lane w, its j = s / W-th there (G = group size,
// "->" = which later WQE field it rewrites; [Fig5 n] = the paper's step).
// Every WR on L_w is signaled (C_w's WAITs count them); on A only the reply
// (A's binds and ENABLE are not: nothing waits on them, a failed one still
// completes with an error, and a successful unsignaled WR writes no CQE, so
// A does not stall on three CQE writes per allocation: 372 -> 492 kops at 8
// lanes); of C_w's, only the ENABLE that finishes the instance's part of A
// (into gcq, below).
//
//   RECV on A    CN request -> A.reply{remote_addr,rkey} (CN_buff),  [Fig5 1]
//                              A.bind[k].qpn (k = 1..G-1: the access QPs)
//   L1 masked FAA head += 8 (wraps in the ring)   -> scratch[s]      [Fig5 2]
//                                                    (u64 LE: the claimed
//                                                    element's address)
//   L2 READ scratch[s], 8 reversed 1-byte SGEs    -> L4.remote_addr (BE)
//      FENCE: consumes L1's result, ordered by the RNIC whatever C_w enables
//   L3 READ scratch[s], 8 reversed 1-byte SGEs    -> L5.remote_addr (BE)
//      (L2 and L3 are one gate: the FAA returns host order and a READ can
//      scatter each source byte to one place only, so the two fields need
//      two swap READs; L3 issues right behind L2, about one PU slot, not a
//      dependent step)
//   L4 READ element (8 B), FENCE                  -> L6.remote_addr  [Fig5 3]
//   L5 WRITE 8 zero bytes to the element, FENCE (after L4's read) [§4.3
//      "Detecting empty free MW queue"]
//   L6 READ entry (16 + 16G B), FENCE              -> L7.remote_addr  [Fig5 4]
//                                                     (owner_ptr), staging[s]
//                                                     (handle), A.bind[k]
//                                                     bytes 16..31 (base,
//                                                     rkey, new rkey)
//   L7 WRITE owner_id (this chain's CN), FENCE  [§4.3 "Handling crashed CNs"]
//   L8 the instance's ticket (below)
//   A.bind[k] BIND_MW MW k of the entry to the chunk; MW 0 to the CN's Free QP
//             (fixed when posted), MW k to the k-th access QP     [Fig5 5-6]
//   A.reply   WRITE_WITH_IMM (imm = s) to CN_buff, gathering staging[s] and
//             A.bind[k] bytes 16..31: { handle, G x (base, rkey, new rkey) }
//                                                                  [Fig5 7]
//   A.enable  SEND_ENABLE L_w's L8 (the lane's next instance may claim)
//
//   C_w: WAIT lcq_w >= 8j          (the lane's previous ticket)
//        WAIT rcq >= s+1           EN L1        (request s has landed)
//        WAIT lcq_w >= 8j+1        EN L2..L3    (FAA result landed)
//        WAIT lcq_w >= 8j+3        EN L4..L5    (element address in L4, L5)
//        WAIT lcq_w >= 8j+4        EN L6        (entry address in L6)
//        WAIT lcq_w >= 8j+6        EN L7        (owner_ptr in L7)
//        WAIT gcq >= s             EN A.bind[0]..A.enable, signaled -> gcq
//                                  (binds rewritten; the instances before s
//                                  have enabled all of theirs)
// A runs in order, so the reply starts only after every bind of its instance
// succeeded (a failed bind moves A to ERR and flushes the reply): no gate
// between binds and reply. gcq counts the instances whose part of A is
// enabled: an ENABLE enables every WQE below its index, so lane w may enable
// s's part only once s-1's part (on another lane) is enabled too, or it
// would release s-1's unrewritten binds. L7 (owner_id) needs no gate before
// the reply either: its address is the MN's own owner_ptr, read by L6, so it
// cannot fault while L_w is healthy; it may land just after the reply, and
// the MN's Quiesce waits for every started step before it Inspects. This
// leaves 5 dependent gates per allocation (L1, L2-L3, L4, L6, then A).
//
// Why the ticket: a WAIT counts every completion, flushes included. When A
// faults (a bad access qpn or CN_buff in the request) its RQ and SQ flush, so
// rcq and gcq-gated steps see counts past every later instance's and C_w
// would go on enabling L_w, which is healthy, to claim (and leak) one element
// per pre-posted instance. L8 is enabled only from A's tail, which a fault
// flushes, and L_w never flushes while healthy: the lane's next instance
// never passes its first WAIT, and a faulted chain claims at most one more
// element per lane (an instance already past its ticket), which the MN's
// repair restores (Inspect: every lane's last instance). A reply the CN's
// RNIC NAKs comes after its ticket: that entry stays granted (owner_id =
// the requester, in its budget, reclaimed if the CN crashes), and the
// renewal that follows hands it to the CN (OsmwMn::RenewAlloc, "Settling").
//
// Placeholders that no step rewrote make the chain fault instead of doing
// harm: binds carry rkey 0 and (k >= 1) the qpn of L_0 (outside the data
// PD); READ/WRITE of the metadata carry address 0 (outside the metadata MR);
// the reply carries rkey 0.
//
// Empty queue ([OSMW] §4.3): L5 zeroes every element it hands out, so a head
// that reaches an element no free has refilled reads 0 into L6, whose READ of
// address 0 faults: L_w goes to ERR and flushes; C_w's WAITs then see the
// flush completions and enable binds that still carry their placeholders,
// which fail, so A goes to ERR too and the reply is flushed. The CN gets no
// reply (AllocClient times out); nothing was bound or recorded (the failed
// claim did advance the head). A bad request faults the same way after its
// claim: that entry stays owned (owner_id) by the requester, half bound.
// The MN CPU notices (Faulted), stops the chain (Quiesce), reads every lane's
// last instance (Inspect) and repairs (onesided_mw.cc).
//
// Recycling (AllocChainConfig::recycle; ODRP §4.4 "CNode-assisted MNode WR
// recycle", [OSMW] §4.3): the K = max_instances instances (K/W per lane) are
// posted once and then reused in place forever, with no MN CPU. The rings of
// A, L_w and C_w hold exactly K, K/W and K/W instances (K/W a power of two >=
// 4; A's instance is padded with unsignaled NOPs to P_A = bit_ceil(G+2)
// WQEs, C_w's to 16), so absolute WQE index i of instance j+K/W sits where
// instance j's did. What differs from round to round is only absolute: WAIT
// counts, ENABLE indices, the reply's imm and the RQ doorbell record. The CN
// knows how many requests it sent, computes them (ControlValues) and sends
// them with each request; RECVs scatter them into exactly those WQE fields
// (never a whole WQE: a CN cannot change an opcode, a CQ or a target QP). A
// request is two SENDs, so A's RQ holds 2K RECVs:
//   RECV 2s   (14 x 8 B)  the 14 operand0 fields (WAIT counts, ENABLE
//                         indices) of C_w's next instance, s+W
//   RECV 2s+1 the request as above, then the reply's imm (= s), the ticket
//             ENABLE index of A's tail and the RQ doorbell record
//             (= 2(s+1) + 2K: the RECVs of this round become postable again)
// C_w is managed too (otherwise its producer index, which only the MN CPU's
// doorbell moves, would stop it after K/W instances): its instance ends with
// an ENABLE of itself through its next instance. A bootstrap QP B
// (cross-channel, loopback, W WQEs) enables every C_w's first instance.
// Placeholders are restored for the next round: L8, the ticket, is a READ of
// zeros into the rkey fields of the instance's binds (after the reply was
// posted), so a bind that no L6 rewrote still fails on rkey 0. It also puts
// 0 back into the addresses L4..L7 were given.
// Faults in rounds >= 1: every WQE then sits above the producer index the
// MN CPU last rang, so a QP going to ERR flushes nothing but the WQEs in
// flight. The failing WQE's own error completion still counts: on an empty
// queue L6's error lets C_w enable the binds, which fail on the rkey 0 that
// L8 restored (without it they would rebind last round's group, which may be
// free again: alloc_chain_test checks this), and C_w then stops at its WAIT
// for L7. A faulted chain claims nothing more than above, as in round 0.
// The RQ and C_w are safe to rewrite while in use because the CN keeps at
// most W requests in flight (AllocClient) and K/W >= 4: request s is sent
// only after reply s-W arrived, so C_w is at instance j (or finishing j-1)
// when request s writes instance j+1, and A has finished instance s-W... long
// before request s+K rewrites that slot.
// Wrong counts or indices from a CN (onesided_mw_test
// WrongControlValuesReplayNothing, fuzz_test): its chain may run steps early
// or run instances nobody requested. Every step that consumes an earlier
// step's result on L_w carries FENCE (L2, L4, L5, L6, L7), so whoever enabled
// it, it starts only once the step before it has landed: an early step never
// reads a result slot before the FAA wrote it (which would hand out a stale
// element and skip the claimed one). L8 restores L4..L7's addresses to 0 at
// the end of every round. An instance run out of turn then either makes a
// genuine claim (a fresh head FAA; the entry ends owned by that CN,
// reclaimable, and counted by the budget monitor through claims_started) or
// faults on a restored 0; it never acts on last round's element, entry or
// windows. Early ENABLEs of A release binds that still carry rkey 0: they
// fault the requester's own chain. What remains is capacity: a round the MN
// stops mid-way (Quiesce) may orphan the entry it was moving; Inspect repairs
// the instance each lane stopped in.
#pragma once

#include <bit>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "fabric/node.h"
#include "systems/common/chain_wr.h"
#include "systems/common/reply_deadlines.h"
#include "systems/common/wait_list.h"
#include "systems/onesided_mw/layout.h"
#include "systems/onesided_mw/metadata.h"
#include "systems/status.h"

namespace dmb::systems::onesided_mw {

struct AllocChainConfig {
  uint32_t free_qpn = 0;        // MN end of the CN's Free QP: MW 0 of every group goes to it
  uint64_t owner_id = 0;        // written to owner_id (OwnerIdOfCn(cn_index))
  uint32_t max_instances = 16;  // chain instances the rings hold at once (all lanes)
  // Lanes: instance s runs its metadata steps on lane s mod lanes, so up to
  // `lanes` requests are inside the chain at once. max_instances must be a
  // multiple of lanes.
  uint32_t lanes = 1;
  // Reuse the instances in place, re-armed by the CN's requests (see above).
  // max_instances / lanes must then be a power of two >= 4, armed all at once.
  bool recycle = false;
};

class AllocChain {
 public:
  // Per instance: L1..L8 on its lane's L; G binds, the reply, ENABLE on A;
  // the WAITs and ENABLEs on its lane's C.
  static constexpr uint32_t kWorkerWrs = 8;
  static constexpr uint32_t kAllocWrs(uint32_t g) { return g + 2; }
  static constexpr uint32_t kControlWrs = 13;
  // Recycling: C's instance (the 13 above, C's ENABLE of itself and NOP
  // padding), A's instance padded to a power of two, RECVs per request.
  static constexpr uint32_t kControlWrsRecycle = 16;
  static uint32_t AllocSlotWrs(uint32_t g) { return std::bit_ceil(kAllocWrs(g)); }
  static constexpr uint32_t kRecvsPerRequestRecycle = 2;
  // The operand0 of each of C_w's WQEs of instance `s` (WAIT counts, ENABLE
  // indices; the 14th only when recycling) for a chain of `lanes` lanes,
  // assuming every QP starts at index 0 and holds only this chain: what Arm
  // posts and what a recycling CN sends for the lane's next instance.
  static std::vector<uint64_t> ControlValues(uint64_t s, uint32_t g, bool recycle,
                                             uint32_t lanes = 1);

  // Creates A, every lane's L and C and the MRs the chain scatters through,
  // and connects L and C to themselves. Connect alloc_qp() to the CN's alloc QP, then Arm.
  static Task<std::unique_ptr<AllocChain>> Create(fabric::Cluster* cluster, Metadata* md,
                                                  AllocChainConfig cfg);

  // Pre-posts `n` chain instances (the MN CPU posts them, verbs.post_send
  // each). Throws VerbsError when A is not connected or the rings are full.
  Task<void> Arm(uint32_t n);

  fabric::Qp* alloc_qp() const { return a_; }
  fabric::Qp* worker_qp(uint32_t lane = 0) const { return lanes_.at(lane).l; }
  fabric::Qp* control_qp(uint32_t lane = 0) const { return lanes_.at(lane).c; }
  uint32_t lanes() const { return static_cast<uint32_t>(lanes_.size()); }
  uint64_t armed() const { return armed_; }
  // Requests the RNIC has taken (RECVs consumed on A).
  uint64_t requests_taken() const {
    return a_->counters().recvs_consumed / (cfg_.recycle ? kRecvsPerRequestRecycle : 1);
  }
  // Some chain QP is in ERR (a fault: empty queue, bad request): the chain
  // serves nothing until rebuilt.
  bool Faulted() const;

  // ---- Recovery (MN CPU, control path: onesided_mw.cc) ----
  // Stops the chain for good: every C and B first (nothing more is enabled),
  // then every L once every step it started has completed, then A. The CN's end of A
  // sees the next SEND fail.
  Task<void> Quiesce(fabric::Runtime* rt);
  // Quiesces the chain (read Inspect before) and gives its QPs (and their
  // rings), CQs, MRs and scratch back to the MN (MN CPU, after a rebuild).
  // The chain is unusable afterwards.
  Task<void> Destroy();
  // What request `m` (absolute, 0-based) did, read after Quiesce. L's steps
  // run in order and each is counted when started, so `steps` says exactly
  // which effects happened: 1 the claim (head FAA), 4 the element read into
  // L6, 5 the element zeroed, 6 the entry read (binds and staged handle
  // rewritten), 7 owner_id written, 8 the ticket. `replied`: A started m's
  // reply WRITE (A runs in order and a failed bind stops it, so every bind
  // of m succeeded): the grant went out to the CN's QP. Whether it arrived
  // the MN cannot see (a CN that gave up on it moved its QP to ERR first);
  // the renewal tells the CN (OsmwMn::RenewAlloc). Valid for the last
  // lane_instances() requests of each lane only (older slots are reused).
  struct Progress {
    uint32_t steps = 0;
    uint64_t element = 0;  // the claimed element's address (steps >= 1)
    // What the element held (steps >= 4; from L6's address until the ticket
    // restores it, then from the staged handle): 0 = the queue was empty.
    uint64_t entry = 0;
    bool replied = false;
  };
  Progress Inspect(uint64_t m) const;
  // Instances per lane (max_instances / lanes): how far back Inspect sees.
  uint32_t lane_instances() const { return LaneInstances(); }
  // The request lane `w` last started (its L ran at least one of its
  // steps), or -1: the only one of the lane that can be partial.
  int64_t LastStarted(uint32_t w) const;
  // Claims the chain started (L1s run): more than requests_taken() when a CN
  // sent wrong counts and L ran instances nobody requested (the budget
  // monitor counts these).
  uint64_t claims_started() const;

 private:
  AllocChain() = default;

  fabric::Cluster* cluster_ = nullptr;
  fabric::Node* mn_ = nullptr;
  Metadata* md_ = nullptr;
  AllocChainConfig cfg_;
  struct Lane {
    fabric::Cq* lcq = nullptr;  // L's completions, counted by C's WAITs
    fabric::Qp* l = nullptr;
    fabric::Qp* c = nullptr;
    fabric::Mr* c_ring_data_mr = nullptr;  // recycling: C's SQ ring, data PD (A's RECVs)
  };
  Task<void> CreateQps();
  Task<void> CreateScratch();
  void PostAllocPart(uint64_t s, uint64_t staged_handle);
  fabric::SendWr TicketWr(uint64_t s, uint64_t a0, uint64_t l0) const;
  void PostWorkerPart(uint64_t s, uint64_t faa_result, uint64_t staged_handle);
  void PostRecvs(uint64_t s);
  void PostControlPart(uint64_t s);
  const Lane& LaneOf(uint64_t s) const { return lanes_[s % lanes_.size()]; }
  uint64_t LaneIndex(uint64_t s) const { return s / lanes_.size(); }
  // A's first WQE index of instance s.
  uint64_t AllocIndex(uint64_t s) const {
    return s * (cfg_.recycle ? AllocSlotWrs(md_->group_size()) : kAllocWrs(md_->group_size()));
  }
  uint32_t LaneInstances() const {
    return cfg_.max_instances / static_cast<uint32_t>(lanes_.size());
  }

  fabric::Cq* rcq_ = nullptr;  // A's RECVs
  fabric::Cq* acq_ = nullptr;  // A's binds and replies
  fabric::Cq* gcq_ = nullptr;  // C's: instances whose part of A is enabled (and C's errors)
  fabric::Qp* a_ = nullptr;
  std::vector<Lane> lanes_;
  fabric::Qp* boot_ = nullptr;             // recycling: enables every C's first instance
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

// The CN end of one Alloc QP: up to `lanes` allocations in flight (the MN's
// chain has as many lanes), each with its own slot of the buffer. Replies
// come back in request order (A runs in order).
class AllocClient {
 public:
  // `mr` covers [buf_addr, +BufferBytes(g, lanes)) with local write and
  // remote write (the replies land there). Creates the CN's alloc QP (not
  // connected). `recycle_instances` > 0: the MN's chain recycles
  // (AllocChainConfig::recycle) with that many instances.
  AllocClient(fabric::Node* cn, fabric::Pd* pd, fabric::Runtime* rt, fabric::Mr* mr,
              uint64_t buf_addr, uint32_t group_size, uint32_t recycle_instances = 0,
              uint32_t lanes = 1);
  // Destroys the alloc QP and its CQs (a renewed pair's old client gives them
  // back). Destroy a client only when no Allocate is running on it.
  ~AllocClient();
  AllocClient(const AllocClient&) = delete;
  AllocClient& operator=(const AllocClient&) = delete;
  // One slot: [request 64][reply, 64-aligned][control values 128][request 128].
  static uint64_t SlotBytes(uint32_t g) { return 64 + (ReplyBytes(g) + 63) / 64 * 64 + 256; }
  static uint64_t BufferBytes(uint32_t g, uint32_t lanes = 1) { return lanes * SlotBytes(g); }

  fabric::Qp* qp() const { return qp_; }
  // Where the reply of the request with sequence number `seq` lands.
  uint64_t reply_addr(uint32_t seq = 0) const { return SlotAddr(seq) + 64; }

  // Sends the request (MN-side qpns of the G-1 access QPs, in MW order) and
  // awaits the reply WRITE_WITH_IMM. The CQE (rather than polling a flag in
  // CN_buff) tells the CN the reply bytes have landed, without a polling loop
  // that would have to sleep in virtual time. Callers may overlap: beyond
  // `lanes` in flight they wait for a slot. With no reply within `timeout`
  // the client asks the liveness check (if set): a chain that has not
  // faulted is only slow and the client waits another `timeout`. Otherwise
  // (the MN's chain faulted, e.g. on an empty free-MW queue) it moves its
  // alloc QP to ERR, which flushes every pending RECV, and every allocation
  // in flight returns kLaneBroken: the lane is dead until reconnected (so
  // is the MN end). `*seq` (if given): the request's number, or kNoSeq when
  // nothing was sent (the client was already stopped). Request numbers are
  // the MN chain's instance numbers: one per request actually sent.
  static constexpr uint32_t kNoSeq = ~0u;
  Task<Result<AllocGrant>> Allocate(std::vector<uint32_t> access_qpns, Ps timeout,
                                    uint32_t* seq = nullptr);
  void set_liveness(chain::LivenessCheck alive) { deadlines_.set_liveness(std::move(alive)); }

  // ---- Renewal (OsmwMn::RenewAlloc) ----
  // Moves the alloc QP to ERR (nothing more arrives on it), waits until
  // every Allocate in flight has returned and returns how many replies it
  // accepted: exactly requests 0..n-1 (replies arrive in request order, and
  // after the first failed one the client accepts none: the lane is dead).
  Task<uint64_t> Stop();
  // Grants of requests >= Stop()'s count that the MN had sent (the renewal
  // salvaged them): each goes to the allocation that sent the request.
  void Salvage(std::vector<AllocGrant> grants);
  // The salvaged grant of request `seq`, once (nullopt: none).
  std::optional<AllocGrant> TakeSalvaged(uint32_t seq);

  // Attack tests: a malicious CN's edit of the control values it sends with
  // request `seq` (those of the lane's next instance, ControlValues order).
  using Tamper = std::function<void(uint32_t seq, std::vector<uint64_t>* values)>;
  void set_tamper(Tamper t) { tamper_ = std::move(t); }

 private:
  uint64_t SlotAddr(uint32_t seq) const { return buf_ + (seq % lanes_) * SlotBytes(g_); }
  bool PostRequest(uint32_t seq, const std::vector<uint32_t>& access_qpns);
  Result<AllocGrant> ReadReply(uint32_t seq, const fabric::WorkCompletion& wc, bool timed_out,
                               Ps timeout) const;

  fabric::Node* cn_;
  fabric::Mr* mr_;
  uint64_t buf_;
  uint32_t g_;
  uint32_t recycle_ = 0;
  uint32_t lanes_ = 1;
  fabric::Cq* send_cq_ = nullptr;
  fabric::Cq* recv_cq_ = nullptr;
  fabric::Qp* qp_ = nullptr;
  uint32_t next_seq_ = 0;
  uint32_t in_flight_ = 0;
  uint64_t accepted_ = 0;  // replies handed to callers: requests 0..accepted_-1
  bool broken_ = false;    // a reply failed (or Stop): accept nothing more
  WaitList slot_free_;     // allocations waiting for one of the `lanes` slots
  CoMutex reply_turn_;     // replies are consumed in request order
  chain::ReplyDeadlines deadlines_;
  std::map<uint32_t, AllocGrant> salvaged_;
  Tamper tamper_;
};

}  // namespace dmb::systems::onesided_mw
