// odrp: the MemoryManager over ODRP's WR chains; the design is in odrp.h.
#include "systems/odrp/odrp.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "fabric/wqe_layout.h"
#include "systems/registry.h"

namespace dmb::systems::odrp {

using fabric::QpState;

namespace {

constexpr uint64_t kHdrStride = kHeaderStride;  // one request header (<= 124 B)
// A Load flushed behind another request's fault retries on the rebuilt chain
// at most this often (each retry follows a rebuild).
constexpr int kFlushRetries = 4;

// Releases the MN's control path when the holder leaves its scope.
struct Unlocker {
  CoMutex* m;
  ~Unlocker() { m->Unlock(); }
};

Capabilities OdrpCaps() {
  Capabilities c;
  c.granularity_bytes = kPageBytes;
  c.fixed_io_bytes = static_cast<uint32_t>(kPageBytes);
  c.isolation = Isolation::kTranslated;
  c.mn_cpu_on_alloc = false;
  c.mn_cpu_on_access = false;
  c.max_group_lanes = 8;
  return c;
}

std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

Status OutOfMemory(const std::string& why) { return Status(Code::kOutOfMemory, "odrp: " + why); }

}  // namespace

// ============================== MN side ==============================

OdrpMnSide::OdrpMnSide(const Deployment& d, const Knobs&) : deployment_(d), node_(d.mn) {
  cost_dispatch_ = node_->Cost("rpc.dispatch");
  cost_qp_modify_ = node_->Cost("verbs.qp_modify");
  cost_bookkeeping_ = node_->Cost("mn.bookkeeping");
}

OdrpMnSide::~OdrpMnSide() = default;

Task<void> OdrpMnSide::Start() {
  fabric::RequireCaps(*node_, kNeeds, "odrp");
  const uint64_t pages = deployment_.pool_bytes / kPageBytes;  // >= 1: SystemInfo::check_pool
  odrp_ = co_await OdrpMetadata::Create(deployment_.cluster, node_, {.pages = pages});
  repair_ = co_await RingRepair::Create({deployment_.cluster, node_, odrp_->meta_mr(),
                                         odrp_->ring_addr(), odrp_->layout().ring_bytes,
                                         odrp_->head_addr(), odrp_->tail_addr()});
}

fabric::Qp* OdrpMnSide::CreateLaneQp(uint32_t) {
  throw std::logic_error("odrp: no RPC lanes; a CN connects to its chains (OpenChain)");
}

void OdrpMnSide::LaneConnected(uint32_t, fabric::Qp*) {
  throw std::logic_error("odrp: no RPC lanes; a CN connects to its chains (OpenChain)");
}

void OdrpMnSide::ReleaseLane(uint32_t, uint32_t) {
  throw std::logic_error("odrp: no RPC lanes; a CN's lanes are its own (RecoverLane resets them)");
}

Task<void> OdrpMnSide::ChargeQpSetup() {
  co_await node_->cpu().Work(cost_qp_modify_, 3);  // create + INIT + RTR + RTS of one QP
}

OdrpMnSide::CnState& OdrpMnSide::StateOf(uint32_t cn_index) {
  auto it = cns_.find(cn_index);
  if (it == cns_.end()) {
    throw std::logic_error("odrp: CN " + std::to_string(cn_index) + " never connected");
  }
  return it->second;
}

Task<const CnTable*> OdrpMnSide::ConnectCn(uint32_t cn_index, uint64_t swap_pages) {
  if (!odrp_) throw std::logic_error("odrp: a CN connected before the MN started");
  co_await control_.Lock();
  Unlocker unlock{&control_};
  auto it = cns_.find(cn_index);
  if (it == cns_.end()) {
    co_await node_->cpu().Work(cost_dispatch_);
    CnState cs;
    cs.table = co_await odrp_->AddCn(swap_pages);
    it = cns_.emplace(cn_index, std::move(cs)).first;
  }
  co_return it->second.table;
}

// 1 + 2 x lanes MN QPs per chain (R, and L, C per lane), each created and
// moved to RTS.
Task<std::unique_ptr<Chain>> OdrpMnSide::NewChain(const CnState& cs, ChainKind kind,
                                                  fabric::Qp* cn_qp, uint32_t lanes) {
  co_await node_->cpu().Work(cost_qp_modify_, 3 * (1 + 2 * lanes));
  std::unique_ptr<Chain> c =
      co_await Chain::Create(odrp_.get(), cs.table, kind, ChainSlots(lanes), lanes);
  deployment_.cluster->Connect(cn_qp, c->cn_qp());
  co_await c->Arm();
  co_return c;
}

Task<Chain*> OdrpMnSide::OpenChain(uint32_t cn_index, ChainKind kind, fabric::Qp* cn_qp,
                                   uint32_t lanes) {
  if (lanes == 0 || lanes > kMaxLoadLanes) {
    throw std::invalid_argument("odrp: a " + std::string(ChainKindName(kind)) + " chain with " +
                                std::to_string(lanes) + " lanes");
  }
  co_await control_.Lock();
  Unlocker unlock{&control_};
  co_await node_->cpu().Work(cost_dispatch_);
  CnState& cs = StateOf(cn_index);
  cs.chains.push_back(co_await NewChain(cs, kind, cn_qp, lanes));
  ++counters_.chains_opened;
  co_return cs.chains.back().get();
}

Task<ChainReport> OdrpMnSide::RebuildChain(uint32_t cn_index, Chain* old, fabric::Qp* cn_qp,
                                           uint64_t tt_addr) {
  co_await control_.Lock();
  Unlocker unlock{&control_};
  co_await node_->cpu().Work(cost_dispatch_);
  CnState& cs = StateOf(cn_index);
  auto it = std::find_if(cs.chains.begin(), cs.chains.end(),
                         [old](const std::unique_ptr<Chain>& c) { return c.get() == old; });
  if (it == cs.chains.end()) {
    throw std::logic_error("odrp: RebuildChain of a chain CN " + std::to_string(cn_index) +
                           " does not have");
  }
  // Never stop a chain mid-request (that could leave a page claimed but not
  // mapped, or mapped and still queued): wait until it faulted or finished.
  while (!old->Faulted() && !old->Idle()) co_await node_->cpu().Work(cost_bookkeeping_);
  ChainReport rep;
  const ChainKind kind = old->geometry().kind;
  rep.faulted = old->Faulted();
  co_await StopAndRepair(*old, &rep);
  if ((kind == ChainKind::kLoad || kind == ChainKind::kMappedStore) && rep.faulted) {
    co_await node_->cpu().Work(cost_bookkeeping_);
    rep.refused_request = old->RefusedRequest();
  }
  rep.entry_mapped = EntryMapped(*cs.table, tt_addr);
  std::unique_ptr<Chain> fresh = co_await NewChain(cs, kind, cn_qp, old->geometry().lanes);
  // Swapped, not emptied first: ChainRunning may look at every chain of the
  // CN meanwhile.
  std::unique_ptr<Chain> dead = std::exchange(*it, std::move(fresh));
  rep.chain = it->get();
  ++counters_.chains_rebuilt;
  // The dead chain is stopped and repaired: give back what it holds, or a CN
  // whose requests fault over and over fills the MN (odrp_test
  // ChainsRefusedOverAndOverHoldNoMoreMemoryThanOnce).
  repaired_.erase(dead.get());
  co_await chain::Teardown(node_, dead->Parts());
  co_return rep;
}

Task<void> OdrpMnSide::StopAndRepair(Chain& c, ChainReport* rep) {
  if (!repaired_.insert(&c).second) {  // ReclaimCn, then a rebuild: once
    c.Stop();
    co_return;
  }
  const ChainKind kind = c.geometry().kind;
  const bool repairs = kind == ChainKind::kUnmappedStore || kind == ChainKind::kInvalidate;
  if (repairs) {
    // Other lanes may be mid-request: let every step they started finish
    // (odrp.h "Recovery"), then read each lane's last instance.
    c.StopControl();
    while (!c.WorkersSettled()) co_await node_->cpu().Work(cost_bookkeeping_);
  }
  c.Stop();
  for (uint32_t w = 0; repairs && w < c.geometry().lanes; ++w) {
    const Chain::LaneProgress p = c.LastInstance(w);
    if (kind == ChainKind::kUnmappedStore) co_await RecoverDequeue(c, p, rep);
    if (kind == ChainKind::kInvalidate) co_await RecoverEnqueue(c, p);
  }
  if (kind == ChainKind::kUnmappedStore) {
    counters_.empty_faults += rep->queue_empty;
    counters_.elements_moved += co_await repair_->Sweep();
    rep->pages_available = repair_->HeadHasElement();
  }
}

// One lane's last Unmapped Store instance (L_w settled): U1 claimed
// position p (faa[s]); U4 read the element into U7's WQE; U7 stores the
// page, U5 maps it, U6 zeroes the element. Claimed but not mapped (a
// refusal at CHK, an empty queue at U7, a stop before U5): p is a dead
// position for RingRepair, whose Sweep moves its element (still there: U6
// never ran) to the tail. Mapped (U5 ran on a page): granted, nothing to do.
Task<void> OdrpMnSide::RecoverDequeue(const Chain& old, Chain::LaneProgress p, ChainReport* rep) {
  if (p.steps <= kStoreU1) co_return;  // the lane never claimed in this instance
  const uint64_t pos = old.ClaimedPosition(p.slot);
  const uint64_t ring = odrp_->ring_addr();
  if (pos < ring || pos >= ring + odrp_->layout().ring_bytes || pos % kElementBytes != 0) {
    co_return;  // not a claimed position: the dequeue never ran
  }
  co_await node_->cpu().Work(cost_bookkeeping_);
  const bool read = p.steps > kStoreU4;
  const bool empty = read && old.DequeuedElement(p.slot) == 0;
  if (p.steps > kStoreU5 && !empty) co_return;  // mapped: the request's page
  rep->queue_empty |= empty;
  repair_->AddDeadPosition(pos);
}

// One lane's last Invalidate instance (L_w settled): V7 unmapped the entry,
// V5 claimed tail position p, V8 wrote the page there. Unmapped but not
// enqueued: the MN enqueues the page (V5 not run) or fills p (V5 ran, V8
// not). Before V7 nothing changed (a refusal at V3/V4, a stop): the CN's
// retry finds the entry still mapped.
Task<void> OdrpMnSide::RecoverEnqueue(const Chain& old, Chain::LaneProgress p) {
  if (p.steps <= kInvV7 || p.steps > kInvV8) co_return;
  co_await node_->cpu().Work(cost_bookkeeping_);
  const uint64_t page = old.InvalidatedPage(p.slot);
  if (p.steps <= kInvV5) {
    co_await repair_->Enqueue(page);
  } else {
    co_await repair_->Fill(old.ClaimedPosition(p.slot), page);
  }
  ++counters_.enqueues_completed;
}

Task<bool> OdrpMnSide::EntryIsMapped(uint32_t cn_index, uint64_t tt_addr) {
  co_await node_->cpu().Work(cost_dispatch_);
  co_return EntryMapped(*StateOf(cn_index).table, tt_addr);
}

Task<bool> OdrpMnSide::RepairQueue() {
  co_await control_.Lock();
  Unlocker unlock{&control_};
  co_await node_->cpu().Work(cost_dispatch_);
  ++counters_.queue_checks;
  counters_.elements_moved += co_await repair_->Sweep();
  co_return repair_->HeadHasElement();
}

Task<bool> OdrpMnSide::ChainRunning(uint32_t cn_index, const Chain* chain, uint32_t r_qpn) {
  co_await node_->cpu().Work(cost_dispatch_);
  ++counters_.liveness_checks;
  const CnState& cs = StateOf(cn_index);
  for (const auto& c : cs.chains) {
    if (c.get() == chain && c->cn_qp()->qp_num() == r_qpn) co_return !c->Faulted();
  }
  co_return false;  // not (any more) a chain of this CN
}

bool OdrpMnSide::EntryMapped(const CnTable& t, uint64_t tt_addr) const {
  if (tt_addr < t.tt_base || tt_addr >= t.tt_base + t.entries * kTtEntryBytes ||
      tt_addr % kTtEntryBytes != 0) {
    return false;
  }
  return node_->memory().LoadU64(tt_addr) != 0;
}

uint64_t OdrpMnSide::MappedEntries(const CnTable& t) const {
  std::vector<uint64_t> e(t.entries);
  node_->memory().Read(t.tt_base, e.data(), t.entries * kTtEntryBytes);
  return static_cast<uint64_t>(std::count_if(e.begin(), e.end(), [](uint64_t v) { return v; }));
}

Task<ReclaimReport> OdrpMnSide::ReclaimCn(uint32_t cn_index) {
  ReclaimReport r;
  co_await control_.Lock();
  Unlocker unlock{&control_};
  auto it = cns_.find(cn_index);
  if (it == cns_.end()) co_return r;
  CnState& cs = it->second;
  for (const auto& c : cs.chains) {  // nothing of that CN runs any more
    ChainReport ignored;             // its lanes' half-done allocations and frees repaired
    co_await StopAndRepair(*c, &ignored);
  }
  const CnTable& t = *cs.table;
  std::vector<uint8_t> tt(t.entries * kTtEntryBytes);
  node_->memory().Read(t.tt_base, tt.data(), tt.size());
  for (uint64_t i = 0; i < t.entries; ++i) {
    const uint64_t page = fabric::LoadBe64(&tt[i * kTtEntryBytes]);
    if (page == 0) continue;
    co_await node_->cpu().Work(cost_bookkeeping_);
    // Unmap before the page re-enters the queue: never mapped and free at once.
    node_->memory().Fill(t.tt_base + i * kTtEntryBytes, 0, kTtEntryBytes);
    co_await repair_->Enqueue(page);
    ++r.chunks_reclaimed;
  }
  counters_.pages_reclaimed += r.chunks_reclaimed;
  counters_.elements_moved += co_await repair_->Sweep();
  co_return r;
}

MnStats OdrpMnSide::stats() const {
  MnStats s;
  if (!odrp_) return s;
  s.pool_bytes = odrp_->layout().pages * kPageBytes;
  s.chunks_total = odrp_->layout().pages;
  for (const auto& [cn, cs] : cns_) s.chunks_in_use += MappedEntries(*cs.table);
  return s;
}

uint64_t OdrpMnSide::PageBehind(uint32_t cn_index, const Chunk& chunk) const {
  auto it = cns_.find(cn_index);
  if (it == cns_.end()) return 0;
  const uint64_t tt = chunk.addr / kPageBytes * kTtEntryBytes;
  if (!EntryMapped(*it->second.table, tt)) return 0;
  uint8_t be[8];
  node_->memory().Read(tt, be, 8);
  return fabric::LoadBe64(be);
}

// ============================== CN side ==============================

OdrpCn::OdrpCn(const Deployment& d, uint32_t cn_index, MnControl* mn, const Knobs& k)
    : deployment_(d),
      cn_index_(cn_index),
      mn_(dynamic_cast<OdrpMnSide*>(mn)),
      caps_(OdrpCaps()),
      node_(d.cns.at(cn_index - d.cn_index_base)),
      rt_(&d.cluster->runtime()),
      timeout_(static_cast<Ps>(k.Int("reply_timeout_us")) * kPsPerUs),
      swap_pages_(k.Int("swap_pages") > 0 ? static_cast<uint64_t>(k.Int("swap_pages"))
                                          : d.pool_bytes / kPageBytes) {
  if (!mn_) {
    throw ConfigError(
        "odrp: the chains need a ConnectX-class RNIC (cross_channel); a remote MN is not "
        "supported");
  }
  if (swap_pages_ == 0) throw ConfigError("odrp: a CN needs at least one swap page");
  cost_qp_modify_ = node_->Cost("verbs.qp_modify");
  const char* knobs[kChainKinds] = {"load_lanes", "unmapped_store_lanes", "mapped_store_lanes",
                                    "invalidate_lanes"};  // ChainKind order
  for (uint32_t i = 0; i < kChainKinds; ++i) {
    lanes_[i] = static_cast<uint32_t>(k.Int(knobs[i]));
  }
}

OdrpCn::~OdrpCn() = default;

Task<void> OdrpCn::EnsureTable() {
  if (table_) co_return;
  const CnTable* t = co_await mn_->ConnectCn(cn_index_, swap_pages_);
  if (!table_) {  // another group of this CN may have connected meanwhile
    table_ = t;
    swap_map_.assign(t->entries, false);
  }
}

std::unique_ptr<ChainClient> OdrpCn::NewClient(ChainKind kind, uint64_t hdr) const {
  const uint32_t lanes = LanesOf(kind);
  return std::make_unique<ChainClient>(
      node_, pd_, rt_, ChainGeometry::For(kind, ChainSlots(lanes), lanes), hdr_mr_, hdr);
}

// The first group of the CN sets up the headers and opens the chains; the
// groups opened meanwhile wait for it (without the lock each registered a
// header block of its own and dropped it: odrp_test
// GroupsOpenedAtOnceSetUpTheChainHeadersOnce).
Task<void> OdrpCn::EnsurePools() {
  if (hdr_mr_) co_return;
  co_await pools_setup_.Lock();
  Unlocker unlock{&pools_setup_};
  if (hdr_mr_) co_return;  // set up while this group waited
  // One header per lane of every kind (the replies of all but Load land in
  // them: remote write).
  uint64_t headers = 0;
  for (uint32_t lanes : lanes_) headers += lanes;
  const uint64_t bytes = headers * kHdrStride;
  const uint64_t base = node_->memory().Alloc(bytes, 64);
  node_->memory().Fill(base, 0, bytes);
  hdr_mr_ = co_await node_->RegMr(pd_, base, bytes, fabric::kLocalWrite | fabric::kRemoteWrite);
  lane_cq_ = node_->CreateCq(4, /*ignore_overrun=*/true);
  for (uint32_t k = 0; k < kChainKinds; ++k) {
    KindPool& pool = pools_[k];
    if (pool.chains.empty() && pool.opening == 0) (void)co_await OpenPooled(ChainKind(k));
  }
}

// Opens the CN's chain of `kind`.
Task<OdrpCn::PooledChain*> OdrpCn::OpenPooled(ChainKind kind) {
  KindPool& pool = pools_[static_cast<size_t>(kind)];
  ++pool.opening;
  auto pc = std::make_unique<PooledChain>();
  pc->kind = kind;
  // Headers: each kind's lanes, in ChainKind order.
  uint64_t index = 0;
  for (uint32_t k = 0; k < static_cast<uint32_t>(kind); ++k) index += lanes_[k];
  pc->hdr = hdr_mr_->addr() + index * kHdrStride;
  pool.chains.push_back(std::move(pc));  // reserves its header slot
  PooledChain* raw = pool.chains.back().get();
  raw->client = NewClient(kind, raw->hdr);
  co_await node_->cpu().Work(cost_qp_modify_, 3);
  raw->chain =
      co_await mn_->OpenChain(cn_index_, kind, raw->client->qp(), raw->client->geometry().lanes);
  WatchLiveness(*raw);
  --pool.opening;
  pool.freed.NotifyAll();  // requests that found it being opened
  co_return raw;
}

Task<OdrpCn::PooledChain*> OdrpCn::Acquire(ChainKind kind) {
  KindPool& pool = pools_[static_cast<size_t>(kind)];
  for (;;) {  // one pipelined chain per kind, shared
    if (!pool.chains.empty()) {
      PooledChain* pc = pool.chains.front().get();
      if (pc->chain != nullptr && !pc->rebuilding) co_return pc;
    } else if (pool.opening == 0) {
      co_return co_await OpenPooled(kind);
    }
    co_await pool.freed.Wait();
  }
}

Task<AccessGroup*> OdrpCn::OpenGroup(int lanes, uint64_t buffer_bytes) {
  if (lanes < 1 || lanes > caps_.max_group_lanes) {
    throw ConfigError("an access group needs 1.." + std::to_string(caps_.max_group_lanes) +
                      " lanes for odrp, asked for " + std::to_string(lanes));
  }
  if (!pd_) pd_ = node_->AllocPd();
  co_await EnsureTable();
  co_await EnsurePools();
  // [zero page][data buffer], one MR; remote write: the Load chains' replies
  // land in the data buffer.
  const uint64_t total = kPageBytes + buffer_bytes;
  const uint64_t base = node_->memory().Alloc(total, kPageBytes);
  node_->memory().Fill(base, 0, kPageBytes);
  auto g = std::make_unique<Group>();
  g->mr = co_await node_->RegMr(pd_, base, total, fabric::kLocalWrite | fabric::kRemoteWrite);
  g->zero_page = base;
  g->group =
      std::make_unique<AccessGroup>(cn_index_, g->mr, g->zero_page + kPageBytes, buffer_bytes);
  Group* raw = g.get();
  groups_.push_back(std::move(g));
  for (int i = 0; i < lanes; ++i) co_await AddLane(raw, i);
  co_return raw->group.get();
}

// A lane is its state QP: CN-local, never connected (odrp.h "Lanes").
Task<void> OdrpCn::AddLane(Group* g, size_t index) {
  auto lane = std::make_unique<Lane>();
  lane->group = g->group.get();
  lane->index = index;
  fabric::QpInitAttr a;
  a.pd = pd_;
  a.send_cq = lane_cq_;
  a.recv_cq = lane_cq_;
  co_await node_->cpu().Work(cost_qp_modify_, 1);
  lane->qp = node_->CreateQp(a);
  lane->qp->Modify(QpState::kInit);
  lane->cq = nullptr;
  lane->mn_qpn = 0;
  g->group->AddLane(std::move(lane));
}

void OdrpCn::WatchLiveness(PooledChain& pc) {
  OdrpMnSide* mn = mn_;
  const uint32_t cn = cn_index_;
  const Chain* chain = pc.chain;
  const uint32_t r_qpn = chain->cn_qp()->qp_num();
  pc.client->SetLivenessCheck(
      [mn, cn, chain, r_qpn]() { return mn->ChainRunning(cn, chain, r_qpn); });
}

OdrpCn::Group* OdrpCn::GroupOf(const AccessGroup& ag) {
  for (const auto& g : groups_) {
    if (g->group.get() == &ag) return g.get();
  }
  return nullptr;
}

// Replaces the pooled chain `pc` (held by the caller) by a fresh one.
Task<ChainReport> OdrpCn::Rebuild(PooledChain& pc, uint64_t tt_addr) {
  std::unique_ptr<ChainClient> client = NewClient(pc.kind, pc.hdr);
  co_await node_->cpu().Work(cost_qp_modify_, 3);
  const ChainReport rep = co_await mn_->RebuildChain(cn_index_, pc.chain, client->qp(), tt_addr);
  // Clients of earlier rebuilds go once no request is inside them any more;
  // this one's flushed requests may still be.
  std::erase_if(pc.retired, [](const std::unique_ptr<ChainClient>& c) { return c->Idle(); });
  pc.retired.push_back(std::move(pc.client));
  pc.client = std::move(client);
  pc.chain = rep.chain;
  WatchLiveness(pc);
  co_return rep;
}

bool OdrpCn::TakeSwapPage(uint64_t* index) {
  const uint64_t n = swap_map_.size();
  if (swap_used_ == n) return false;
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t i = (swap_hint_ + k) % n;
    if (swap_map_[i]) continue;
    swap_map_[i] = true;
    ++swap_used_;
    swap_hint_ = (i + 1) % n;
    *index = i;
    return true;
  }
  return false;
}

