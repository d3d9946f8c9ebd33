// odrp: ODRP ([ODRP], docs/references.md) as a MemoryManager. The WR
// chains, their layout and their fault behaviour are in chains.h; this file is
// how a CN's chunks, lanes and faults map onto them.
//
// Chunks. A chunk is one 4 KB page behind one entry of the CN's translation
// table (TT). Alloc(group) picks a free swap page from the CN's bitmap and
// runs the Unmapped Store chain with a zero page (Figure 10(b)'s "ODRP
// AllocWrite"): the MN's RNIC dequeues a free page, maps it in the TT entry
// and stores the zeros. The CN never learns the physical page:
//   Chunk.addr  = (tt_addr / 8) * 4096, a NAME, not an MN address: unique
//               across CNs because TTs are disjoint MN memory (8-byte entries
//               map to disjoint 4 KB name ranges), and the CN turns it back
//               into tt_addr = addr / 4096 * 8 for every chain request.
//   Chunk.bytes = 4096; Chunk.id = the swap page index; rkeys = {0} (no key).
// Read = Load chain, Write = Mapped Store chain, both only whole pages (offset
// 0, 4096 B; anything else is kUnsupported). Free = Invalidate chain.
//
// Chains per CN ([ODRP] §4.4: "for each type of WR chain, the CNode backend
// has an RDMA connection to the MNode"): ONE chain per kind per CN, each
// pipelined (chains.h "Pipelining"): W lanes behind one CN-facing R (knobs
// load_lanes, unmapped_store_lanes, mapped_store_lanes, invalidate_lanes,
// default 16), shared by every lane and access group of the CN, which keeps
// up to W requests of the kind in flight through it (1 + 2W MN QPs per
// chain, 4 CN-facing ones per CN). The chain of each kind is opened with the
// CN's first access group (or by the first request that needs it).
// History: Unmapped Store and Invalidate were a pool per kind of
// one-request chains (knob chains_per_kind, default 1: ODRP's one
// connection per kind). More one-request chains made the 48-task figure
// slower, not faster (sim, `dmb_micro --bench swap --system odrp --app
// kmeans --scale 0.001953125 --tasks 48 --cns 6 --local 0.5`, job time):
// chains_per_kind = 16: 52.8 s, 4: 28.7 s, 2: 19.2 s, 1: 20.0 s (Static-MR
// 6.9 s): every extra chain is one more CN-facing QP holding offloaded WRs
// (cx5 profile: a penalty per WR per such QP). Pipelining adds W requests
// per kind without adding CN-facing QPs (lanes are MN-local loopback QPs,
// which the cx5 profile's penalty does not count).
// Mapped Store pipelined, measured (sim, `dmbench micro access --system odrp
// --op write`, mean): 1 thread 8.27 -> 10.56 us (T, M3's fenced READ, the
// gcq gate), 24 threads 198 -> 22.2 us (one chain of 16 lanes instead of one
// request at a time); 9.26 and 19.97 us in the release build that measured
// the next.
// Unmapped Store and Invalidate pipelined (issue 13), measured (sim, release
// build, `dmb_micro alloc --system odrp`, mean, one-request chain ->
// pipelined): 1 thread alloc 11.60 -> 12.97 us, free 11.25 -> 12.65 us (T, N's
// fenced READ, the gcq gate and the 16-WQE C_w instance); 24 threads alloc
// 49.8 -> 21.7 us (81 -> 557 kops), free 243 -> 21.1 us (82 -> 562 kops).
// Swap application (`dmb_micro swap --system odrp --app kmeans --local 0.5
// --scale 0.00048828125 --seed 1`): 1 CN, 8 tasks: job 0.280 -> 0.166 s,
// alloc 41.2 -> 17.5 us (chains_per_kind = 4 was 0.184 s; Static-MR 1GB
// 0.074 s); 6 CNs, 12 tasks: job 0.196 -> 0.183 s, alloc 22.1 -> 24.5 us
// (2 tasks per CN keep few allocations in flight: the pipelined chain's
// extra steps cost more than the overlap gains); with unmapped_store_lanes
// = invalidate_lanes = 1, 1 CN: 0.305 s (the pipelined layout, one at a
// time, costs more than the one-request chain did).
// What bounds that swap run now (MN QP counters summed after the run: WQEs
// started + responder operations, times the cx5 profile's 114.3 ns + 3.806
// ns x CN-facing offloaded QPs per WR; one-off instrumentation, not kept):
// 6 CNs: the MN RNIC's 8 processing units, busy 77% of the run on average
// (1.14 s of PU time in 0.186 s; 24 CN-facing chain QPs make every WR 205.6
// ns, 44% of it offload penalty). Loads are 69% of it: 15 WR-sides each (C_w
// 8 with 3 NOPs, T and L1 on both loopback sides, R0, R1, the request's
// SEND), allocations and frees 13% and 12% (48 and 46 each), Mapped Stores
// 5% (19). The MN port is about half busy (TX ~51 Gbps: loads' 4 KB replies
// and the loopback page copies); one CN's R about 10% (2 WQEs a load);
// Static-MR's same run is MN-port bound instead (~98 Gbps TX, PUs 4.5%). 1
// CN: PUs 36%, port ~37%: latency bound, by the chains' dependent WQE hops
// (sync swap-in 7.4 us vs Static-MR's 3.3; allocation 17.5 us and a free
// ~13 us per swap-out, which Static-MR does not make).
// Why load_lanes = 16 by default: a lane carries one request at a time and
// the CN keeps W in flight, so one CN loads at most about W per load latency
// (6.9 us at 1 thread, sim), until the one R's in-order pipe (R0's 4 KB reply
// and R1 per request) saturates. A CN swapping at 100 Gbps / 6 (~500 k
// pages/s) needs W >= 4; 24 application threads keep up to 24 faults in
// flight. Measured (sim, `dmbench micro access --system odrp --op read
// --threads 24 --ops 2000`, mean): W = 4: 49.1 us (0.49 Mops, just the swap
// rate), 8: 25.3 us (0.95 Mops), 16: 19.1 us (1.25 Mops); 1 and 4 threads:
// 6.88 and 7.97 us at any W. Lanes are MN-local loopback QPs, which the cx5
// profile's offload penalty does not count (offload_counts_loopback = 0), so
// 16 costs the data path nothing there; beyond 16 R is the bound.
// Against the pool of up to 16 one-request Load chains per CN (each its own
// R), the pipelined chain is SLOWER in this sim (issue 13, open): 1, 4, 24
// threads 6.14, 6.26, 14.4 us before, 6.88, 7.97, 19.1 us now. At 1-4
// threads the gate costs it (C_w's signaled ENABLE of R into gcq, then the
// next C_w's WAIT on it: one completion hop per request, in series); at 24
// threads the one R's in-order pipe does (16 Rs served replies in parallel).
// Measured alternative (not kept): free_chain.h's way, a WAIT on lcq_w at the
// head of R's instance instead of the gate (R: WAIT, R0, ENABLE C_w, NOP; C_w:
// WAIT rcq, ENABLE L_w, ENABLE R, NOP): 6.01, 6.39, 21.8 us (twice the R WQEs
// per request, and R0, a rewritten WQE, behind a WAIT rather than an
// ENABLE, which [ODRP] footnote 1 says a real RNIC's prefetch needs). Next
// steps: two pipelined Load chains per CN, or one R WQE per request.
//
// Lanes. A lane owns no chain. Lane.qp is a CN-local QP that is never
// connected (never post on it; Lane.cq is null, Lane.mn_qpn 0): it only
// carries the lane's state. A refused Read or Write moves it to ERR, so
// Lane::broken() tells the lane needs RecoverLane, which resets it. A
// chain that faulted is rebuilt once, by the first of its requests that
// finds it faulted (RebuildShared); the others wait for the rebuild.
//
// Flushed requests. Load and Mapped Store: a fault of one request flushes every
// reply R had not had acknowledged, also of requests sent before it (or, for
// Mapped Store after the first lap, holds them behind the gate). RebuildChain
// reports the refused request (ChainReport::refused_request,
// Chain::RefusedRequest); that one gets kAccessDenied and breaks its lane;
// every other request flushed by the fault retries on the rebuilt chain (at
// most kFlushRetries times), which the first of them to notice rebuilds once
// (RebuildShared). A retried store may have landed on the old chain already:
// it stores the same bytes again (the caller's Write has not returned).
// Unmapped Store and Invalidate: requests flushed (or held behind the gate)
// by another request's fault may have run on their own lanes, and an
// allocation or a free is not idempotent. After the rebuild the CN asks the
// MN whether the request's TT entry is mapped (EntryIsMapped, control path,
// only after a fault): an allocation whose entry is mapped is done (its
// page holds the zeros: U7 stores before U5 maps), a free whose entry is
// unmapped is done; the others retry (at most kFlushRetries times). A
// refused request is told apart by its name: a free of a name outside the
// CN's table or of an unmapped entry is kNotOwner; an allocation only ever
// names the CN's own free swap page, so it is refused only by an empty
// queue (ChainReport::queue_empty).
//
// Refusals. The chains refuse by faulting (chains.h "Faults"): an unmapped
// entry, a tt_addr outside the CN's own TT (another CN's chunk) or an empty
// free page queue. The CN sees no reply. When reply_timeout_us has passed (a
// policy, not a latency: the success path never waits for it) it asks the MN
// (control path) whether the chain faulted; a chain that did not is only slow
// (a loaded RNIC) and the CN waits another reply_timeout_us. A CN therefore
// never abandons a running request, and the MN never stops a chain mid-request
// (RebuildChain first waits until the chain faulted or is idle). A refused
// request (its chain is rebuilt at once):
//   Read/Write -> kAccessDenied, lane broken until RecoverLane;
//   Free       -> kNotOwner;
//   Alloc      -> see "Empty queue".
// Except the empty queue, no refused request changes MN state.
//
// Recovery (MN CPU, control path). OdrpMnSide::RebuildChain stops the dead
// chain (its QPs to ERR), creates and arms a fresh one connected to a fresh
// ChainClient, then gives the dead chain's QPs, CQs, MRs, scratch and staging
// back (chain::Teardown: up to two MR deregistrations on the MN CPU); the CN
// destroys a replaced client once no request is inside it. A CN whose
// requests fault over and over therefore costs the MN CPU time, not memory
// (odrp_test ChainsRefusedOverAndOverHoldNoMoreMemoryThanOnce). The CN side
// reaches the MN object directly (same process); a remote MN daemon is
// refused at construction. Unmapped Store and
// Invalidate: the other lanes may be mid-request when one faults, so the MN
// first stops every C_w (no further step is enabled) and waits until every
// step an L_w started has completed (Chain::WorkersSettled; a control-path
// poll charged as mn.bookkeeping), then reads each lane's last instance
// (Chain::LastInstance: which of its L steps started), as OneSidedMW's
// Inspect. Unmapped Store: claimed (U1) but not mapped (U5) -> p is a dead
// position (RecoverDequeue; its element is still in its slot, U6 runs after
// U5); mapped -> the request's page. Invalidate: unmapped (V7) but the tail
// not claimed (V5) -> RingRepair::Enqueue(page); claimed but not written
// (V8) -> RingRepair::Fill(p, page) (RecoverEnqueue); before V7 nothing
// changed. The page is V3's landing in V4's WQE (InvalidatedPage).
//
// Empty queue. An Unmapped Store that dequeues the (zeroed) element past the
// last free page faults at U7 on the null page address, after advancing the
// head past the claimed position p. With W lanes several can (each after
// its own claim), and in lap 0 the flush of R's RQ lets every lane run one
// more instance, which claims a position and is refused at CHK. The MN tells
// an empty queue from any other fault by what each lane's dequeue READ (U4)
// landed in its U7 WQE: 0 means the queue was empty (CHK's and U7's FENCEs
// make U4 land before CHK, U7 run). A request whose tt_addr CHK refused
// (misaligned, outside the CN's table) takes the same path: its claimed
// element is still in its slot and is moved back. p is faa[s] of the chain
// scratch. The MN CPU adds every such p to RingRepair's dead positions (also
// when the element was not 0: a page claimed by a faulted dequeue sits
// behind the head and must be moved back), sweeps once, and the CN's Allocs
// return kOutOfMemory (odrp_test AllocationsInFlightOnAnEmptyQueueLoseNoPage:
// free queue + mapped == pool after the repair). The CN then remembers the
// MN was empty: its next Allocs first ask the MN (control path) to sweep and
// say whether the head holds a page, until it does. While the CN has not
// seen the queue empty, Alloc never touches the MN CPU.
//
// Crash. ReclaimCn stops the CN's chains (StopAndRepair: a lane's
// half-done allocation or free is repaired as after a fault), returns every
// page mapped in its TT to the free page queue (RingRepair::Enqueue: masked
// FAA on the tail through the RNIC) and zeroes those entries. Nobody else's
// TT is touched.
//
// Not handled: per-CN budgets ([ODRP] §4.5.2 "Fairness"), also of rebuilds
// (each costs the MN CPU a chain's creation, arming and teardown). An
// Unmapped Store that names an entry that is already mapped (a malicious or
// confused CN bypassing its bitmap) overwrites the entry: the CN loses its
// own page until it is reclaimed (CHK checks the address, not that the
// entry is free; unchanged by issue 13). A dequeue stopped after U5 and
// before U6 (a rebuild's StopControl between two WQEs of one stage) leaves
// the mapped page's element behind the head, where the next enqueue at that
// position overwrites it.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "systems/common/ring_repair.h"
#include "systems/common/wait_list.h"
#include "systems/memory_manager.h"
#include "systems/odrp/chains.h"

