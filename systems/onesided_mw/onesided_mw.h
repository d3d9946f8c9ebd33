// OneSidedMW ([OSMW], docs/references.md) behind the
// MemoryManager interface: allocation and free run as WR chains on the MN's
// RNIC (alloc_chain.h, free_chain.h), access is one-sided through type-2 MWs
// bound to the CN's own access QPs. The MN CPU sets up, and then only
// repairs: a faulted chain, an empty free-MW queue, a crashed CN, a CN over
// its budget.
//
// Management pairs. A pair is one allocation chain and one free chain for
// one CN (Alloc QP + Free QP, [OSMW] §4.2 Figure 4). MW 0 of every group a
// pair's allocation chain hands out is bound to that pair's Free QP, so a
// chunk is freed through the pair that allocated it (the CN remembers which).
//   sep=true  ([OSMW] "+Sep"): `alloc_qps` pairs per CN (the paper: 1),
//             shared by all the CN's access groups; access QPs hold no
//             offloaded WRs.
//   sep=false: every access group gets its own pair, so the number of MN
//             QPs holding offloaded WRs grows with the threads and the sim's
//             per-QP offload penalty ([OSMW] §3.2) slows every WR of the MN.
// Allocations and frees overlap on a pair: its allocation and free chains
// have `alloc_lanes` lanes each (by default 8 with sep, 1 without), so that
// many requests are inside one Alloc QP and one Free QP at once
// (alloc_chain.h "Pipelining", free_chain.h); the CN keeps up to that many
// of each in flight. A Free pair is two CN-facing QPs: F takes the requests
// (and carries MW 0), R sends the replies.
//
// Groups ([OSMW] §4.2 "QP and MW Grouping"): group_size G MWs per chunk,
// MW 0 on the Free QP and MW k (k = 1..G-1) on the group's lane k-1, so an
// access group has G-1 lanes at most (fewer: the lanes are named cyclically).
// G = 2 is "no Grouping" (one access QP per chunk).
//
// Faults and the MN CPU (all off the allocation, free and access paths):
//  - Late replies ([OSMW] leaves this open; ODRP's answer, odrp.h
//    "Refusals"). A chain refuses by faulting and sends no reply; a slow one
//    (a loaded MN link queues replies for longer than reply_timeout_us) sends
//    none in time either. So when a reply deadline passes the CN asks the MN
//    (AllocRunning / FreeRunning: the MN CPU reads the chain's QP states)
//    whether the chain its client is connected to faulted; if not, the
//    request is only slow and the CN waits another reply_timeout_us. It
//    renews only a chain that faulted or that the MN stopped
//    (probe_on_timeout=false renews at the first deadline: tests).
//  - Settling a renewal (RenewAlloc, RenewFree). Whatever the timing (and
//    whatever a CN claims), no grant is lost or handed out twice:
//    1. The CN stops its old client first (QP to ERR: nothing more arrives
//       on it; the calls in flight return) and tells the MN how many replies
//       it took: requests 0..n-1, a prefix (replies come in order and a
//       client takes none after a failed one).
//    2. The MN stops the chain (Quiesce: nothing more is enabled, every
//       started step completes) and reads every request still in the lanes'
//       slots (lane_instances() per lane), not just each lane's last: the
//       ones before the last went all the way, but their replies may have
//       been dropped at the CN's stopped QP or be still on the link.
//    3. Allocation request whose reply A started (Inspect().replied: every
//       bind succeeded, the grant went out): it is the CN's. If the chain
//       stopped before L7, the MN writes owner_id. If the CN did not take it
//       (request >= n) the MN returns it (AllocSettle::salvaged: handle,
//       base, the windows' current rkeys) and the CN hands it to the
//       allocation that sent the request, as if the reply had come. The MN
//       decides from its own chain, never from n: a CN that lies about n only
//       misses grants that stay its own (owner_id, budget, ReclaimCn). The
//       MN's own stops (budget monitor, max_renewals, crash) record the same
//       (Pair::sent) for the CN's next renewal to settle.
//    4. Allocation request whose reply A did not start: nobody can know of
//       what it took. A claim that found the element 0 is the empty queue
//       ([OSMW] §4.3): the dead position goes to RingRepair, every CN is told
//       (an RDMA WRITE to its notice word), and the allocation returns
//       kOutOfMemory. An entry that left the queue (L5 zeroed its element) is
//       reclaimed (windows invalidated, owner_id cleared, re-queued); a claim
//       that did not read its element leaves a dead position for the sweep.
//       The CN's allocation gets the renewal's verdict (the one that timed
//       out: kOutOfMemory or kLaneBroken) or retries once (flushed behind it).
//    5. Free request (RepairFree): one whose L2 ran freed its entry (L2..L5
//       half done are finished: the entry goes to the tail element L3
//       claimed, or is enqueued); one stopped after its owner check (F.inv0
//       on the CN's own Free QP invalidated MW 0) but before L2 is finished
//       by the MN (ReclaimEntry, owner-checked): the CN could not free it
//       again. Requests >= the CN's count of "freed" replies that freed go
//       back to the CN (FreeSettle::freed): those frees succeeded. The others
//       changed nothing: the refused one (it timed out on a faulted chain)
//       returns kNotOwner, the ones flushed behind it retry once.
//    6. RenewFree moves MW 0 to the new Free QP for the handles the CN holds
//       (once per hold) minus one per settled free, plus the salvaged grants,
//       each owner-checked; a settled free's entry may be someone else's by
//       now, so it is not touched.
//    Either way a fresh chain is armed for the CN.
//  - An allocation renewal the CN caused that was not an empty queue counts
//    against it (max_renewals, below). So does an empty queue found again
//    by the same pair before the queue reopened: the first fault's renewal
//    wrote the CN's notice before it returned, so that claim ignored it, and
//    each such fault costs the MN CPU a chain rebuild (onesided_mw_test
//    ACnIgnoringTheEmptyNoticeIsClosedAfterMaxRenewals).
//  - While the notice says "empty" a CN asks the MN before allocating
//    (Probe: the MN CPU sweeps the ring); a watcher task also sweeps every
//    empty_watch_us, and both clear the notice when memory is back. An
//    allocation that waited for its pair's renewal looks at the notice
//    after it (that renewal may have found the queue empty).
//  - A refused free (not the owner, forged handle, double free) kills that
//    pair's free chain; RenewFree arms a new one and moves MW 0 of the
//    entries the CN still holds through that pair to it (owner-checked).
//  - Every renewal destroys the chains it replaces (their QPs, rings, CQs,
//    MRs and scratch go back to the MN: MN memory stays flat however many
//    renewals a CN forces). A renewal the CN caused (a refused free, a
//    faulted allocation that was not the pair's first empty queue since
//    the queue last reopened) counts against it: past
//    max_renewals (default 64) the MN closes all of the CN's pairs (chains
//    destroyed; its allocations and frees fail with kLaneBroken saying why;
//    what it holds comes back through ReclaimCn), and with a budget each
//    renewal also counts as one chunk held.
//  - ReclaimCn stops and destroys the CN's chains and returns every entry
//    whose owner_id is that CN's (unbind, owner_id := 0, enqueue).
//  - Budget ([OSMW] §4.4 "Protection against DoS"): with budget_chunks > 0,
//    every monitor_period_us the MN reads each CN's chain counters (claims
//    its allocation chains started minus frees that completed:
//    FreeChain::frees_done, never a request merely received; plus the
//    renewals it caused) and stops the allocation chains of a CN over the
//    budget; its allocations then fail with kOutOfMemory "over budget"; frees
//    keep working. The monitor is periodic: a CN allocating faster than one
//    scan can go past the budget by what it allocates between two scans.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "systems/common/cn_base.h"
#include "systems/common/mn_base.h"
#include "systems/common/ring_repair.h"
#include "systems/common/wait_list.h"
#include "systems/onesided_mw/alloc_chain.h"
#include "systems/onesided_mw/free_chain.h"
#include "systems/onesided_mw/metadata.h"