void OdrpCn::ReleaseSwapPage(uint64_t index) {
  if (index >= swap_map_.size() || !swap_map_[index]) return;
  swap_map_[index] = false;
  --swap_used_;
}

bool OdrpCn::OwnName(uint64_t tt_addr) const {
  return table_ && tt_addr >= table_->tt_base &&
         tt_addr < table_->tt_base + table_->entries * kTtEntryBytes;
}

Task<Result<Chunk>> OdrpCn::Alloc(AccessGroup& ag) {
  Group* g = GroupOf(ag);
  if (!g) {
    co_return Result<Chunk>{Status(Code::kInvalidArgument, "odrp: not an access group of this CN")};
  }
  if (saw_empty_) {
    // Only after this CN found the queue empty: the MN CPU sweeps first.
    if (!co_await mn_->RepairQueue()) {
      co_return Result<Chunk>{OutOfMemory("the MN's free page queue is still empty")};
    }
    saw_empty_ = false;
  }
  bool retry = false;
  Result<Chunk> r = co_await AllocOnce(*g, &retry);
  if (retry) r = co_await AllocOnce(*g, &retry);  // a page came back during the repair
  co_return r;
}

// An Unmapped Store of the zero page into a free swap page of this CN; a
// request flushed behind another request's fault is sent again.
Task<Result<Chunk>> OdrpCn::AllocOnce(Group& g, bool* retry) {
  *retry = false;
  Result<Chunk> out;
  uint64_t idx = 0;
  if (!TakeSwapPage(&idx)) {
    out.status =
        OutOfMemory("CN " + std::to_string(cn_index_) + "'s swap space (" +
                    std::to_string(swap_map_.size()) + " pages) is all mapped; raise swap_pages");
    co_return out;
  }
  bool again = true;
  for (int attempt = 1; again; ++attempt) {
    co_await AllocAttempt(g, idx, attempt, &out, &again, retry);
  }
  co_return out;
}