namespace dmb::systems::odrp {

// The chains' cross-channel WRs and the masked FAAs on the free page queue.
inline const std::vector<std::string> kNeeds = {"cross_channel", "masked_atomics", "atomics"};

inline constexpr uint32_t kChainKinds = 4;     // ChainKind's values
inline constexpr uint32_t kMaxLoadLanes = 16;  // knobs *_lanes (every kind)
// Instances of a chain: 4 per lane (each lane ring holds 4 instances).
inline uint32_t ChainSlots(uint32_t lanes) { return 4 * lanes; }

// What the MN found when it rebuilt a chain.
struct ChainReport {
  Chain* chain = nullptr;        // the fresh chain, armed, connected to the new CN QP
  bool faulted = false;          // the old chain had faulted (vs. a deadline on a live chain)
  bool queue_empty = false;      // Unmapped Store: its dequeue found the queue empty
  bool pages_available = false;  // after the repair, the next dequeue finds a page
  bool entry_mapped = false;     // the TT entry the CN named is mapped now
  // Load, Mapped Store: the request the old chain refused (Chain::RefusedRequest); the
  // others without a reply were flushed behind it.
  uint64_t refused_request = Chain::kNoRequest;
};

struct OdrpMnCounters {
  uint64_t chains_opened = 0;
  uint64_t chains_rebuilt = 0;
  uint64_t empty_faults = 0;        // Unmapped Store chains faulted on an empty queue
  uint64_t elements_moved = 0;      // RingRepair::Sweep
  uint64_t pages_reclaimed = 0;     // crashed CNs' pages returned
  uint64_t queue_checks = 0;        // RepairQueue calls (CNs that saw the queue empty)
  uint64_t liveness_checks = 0;     // ChainRunning calls (deadlines that passed)
  uint64_t enqueues_completed = 0;  // Invalidates a rebuild stopped between unmap and enqueue
};

class OdrpMnSide : public MnSide {
 public:
  OdrpMnSide(const Deployment& d, const Knobs& k);
  ~OdrpMnSide() override;

