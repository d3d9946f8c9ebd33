// rpc_mw: Patronus-style RPC memory-window management.
//
// The MN registers its pool once as an MR that allows MW binding and keeps a
// pool of pre-allocated MWs. An allocation is an RPC: the MN CPU takes a free
// chunk and a pooled MW and posts the bind on the MN end of the requesting
// lane, before the reply, so the rkey is live when the CN sees it:
//  - mw_type=1: ibv_bind_mw; the window is usable from any QP of the PD.
//  - mw_type=2: a BIND_MW WR whose qpn field names each lane of the group, so
//    only those connections can use it (one window per lane).
// A free is an RPC; the MN unbinds (type-1) or invalidates (type-2) on its
// admin QP and waits for it before the chunk and the window are reused.
//
// Patronus options (off by default):
//  - leases: each chunk gets a lease word (its own window over 8 B); the MN
//    revokes the chunk when the word's expiry (virtual us) has passed or lies
//    more than one lease period ahead (no CN may extend further); the CN
//    extends it one-sidedly by CAS; the MN refuses extension by zeroing it.
//  - delayed_unbind: a free only parks the chunk with its window still bound;
//    with type-1 the next allocation hands the window over by rebinding it
//    (one bind instead of unbind + bind, Patronus "handover"); parked windows
//    are unbound in a batch when free chunks run low.
//  - spare_qps: each lane keeps a pre-connected spare QP that replaces it after
//    an illegal access errors it (Patronus §5.5).
#include <deque>
#include <stdexcept>

#include "systems/common/chunk_table.h"
#include "systems/common/cn_base.h"
#include "systems/common/mn_base.h"
#include "systems/common/wait_list.h"
#include "systems/registry.h"

namespace dmb::systems {
namespace {

using fabric::MwType;
using fabric::Opcode;
using fabric::WcStatus;

// Data windows allow RDMA atomics too: apps commit with CAS (RACE hashing).
constexpr uint32_t kDataAccess = fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;
constexpr uint32_t kLeaseAccess = fabric::kRemoteRead | fabric::kRemoteAtomic;
constexpr uint64_t kLeaseSlotBytes = 32;  // Patronus lease header; expiry in the last 8 B
constexpr uint64_t kUnbindBatch = 32;

uint64_t NowUs(fabric::Runtime& rt) { return static_cast<uint64_t>(rt.now() / kPsPerUs); }

// The MW type the knobs ask for; with leases, the CN extends a lease by CAS.
std::vector<std::string> RpcMwNeeds(bool type1, bool leases) {
  std::vector<std::string> caps = {type1 ? "mw_type1" : "mw_type2"};
  if (leases) caps.push_back("atomics");
  return caps;
}

class RpcMwMn : public MnBase {
 public:
  RpcMwMn(const Deployment& d, const Knobs& k)
      : MnBase(d, k),
        type_(k.Int("mw_type") == 1 ? MwType::kType1 : MwType::kType2),
        leases_(k.Bool("leases")),
        lease_us_(static_cast<uint64_t>(k.Int("lease_us"))),
        delayed_unbind_(k.Bool("delayed_unbind")) {}

  CapsNeed Needs() const override {
    return {type_ == MwType::kType1 ? "rpc_mw with mw_type=1" : "rpc_mw with mw_type=2",
            RpcMwNeeds(type_ == MwType::kType1, leases_)};
  }

  Task<ReclaimReport> ReclaimCn(uint32_t cn) override {
    ReclaimReport r;
    for (uint64_t i : table_.OwnedByCn(cn)) {
      co_await Revoke(i);
      ++r.chunks_reclaimed;
    }
    co_return r;
  }

  uint64_t handovers() const { return handovers_; }
  uint64_t leases_expired() const { return leases_expired_; }

 protected:
  Task<void> Setup() override {
    const uint64_t g = knobs_.Size("granularity");  // fits: SystemInfo::check_pool
    table_.Init(pool_addr_, g, pool_bytes_ / g);
    chunks_.assign(table_.count(), {});
    mr_ = co_await node_->RegMr(pd_, pool_addr_, pool_bytes_,
                                fabric::kLocalWrite | kDataAccess | fabric::kMwBind);
    if (leases_) {
      const uint64_t bytes = table_.count() * kLeaseSlotBytes;
      lease_base_ = node_->memory().Alloc(bytes, 4096);
      lease_mr_ = co_await node_->RegMr(pd_, lease_base_, bytes,
                                        fabric::kLocalWrite | kLeaseAccess | fabric::kMwBind);
      runtime().Spawn(LeaseScanner());
    }
    // Patronus keeps an MW pool because allocating an MW costs ~100x a bind.
    for (uint64_t i = 0; i < table_.count(); ++i) free_mws_.push_back(node_->AllocMw(pd_, type_));
  }