namespace dmb::systems::onesided_mw {

// What the MN tells a CN through its notice word.
inline constexpr uint64_t kNoticeOk = 0;
inline constexpr uint64_t kNoticeEmpty = 1;

struct OsmwStats {
  uint64_t alloc_renewals = 0;  // allocation chains rebuilt after a fault
  uint64_t free_renewals = 0;
  uint64_t liveness_checks = 0;  // a CN's reply deadline passed: it asked whether the chain faulted
  uint64_t slow_replies = 0;     // ... and the chain had not: the CN waited again
  uint64_t grants_salvaged = 0;  // a renewal told the CN of a grant whose reply it never took
  uint64_t frees_settled = 0;    // a renewal told the CN a free whose reply it never took was done
  uint64_t empty_faults = 0;     // allocations that found the queue empty
  uint64_t entries_reclaimed = 0;  // half-granted after a bad request, or a crashed CN's
  uint64_t elements_moved = 0;     // RingRepair::Sweep
  uint64_t cns_cut = 0;            // over budget
  uint64_t cns_closed = 0;         // over max_renewals
  uint64_t monitor_scans = 0;
  uint64_t frees_finished = 0;  // frees the MN stopped between L2 and L5 (RepairFree)
};

// The chains' cross-channel WRs, type-2 windows bound to a named QP, and
// the masked FAAs on the free MW queue.
inline const std::vector<std::string> kNeeds = {"mw_type2", "qpn_in_bind", "cross_channel",
                                                "atomics", "masked_atomics"};

// A renewal's settlement of the old chain's requests (OsmwMn::RenewAlloc,
// RenewFree). The CN first stops its old client (its QP to ERR: nothing more
// arrives on it) and says how many replies it took, in order; the MN, which
// alone sees what each request did, answers for the rest.
struct AllocSettle {
  uint64_t accepted = 0;  // in: replies taken (requests 0..accepted-1)
  // out: requests >= accepted whose grant the chain had sent (the reply was
  // lost with the CN's QP, or still in flight when it stopped): the CN's,
  // and usable (MW 0 on the pair's current Free QP).
  std::vector<AllocGrant> salvaged;
};
struct FreeSettle {
  uint64_t confirmed = 0;       // in: "freed" replies taken (requests 0..confirmed-1)
  std::vector<uint64_t> freed;  // out: requests >= confirmed that freed their entry
};

class OsmwMn : public MnBase {
 public:
  OsmwMn(const Deployment& d, const Knobs& knobs);