  Task<void> Start() override;
  Task<ReclaimReport> ReclaimCn(uint32_t cn_index) override;
  MnStats stats() const override;
  fabric::Node* node() const override { return node_; }
  // ODRP has no RPC lanes: CNs connect to chains (OpenChain). These throw.
  fabric::Qp* CreateLaneQp(uint32_t cn_index) override;
  void LaneConnected(uint32_t cn_index, fabric::Qp* mn_qp) override;
  void ReleaseLane(uint32_t cn_index, uint32_t mn_qpn) override;
  Task<void> ChargeQpSetup() override;

  // ---- Control path (MN CPU), called by the CN sides of this process ----
  // The CN's TT (created once, `swap_pages` entries; later calls return it).
  Task<const CnTable*> ConnectCn(uint32_t cn_index, uint64_t swap_pages);
  // Creates a chain of `kind` for the CN, connects it to `cn_qp` (a fresh
  // ChainClient's QP) and arms it. `lanes`: the chain's W, any kind (1..kMaxLoadLanes).
  Task<Chain*> OpenChain(uint32_t cn_index, ChainKind kind, fabric::Qp* cn_qp, uint32_t lanes = 1);
  // Replaces `old` (a chain of this CN whose request got no reply) by a fresh
  // one connected to `cn_qp`, repairing the free page queue after a faulted
  // dequeue, and tears `old` down (it must not be used after). `tt_addr` is
  // the entry the failed request named (reported back as entry_mapped when
  // it lies in the CN's TT).
  Task<ChainReport> RebuildChain(uint32_t cn_index, Chain* old, fabric::Qp* cn_qp,
                                 uint64_t tt_addr);
  // For a CN that saw the queue empty: sweeps the dead positions; true when
  // the next dequeue finds a page.
  Task<bool> RepairQueue();
  // After a rebuild: whether the TT entry at tt_addr (of that CN) is mapped,
  // i.e. whether a store or invalidation whose reply a fault flushed ran.
  Task<bool> EntryIsMapped(uint32_t cn_index, uint64_t tt_addr);
  // A CN's reply deadline passed: true when `chain` (of that CN) has not
  // faulted, i.e. the request is slow, not refused (ChainClient liveness).
  // `r_qpn` is the chain's R QP number when the CN took it: a rebuild frees
  // the old Chain, and a fresh one may come to live at its address.
  Task<bool> ChainRunning(uint32_t cn_index, const Chain* chain, uint32_t r_qpn);