  Task<void> Handle(MnLane& lane, const RpcRequest& req, RpcReply& reply) override {
    co_await BookkeepingCost();
    if (req.op == kRpcAlloc) {
      co_await HandleAlloc(lane, req, reply);
    } else if (req.op == kRpcFree) {
      const uint64_t i = req.arg[0];
      if (!table_.OwnedBy(i, lane.cn_index)) {
        reply.code = static_cast<uint32_t>(Code::kNotOwner);
        co_return;
      }
      if (delayed_unbind_) {
        table_.MarkPending(i);
        parked_.push_back(i);
        if (table_.free_count() < kUnbindBatch || parked_.size() >= 4 * kUnbindBatch) {
          runtime().Spawn(UnbindParked(kUnbindBatch));
        }
      } else {
        // Revoke in the background: the chunk is pending (not reusable) until
        // every window over it is retired; the worker answers right away.
        table_.MarkPending(i);
        runtime().Spawn(Revoke(i));
      }
    } else {
      reply.code = static_cast<uint32_t>(Code::kInvalidArgument);
    }
  }

  uint64_t chunks_total() const override { return table_.count(); }
  uint64_t chunks_in_use() const override { return table_.in_use(); }

 private:
  struct ChunkState {
    std::vector<fabric::Mw*> mws;  // bound windows (one, or one per lane for type-2)
    fabric::Mw* lease_mw = nullptr;
  };

  fabric::Mw* TakeMw() {
    if (free_mws_.empty()) return node_->AllocMw(pd_, type_);
    fabric::Mw* mw = free_mws_.back();
    free_mws_.pop_back();
    return mw;
  }

  // Posts a bind of `mw` over [addr, +len) on `qp` (before the reply);
  // returns the rkey it will have.
  Task<uint32_t> PostBind(fabric::Qp* qp, fabric::Mw* mw, fabric::Mr* mr, uint64_t addr,
                          uint64_t len, uint32_t access, uint32_t target_qpn) {
    const uint32_t rkey = NextRkey(mw->rkey());
    int rc = 0;
    if (type_ == MwType::kType1) {
      rc = qp->BindMw(mw, 0, mr, addr, len, access, rkey, 0);
    } else {
      fabric::SendWr wr;
      wr.opcode = Opcode::kBindMw;
      wr.flags = 0;
      wr.bind_mw_rkey = mw->rkey();
      wr.bind_new_rkey = rkey;
      wr.bind_mr_lkey = mr->lkey();
      wr.bind_addr = addr;
      wr.bind_length = len;
      wr.bind_access = access;
      wr.bind_qpn = target_qpn == qp->qp_num() ? 0 : target_qpn;
      rc = qp->PostSend(wr);
    }
    if (rc != 0) {  // never hand out an rkey whose bind was not posted
      throw std::runtime_error("rpc_mw: posting a bind on MN QP " + std::to_string(qp->qp_num()) +
                               " failed (errno " + std::to_string(rc) + ")");
    }
    co_await PostCost();
    co_return rkey;
  }

  // Type-2: every window's QP must be one of the caller's lanes
  // (kInvalidArgument), and binding one to a QP other than this RPC lane's,
  // which posts the binds, needs qpn_in_bind (kUnsupported: upstream verbs
  // bind a type-2 window to the posting QP only; a one-lane request naming
  // another of the CN's QPs once made the post fail and the worker throw).
  Code CheckWindowQps(const MnLane& lane, const RpcRequest& req, uint32_t lanes) {
    if (type_ != MwType::kType2) return Code::kOk;
    const bool any_qp = node_->caps().qpn_in_bind;
    if (lanes > 1 && !any_qp) return Code::kUnsupported;
    for (uint32_t k = 0; k < lanes; ++k) {
      if (!LaneOf(lane.cn_index, req.lane_qpns[k])) return Code::kInvalidArgument;
      if (req.lane_qpns[k] != lane.qp->qp_num() && !any_qp) return Code::kUnsupported;
    }
    return Code::kOk;
  }