  // ---- Control path, called by the CN side (the bootstrap channel) ----
  // Creates a pair for CN `cn` and connects its chains to the CN's QPs.
  Task<uint32_t> OpenPair(uint32_t cn, fabric::Qp* cn_alloc_qp, FreeQps cn_free);
  // The CN's notice word (its memory, remote write for `rkey`).
  void RegisterNotice(uint32_t cn, fabric::Qp* cn_qp, uint64_t addr, uint32_t rkey);
  // See the header comment. Status kOk never: the allocation failed.
  // `settle` (null: the CN says nothing; it keeps every grant that went
  // out, as owner, and learns of none): see AllocSettle.
  Task<Status> RenewAlloc(uint32_t pair, fabric::Qp* cn_alloc_qp, AllocSettle* settle = nullptr);
  // A free on `pair` was refused: new free and allocation chains, connected
  // to the CN's fresh QPs; MW 0 of `held` (handles the CN holds through this
  // pair, once per hold, a free in flight still holding; owner-checked,
  // minus one per settled free) and of the salvaged grants moves to the new
  // Free QP; the old chains are destroyed.
  // kLaneBroken (nothing rebuilt) when the CN is past max_renewals (this
  // renewal closed its pairs) or the pair is closed.
  Task<Status> RenewFree(uint32_t pair, FreeQps cn_free, fabric::Qp* cn_alloc_qp,
                         std::vector<uint64_t> held, AllocSettle* alloc_settle = nullptr,
                         FreeSettle* free_settle = nullptr);
  // A CN's reply deadline passed (control path, MN CPU): true when the
  // pair's chain that `cn_qp` (the CN's alloc QP, or its Free QP) is
  // connected to still runs and has not faulted: the request is only slow.
  Task<bool> AllocRunning(uint32_t pair, const fabric::Qp* cn_qp);
  Task<bool> FreeRunning(uint32_t pair, const fabric::Qp* cn_qp);
  // kOk when the next allocation can succeed, else kOutOfMemory.
  Task<Status> Probe();

  Task<ReclaimReport> ReclaimCn(uint32_t cn_index) override;
  Metadata& metadata() { return *md_; }
  RingRepair& ring() { return *ring_; }
  const OsmwStats& osmw_stats() const { return st_; }
  bool empty() const { return empty_; }
  bool cut(uint32_t cn) const { return cut_.count(cn) > 0; }
  // Past max_renewals: its pairs are closed.
  bool closed(uint32_t cn) const { return closed_.count(cn) > 0; }
  // Chain renewals CN `cn` caused (what max_renewals limits).
  uint64_t renewals(uint32_t cn) const {
    const auto it = renewals_.find(cn);
    return it == renewals_.end() ? 0 : it->second;
  }
  // Tests: the chains of pair `i`.
  // Lanes of every allocation and free chain (alloc_lanes).
  uint32_t chain_lanes() const { return lanes_; }
  const FreeChain& free_chain(uint32_t i) const { return *pairs_.at(i)->free; }
  // Management pairs opened (tests).
  size_t pairs() const { return pairs_.size(); }

 protected:
  CapsNeed Needs() const override;
  Task<void> Setup() override;
  Task<void> Handle(MnLane& lane, const RpcRequest& req, RpcReply& reply) override;
  uint64_t chunks_total() const override { return md_ ? md_->layout().entries : 0; }
  uint64_t chunks_in_use() const override;