  // MN CPU reads for tests.
  const OdrpMetadata& odrp() const { return *odrp_; }
  const OdrpMnCounters& counters() const { return counters_; }
  // The page behind `chunk` of CN `cn_index` (0: unmapped or not that CN's).
  uint64_t PageBehind(uint32_t cn_index, const Chunk& chunk) const;

 private:
  struct CnState {
    const CnTable* table = nullptr;
    std::vector<std::unique_ptr<Chain>> chains;
  };
  CnState& StateOf(uint32_t cn_index);
  Task<std::unique_ptr<Chain>> NewChain(const CnState& cs, ChainKind kind, fabric::Qp* cn_qp,
                                        uint32_t lanes);
  // Stops `c` for good; Unmapped Store, Invalidate: first lets every started
  // L step finish and then repairs each lane's last instance ("Recovery").
  Task<void> StopAndRepair(Chain& c, ChainReport* rep);
  // One lane's last instance after the chain settled ("Recovery").
  Task<void> RecoverDequeue(const Chain& old, Chain::LaneProgress p, ChainReport* rep);
  Task<void> RecoverEnqueue(const Chain& old, Chain::LaneProgress p);
  bool EntryMapped(const CnTable& t, uint64_t tt_addr) const;
  uint64_t MappedEntries(const CnTable& t) const;