Task<void> OdrpCn::AllocAttempt(Group& g, uint64_t idx, int attempt, Result<Chunk>* out,
                                bool* again, bool* retry) {
  *again = false;
  const uint64_t tt = table_->tt_base + idx * kTtEntryBytes;
  PooledChain* pc = co_await Acquire(ChainKind::kUnmappedStore);
  const uint64_t gen = pc->gen;
  const Status st = co_await pc->client->UnmappedStore(tt, g.zero_page, g.mr->lkey(), timeout_);
  bool mapped = st.ok();
  ChainReport rep;
  if (!mapped) {
    rep = co_await RebuildShared(*pc, gen, tt);
    // The store may have run with its reply flushed behind another
    // request's fault (the MN lets every started step finish, and U7 stores
    // the zeros before U5 maps the page): then the page is this CN's.
    mapped = co_await mn_->EntryIsMapped(cn_index_, tt);
  }
  if (mapped) {
    out->status = Status::Ok();
    out->value.addr = tt / kTtEntryBytes * kPageBytes;
    out->value.bytes = kPageBytes;
    out->value.id = idx;
    out->value.rkeys = {0};
    co_return;
  }
  if (rep.queue_empty) {
    ReleaseSwapPage(idx);
    *retry = rep.pages_available;
    saw_empty_ = !rep.pages_available;
    out->status = OutOfMemory("the MN's free page queue is empty; free a chunk first");
    co_return;
  }
  if (attempt < kFlushRetries) {
    *again = true;  // flushed behind another request's fault: send it again
    co_return;
  }
  ReleaseSwapPage(idx);
  out->status = Status(Code::kLaneBroken,
                       "odrp: allocation failed (" + st.message() + "); " +
                           (rep.faulted ? "the Unmapped Store chain faulted and was rebuilt"
                                        : "the chain was live: raise reply_timeout_us"));
}