  Task<void> HandleAlloc(MnLane& lane, const RpcRequest& req, RpcReply& reply) {
    const uint32_t lanes = std::max<uint32_t>(1, req.lanes);
    if (const Code c = CheckWindowQps(lane, req, lanes); c != Code::kOk) {
      reply.code = static_cast<uint32_t>(c);
      co_return;
    }
    std::optional<uint64_t> idx;
    bool handover = false;
    if (delayed_unbind_ && type_ == MwType::kType1 && !parked_.empty()) {
      idx = parked_.front();  // hand the parked window over by rebinding it
      parked_.pop_front();
      handover = true;
      ++handovers_;
      table_.Release(*idx);
      idx = table_.Take(lane.cn_index);
    } else {
      idx = table_.Take(lane.cn_index);
      if (!idx && !parked_.empty()) {
        co_await UnbindParked(parked_.size());
        idx = table_.Take(lane.cn_index);
      }
      while (!idx && table_.pending() > 0) {  // revocations still running
        co_await revoked_.Wait();
        idx = table_.Take(lane.cn_index);
      }
    }
    if (!idx) {
      reply.code = static_cast<uint32_t>(Code::kOutOfMemory);
      co_return;
    }
    ChunkState& cs = chunks_[*idx];
    const uint64_t addr = table_.addr(*idx);
    const uint64_t g = table_.chunk_bytes();
    const uint32_t windows = type_ == MwType::kType1 ? 1 : lanes;
    if (!handover) {
      cs.mws.clear();
      for (uint32_t k = 0; k < windows; ++k) cs.mws.push_back(TakeMw());
    }
    for (uint32_t k = 0; k < windows; ++k) {
      reply.rkeys[k] =
          co_await PostBind(lane.qp, cs.mws[k], mr_, addr, g, kDataAccess, req.lane_qpns[k]);
    }
    reply.n_rkeys = windows;
    reply.addr = addr;
    reply.bytes = g;
    reply.id = *idx;
    if (leases_) {
      const uint64_t word = lease_base_ + *idx * kLeaseSlotBytes + kLeaseSlotBytes - 8;
      const uint64_t expiry = NowUs(runtime()) + lease_us_;
      node_->memory().StoreU64(word, expiry);
      if (!cs.lease_mw) cs.lease_mw = TakeMw();
      reply.aux_rkey = co_await PostBind(lane.qp, cs.lease_mw, lease_mr_, word, 8, kLeaseAccess,
                                         req.lane_qpns[0]);
      reply.aux[0] = word;
      reply.aux[1] = expiry;
    }
  }

  // Unbinds/invalidates one window on the admin QP and waits for it.
  Task<void> Retire(fabric::Mw* mw) {
    if (type_ == MwType::kType1) {
      co_await AdminBindType1(mw, nullptr, 0, 0, 0, NextRkey(mw->rkey()));
    } else {
      fabric::SendWr wr;
      wr.opcode = Opcode::kLocalInv;
      wr.invalidate_rkey = mw->rkey();
      co_await AdminExec(wr);
    }
  }

  // Takes chunk `i` away from its holder: every window over it is retired
  // before the chunk and the windows go back to the pools.
  Task<void> Revoke(uint64_t i) {
    if (!table_.IsPending(i)) table_.MarkPending(i);
    ChunkState& cs = chunks_[i];
    if (cs.lease_mw) node_->memory().StoreU64(LeaseWord(i), 0);  // refuse further extension
    for (fabric::Mw* mw : cs.mws) {
      co_await Retire(mw);
      free_mws_.push_back(mw);
    }
    cs.mws.clear();
    if (cs.lease_mw) {
      co_await Retire(cs.lease_mw);
      free_mws_.push_back(cs.lease_mw);
      cs.lease_mw = nullptr;
    }
    table_.Release(i);
    revoked_.NotifyAll();
  }

  Task<void> UnbindParked(uint64_t n) {
    for (uint64_t k = 0; k < n && !parked_.empty(); ++k) {
      const uint64_t i = parked_.front();
      parked_.pop_front();
      co_await Revoke(i);
    }
  }

  uint64_t LeaseWord(uint64_t i) const {
    return lease_base_ + i * kLeaseSlotBytes + kLeaseSlotBytes - 8;
  }

  // Patronus' expiry poller: every lease period, revoke what has expired.
  Task<void> LeaseScanner() {
    const auto scan_cost = node_->Cost("patronus.lease_check");
    for (;;) {
      co_await runtime().SleepFor(static_cast<Ps>(lease_us_) * kPsPerUs);
      co_await node_->cpu().Work(scan_cost, std::max<uint64_t>(1, table_.in_use()));
      const uint64_t now = NowUs(runtime());
      for (uint64_t i = 0; i < table_.count(); ++i) {
        if (table_.in_use() == 0) break;
        const auto& cs = chunks_[i];
        // Any CN's: under `dmbench mn` the MN's deployment has no CNs, and a
        // CN process's indexes start past 0.
        if (!cs.lease_mw || cs.mws.empty() || !table_.Owned(i)) continue;
        // A lease ends at the word's time, and never later than one period
        // from now: a CN may extend only to now + lease_us, so a word beyond
        // that (a CN that CASed it to the maximum) is refused, not honoured.
        const uint64_t until = node_->memory().LoadU64(LeaseWord(i));
        if (until < now || until > now + lease_us_) {
          ++leases_expired_;
          co_await Revoke(i);
        }
      }
    }
  }