  Deployment deployment_;
  fabric::Node* node_;
  std::unique_ptr<OdrpMetadata> odrp_;
  std::unique_ptr<RingRepair> repair_;
  std::map<uint32_t, CnState> cns_;  // by CN index (ordered: deterministic)
  std::set<const Chain*> repaired_;  // chains StopAndRepair has repaired (never twice)
  CoMutex control_;
  OdrpMnCounters counters_;
  fabric::CpuCost cost_dispatch_;
  fabric::CpuCost cost_qp_modify_;
  fabric::CpuCost cost_bookkeeping_;
};

class OdrpCn : public CnSide {
 public:
  // Throws ConfigError when `mn` is not an OdrpMnSide of this process.
  OdrpCn(const Deployment& d, uint32_t cn_index, MnControl* mn, const Knobs& k);
  ~OdrpCn() override;

  const Capabilities& caps() const override { return caps_; }
  uint32_t cn_index() const override { return cn_index_; }
  fabric::Node* node() const override { return node_; }
  Task<AccessGroup*> OpenGroup(int lanes, uint64_t buffer_bytes) override;
  Task<Result<Chunk>> Alloc(AccessGroup& group) override;
  Task<Status> Free(AccessGroup& group, const Chunk& chunk) override;
  Task<Status> Read(Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                    uint64_t local_addr) override;
  Task<Status> Write(Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                     uint64_t local_addr) override;
  Task<Status> Extend(Lane& lane, Chunk& chunk) override;
  Task<Status> RecoverLane(Lane& lane) override;

  uint64_t swap_pages_used() const { return swap_used_; }
  // Chains this CN has of `kind` (tests: one per kind, however many requests).
  size_t chains_of(ChainKind kind) const { return pools_[static_cast<size_t>(kind)].chains.size(); }

 private:
  // The CN's one chain of a kind (see "Chains per CN").
  struct PooledChain {
    ChainKind kind = ChainKind::kLoad;
    uint64_t hdr = 0;  // its request header buffer (hdr_mr_)
    std::unique_ptr<ChainClient> client;
    Chain* chain = nullptr;  // the MN's chain (a handle for RebuildChain)
    // Shared by every request of the kind; `gen` counts rebuilds, so that
    // the requests a fault flushed rebuild it once.
    uint64_t gen = 0;
    bool rebuilding = false;
    ChainReport report;  // of the last rebuild
    WaitList rebuilt;
    // Clients a rebuild replaced: requests flushed behind a fault may still
    // be inside them (ChainClient::Invoke) when the chain is rebuilt. The
    // next rebuild destroys those that are idle.
    std::vector<std::unique_ptr<ChainClient>> retired;
  };
  struct KindPool {
    std::vector<std::unique_ptr<PooledChain>> chains;  // 0 or 1
    uint32_t opening = 0;                              // chains being opened for this kind
    WaitList freed;  // requests waiting for the chain (opened or rebuilt)
  };
  struct Group {
    std::unique_ptr<AccessGroup> group;
    fabric::Mr* mr = nullptr;
    uint64_t zero_page = 0;  // 4 KB of zeros: what Alloc stores
  };