Task<Status> OdrpCn::Free(AccessGroup& ag, const Chunk& chunk) {
  if (!GroupOf(ag))
    co_return Status(Code::kInvalidArgument, "odrp: not an access group of this CN");
  Status st;
  bool again = true;
  for (int attempt = 1; again; ++attempt) st = co_await FreeAttempt(chunk, attempt, &again);
  co_return st;
}

Task<Status> OdrpCn::FreeAttempt(const Chunk& chunk, int attempt, bool* again) {
  *again = false;
  const uint64_t tt = TtAddr(chunk);
  const bool own = OwnName(tt);
  const uint64_t idx = own ? (tt - table_->tt_base) / kTtEntryBytes : 0;
  PooledChain* pc = co_await Acquire(ChainKind::kInvalidate);
  const uint64_t gen = pc->gen;
  const Status st = co_await pc->client->Invalidate(tt, timeout_);
  if (st.ok()) {
    if (own) ReleaseSwapPage(idx);
    co_return Status::Ok();
  }
  (void)co_await RebuildShared(*pc, gen, tt);
  bool mapped = false;
  if (own) mapped = co_await mn_->EntryIsMapped(cn_index_, tt);
  if (own && swap_map_[idx] && !mapped) {
    ReleaseSwapPage(idx);  // the free took effect; only its reply was lost
    co_return Status::Ok();
  }
  if (!mapped) {
    co_return Status(Code::kNotOwner, "odrp: the MN's Invalidate chain refused chunk " +
                                          Hex(chunk.addr) +
                                          ": no page is mapped behind it in this CN's "
                                          "translation table (not this CN's chunk, or freed)");
  }
  if (attempt < kFlushRetries) {
    *again = true;  // still mapped: flushed behind another request's fault
    co_return st;
  }
  co_return Status(Code::kLaneBroken, "odrp: free of chunk " + Hex(chunk.addr) + " failed (" +
                                          st.message() + "); raise reply_timeout_us");
}