  MwType type_;
  bool leases_;
  uint64_t lease_us_;
  bool delayed_unbind_;
  ChunkTable table_;
  std::vector<ChunkState> chunks_;
  std::vector<fabric::Mw*> free_mws_;
  std::deque<uint64_t> parked_;
  WaitList revoked_;
  fabric::Mr* mr_ = nullptr;
  fabric::Mr* lease_mr_ = nullptr;
  uint64_t lease_base_ = 0;
  uint64_t handovers_ = 0;
  uint64_t leases_expired_ = 0;
};

Capabilities RpcMwCaps(const Knobs& k) {
  Capabilities c;
  c.granularity_bytes = k.Size("granularity");
  c.isolation = k.Int("mw_type") == 1 ? Isolation::kChunkRkey : Isolation::kChunkQp;
  c.mn_cpu_on_alloc = true;
  c.leases = k.Bool("leases");
  return c;
}

class RpcMwCn : public RpcCn {
 public:
  RpcMwCn(const Deployment& d, uint32_t cn, MnControl* mn, const Knobs& k)
      : RpcCn(d, cn, mn, RpcMwCaps(k)), lease_us_(static_cast<uint64_t>(k.Int("lease_us"))) {
    spare_qps_ = k.Bool("spare_qps");
  }

  // Patronus §5.3: CAS the lease word from what we were granted to now + lease.
  Task<Status> Extend(Lane& lane, Chunk& chunk) override {
    if (!caps_.leases) co_return Status(Code::kUnsupported, "leases are off (leases=false)");
    const uint64_t want = NowUs(deployment_.cluster->runtime()) + lease_us_;
    fabric::SendWr wr;
    wr.opcode = Opcode::kCmpAndSwp;
    wr.sg_list = {{lane.ctrl_addr, 8, lane.group->lkey()}};
    wr.remote_addr = chunk.lease.header_addr;
    wr.rkey = chunk.lease.header_rkey;
    wr.compare_add = chunk.lease.expires_us;
    wr.swap = want;
    const auto wc = co_await Exec(lane, wr);
    Status st = FromWc(wc, "lease CAS");
    if (!st.ok()) co_return st;
    const uint64_t seen = node_->memory().LoadU64(lane.ctrl_addr);
    if (seen != chunk.lease.expires_us) {
      co_return Status(Code::kLeaseExpired,
                       "the MN revoked the lease (word " + std::to_string(seen) + ")");
    }
    chunk.lease.expires_us = want;
    co_return Status::Ok();
  }

 private:
  uint64_t lease_us_;
};

}  // namespace

extern const SystemInfo kRpcMw;
const SystemInfo kRpcMw{
    "rpc_mw",
    "RPC to the MN CPU, which binds a pooled MW per chunk (Patronus)",
    {{"granularity", KnobKind::kSize, "4KB", "chunk size", 64},
     {"mw_type", KnobKind::kInt, "1", "1: ibv_bind_mw, any QP; 2: BIND_MW WR, owner's QPs only", 1,
      2},
     {"leases", KnobKind::kBool, "false", "chunks expire unless the CN extends them by CAS"},
     {"lease_us", KnobKind::kInt, "100", "lease period and expiry scan interval (Patronus: 100)", 1,
      100000000},
     {"delayed_unbind", KnobKind::kBool, "false",
      "park freed windows; type-1 hands them over by rebinding; batch the rest"},
     {"spare_qps", KnobKind::kBool, "false", "a pre-connected spare QP replaces an errored lane"}},
    [](const Deployment& d, const Knobs& k) -> std::unique_ptr<MemoryManager> {
      return std::make_unique<BasicManager<RpcMwMn, RpcMwCn>>("rpc_mw", d, k);
    },
    {{"type2", {{"mw_type", "2"}}},
     {"type1_patronus", {{"delayed_unbind", "true"}, {"spare_qps", "true"}}},
     {"type2_patronus", {{"mw_type", "2"}, {"delayed_unbind", "true"}, {"spare_qps", "true"}}}},
    {{"granularity", "64KB"}},
    [](const Knobs& k) { return RpcMwNeeds(k.Int("mw_type") == 1, k.Bool("leases")); },
    [](const Knobs& k, uint64_t pool) { GranularityFitsPool("rpc_mw", k, pool); }};

}  // namespace dmb::systems
