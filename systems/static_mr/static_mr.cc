// static_mr: coarse MRs registered once at start (1 GB for swap, 16 MB for KV
// in the papers) and handed out whole by a cheap RPC. Sub-allocation inside a
// region is the application's business. No revocation: an MR stays valid for
// the MN's lifetime, so whoever once held a region's rkey keeps access to it
// (isolation at region granularity only).
#include "systems/common/chunk_table.h"
#include "systems/common/cn_base.h"
#include "systems/common/mn_base.h"
#include "systems/registry.h"

namespace dmb::systems {
namespace {

constexpr uint32_t kRemoteAccess =
    fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;

class StaticMrMn : public MnBase {
 public:
  StaticMrMn(const Deployment& d, const Knobs& k) : MnBase(d, k) {}

  Task<ReclaimReport> ReclaimCn(uint32_t cn) override {
    ReclaimReport r;
    for (uint64_t i : table_.OwnedByCn(cn)) {
      table_.Release(i);
      ++r.chunks_reclaimed;
    }
    co_return r;
  }

 protected:
  Task<void> Setup() override {
    const uint64_t g = knobs_.Size("granularity");
    const uint64_t count = pool_bytes_ / g;
    if (count == 0) {
      throw ConfigError("static_mr.granularity: " + FormatSize(g) + " is larger than the " +
                        FormatSize(pool_bytes_) + " MN pool");
    }
    table_.Init(pool_addr_, g, count);
    for (uint64_t i = 0; i < count; ++i) {
      mrs_.push_back(co_await node_->RegMr(pd_, table_.addr(i), g, kRemoteAccess));
    }
  }

  Task<void> Handle(MnLane& lane, const RpcRequest& req, RpcReply& reply) override {
    co_await node_->cpu().Work(node_->Cost("mn.bookkeeping"));
    if (req.op == kRpcAlloc) {
      auto i = table_.Take(lane.cn_index);
      if (!i) {
        reply.code = static_cast<uint32_t>(Code::kOutOfMemory);
        co_return;
      }
      reply.addr = table_.addr(*i);
      reply.bytes = table_.chunk_bytes();
      reply.id = *i;
      reply.n_rkeys = 1;
      reply.rkeys[0] = mrs_[*i]->rkey();
    } else if (req.op == kRpcFree) {
      const uint64_t i = req.arg[0];
      if (!table_.OwnedBy(i, lane.cn_index)) {
        reply.code = static_cast<uint32_t>(Code::kNotOwner);
        co_return;
      }
      table_.Release(i);
    } else {
      reply.code = static_cast<uint32_t>(Code::kInvalidArgument);
    }
  }

  uint64_t chunks_total() const override { return table_.count(); }
  uint64_t chunks_in_use() const override { return table_.in_use(); }

 private:
  ChunkTable table_;
  std::vector<fabric::Mr*> mrs_;
};

Capabilities StaticMrCaps(const Knobs& k) {
  Capabilities c;
  c.granularity_bytes = k.Size("granularity");
  c.isolation = Isolation::kRegion;
  c.mn_cpu_on_alloc = true;
  return c;
}

class StaticMrCn : public RpcCn {
 public:
  StaticMrCn(const Deployment& d, uint32_t cn, StaticMrMn* mn, const Knobs& k)
      : RpcCn(d, cn, mn, StaticMrCaps(k)) {}
};

}  // namespace

extern const SystemInfo kStaticMr;
const SystemInfo kStaticMr{
    "static_mr",
    "coarse MRs registered once at start and handed out whole (no revocation)",
    {{"granularity", KnobKind::kSize, "16MB", "size of each pre-registered MR (16MB KV, 1GB swap)",
      4096}},
    [](const Deployment& d, const Knobs& k) -> std::unique_ptr<MemoryManager> {
      return std::make_unique<BasicManager<StaticMrMn, StaticMrCn>>("static_mr", d, k);
    }};

}  // namespace dmb::systems
