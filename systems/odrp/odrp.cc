// odrp: the MemoryManager over ODRP's WR chains; the design is in odrp.h.
#include "systems/odrp/odrp.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "fabric/wqe_layout.h"
#include "systems/registry.h"

namespace dmb::systems::odrp {

using fabric::QpState;

namespace {

constexpr uint64_t kHdrStride = 128;                // one request header (<= 104 B)
constexpr uint64_t kLaneHdrBytes = 4 * kHdrStride;  // one per chain kind

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
  fabric::RequireCaps(*node_, {"cross_channel", "masked_atomics", "atomics"}, "odrp");
  const uint64_t pages = deployment_.pool_bytes / kPageBytes;
  if (pages == 0) {
    throw ConfigError("odrp: the " + FormatSize(deployment_.pool_bytes) +
                      " MN pool holds no 4 KB page; use a larger pool");
  }
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

// Three MN QPs per chain (R, L, C), each created and moved to RTS.
Task<std::unique_ptr<Chain>> OdrpMnSide::NewChain(const CnState& cs, ChainKind kind,
                                                  fabric::Qp* cn_qp) {
  co_await node_->cpu().Work(cost_qp_modify_, 3 * 3);
  std::unique_ptr<Chain> c = co_await Chain::Create(odrp_.get(), cs.table, kind, kChainSlots);
  deployment_.cluster->Connect(cn_qp, c->cn_qp());
  co_await c->Arm();
  co_return c;
}

Task<Chain*> OdrpMnSide::OpenChain(uint32_t cn_index, ChainKind kind, fabric::Qp* cn_qp) {
  co_await control_.Lock();
  Unlocker unlock{&control_};
  co_await node_->cpu().Work(cost_dispatch_);
  CnState& cs = StateOf(cn_index);
  cs.chains.push_back(co_await NewChain(cs, kind, cn_qp));
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
  const bool l_faulted = old->worker_qp()->QueryState() == QpState::kErr;
  rep.faulted = old->Faulted();
  old->Stop();
  if (kind == ChainKind::kUnmappedStore && l_faulted) co_await RecoverDequeue(*old, &rep);
  rep.entry_mapped = EntryMapped(*cs.table, tt_addr);
  *it = co_await NewChain(cs, kind, cn_qp);  // the old chain's QPs stay in ERR
  rep.chain = it->get();
  ++counters_.chains_rebuilt;
  co_return rep;
}

// The last request's dequeue claimed position p (faa[s]) and, the worker
// having faulted after U4 landed, read the element U7's WQE now holds. p is
// behind the head either way: a dead position for RingRepair.
Task<void> OdrpMnSide::RecoverDequeue(const Chain& old, ChainReport* rep) {
  const uint64_t taken = old.requests_taken();
  if (taken == 0) co_return;
  const uint32_t slot = static_cast<uint32_t>((taken - 1) % old.geometry().slots);
  const uint64_t pos = old.ClaimedPosition(slot);
  const uint64_t ring = odrp_->ring_addr();
  if (pos < ring || pos >= ring + odrp_->layout().ring_bytes || pos % kElementBytes != 0) {
    co_return;  // not a claimed position: the dequeue never ran
  }
  co_await node_->cpu().Work(cost_bookkeeping_);
  rep->queue_empty = old.DequeuedElement(slot) == 0;
  if (rep->queue_empty) ++counters_.empty_faults;
  repair_->AddDeadPosition(pos);
  counters_.elements_moved += co_await repair_->Sweep();
  rep->pages_available = repair_->HeadHasElement();
}

Task<bool> OdrpMnSide::RepairQueue() {
  co_await control_.Lock();
  Unlocker unlock{&control_};
  co_await node_->cpu().Work(cost_dispatch_);
  ++counters_.queue_checks;
  counters_.elements_moved += co_await repair_->Sweep();
  co_return repair_->HeadHasElement();
}

Task<bool> OdrpMnSide::ChainRunning(uint32_t cn_index, const Chain* chain) {
  co_await node_->cpu().Work(cost_dispatch_);
  ++counters_.liveness_checks;
  const CnState& cs = StateOf(cn_index);
  for (const auto& c : cs.chains) {
    if (c.get() == chain) co_return !c->Faulted();
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
  for (const auto& c : cs.chains) c->Stop();  // nothing of that CN runs any more
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

std::unique_ptr<ChainClient> OdrpCn::NewClient(const Group& g, ChainKind kind, uint64_t hdr) const {
  return std::make_unique<ChainClient>(node_, pd_, rt_, ChainGeometry::For(kind, kChainSlots), g.mr,
                                       hdr);
}

Task<AccessGroup*> OdrpCn::OpenGroup(int lanes, uint64_t buffer_bytes) {
  if (lanes < 1 || lanes > caps_.max_group_lanes) {
    throw ConfigError("an access group needs 1.." + std::to_string(caps_.max_group_lanes) +
                      " lanes for odrp, asked for " + std::to_string(lanes));
  }
  if (!pd_) pd_ = node_->AllocPd();
  co_await EnsureTable();
  // [request headers of every lane][zero page][data buffer], one MR; remote
  // write: the Load chains' replies land in the data buffer.
  const uint64_t hdr_bytes = (lanes * kLaneHdrBytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  const uint64_t total = hdr_bytes + kPageBytes + buffer_bytes;
  const uint64_t base = node_->memory().Alloc(total, kPageBytes);
  node_->memory().Fill(base, 0, hdr_bytes + kPageBytes);
  auto g = std::make_unique<Group>();
  g->mr = co_await node_->RegMr(pd_, base, total, fabric::kLocalWrite | fabric::kRemoteWrite);
  g->zero_page = base + hdr_bytes;
  g->group =
      std::make_unique<AccessGroup>(cn_index_, g->mr, g->zero_page + kPageBytes, buffer_bytes);
  Group* raw = g.get();
  groups_.push_back(std::move(g));
  for (int i = 0; i < lanes; ++i) co_await AddLane(raw, i, base + i * kLaneHdrBytes);
  co_return raw->group.get();
}

Task<void> OdrpCn::AddLane(Group* g, size_t index, uint64_t hdr_base) {
  auto lane = std::make_unique<Lane>();
  lane->group = g->group.get();
  lane->index = index;
  lane->ctrl_addr = hdr_base;
  LaneChains lc;
  lc.lane = lane.get();
  std::vector<ChainKind> kinds = {ChainKind::kLoad, ChainKind::kMappedStore};
  if (index == 0) kinds.insert(kinds.end(), {ChainKind::kUnmappedStore, ChainKind::kInvalidate});
  for (ChainKind k : kinds) {
    Slot s;
    s.kind = k;
    s.hdr = hdr_base + kHdrStride * static_cast<uint64_t>(k);
    s.client = NewClient(*g, k, s.hdr);
    co_await node_->cpu().Work(cost_qp_modify_, 3);
    s.chain = co_await mn_->OpenChain(cn_index_, k, s.client->qp());
    WatchLiveness(s);
    lc.slots.push_back(std::move(s));
  }
  lane->qp = lc.slots[0].client->qp();  // the Load chain: see odrp.h "Lanes"
  lane->cq = nullptr;
  lane->mn_qpn = lc.slots[0].chain->cn_qp()->qp_num();
  g->group->AddLane(std::move(lane));
  g->lanes.push_back(std::move(lc));
}

void OdrpCn::WatchLiveness(Slot& s) {
  OdrpMnSide* mn = mn_;
  const uint32_t cn = cn_index_;
  const Chain* chain = s.chain;
  s.client->SetLivenessCheck([mn, cn, chain]() { return mn->ChainRunning(cn, chain); });
}

OdrpCn::Group* OdrpCn::GroupOf(const AccessGroup& ag) {
  for (const auto& g : groups_) {
    if (g->group.get() == &ag) return g.get();
  }
  return nullptr;
}

OdrpCn::Slot& OdrpCn::SlotOf(LaneChains& lc, ChainKind kind) {
  for (Slot& s : lc.slots) {
    if (s.kind == kind) return s;
  }
  throw std::logic_error(std::string("odrp: lane without a ") + ChainKindName(kind) + " chain");
}

Task<ChainReport> OdrpCn::Rebuild(Group& g, LaneChains& lc, Slot& s, uint64_t tt_addr) {
  std::unique_ptr<ChainClient> client = NewClient(g, s.kind, s.hdr);
  co_await node_->cpu().Work(cost_qp_modify_, 3);
  const ChainReport rep = co_await mn_->RebuildChain(cn_index_, s.chain, client->qp(), tt_addr);
  s.client = std::move(client);
  s.chain = rep.chain;
  WatchLiveness(s);
  if (s.kind == ChainKind::kLoad) {
    lc.lane->qp = s.client->qp();
    lc.lane->mn_qpn = s.chain->cn_qp()->qp_num();
  }
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

// One Unmapped Store of the zero page into a free swap page of this CN.
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
  const uint64_t tt = table_->tt_base + idx * kTtEntryBytes;
  Slot& s = SlotOf(g.lanes.at(0), ChainKind::kUnmappedStore);
  const Status st = co_await s.client->UnmappedStore(tt, g.zero_page, g.mr->lkey(), timeout_);
  if (st.ok()) {
    out.value.addr = tt / kTtEntryBytes * kPageBytes;
    out.value.bytes = kPageBytes;
    out.value.id = idx;
    out.value.rkeys = {0};
    co_return out;
  }
  const ChainReport rep = co_await Rebuild(g, g.lanes.at(0), s, tt);
  if (!rep.entry_mapped) ReleaseSwapPage(idx);  // else held: see odrp.h "Not handled"
  if (rep.queue_empty) {
    *retry = rep.pages_available;
    saw_empty_ = !rep.pages_available;
    out.status = OutOfMemory("the MN's free page queue is empty; free a chunk first");
    co_return out;
  }
  out.status = Status(Code::kLaneBroken,
                      "odrp: allocation failed (" + st.message() + "); " +
                          (rep.faulted ? "the Unmapped Store chain faulted and was rebuilt"
                                       : "the chain was live: raise reply_timeout_us"));
  co_return out;
}

Task<Status> OdrpCn::Free(AccessGroup& ag, const Chunk& chunk) {
  Group* g = GroupOf(ag);
  if (!g) co_return Status(Code::kInvalidArgument, "odrp: not an access group of this CN");
  const uint64_t tt = TtAddr(chunk);
  const bool own = OwnName(tt);
  const uint64_t idx = own ? (tt - table_->tt_base) / kTtEntryBytes : 0;
  Slot& s = SlotOf(g->lanes.at(0), ChainKind::kInvalidate);
  const Status st = co_await s.client->Invalidate(tt, timeout_);
  if (st.ok()) {
    if (own) ReleaseSwapPage(idx);
    co_return Status::Ok();
  }
  const ChainReport rep = co_await Rebuild(*g, g->lanes.at(0), s, tt);
  if (own && swap_map_[idx] && !rep.entry_mapped) {
    ReleaseSwapPage(idx);  // the free took effect; only its reply was lost
    co_return Status::Ok();
  }
  if (rep.faulted) {
    co_return Status(Code::kNotOwner, "odrp: the MN's Invalidate chain refused chunk " +
                                          Hex(chunk.addr) +
                                          ": no page is mapped behind it in this CN's "
                                          "translation table (not this CN's chunk, or freed)");
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

// A Load or Mapped Store got no reply: the lane is broken (Lane.qp to ERR)
// until RecoverLane rebuilds its chains.
Status OdrpCn::Refused(LaneChains& lc, const Slot& s, const Status& st, const Chunk& chunk) {
  fabric::Qp* q = lc.lane->qp;
  if (q->state() != QpState::kErr) q->Modify(QpState::kErr);
  const char* what = s.kind == ChainKind::kLoad ? "read" : "write";
  if (!s.client->timed_out()) {
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

OdrpCn::LaneChains* OdrpCn::LaneOf(const Lane& lane) {
  Group* g = lane.group ? GroupOf(*lane.group) : nullptr;
  if (!g || lane.index >= g->lanes.size() || g->lanes[lane.index].lane != &lane) return nullptr;
  return &g->lanes[lane.index];
}

Task<Status> OdrpCn::Access(ChainKind kind, Lane& lane, const Chunk& chunk, uint64_t offset,
                            uint32_t length, uint64_t local_addr) {
  if (Status st = CheckIo(lane, offset, length, local_addr); !st.ok()) co_return st;
  LaneChains* lc = LaneOf(lane);
  if (!lc) co_return Status(Code::kInvalidArgument, "odrp: not a lane of this CN");
  if (lane.broken()) {
    co_return Status(Code::kLaneBroken, "odrp: the lane's chains faulted; RecoverLane first");
  }
  Slot& s = SlotOf(*lc, kind);
  const uint64_t tt = TtAddr(chunk);
  Status st;  // (gcc 12: no co_await inside a conditional expression)
  if (kind == ChainKind::kLoad) {
    st = co_await s.client->Load(tt, local_addr, lane.group->mr()->rkey(), timeout_);
  } else {
    st = co_await s.client->MappedStore(tt, local_addr, lane.group->lkey(), timeout_);
  }
  if (st.ok()) co_return st;
  co_return Refused(*lc, s, st, chunk);
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
  LaneChains* lc = LaneOf(lane);
  if (!lc) co_return Status(Code::kInvalidArgument, "odrp: not a lane of this CN");
  Group* g = GroupOf(*lane.group);
  bool rebuilt = false;
  for (Slot& s : lc->slots) {
    if (s.client->qp()->state() != QpState::kErr && !s.chain->Faulted()) continue;
    co_await Rebuild(*g, *lc, s, 0);
    rebuilt = true;
  }
  if (rebuilt) ++lane.recoveries;
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
     {"swap_pages", KnobKind::kInt, "0",
      "swap pages per CN (entries of its translation table); 0: as many as the MN pool has "
      "pages",
      0, 1ll << 32}},
    [](const Deployment& d, const Knobs& k) -> std::unique_ptr<MemoryManager> {
      return std::make_unique<BasicManager<odrp::OdrpMnSide, odrp::OdrpCn>>("odrp", d, k);
    }};

}  // namespace dmb::systems
