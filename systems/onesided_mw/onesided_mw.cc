#include "systems/onesided_mw/onesided_mw.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#include "systems/registry.h"

namespace dmb::systems::onesided_mw {

using fabric::Opcode;
using fabric::QpState;
using fabric::SendWr;
using fabric::WcStatus;

// The allocation chain's lanes: alloc_lanes, or (0) 8 when the CN's threads
// share a pair (sep) and 1 when every access group has its own. A lane is
// an MN-local worker and control QP (looped back); under the profile's
// default reading of the offload penalty (issue 14 #2: only QPs connected to
// another node carry it) lanes cost MN memory and loopback WRs, not a
// penalty on every MN WR. Measured (dmb_micro alloc, 48 threads, batch 300,
// group 3): one Alloc QP sustains 300 kops with 4 lanes, 587 with 8, 650
// with 16, where A's in-order part (binds, reply, ticket, pads: about 1.5 us
// per allocation) bounds it; KV insert at 1 CN x 24 threads, 4 KB chunks:
// 1.21 / 2.23 / 2.23 Mops. 8 takes nearly all of it at half the rings of 16.
// (Under +all_cross_channel every lane adds 2 penalized QPs; 4 was the
// default then.)
namespace {
uint32_t AllocLanes(const Knobs& k) {
  const int64_t lanes = k.Int("alloc_lanes");
  if (lanes > 0) return static_cast<uint32_t>(lanes);
  return k.Bool("sep") ? 8 : 1;
}
}  // namespace

// ============================== MN side ==============================

OsmwMn::OsmwMn(const Deployment& d, const Knobs& k)
    : MnBase(d, k),
      g_(static_cast<uint32_t>(k.Int("group_size"))),
      chunk_bytes_(k.Size("granularity")),
      instances_(static_cast<uint32_t>(k.Int("chain_instances"))),
      lanes_(AllocLanes(k)),
      empty_watch_(static_cast<Ps>(k.Int("empty_watch_us")) * kPsPerUs),
      monitor_period_(static_cast<Ps>(k.Int("monitor_period_us")) * kPsPerUs),
      budget_(static_cast<uint64_t>(k.Int("budget_chunks"))),
      max_renewals_(static_cast<uint64_t>(k.Int("max_renewals"))) {
  if (!std::has_single_bit(instances_)) {
    throw ConfigError("onesided_mw: chain_instances must be a power of two (4..256), got " +
                      std::to_string(instances_));
  }
  if (instances_ % lanes_ != 0 || instances_ / lanes_ < 4 ||
      !std::has_single_bit(instances_ / lanes_)) {
    throw ConfigError(
        "onesided_mw: chain_instances / alloc_lanes must be a power of two >= 4 "
        "(each allocation lane recycles its own instances), got " +
        std::to_string(instances_) + " / " + std::to_string(lanes_) +
        "; raise chain_instances or lower alloc_lanes");
  }
}

MnBase::CapsNeed OsmwMn::Needs() const { return {"onesided_mw", kNeeds}; }

// SystemInfo::check_pool: the allocation queue's elements and the chunks'
// windows are indexed by 24 bits.
void OsmwCheckPool(const Knobs& k, uint64_t pool_bytes) {
  const uint64_t chunk_bytes = k.Size("granularity");
  const uint64_t entries = pool_bytes / chunk_bytes;
  if (entries < 1 || entries > (1u << 24)) {
    throw ConfigError("onesided_mw: " + FormatSize(pool_bytes) + " of MN memory in " +
                      FormatSize(chunk_bytes) + " chunks gives " + std::to_string(entries) +
                      " chunks; use 1..16M chunks (change granularity or the pool size)");
  }
}

Task<void> OsmwMn::Setup() {
  const uint64_t entries = pool_bytes_ / chunk_bytes_;  // 1..16M: OsmwCheckPool
  // Registered once ([OSMW] §5): the windows grant all remote access.
  pool_mr_ =
      co_await node_->RegMr(pd_, pool_addr_, pool_bytes_, fabric::kLocalWrite | fabric::kMwBind);
  MetadataConfig mc;
  mc.group_size = g_;
  mc.entries = static_cast<uint32_t>(entries);
  mc.chunk_bytes = chunk_bytes_;
  // Claims past the tail while the queue runs dry: at most one per lane of
  // every chain in flight; as many as entries is room for any deployment.
  mc.dead_slots = mc.entries;
  md_ = co_await Metadata::Create(node_, pd_, pool_mr_, mc);
  const Layout& l = md_->layout();
  ring_ = co_await RingRepair::Create({deployment_.cluster, node_, md_->meta_mr(), md_->ring_addr(),
                                       l.ring_bytes, md_->head_addr(), md_->tail_addr()});
  notice_src_ = node_->memory().Alloc(16, 64);
  node_->memory().StoreU64(notice_src_, kNoticeOk);
  node_->memory().StoreU64(notice_src_ + 8, kNoticeEmpty);
  notice_src_mr_ = co_await node_->RegMr(pd_, notice_src_, 16, fabric::kLocalWrite);
  notice_cq_ = node_->CreateCq(1u << 16, /*ignore_overrun=*/true);
  reclaim_cq_ = node_->CreateCq(64);
  fabric::QpInitAttr a;
  a.pd = pd_;
  a.send_cq = reclaim_cq_;
  a.recv_cq = reclaim_cq_;
  a.max_send_wr = 16;
  a.invalidate_any_qp = true;  // MN-only: retires windows bound to any QP
  reclaim_qp_ = node_->CreateQp(a);
  deployment_.cluster->Connect(reclaim_qp_, reclaim_qp_);
  if (budget_ > 0) runtime().Spawn(Monitor());
}

Task<void> OsmwMn::Handle(MnLane&, const RpcRequest&, RpcReply& reply) {
  // Nothing is served by RPC: allocation and free are chains.
  reply.code = static_cast<uint32_t>(Code::kUnsupported);
  co_return;
}

uint64_t OsmwMn::chunks_in_use() const {
  if (!md_) return 0;
  uint64_t n = 0;
  for (uint32_t i = 0; i < md_->layout().entries; ++i) {
    n += node_->memory().LoadU64(md_->owner_addr(i)) != kNoOwner;
  }
  return n;
}

// ---- Pairs ----

Task<std::unique_ptr<FreeChain>> OsmwMn::NewFreeChain(FreeQps cn) {
  co_await ChargeQpSetup();
  FreeChainConfig fc;
  fc.max_instances = instances_;
  fc.lanes = lanes_;
  fc.recycle = true;
  auto chain = co_await FreeChain::Create(deployment_.cluster, md_.get(), fc);
  deployment_.cluster->Connect(cn.request, chain->free_qp());
  deployment_.cluster->Connect(cn.reply, chain->reply_qp());
  co_await chain->Arm(instances_);
  co_return chain;
}

Task<std::unique_ptr<AllocChain>> OsmwMn::NewAllocChain(uint32_t cn, uint32_t free_qpn,
                                                        fabric::Qp* cn_qp) {
  co_await ChargeQpSetup();
  AllocChainConfig ac;
  ac.free_qpn = free_qpn;
  ac.owner_id = OwnerIdOfCn(cn);
  ac.max_instances = instances_;
  ac.lanes = lanes_;
  ac.recycle = true;
  auto chain = co_await AllocChain::Create(deployment_.cluster, md_.get(), ac);
  deployment_.cluster->Connect(cn_qp, chain->alloc_qp());
  co_await chain->Arm(instances_);
  co_return chain;
}

Task<uint32_t> OsmwMn::OpenPair(uint32_t cn, fabric::Qp* cn_alloc_qp, FreeQps cn_free) {
  auto p = std::make_unique<Pair>();
  p->cn = cn;
  if (const auto it = closed_.find(cn); it != closed_.end()) {
    // No chains: the CN's QPs stay unconnected and RenewAlloc/RenewFree say why.
    p->stopped_why = it->second;
    p->stopped_code = Code::kLaneBroken;
  } else {
    p->free = co_await NewFreeChain(cn_free);
    p->free_peer = cn_free.request;
    if (cut(cn)) {
      p->stopped_why = "onesided_mw: CN " + std::to_string(cn) + " is over its budget";
    } else {
      p->alloc = co_await NewAllocChain(cn, p->free->free_qp()->qp_num(), cn_alloc_qp);
      p->alloc_peer = cn_alloc_qp;
    }
  }
  pairs_.push_back(std::move(p));
  co_return static_cast<uint32_t>(pairs_.size() - 1);
}

void OsmwMn::RegisterNotice(uint32_t cn, fabric::Qp* cn_qp, uint64_t addr, uint32_t rkey) {
  fabric::QpInitAttr a;
  a.pd = pd_;
  a.send_cq = notice_cq_;
  a.recv_cq = notice_cq_;
  a.max_send_wr = 64;
  a.access = 0;
  fabric::Qp* qp = node_->CreateQp(a);
  deployment_.cluster->Connect(cn_qp, qp);
  notices_[cn] = {qp, addr, rkey};
  if (empty_) {
    const Notice& n = notices_[cn];
    SendWr w;
    w.opcode = Opcode::kWrite;
    w.flags = 0;
    w.remote_addr = n.addr;
    w.rkey = n.rkey;
    w.sg_list = {{notice_src_ + 8, 8, notice_src_mr_->lkey()}};
    (void)n.qp->PostSend(w);
  }
}

// "Tells the CNs" ([OSMW] §4.3): one RDMA WRITE of the notice word per CN.
void OsmwMn::NotifyAll(uint64_t notice) {
  for (auto& [cn, n] : notices_) {
    if (n.qp->state() != QpState::kRts) continue;  // a crashed CN's
    SendWr w;
    w.opcode = Opcode::kWrite;
    w.flags = 0;
    w.remote_addr = n.addr;
    w.rkey = n.rkey;
    w.sg_list = {{notice_src_ + (notice == kNoticeEmpty ? 8 : 0), 8, notice_src_mr_->lkey()}};
    (void)n.qp->PostSend(w);
  }
}

// ---- Repair ----

Task<fabric::WorkCompletion> OsmwMn::ReclaimExec(SendWr wr) {
  co_await PostCost();
  wr.flags |= fabric::kSignaled;
  if (reclaim_qp_->PostSend(wr) != 0) {
    throw std::runtime_error("onesided_mw: cannot post on the MN's reclaim QP");
  }
  co_return co_await reclaim_cq_->Next();
}

Task<bool> OsmwMn::TryInvalidate(fabric::Mw* mw) {
  SendWr inv;
  inv.opcode = Opcode::kLocalInv;
  inv.invalidate_rkey = mw->rkey();
  const fabric::WorkCompletion wc = co_await ReclaimExec(inv);
  if (wc.status == WcStatus::kSuccess) co_return true;
  // Not bound: the failed WR moved the QP to ERR; reset and reconnect it.
  co_await ChargeQpSetup();
  reclaim_qp_->Modify(QpState::kReset);
  deployment_.cluster->Connect(reclaim_qp_, reclaim_qp_);
  fabric::WorkCompletion drop[16];
  while (reclaim_cq_->Poll(drop) > 0) {
  }
  co_return false;
}

Task<void> OsmwMn::ReclaimEntry(uint32_t i) {
  for (uint32_t k = 0; k < g_; ++k) (void)co_await TryInvalidate(md_->mw(i, k));
  co_await BookkeepingCost();
  node_->memory().StoreU64(md_->owner_addr(i), kNoOwner);
  (void)co_await ring_->Enqueue(md_->entry_addr(i));
  ++st_.entries_reclaimed;
}

// The chain leaves the pair before its teardown suspends: a CN's liveness
// check (AllocRunning) meanwhile finds no chain, not one half destroyed.
Task<bool> OsmwMn::RetireAlloc(Pair& p) {
  const bool empty = co_await RepairAlloc(p);
  const std::unique_ptr<AllocChain> dead = std::move(p.alloc);
  co_await dead->Destroy();
  co_return empty;
}

Task<void> OsmwMn::DropFree(Pair& p) {
  if (!p.free) co_return;
  co_await p.free->Quiesce(&runtime());
  (void)co_await RepairFree(*p.free, p);
  p.frees_before += p.free->frees_done();
  const std::unique_ptr<FreeChain> dead = std::move(p.free);  // as RetireAlloc
  co_await dead->Destroy(&runtime());
}

Task<void> OsmwMn::StopChains(uint32_t cn, bool frees_too) {
  for (auto& p : pairs_) {
    if (p->cn != cn) continue;
    if (p->alloc) co_await p->alloc->Quiesce(&runtime());
    if (frees_too && p->free) co_await p->free->Quiesce(&runtime());
  }
}

Task<bool> OsmwMn::ChargeRenewal(uint32_t cn) {
  if (++renewals_[cn] <= max_renewals_) co_return true;
  const std::string why = "onesided_mw: CN " + std::to_string(cn) + " caused more than " +
                          std::to_string(max_renewals_) +
                          " chain renewals (refused frees, faulted allocation requests, "
                          "claims on a queue it was told is empty: "
                          "max_renewals); the MN closed its management pairs, so its "
                          "allocations and frees fail from now on";
  closed_[cn] = why;
  ++st_.cns_closed;
  co_await StopChains(cn, true);
  for (auto& q : pairs_) {
    if (q->cn != cn) continue;
    if (q->alloc) (void)co_await RetireAlloc(*q);
    co_await DropFree(*q);
    q->stopped_why = why;
    q->stopped_code = Code::kLaneBroken;
  }
  co_return false;
}

Task<bool> OsmwMn::RepairAlloc(Pair& p) {
  AllocChain& c = *p.alloc;
  co_await c.Quiesce(&runtime());
  const uint64_t taken = c.requests_taken();
  p.allocs_before += std::max(taken, c.claims_started());
  p.sent.clear();
  bool was_empty = false;
  for (uint32_t w = 0; w < c.lanes(); ++w) was_empty |= co_await RepairLane(p, w);
  co_return was_empty;
}

// Each lane's L runs its requests in order, so only the one it stopped in
// can be partial (with honest counts: its last request's; with wrong ones,
// any). The ones before it went all the way, but their replies may never
// have reached the CN: every request still in the lane's slots is read.
// True when one found the queue empty.
Task<bool> OsmwMn::RepairLane(Pair& p, uint32_t w) {
  const AllocChain& c = *p.alloc;
  bool empty = false;
  int64_t m = c.LastStarted(w);
  for (uint32_t n = 0; m >= 0 && n < c.lane_instances(); ++n, m -= c.lanes()) {
    empty |= co_await RepairRequest(p, static_cast<uint64_t>(m));
  }
  co_return empty;
}

// Request m of the stopped chain. Its grant went out (A started the reply):
// it is the CN's whatever became of the reply, so the entry keeps its owner
// (written here if the chain stopped before L7) and goes to p.sent for the
// CN's renewal to settle. It did not: whatever it took out of the queue
// goes back, since no one else can know of it.
Task<bool> OsmwMn::RepairRequest(Pair& p, uint64_t m) {
  const AllocChain::Progress pr = p.alloc->Inspect(m);
  co_await BookkeepingCost();
  if (pr.steps == 0) co_return false;
  const int64_t i = pr.steps >= 4 && pr.entry != 0 ? md_->EntryOf(pr.entry) : -1;
  const uint64_t owner = OwnerIdOfCn(p.cn);
  if (pr.replied) {
    if (i < 0) co_return false;  // binds that succeeded without L6: only a CN's wrong values
    const uint64_t at = md_->owner_addr(static_cast<uint32_t>(i));
    if (pr.steps < 7 && node_->memory().LoadU64(at) == kNoOwner) {
      node_->memory().StoreU64(at, owner);  // L7 never ran
    }
    if (node_->memory().LoadU64(at) == owner)
      p.sent.push_back(GrantOf(m, static_cast<uint32_t>(i)));
    co_return false;
  }
  if (pr.steps >= 4 && pr.entry == 0) {
    // The claim found the element empty: the queue ran dry. It granted
    // nothing: the budget counts it no more (claims_started did).
    ring_->AddDeadPosition(pr.element);
    ++p.frees_before;
    co_return true;
  }
  if (pr.steps >= 5) {
    // The entry left the queue (L5 zeroed its element) but no reply named
    // it: take it back (windows the binds made, owner_id, the queue).
    if (i >= 0) {
      co_await ReclaimEntry(static_cast<uint32_t>(i));
      ++p.frees_before;  // claimed, and given back: the budget counts it no more
    }
    co_return false;
  }
  // Claimed but neither read nor zeroed: whatever the element holds (or an
  // enqueue puts there) is moved to the tail by the sweep. Nothing granted.
  ring_->AddDeadPosition(pr.element);
  ++p.frees_before;
  co_return false;
}

AllocGrant OsmwMn::GrantOf(uint64_t seq, uint32_t i) const {
  AllocGrant g;
  g.seq = static_cast<uint32_t>(seq);
  g.handle = md_->entry_addr(i);
  g.base = md_->chunk_addr(i);
  // What the binds installed: the windows' current rkeys (the reply's next_rkey).
  for (uint32_t k = 0; k < g_; ++k) g.rkeys.push_back(md_->mw(i, k)->rkey());
  return g;
}

std::vector<uint64_t> OsmwMn::SettleAlloc(Pair& p, AllocSettle* settle) {
  std::vector<uint64_t> handles;
  for (AllocGrant& g : p.sent) {
    if (!settle || g.seq < settle->accepted) continue;
    handles.push_back(g.handle);
    ++st_.grants_salvaged;
    settle->salvaged.push_back(std::move(g));
  }
  p.sent.clear();
  return handles;
}

Task<bool> OsmwMn::AllocRunning(uint32_t pair, const fabric::Qp* cn_qp) {
  co_await BookkeepingCost();
  const Pair& p = *pairs_.at(pair);
  ++st_.liveness_checks;
  const bool running = p.alloc && p.alloc_peer == cn_qp && !p.alloc->Faulted();
  st_.slow_replies += running;
  co_return running;
}

Task<bool> OsmwMn::FreeRunning(uint32_t pair, const fabric::Qp* cn_qp) {
  co_await BookkeepingCost();
  const Pair& p = *pairs_.at(pair);
  ++st_.liveness_checks;
  const bool running = p.free && p.free_peer == cn_qp && !p.free->Faulted();
  st_.slow_replies += running;
  co_return running;
}

// Pair p's allocation chain found the queue empty: every CN is told once per
// episode, and the watcher sweeps until memory is back.
void OsmwMn::NoteEmptyQueue(Pair& p) {
  ++st_.empty_faults;
  if (!empty_) {
    empty_ = true;
    ++empty_episodes_;
    NotifyAll(kNoticeEmpty);
  }
  p.empty_fault_episode = empty_episodes_;
  if (!watcher_running_) {
    watcher_running_ = true;
    runtime().Spawn(EmptyWatcher());
  }
}

Task<Status> OsmwMn::RenewAlloc(uint32_t pair, fabric::Qp* cn_alloc_qp, AllocSettle* settle) {
  Pair& p = *pairs_.at(pair);
  co_await repair_.Lock();
  if (!p.alloc) {
    (void)SettleAlloc(p, settle);  // what the MN's own stop of the chain left
    repair_.Unlock();
    co_return Status(p.stopped_code, p.stopped_why);
  }
  const bool was_empty = co_await RetireAlloc(p);
  (void)SettleAlloc(p, settle);
  ++st_.alloc_renewals;
  // An empty queue is the protocol's out-of-memory path, not the CN's fault,
  // once per pair while it stays empty: the MN tells every CN at once (the
  // notice lands long before this renewal's new chain is armed and it
  // returns), and an honest CN asks the MN from then on (Probe) instead of
  // claiming. A pair that claims again before the queue reopens ignored the
  // notice, and each of its faults costs the MN CPU a chain rebuild: those
  // count as renewals (max_renewals closes the CN).
  const bool repeat_empty = was_empty && empty_ && p.empty_fault_episode == empty_episodes_;
  if (was_empty) NoteEmptyQueue(p);
  if ((!was_empty || repeat_empty) && !co_await ChargeRenewal(p.cn)) {
    repair_.Unlock();
    co_return Status(p.stopped_code, p.stopped_why);
  }
  p.alloc = co_await NewAllocChain(p.cn, p.free->free_qp()->qp_num(), cn_alloc_qp);
  p.alloc_peer = cn_alloc_qp;
  repair_.Unlock();
  if (was_empty) {
    co_return Status(Code::kOutOfMemory,
                     "onesided_mw: the free-MW queue is empty (the allocation chain found a "
                     "zeroed element); the MN tells every CN when memory is back");
  }
  co_return Status(Code::kLaneBroken,
                   "onesided_mw: the allocation chain faulted or was stopped (bad access QP "
                   "number or reply buffer, or a reply later than the CN waited); the MN rebuilt "
                   "it and settled every request in flight");
}

Task<void> OsmwMn::RebindMw0(uint32_t i, uint32_t free_qpn) {
  fabric::Mw* mw = md_->mw(i, 0);
  if (!co_await TryInvalidate(mw)) co_return;
  SendWr b;
  b.opcode = Opcode::kBindMw;
  b.bind_mw_rkey = mw->rkey();
  b.bind_new_rkey = mw->rkey();  // the MWTable keeps naming it
  b.bind_mr_lkey = pool_mr_->lkey();
  b.bind_addr = md_->chunk_addr(i);
  b.bind_length = chunk_bytes_;
  b.bind_access = md_->config().mw_access;
  b.bind_qpn = free_qpn;
  const fabric::WorkCompletion wc = co_await ReclaimExec(b);
  if (wc.status != WcStatus::kSuccess) {
    throw std::runtime_error("onesided_mw: rebinding MW 0 of entry " + std::to_string(i) +
                             " failed: " + std::string(fabric::WcStatusName(wc.status)));
  }
}

// Each lane's last request is the only one of the lane that can be partial;
// the ones before it went all the way (L5 queued their entry), but their
// replies may never have reached the CN. Returns the entries of the
// requests that freed and whose reply the CN did not take (all, without a
// settlement).
Task<std::vector<uint64_t>> OsmwMn::RepairFree(FreeChain& f, Pair& p, FreeSettle* settle) {
  std::vector<uint64_t> freed;
  for (uint32_t w = 0; w < f.lanes(); ++w) {
    int64_t m = f.LastStarted(w);
    for (uint32_t n = 0; m >= 0 && n < f.lane_instances(); ++n, m -= f.lanes()) {
      const FreeChain::Progress pr = f.InspectRequest(static_cast<uint64_t>(m));
      const bool done = n == 0 ? co_await RepairFreeLane(pr, p) : pr.steps >= 2;
      if (!done || (settle && static_cast<uint64_t>(m) < settle->confirmed)) continue;
      freed.push_back(pr.named);
      if (settle) {
        settle->freed.push_back(static_cast<uint64_t>(m));
        ++st_.frees_settled;
      }
    }
  }
  co_return freed;
}

// A free the MN stopped (a crashed CN, a refused request on its chain, a
// renewal) after L2 cleared the entry's owner but before L5 queued it would
// lose the entry: neither owned nor queued. Finish it: write it into the
// tail element L3 claimed, or enqueue it. Checked against the MWTable and the
// ring, so a step a CN's wrong values ran (or a repeated repair) queues
// nothing twice. One stopped after its owner check (F.inv0 invalidated MW 0)
// but before L2 is finished too: MW 0 is gone, so the CN could not free the
// entry again. True when the request freed its entry.
Task<bool> OsmwMn::RepairFreeLane(const FreeChain::Progress& pr, const Pair& p) {
  co_await BookkeepingCost();
  if (pr.steps < 2) {
    if (pr.steps == 0 || !pr.owner_checked) co_return false;
    co_return co_await FinishCheckedFree(pr.named, p);
  }
  if (pr.steps >= 5) co_return true;
  const int64_t i = md_->EntryOf(pr.handle);
  if (i < 0 || node_->memory().LoadU64(md_->owner_addr(static_cast<uint32_t>(i))) != kNoOwner) {
    co_return false;  // L2 faulted (the owner was never cleared) or not an entry
  }
  if (Queued(pr.handle)) co_return true;
  if (pr.steps >= 3 && ring_->LoadElementAt(pr.element) == 0) {
    co_await ring_->Fill(pr.element, pr.handle);
  } else {
    (void)co_await ring_->Enqueue(pr.handle);
  }
  ++st_.frees_finished;
  co_return true;
}

Task<bool> OsmwMn::FinishCheckedFree(uint64_t handle, const Pair& p) {
  const int64_t i = md_->EntryOf(handle);
  if (i < 0 || Queued(handle) ||
      node_->memory().LoadU64(md_->owner_addr(static_cast<uint32_t>(i))) != OwnerIdOfCn(p.cn)) {
    co_return false;
  }
  co_await ReclaimEntry(static_cast<uint32_t>(i));  // every window, owner_id, the queue
  ++st_.frees_finished;
  co_return true;
}

bool OsmwMn::Queued(uint64_t handle) const {
  for (uint32_t s = 0; s < md_->layout().ring_slots; ++s) {
    if (md_->LoadElement(s) == handle) return true;
  }
  return false;
}

Task<Status> OsmwMn::RenewFree(uint32_t pair, FreeQps cn_free, fabric::Qp* cn_alloc_qp,
                               std::vector<uint64_t> held, AllocSettle* alloc_settle,
                               FreeSettle* free_settle) {
  Pair& p = *pairs_.at(pair);
  co_await repair_.Lock();
  if (!p.free || !co_await ChargeRenewal(p.cn)) {
    (void)SettleAlloc(p, alloc_settle);
    repair_.Unlock();
    co_return Status(Code::kLaneBroken, p.stopped_why);
  }
  // The old chain is destroyed once MW 0 has moved off its Free QP (rxe
  // holds a QP while windows are bound to it).
  std::unique_ptr<FreeChain> old = std::move(p.free);
  co_await old->Quiesce(&runtime());
  const std::vector<uint64_t> freed = co_await RepairFree(*old, p, free_settle);
  p.frees_before += old->frees_done();
  ++st_.free_renewals;
  p.free = co_await NewFreeChain(cn_free);
  p.free_peer = cn_free.request;
  const uint32_t new_f = p.free->free_qp()->qp_num();
  // The allocation chain's BIND of MW 0 names the old Free QP (fixed when
  // posted): it is rebuilt too.
  if (p.alloc) {
    (void)co_await RetireAlloc(p);
    p.alloc = co_await NewAllocChain(p.cn, new_f, cn_alloc_qp);
    p.alloc_peer = cn_alloc_qp;
  }
  // MW 0 of what the CN still holds through this pair moves to the new Free
  // QP: what it named, and the grants it learns of now; not what the old
  // chain freed (the CN's frees in flight: the entry may be someone else's
  // by now). The owner check keeps a CN to its own entries.
  // `held` counts a handle once per hold (a free in flight still holds it;
  // the entry may have come back to the CN meanwhile): drop one per free
  // the old chain did.
  for (uint64_t h : freed) {
    if (auto it = std::ranges::find(held, h); it != held.end()) held.erase(it);
  }
  const std::vector<uint64_t> salvaged = SettleAlloc(p, alloc_settle);
  held.insert(held.end(), salvaged.begin(), salvaged.end());
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  for (uint64_t h : held) {
    co_await BookkeepingCost();
    const int64_t i = md_->EntryOf(h);
    if (i < 0 ||
        node_->memory().LoadU64(md_->owner_addr(static_cast<uint32_t>(i))) != OwnerIdOfCn(p.cn)) {
      continue;
    }
    co_await RebindMw0(static_cast<uint32_t>(i), new_f);
  }
  co_await old->Destroy(&runtime());
  repair_.Unlock();
  co_return Status::Ok();
}

Task<void> OsmwMn::SweepAndMaybeReopen() {
  // An element moved to the tail may land in another dead position (the
  // lanes of several chains claimed past the tail together): sweep until
  // nothing moves.
  for (uint64_t moved = 1; moved > 0;) {
    moved = co_await ring_->Sweep();
    st_.elements_moved += moved;
  }
  if (empty_ && ring_->HeadHasElement()) {
    empty_ = false;
    NotifyAll(kNoticeOk);
  }
}

Task<Status> OsmwMn::Probe() {
  co_await repair_.Lock();
  co_await BookkeepingCost();
  co_await SweepAndMaybeReopen();
  const bool empty = empty_;
  repair_.Unlock();
  if (empty) co_return Status(Code::kOutOfMemory, "onesided_mw: the free-MW queue is empty");
  co_return Status::Ok();
}

// "Watches the tail and tells them when memory is back" ([OSMW] §4.3).
Task<void> OsmwMn::EmptyWatcher() {
  while (empty_) {
    co_await runtime().SleepFor(empty_watch_);
    co_await repair_.Lock();
    co_await SweepAndMaybeReopen();
    repair_.Unlock();
  }
  watcher_running_ = false;
}

uint64_t OsmwMn::Charged(uint32_t cn) const {
  uint64_t allocs = 0, frees = 0;
  for (const auto& p : pairs_) {
    if (p->cn != cn) continue;
    allocs += p->allocs_before;
    if (p->alloc) allocs += std::max(p->alloc->requests_taken(), p->alloc->claims_started());
    frees += p->frees_before + (p->free ? p->free->frees_done() : 0);
  }
  return (allocs > frees ? allocs - frees : 0) + renewals(cn);
}

// The DoS monitor ([OSMW] §4.4): reads each CN's management-QP counters.
Task<void> OsmwMn::Monitor() {
  for (;;) {
    co_await runtime().SleepFor(monitor_period_);
    ++st_.monitor_scans;
    co_await repair_.Lock();
    for (auto& [cn, n] : notices_) {
      co_await BookkeepingCost();
      if (cut(cn) || Charged(cn) <= budget_) continue;
      cut_[cn] = true;
      ++st_.cns_cut;
      co_await StopChains(cn, false);
      for (auto& p : pairs_) {
        if (p->cn != cn || !p->alloc) continue;
        (void)co_await RetireAlloc(*p);
        p->stopped_why = "onesided_mw: CN " + std::to_string(cn) +
                         " held more than its budget of " + std::to_string(budget_) +
                         " chunks (chain renewals it caused count as chunks); the MN stopped "
                         "its allocation chains (frees still work)";
      }
    }
    repair_.Unlock();
  }
}

Task<ReclaimReport> OsmwMn::ReclaimCn(uint32_t cn) {
  co_await repair_.Lock();
  co_await StopChains(cn, true);
  for (auto& p : pairs_) {
    if (p->cn != cn) continue;
    if (p->alloc) (void)co_await RetireAlloc(*p);
    co_await DropFree(*p);
    p->stopped_why = "onesided_mw: CN " + std::to_string(cn) + " was declared crashed";
  }
  if (auto it = notices_.find(cn); it != notices_.end()) it->second.qp->Modify(QpState::kErr);
  ReclaimReport rep;
  const uint64_t owner = OwnerIdOfCn(cn);
  for (uint32_t i = 0; i < md_->layout().entries; ++i) {
    co_await BookkeepingCost();
    if (node_->memory().LoadU64(md_->owner_addr(i)) != owner) continue;
    co_await ReclaimEntry(i);
    ++rep.chunks_reclaimed;
  }
  co_await SweepAndMaybeReopen();
  repair_.Unlock();
  co_return rep;
}

// ============================== CN side ==============================

namespace {

Capabilities OsmwCaps(const Knobs& k) {
  Capabilities c;
  c.granularity_bytes = k.Size("granularity");
  c.isolation = Isolation::kChunkQp;
  c.mn_cpu_on_alloc = false;
  c.mn_cpu_on_access = false;
  c.max_group_lanes = static_cast<int>(k.Int("group_size")) - 1;
  c.control_on_lane0 = false;  // the pair's Alloc and Free QPs
  return c;
}

}  // namespace

OsmwCn::OsmwCn(const Deployment& d, uint32_t cn_index, MnControl* mn, const Knobs& k)
    : CnBase(d, cn_index, mn, OsmwCaps(k)),
      g_(static_cast<uint32_t>(k.Int("group_size"))),
      sep_(k.Bool("sep")),
      alloc_qps_(static_cast<uint32_t>(k.Int("alloc_qps"))),
      instances_(static_cast<uint32_t>(k.Int("chain_instances"))),
      lanes_(AllocLanes(k)),
      timeout_(static_cast<Ps>(k.Int("reply_timeout_us")) * kPsPerUs),
      probe_(k.Bool("probe_on_timeout")) {}

OsmwMn& OsmwCn::Mn() {
  auto* mn = dynamic_cast<OsmwMn*>(mn_);
  if (!mn) {
    throw ConfigError(
        "onesided_mw: the chains need a ConnectX-class RNIC (cross_channel) and the MN in "
        "this process; a remote MN daemon is not supported yet");
  }
  return *mn;
}

uint64_t OsmwCn::notice() const {
  return notice_addr_ ? node_->memory().LoadU64(notice_addr_) : kNoticeOk;
}

Task<void> OsmwCn::EnsureNotice() {
  if (notice_addr_) co_return;
  notice_addr_ = node_->memory().Alloc(64, 64);
  node_->memory().StoreU64(notice_addr_, kNoticeOk);
  notice_mr_ =
      co_await node_->RegMr(pd_, notice_addr_, 64, fabric::kLocalWrite | fabric::kRemoteWrite);
  fabric::QpInitAttr a;
  a.pd = pd_;
  a.send_cq = a.recv_cq = node_->CreateCq(16, /*ignore_overrun=*/true);
  a.max_send_wr = 1;
  a.access = fabric::kRemoteWrite;
  fabric::Qp* qp = node_->CreateQp(a);
  co_await node_->cpu().Work(node_->Cost("verbs.qp_modify"), 3);
  co_await mn_->ChargeQpSetup();
  Mn().RegisterNotice(cn_index_, qp, notice_addr_, notice_mr_->rkey());
}

// A client whose reply is late asks the MN whether the chain it is
// connected to faulted (probe_on_timeout): a slow chain is not renewed.
std::shared_ptr<AllocClient> OsmwCn::NewAllocClient(Pair& p) {
  auto c = std::make_shared<AllocClient>(node_, pd_, &deployment_.cluster->runtime(), p.mr,
                                         p.alloc_buf, g_, instances_, lanes_);
  if (probe_) {
    OsmwMn* mn = &Mn();
    c->set_liveness([mn, pp = &p, qp = c->qp()] { return mn->AllocRunning(pp->id, qp); });
  }
  return c;
}

std::shared_ptr<FreeClient> OsmwCn::NewFreeClient(Pair& p) {
  auto c = std::make_shared<FreeClient>(node_, pd_, &deployment_.cluster->runtime(), p.mr,
                                        p.free_buf, /*send_cq=*/nullptr, instances_, g_, lanes_);
  if (probe_) {
    OsmwMn* mn = &Mn();
    c->set_liveness([mn, pp = &p, qp = c->qp()] { return mn->FreeRunning(pp->id, qp); });
  }
  return c;
}

Task<OsmwCn::Pair*> OsmwCn::NewPair() {
  auto p = std::make_unique<Pair>();
  const uint64_t abytes = AllocClient::BufferBytes(g_, lanes_);
  const uint64_t bytes = abytes + FreeClient::BufferBytes(lanes_);
  const uint64_t base = node_->memory().Alloc(bytes, 4096);
  p->mr = co_await node_->RegMr(pd_, base, bytes, fabric::kLocalWrite | fabric::kRemoteWrite);
  p->alloc_buf = base;
  p->free_buf = base + abytes;
  p->alloc = NewAllocClient(*p);
  p->free = NewFreeClient(*p);
  co_await node_->cpu().Work(node_->Cost("verbs.qp_modify"), 6);
  p->id = co_await Mn().OpenPair(cn_index_, p->alloc->qp(), p->free->qps());
  pairs_.push_back(std::move(p));
  co_return pairs_.back().get();
}

Task<AccessGroup*> OsmwCn::OpenGroup(int lanes, uint64_t buffer_bytes) {
  AccessGroup* g = co_await CnBase::OpenGroup(lanes, buffer_bytes);
  // Threads open their groups concurrently: one at a time past this point,
  // so the CN's shared pairs are created once.
  co_await setup_lock_.Lock();
  co_await EnsureNotice();
  if (!sep_) {
    group_pair_[g] = co_await NewPair();  // every group carries its own chains
  } else {
    while (pairs_.size() < alloc_qps_) (void)co_await NewPair();
    group_pair_[g] = pairs_[next_group_++ % pairs_.size()].get();
  }
  setup_lock_.Unlock();
  co_return g;
}

OsmwCn::Pair& OsmwCn::PairFor(const AccessGroup& g) { return *group_pair_.at(&g); }

Task<Result<Chunk>> OsmwCn::Alloc(AccessGroup& g) {
  Pair& p = PairFor(g);
  std::vector<uint32_t> qpns;
  for (uint32_t k = 1; k < g_; ++k) qpns.push_back(g.lane((k - 1) % g.size()).mn_qpn);
  // Allocations overlap on the pair's Alloc QP (up to alloc_lanes in flight).
  // One that fails on a client another allocation already had renewed
  // retries once on the new one.
  for (int attempt = 0;; ++attempt) {
    Result<Chunk> r;
    // A renewal under way may find the queue empty (and tell this CN before
    // it returns) or close the pair: look after it.
    while (p.renewing) co_await p.renewed.Wait();
    if (!p.closed_why.empty()) {
      r.status = Status(Code::kLaneBroken, p.closed_why);
      co_return r;
    }
    if (notice() == kNoticeEmpty) {
      // The MN said the queue ran dry: ask before spending a chain on it
      // (claiming again before it reopens counts as a renewal the CN caused:
      // OsmwMn::RenewAlloc).
      r.status = co_await Mn().Probe();
      if (!r.ok()) co_return r;
    }
    while (p.renewing) co_await p.renewed.Wait();
    std::shared_ptr<AllocClient> client = p.alloc;
    uint32_t seq = AllocClient::kNoSeq;
    Result<AllocGrant> grant = co_await client->Allocate(qpns, timeout_, &seq);
    if (grant.ok()) co_return GrantedChunk(g, p, grant.value);
    co_await p.alloc_lock.Lock();
    // Whoever comes first renews (the chain faulted, or is stopped).
    const bool renewer = client == p.alloc;
    if (renewer) r.status = co_await RenewAllocChain(p);
    p.alloc_lock.Unlock();
    // The renewal settled this request: the chain had sent its grant (held
    // since the renewal returned).
    if (auto salvaged = client->TakeSalvaged(seq)) co_return ChunkOf(g, *salvaged);
    if (renewer) co_return r;
    // The renewal's verdict holds for every allocation it took down: an
    // empty queue is one for all; a bad request was someone else's.
    if (attempt > 0 || p.renewal.code() == Code::kOutOfMemory) {
      r.status = p.renewal.code() == Code::kOutOfMemory ? p.renewal : grant.status;
      co_return r;
    }
  }
}

// Under alloc_lock. The old client is stopped first (its QP to ERR: no reply
// arrives on it any more, and the allocations in flight return), so what it
// took is final; the MN rebuilds the chain for a fresh client and hands back
// the grants it had sent beyond that, which go to their allocations.
Task<Status> OsmwCn::RenewAllocChain(Pair& p) {
  p.renewing = true;
  const std::shared_ptr<AllocClient> old = p.alloc;
  AllocSettle settle;
  settle.accepted = co_await old->Stop();
  const std::shared_ptr<AllocClient> fresh = NewAllocClient(p);
  co_await node_->cpu().Work(node_->Cost("verbs.qp_modify"), 3);
  const Status st = co_await Mn().RenewAlloc(p.id, fresh->qp(), &settle);
  Salvage(p, *old, std::move(settle.salvaged));
  p.alloc = fresh;
  p.renewal = st;
  if (Mn().closed(cn_index_)) p.closed_why = st.message();
  EndRenewal(p);
  co_return st;
}

void OsmwCn::EndRenewal(Pair& p) {
  p.renewing = false;
  p.renewed.NotifyAll();
}

// Salvaged grants are held from the moment the renewal returns, before
// their allocations resume: a free chain renewal meanwhile moves their MW 0.
void OsmwCn::Salvage(Pair& p, AllocClient& old, std::vector<AllocGrant> grants) {
  for (const AllocGrant& a : grants) pair_of_handle_[a.handle].push_back(&p);
  old.Salvage(std::move(grants));
}

Result<Chunk> OsmwCn::ChunkOf(AccessGroup& g, const AllocGrant& a) const {
  Result<Chunk> r;
  r.value.addr = a.base;
  r.value.bytes = caps_.granularity_bytes;
  r.value.id = a.handle;
  for (size_t i = 0; i < g.size(); ++i) r.value.rkeys.push_back(a.rkeys.at(1 + i % (g_ - 1)));
  return r;
}

Result<Chunk> OsmwCn::GrantedChunk(AccessGroup& g, Pair& p, const AllocGrant& a) {
  pair_of_handle_[a.handle].push_back(&p);
  return ChunkOf(g, a);
}

Task<Status> OsmwCn::Free(AccessGroup& g, const Chunk& c) {
  auto it = pair_of_handle_.find(c.id);
  // A handle this CN was not granted still goes to the chain, which refuses it.
  Pair& p = it != pair_of_handle_.end() ? *it->second.front() : PairFor(g);
  auto release = [this, &c, &p] {
    auto held = pair_of_handle_.find(c.id);
    if (held == pair_of_handle_.end()) return;
    std::vector<Pair*>& holds = held->second;
    if (auto at = std::find(holds.begin(), holds.end(), &p); at != holds.end()) holds.erase(at);
    if (holds.empty()) pair_of_handle_.erase(held);
  };
  // Frees overlap on the pair's Free QP (up to alloc_lanes in flight). A
  // refused free kills the chain; the frees behind it were flushed and are
  // settled by the renewal: done on the MN, or retried once on the new chain.
  for (int attempt = 0;; ++attempt) {
    if (!p.closed_why.empty()) co_return Status(Code::kLaneBroken, p.closed_why);
    while (p.renewing) co_await p.renewed.Wait();
    std::shared_ptr<FreeClient> client = p.free;
    uint64_t seq = FreeClient::kNoSeq;
    const Status st = co_await client->Free(c.id, timeout_, &seq);
    if (st.ok()) {
      release();
      co_return st;
    }
    // Whoever comes first renews the chain; the refused free (kNotOwner: no
    // reply, the chain faulted) reports it, the frees flushed behind it retry once.
    co_await p.free_lock.Lock();
    Status renewed;
    if (client == p.free) renewed = co_await RenewFreeChain(p);
    p.free_lock.Unlock();
    if (client->TakeSettled(seq)) {
      release();  // the MN freed it: only its reply was lost
      co_return Status::Ok();
    }
    if (!renewed.ok()) {
      co_return Status(Code::kLaneBroken, "onesided_mw: the MN's free chain refused a free, and: " +
                                              renewed.message());
    }
    if (st.code() == Code::kNotOwner) {
      co_return Status(Code::kNotOwner,
                       "onesided_mw: the MN's free chain refused chunk " + std::to_string(c.id) +
                           " (MW 0 is not bound to this CN's Free QP: not the owner, a forged "
                           "handle or a double free); nothing changed");
    }
    if (attempt > 0) co_return st;
  }
}

// After a refused free: both old clients stopped (what they took is final),
// fresh ones, and the MN rebuilds both chains, settles the requests in
// flight on them and moves MW 0 of what this CN holds through the pair to
// the new Free QP.
Task<Status> OsmwCn::RenewFreeChain(Pair& p) {
  // The MN rebuilds the allocation chain too, for a fresh Alloc client: an
  // allocation renewing it meanwhile would hand the MN the same QP twice
  // (connected twice: RTS -> INIT), so allocations' renewals wait.
  co_await p.alloc_lock.Lock();
  p.renewing = true;
  const std::shared_ptr<AllocClient> old_alloc = p.alloc;
  const std::shared_ptr<FreeClient> old_free = p.free;
  AllocSettle alloc_settle;
  FreeSettle free_settle;
  alloc_settle.accepted = co_await old_alloc->Stop();
  free_settle.confirmed = co_await old_free->Stop();
  const std::shared_ptr<FreeClient> free = NewFreeClient(p);
  const std::shared_ptr<AllocClient> alloc = NewAllocClient(p);
  co_await node_->cpu().Work(node_->Cost("verbs.qp_modify"), 6);
  // Named after the stopped clients' last callers have recorded what they
  // got (they resume before this CPU work ends).
  std::vector<uint64_t> held;
  for (const auto& [h, holds] : pair_of_handle_) {
    for (const Pair* hp : holds) {
      if (hp == &p) held.push_back(h);
    }
  }
  std::sort(held.begin(), held.end());  // in handle order, as the MN has always been told
  const Status renewed = co_await Mn().RenewFree(p.id, free->qps(), alloc->qp(), std::move(held),
                                                 &alloc_settle, &free_settle);
  Salvage(p, *old_alloc, std::move(alloc_settle.salvaged));
  old_free->Settle(free_settle.freed);
  p.free = free;
  p.alloc = alloc;
  if (!renewed.ok()) p.closed_why = renewed.message();
  EndRenewal(p);
  p.alloc_lock.Unlock();
  co_return renewed;
}

// ============================== Registry ==============================

}  // namespace dmb::systems::onesided_mw