  Task<void> EnsureTable();
  // The header MR and the first chain of each kind (the CN's first group).
  Task<void> EnsurePools();
  Task<void> AddLane(Group* g, size_t index);
  std::unique_ptr<ChainClient> NewClient(ChainKind kind, uint64_t hdr) const;
  Group* GroupOf(const AccessGroup& g);
  // The CN's chain of `kind` (opening it first, or waiting while it is
  // opened or rebuilt).
  Task<PooledChain*> Acquire(ChainKind kind);
  Task<PooledChain*> OpenPooled(ChainKind kind);
  Task<ChainReport> Rebuild(PooledChain& pc, uint64_t tt_addr);
  // The client's deadline asks the MN whether its chain still runs.
  void WatchLiveness(PooledChain& pc);
  Task<Result<Chunk>> AllocOnce(Group& g, bool* retry);
  // One Unmapped Store of the zero page at tt; after a fault *retry: flushed
  // behind another request's fault, send it again. Fills `out` otherwise.
  Task<void> AllocAttempt(Group& g, uint64_t idx, int attempt, Result<Chunk>* out, bool* again,
                          bool* retry);
  // One Invalidate; *again: flushed behind another request's fault.
  Task<Status> FreeAttempt(const Chunk& chunk, int attempt, bool* again);
  Status CheckIo(const Lane& lane, uint64_t offset, uint32_t length, uint64_t local_addr) const;
  // Read (kLoad) or Write (kMappedStore) of one whole page.
  Task<Status> Access(ChainKind kind, Lane& lane, const Chunk& chunk, uint64_t offset,
                      uint32_t length, uint64_t local_addr);
  // Load or Mapped Store on the CN's one pipelined chain of that kind: a request flushed behind
  // another's fault retries on the rebuilt chain.
  Task<Status> Pipelined(ChainKind kind, Lane& lane, const Chunk& chunk, uint64_t local_addr);
  uint32_t LanesOf(ChainKind kind) const { return lanes_[static_cast<size_t>(kind)]; }
  // Rebuilds `pc` once per fault, whichever of its flushed requests comes
  // first. Returns that rebuild's report (a default one, refused_request =
  // kNoRequest, when a later rebuild replaced it already).
  Task<ChainReport> RebuildShared(PooledChain& pc, uint64_t gen, uint64_t tt_addr);
  Status Refused(Lane& lane, ChainKind kind, bool timed_out, const Status& st, const Chunk& chunk);
  // The CN's swap pages: a bitmap of those mapped (or being mapped) in its TT.
  bool TakeSwapPage(uint64_t* index);
  void ReleaseSwapPage(uint64_t index);
  uint64_t TtAddr(const Chunk& c) const { return c.addr / kPageBytes * kTtEntryBytes; }
  bool OwnName(uint64_t tt_addr) const;

  Deployment deployment_;
  uint32_t cn_index_;
  OdrpMnSide* mn_;
  Capabilities caps_;
  fabric::Node* node_;
  fabric::Runtime* rt_;
  Ps timeout_;
  // Knobs load_lanes, unmapped_store_lanes, mapped_store_lanes,
  // invalidate_lanes, by ChainKind.
  uint32_t lanes_[kChainKinds] = {};
  uint64_t swap_pages_;
  fabric::Pd* pd_ = nullptr;
  const CnTable* table_ = nullptr;
  std::vector<bool> swap_map_;
  uint64_t swap_used_ = 0;
  uint64_t swap_hint_ = 0;
  bool saw_empty_ = false;  // the last dequeue found the MN's queue empty
  std::vector<std::unique_ptr<Group>> groups_;
  fabric::Mr* hdr_mr_ = nullptr;   // one request header per lane of every kind
  CoMutex pools_setup_;            // EnsurePools: one group sets up, the others wait
  fabric::Cq* lane_cq_ = nullptr;  // the lanes' state QPs' CQ (never used)
  KindPool pools_[kChainKinds];
  fabric::CpuCost cost_qp_modify_;
};

}  // namespace dmb::systems::odrp