Status OdrpCn::CheckIo(const Lane& lane, uint64_t offset, uint32_t length,
                       uint64_t local_addr) const {
  if (offset != 0 || length != kPageBytes) {
    return Status(Code::kUnsupported, "odrp: only whole 4 KB pages (offset 0, 4096 B); got " +
                                          std::to_string(length) + " B at +" +
                                          std::to_string(offset));
  }
  const AccessGroup& g = *lane.group;
  if (local_addr < g.buffer_addr() || local_addr + length > g.buffer_addr() + g.buffer_bytes()) {
    return Status(Code::kInvalidArgument, "local buffer [" + std::to_string(local_addr) + ", +" +
                                              std::to_string(length) +
                                              ") is outside the group's registered buffer");
  }
  return Status::Ok();
}

// A Load or Mapped Store got no reply (its chain is rebuilt by then): the
// lane is broken (its state QP to ERR) until RecoverLane.
Status OdrpCn::Refused(Lane& lane, ChainKind kind, bool timed_out, const Status& st,
                       const Chunk& chunk) {
  if (lane.qp->state() != QpState::kErr) lane.qp->Modify(QpState::kErr);
  const char* what = kind == ChainKind::kLoad ? "read" : "write";
  if (!timed_out) {
    return Status(Code::kLaneBroken, std::string("odrp: ") + what + " failed (" + st.message() +
                                         "); RecoverLane first");
  }
  return Status(Code::kAccessDenied,
                std::string("odrp: the MN refused the ") + what + " of chunk " + Hex(chunk.addr) +
                    " (no page mapped behind it in this CN's translation table): no reply "
                    "within " +
                    std::to_string(timeout_ / kPsPerUs) +
                    " us; the lane is broken until RecoverLane");
}

