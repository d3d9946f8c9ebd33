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
//  - A CN whose allocation got no reply within reply_timeout_us asks the MN
//    to renew the chain (RenewAlloc). The MN stops the old chain and reads
//    what each lane's last request did (AllocChain::Inspect): a claim that found
//    the element 0 is the empty queue ([OSMW] §4.3): the dead position goes
//    to RingRepair, every CN is told (an RDMA WRITE to its notice word), and
//    the allocation returns kOutOfMemory. A claim that got an entry but no
//    grant (a bad request: access qpn, CN_buff; or a request in flight on
//    another lane when the chain faulted) is reclaimed at once. Either way a
//    fresh chain is armed for the CN; the other allocations the fault took
//    down get the same verdict (kOutOfMemory) or retry once (a bad request
//    was someone else's).
//  - While the notice says "empty" a CN asks the MN before allocating
//    (Probe: the MN CPU sweeps the ring); a watcher task also sweeps every
//    empty_watch_us, and both clear the notice when memory is back.
//  - A refused free (not the owner, forged handle, double free) kills that
//    pair's free chain; RenewFree arms a new one and moves MW 0 of the
//    entries the CN still holds through that pair to it (owner-checked).
//  - Every renewal destroys the chains it replaces (their QPs, rings, CQs,
//    MRs and scratch go back to the MN: MN memory stays flat however many
//    renewals a CN forces). A renewal the CN caused (a refused free, a
//    faulted allocation that was not an empty queue) counts against it: past
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
  uint64_t empty_faults = 0;       // allocations that found the queue empty
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

class OsmwMn : public MnBase {
 public:
  OsmwMn(const Deployment& d, const Knobs& knobs);

  // ---- Control path, called by the CN side (the bootstrap channel) ----
  // Creates a pair for CN `cn` and connects its chains to the CN's QPs.
  Task<uint32_t> OpenPair(uint32_t cn, fabric::Qp* cn_alloc_qp, FreeQps cn_free);
  // The CN's notice word (its memory, remote write for `rkey`).
  void RegisterNotice(uint32_t cn, fabric::Qp* cn_qp, uint64_t addr, uint32_t rkey);
  // See the header comment. Status kOk never: the allocation failed.
  Task<Status> RenewAlloc(uint32_t pair, fabric::Qp* cn_alloc_qp);
  // A free on `pair` was refused: new free and allocation chains, connected
  // to the CN's fresh QPs; MW 0 of `held` (handles the CN holds through this
  // pair, owner-checked) moves to the new Free QP; the old chains are
  // destroyed. kLaneBroken (nothing rebuilt) when the CN is past
  // max_renewals (this renewal closed its pairs) or the pair is closed.
  Task<Status> RenewFree(uint32_t pair, FreeQps cn_free, fabric::Qp* cn_alloc_qp,
                         std::vector<uint64_t> held);
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
  // MN QPs that carry chains (for the offload accounting in tests).
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
  // destroys it (p.alloc becomes null). True when a request found the queue
  // empty.
  Task<bool> RetireAlloc(Pair& p);
  Task<bool> RepairAlloc(Pair& p);
  // Stops, repairs and destroys `p`'s free chain, keeping its count of frees.
  Task<void> DropFree(Pair& p);
  // Counts a renewal CN `cn` caused; past max_renewals closes all its pairs
  // (chains destroyed) and returns false. Under repair_.
  Task<bool> ChargeRenewal(uint32_t cn);
  // Stops every chain of `cn` at once (allocation chains; free chains too
  // when `frees_too`), before the slower repair and teardown of each:
  // nothing the CN sent meanwhile runs on a chain that is being retired.
  Task<void> StopChains(uint32_t cn, bool frees_too);
  Task<bool> RepairLane(AllocChain& c, uint32_t w);
  Task<void> RepairFree(FreeChain& f);
  Task<void> RepairFreeLane(const FreeChain::Progress& pr);
  // Unbinds entry i's windows, clears owner_id and enqueues it.
  Task<void> ReclaimEntry(uint32_t i);
  // Moves MW 0 of entry i to another Free QP (after a free chain was rebuilt).
  Task<void> RebindMw0(uint32_t i, uint32_t free_qpn);
  // LOCAL_INV on the MN's reclaim QP (any QP's windows); false when the MW
  // was not bound (the QP is then reset: a failed WR errors it).
  Task<bool> TryInvalidate(fabric::Mw* mw);
  Task<fabric::WorkCompletion> ReclaimExec(fabric::SendWr wr);
  void NotifyAll(uint64_t notice);
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
  };
  OsmwMn& Mn();
  Task<Pair*> NewPair();
  Task<void> EnsureNotice();
  Pair& PairFor(const AccessGroup& g);
  std::shared_ptr<AllocClient> NewAllocClient(Pair& p);
  Result<Chunk> GrantedChunk(AccessGroup& g, Pair& p, const AllocGrant& a);
  std::shared_ptr<FreeClient> NewFreeClient(Pair& p);
  Task<Status> RenewFreeChain(Pair& p);

  uint32_t g_ = 3;
  bool sep_ = true;
  uint32_t alloc_qps_ = 1;
  uint32_t instances_ = 16;
  uint32_t lanes_ = 4;
  Ps timeout_ = 0;
  std::vector<std::unique_ptr<Pair>> pairs_;
  std::map<const AccessGroup*, Pair*> group_pair_;
  std::map<uint64_t, Pair*> pair_of_handle_;
  size_t next_group_ = 0;
  CoMutex setup_lock_;
  fabric::Mr* notice_mr_ = nullptr;
  uint64_t notice_addr_ = 0;
};

}  // namespace dmb::systems::onesided_mw