 private:
  struct Pair {
    uint32_t cn = 0;
    std::unique_ptr<AllocChain> alloc;  // null: stopped (see stopped_why)
    std::unique_ptr<FreeChain> free;    // null: closed or crashed
    uint64_t allocs_before = 0;         // claims of the pair's destroyed allocation chains
    uint64_t frees_before = 0;          // completed frees of its destroyed free chains
    std::string stopped_why;            // over budget, over max_renewals, crashed
    Code stopped_code = Code::kOutOfMemory;
    const fabric::Qp* alloc_peer = nullptr;  // the CN QPs the chains are connected to
    const fabric::Qp* free_peer = nullptr;
    // Grants the last retired allocation chain sent (its last
    // lane_instances() requests per lane still owned by the CN), for the
    // CN's next renewal to settle.
    std::vector<AllocGrant> sent;
    // The empty episode (empty_episodes_) in which this pair's allocation
    // chain last found the queue empty; 0: none.
    uint64_t empty_fault_episode = 0;
  };
  struct Notice {
    fabric::Qp* qp = nullptr;  // MN end
    uint64_t addr = 0;
    uint32_t rkey = 0;
  };
  Task<std::unique_ptr<AllocChain>> NewAllocChain(uint32_t cn, uint32_t free_qpn,
                                                  fabric::Qp* cn_qp);
  Task<std::unique_ptr<FreeChain>> NewFreeChain(FreeQps cn);
  // Stops `p`'s allocation chain, repairs what its last requests left and
  // destroys it (p.alloc becomes null; p.sent lists the grants it sent).
  // True when a request found the queue empty.
  Task<bool> RetireAlloc(Pair& p);
  Task<bool> RepairAlloc(Pair& p);
  // Moves p.sent's grants of requests >= settle->accepted to the settlement
  // (dropped without one); returns their handles.
  std::vector<uint64_t> SettleAlloc(Pair& p, AllocSettle* settle);
  AllocGrant GrantOf(uint64_t seq, uint32_t i) const;
  // Stops, repairs and destroys `p`'s free chain, keeping its count of frees.
  Task<void> DropFree(Pair& p);
  // Counts a renewal CN `cn` caused; past max_renewals closes all its pairs
  // (chains destroyed) and returns false. Under repair_.
  Task<bool> ChargeRenewal(uint32_t cn);
  // Stops every chain of `cn` at once (allocation chains; free chains too
  // when `frees_too`), before the slower repair and teardown of each:
  // nothing the CN sent meanwhile runs on a chain that is being retired.
  Task<void> StopChains(uint32_t cn, bool frees_too);
  Task<bool> RepairLane(Pair& p, uint32_t w);
  Task<bool> RepairRequest(Pair& p, uint64_t m);
  // Finishes what the stopped free chain `f` of `p` left half done; lists
  // (in `settle`, if any) the requests >= settle->confirmed that freed
  // their entry, and returns those entries.
  Task<std::vector<uint64_t>> RepairFree(FreeChain& f, Pair& p, FreeSettle* settle = nullptr);
  // The last request of a lane; true when it freed (or now has freed) its entry.
  Task<bool> RepairFreeLane(const FreeChain::Progress& pr, const Pair& p);
  Task<bool> FinishCheckedFree(uint64_t handle, const Pair& p);
  bool Queued(uint64_t handle) const;
  // Unbinds entry i's windows, clears owner_id and enqueues it.
  Task<void> ReclaimEntry(uint32_t i);
  // Moves MW 0 of entry i to another Free QP (after a free chain was rebuilt).
  Task<void> RebindMw0(uint32_t i, uint32_t free_qpn);
  // LOCAL_INV on the MN's reclaim QP (any QP's windows); false when the MW
  // was not bound (the QP is then reset: a failed WR errors it).
  Task<bool> TryInvalidate(fabric::Mw* mw);
  Task<fabric::WorkCompletion> ReclaimExec(fabric::SendWr wr);
  void NotifyAll(uint64_t notice);
  void NoteEmptyQueue(Pair& p);
  Task<void> SweepAndMaybeReopen();
  Task<void> EmptyWatcher();
  Task<void> Monitor();
  // What the budget monitor holds against `cn`: chunks it holds (claims
  // minus completed frees) plus the renewals it caused.
  uint64_t Charged(uint32_t cn) const;