Task<Status> OdrpCn::Access(ChainKind kind, Lane& lane, const Chunk& chunk, uint64_t offset,
                            uint32_t length, uint64_t local_addr) {
  if (Status st = CheckIo(lane, offset, length, local_addr); !st.ok()) co_return st;
  if (!lane.group || !GroupOf(*lane.group)) {
    co_return Status(Code::kInvalidArgument, "odrp: not a lane of this CN");
  }
  if (lane.broken()) {
    co_return Status(Code::kLaneBroken, "odrp: the lane's request was refused; RecoverLane first");
  }
  co_return co_await Pipelined(kind, lane, chunk, local_addr);
}

// Load or Mapped Store through the CN's one pipelined chain of that kind.
Task<Status> OdrpCn::Pipelined(ChainKind kind, Lane& lane, const Chunk& chunk,
                               uint64_t local_addr) {
  const uint64_t tt = TtAddr(chunk);
  for (int attempt = 1;; ++attempt) {
    PooledChain* pc = co_await Acquire(kind);
    const uint64_t gen = pc->gen;
    ChainClient* client = pc->client.get();  // kept alive by pc->retired across a rebuild
    Status st;  // (gcc 12: no co_await inside a conditional expression)
    if (kind == ChainKind::kLoad) {
      st = co_await client->Load(tt, local_addr, lane.group->mr()->rkey(), timeout_);
    } else {
      st = co_await client->MappedStore(tt, local_addr, lane.group->lkey(), timeout_);
    }
    if (st.ok()) co_return st;
    // The request whose deadline passed is the one the chain refused (R
    // replies in order: every earlier request was answered); the others were
    // flushed behind it and retry on the rebuilt chain.
    const bool timed_out = client->timed_out();
    const uint64_t n = client->last_request();
    const uint64_t refused = (co_await RebuildShared(*pc, gen, tt)).refused_request;
    // A fault flushes every reply R had not had acknowledged, so the request
    // whose deadline passed first need not be the refused one: the MN says
    // which was (a live chain that timed out refused nothing: as before).
    const bool mine = refused == Chain::kNoRequest ? timed_out : refused == n;
    if (mine || attempt == kFlushRetries) {
      co_return Refused(lane, kind, mine, st, chunk);
    }
  }
}