namespace dmb::systems {

using onesided_mw::OsmwCn;
using onesided_mw::OsmwMn;

extern const SystemInfo kOneSidedMw;
const SystemInfo kOneSidedMw{
    "onesided_mw",
    "type-2 MW groups handed out and freed by WR chains on the MN's RNIC (OneSidedMW)",
    {{"granularity", KnobKind::kSize, "4KB", "chunk size", 64},
     {"group_size", KnobKind::kInt, "3",
      "MWs per chunk: MW 0 on the Free QP + (group_size-1) access QPs; 2 = no Grouping", 2,
      onesided_mw::FreeChain::kMaxGroupSize},
     {"sep", KnobKind::kBool, "true",
      "Management-Access QP Separation: true = alloc_qps pairs per CN; false = chains on every "
      "access group"},
     {"alloc_qps", KnobKind::kInt, "1", "with sep: Alloc/Free QP pairs per CN (paper: 1)", 1, 64},
     {"chain_instances", KnobKind::kInt, "32",
      "chain instances pre-posted per chain (a power of two; the allocation chain's are split "
      "among its lanes, 4 or more each)",
      4, 256},
     {"alloc_lanes", KnobKind::kInt, "0",
      "requests in flight per Alloc QP and per Free QP: lanes of both chains, each its own "
      "MN-local worker and control QP (and, for the free chain, unbinder) on the MN "
      "(chain_instances / alloc_lanes >= 4); 0 = 8 with sep (the CN's threads share a pair), 1 "
      "without (one thread per pair)",
      0, 64},
     {"reply_timeout_us", KnobKind::kInt, "1000",
      "a CN asks the MN whether its chain faulted after this long without a reply (and "
      "renews it if so; else waits as long again)",
      1, 100000000},
     {"probe_on_timeout", KnobKind::kBool, "true",
      "at the reply deadline ask the MN whether the chain faulted and wait again if it is only "
      "slow; false: renew at once (tests: renewals of slow chains with requests in flight)"},
     {"empty_watch_us", KnobKind::kInt, "100",
      "while the queue is empty the MN CPU sweeps it this often", 1, 100000000},
     {"budget_chunks", KnobKind::kInt, "0",
      "DoS budget: chunks a CN may hold, each chain renewal it caused counting as one (0 = no "
      "monitor)",
      0, int64_t{1} << 40},
     {"max_renewals", KnobKind::kInt, "64",
      "chain renewals a CN may cause (refused frees, faulted allocation requests, a pair's "
      "claims on a queue it was told is empty) before the MN closes its pairs",
      0, int64_t{1} << 40},
     {"monitor_period_us", KnobKind::kInt, "1000", "budget monitor period", 1, 100000000}},
    [](const Deployment& d, const Knobs& k) -> std::unique_ptr<MemoryManager> {
      return std::make_unique<BasicManager<OsmwMn, OsmwCn>>("onesided_mw", d, k);
    },
    {{"nosep", {{"sep", "false"}}}, {"nogroup", {{"group_size", "2"}}}},
    {{"granularity", "64KB"}},
    [](const Knobs&) { return onesided_mw::kNeeds; },
    onesided_mw::OsmwCheckPool};

}  // namespace dmb::systems