  uint32_t g_ = 3;
  uint64_t chunk_bytes_ = 4096;
  uint32_t instances_ = 16;
  uint32_t lanes_ = 4;
  Ps empty_watch_ = 0;
  Ps monitor_period_ = 0;
  uint64_t budget_ = 0;
  uint64_t max_renewals_ = 64;
  fabric::Mr* pool_mr_ = nullptr;
  std::unique_ptr<Metadata> md_;
  std::unique_ptr<RingRepair> ring_;
  std::vector<std::unique_ptr<Pair>> pairs_;
  std::map<uint32_t, Notice> notices_;
  std::map<uint32_t, bool> cut_;
  std::map<uint32_t, uint64_t> renewals_;   // caused by each CN
  std::map<uint32_t, std::string> closed_;  // CNs past max_renewals, and why
  fabric::Mr* notice_src_mr_ = nullptr;     // 16 B: kNoticeOk, kNoticeEmpty
  uint64_t notice_src_ = 0;
  fabric::Cq* notice_cq_ = nullptr;
  fabric::Cq* reclaim_cq_ = nullptr;
  fabric::Qp* reclaim_qp_ = nullptr;
  CoMutex repair_;  // RingRepair and the chains' rebuilds: one at a time
  bool empty_ = false;
  uint64_t empty_episodes_ = 0;  // times the queue ran empty (empty_ became true)
  bool watcher_running_ = false;
  OsmwStats st_;
};

class OsmwCn : public CnBase {
 public:
  OsmwCn(const Deployment& d, uint32_t cn_index, MnControl* mn, const Knobs& knobs);

  Task<AccessGroup*> OpenGroup(int lanes, uint64_t buffer_bytes) override;
  Task<Result<Chunk>> Alloc(AccessGroup& g) override;
  Task<Status> Free(AccessGroup& g, const Chunk& c) override;

  // Tests: the pair a group allocates through, and its clients.
  size_t pairs() const { return pairs_.size(); }
  uint64_t notice() const;
  // Where the notice word is (the CN's own memory: a CN that ignores the
  // notice can simply rewrite it; attack tests do).
  uint64_t notice_addr() const { return notice_addr_; }

 private:
  struct Pair {
    uint32_t id = 0;  // the MN's pair index
    fabric::Mr* mr = nullptr;
    uint64_t alloc_buf = 0;
    uint64_t free_buf = 0;
    // Shared: allocations in flight keep the client they posted on alive
    // while another renews the pair.
    std::shared_ptr<AllocClient> alloc;
    std::shared_ptr<FreeClient> free;  // frees in flight keep theirs alive too
    CoMutex alloc_lock;                // one renewal at a time
    Status renewal;                    // what the last renewal of the alloc chain reported
    std::string closed_why;            // the MN closed this CN's pairs (max_renewals)
    CoMutex free_lock;
    // A renewal is replacing the clients: new requests wait for it (the
    // fresh clients are not connected before it ends).
    bool renewing = false;
    WaitList renewed;
  };
  OsmwMn& Mn();
  Task<Pair*> NewPair();
  Task<void> EnsureNotice();
  Pair& PairFor(const AccessGroup& g);
  std::shared_ptr<AllocClient> NewAllocClient(Pair& p);
  Result<Chunk> GrantedChunk(AccessGroup& g, Pair& p, const AllocGrant& a);
  Result<Chunk> ChunkOf(AccessGroup& g, const AllocGrant& a) const;
  void Salvage(Pair& p, AllocClient& old, std::vector<AllocGrant> grants);
  std::shared_ptr<FreeClient> NewFreeClient(Pair& p);
  Task<Status> RenewAllocChain(Pair& p);
  Task<Status> RenewFreeChain(Pair& p);
  void EndRenewal(Pair& p);

  uint32_t g_ = 3;
  bool sep_ = true;
  uint32_t alloc_qps_ = 1;
  uint32_t instances_ = 16;
  uint32_t lanes_ = 4;
  Ps timeout_ = 0;
  bool probe_ = true;  // probe_on_timeout
  std::vector<std::unique_ptr<Pair>> pairs_;
  std::map<const AccessGroup*, Pair*> group_pair_;
  // Handles held, once per hold (a handle being freed may come back to the
  // CN before that free's reply: it is then held twice), and their pair.
  // Hashed (a figure-6 run holds a million, and every free looks one up);
  // a handle's holds in the order they were granted.
  std::unordered_map<uint64_t, std::vector<Pair*>> pair_of_handle_;
  size_t next_group_ = 0;
  CoMutex setup_lock_;
  fabric::Mr* notice_mr_ = nullptr;
  uint64_t notice_addr_ = 0;
};

}  // namespace dmb::systems::onesided_mw