Task<ChainReport> OdrpCn::RebuildShared(PooledChain& pc, uint64_t gen, uint64_t tt_addr) {
  if (pc.gen == gen && !pc.rebuilding) {
    pc.rebuilding = true;
    pc.report = co_await Rebuild(pc, tt_addr);
    ++pc.gen;
    pc.rebuilding = false;
    pc.rebuilt.NotifyAll();
    pools_[static_cast<size_t>(pc.kind)].freed.NotifyAll();
  }
  while (pc.rebuilding) co_await pc.rebuilt.Wait();
  // The report of the rebuild that replaced generation `gen` (a later one
  // may have happened meanwhile only after this request's chain was gone).
  co_return pc.gen == gen + 1 ? pc.report : ChainReport{};
}

Task<Status> OdrpCn::Read(Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                          uint64_t local_addr) {
  return Access(ChainKind::kLoad, lane, chunk, offset, length, local_addr);
}

Task<Status> OdrpCn::Write(Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                           uint64_t local_addr) {
  return Access(ChainKind::kMappedStore, lane, chunk, offset, length, local_addr);
}

Task<Status> OdrpCn::Extend(Lane&, Chunk&) {
  co_return Status(Code::kUnsupported, "odrp has no leases to extend");
}

Task<Status> OdrpCn::RecoverLane(Lane& lane) {
  if (!lane.group || !GroupOf(*lane.group) || lane.qp == nullptr) {
    co_return Status(Code::kInvalidArgument, "odrp: not a lane of this CN");
  }
  if (!lane.broken()) co_return Status::Ok();  // its refused chain was rebuilt already
  co_await node_->cpu().Work(cost_qp_modify_, 2);
  lane.qp->Modify(QpState::kReset);
  lane.qp->Modify(QpState::kInit);
  ++lane.recoveries;
  co_return Status::Ok();
}

}  // namespace dmb::systems::odrp

namespace dmb::systems {

extern const SystemInfo kOdrp;
const SystemInfo kOdrp{
    "odrp",
    "ODRP: 4 KB pages behind per-CN translation tables, all logic in MN-side WR chains (no MN "
    "CPU)",
    {{"reply_timeout_us", KnobKind::kInt, "1000",
      "how long a CN awaits a chain's reply before it asks the MN CPU whether the chain "
      "faulted (a refusal is a fault: no reply) or is only slow (then it waits again); a "
      "policy, never on the success path",
      1, 100000000},
     {"load_lanes", KnobKind::kInt, "16",
      "lanes of the CN's one Load chain: up to that many page loads in flight through it at "
      "once, each lane 2 more offloaded MN QPs (odrp.h \"Chains per CN\")",
      1, 16},
     {"mapped_store_lanes", KnobKind::kInt, "16",
      "lanes of the CN's one Mapped Store chain: up to that many page writes (swap-outs) in "
      "flight through it at once, each lane 2 more offloaded MN QPs (odrp.h \"Chains per CN\")",
      1, 16},
     {"unmapped_store_lanes", KnobKind::kInt, "16",
      "lanes of the CN's one Unmapped Store chain: up to that many allocations (first "
      "swap-outs of a page) in flight through it at once, each lane 2 more offloaded MN QPs "
      "(odrp.h \"Chains per CN\")",
      1, 16},
     {"invalidate_lanes", KnobKind::kInt, "16",
      "lanes of the CN's one Invalidate chain: up to that many frees in flight through it at "
      "once, each lane 2 more offloaded MN QPs (odrp.h \"Chains per CN\")",
      1, 16},
     {"swap_pages", KnobKind::kInt, "0",
      "swap pages per CN (entries of its translation table); 0: as many as the MN pool has "
      "pages",
      0, 1ll << 32}},
    [](const Deployment& d, const Knobs& k) -> std::unique_ptr<MemoryManager> {
      return std::make_unique<BasicManager<odrp::OdrpMnSide, odrp::OdrpCn>>("odrp", d, k);
    },
    {},
    {},
    [](const Knobs&) { return odrp::kNeeds; },
    [](const Knobs&, uint64_t pool) {
      if (pool < odrp::kPageBytes) {
        throw ConfigError("odrp: the " + FormatSize(pool) +
                          " MN pool holds no 4 KB page; use a larger pool");
      }
    }};

}  // namespace dmb::systems
