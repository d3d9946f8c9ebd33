// fine_mr: every allocation is an RPC in which the MN CPU registers an MR of
// the granularity (1 MB, 4 MB in the papers) over a free chunk; every free
// deregisters it. Registration cost grows with the pages pinned, on the MN's
// (one) core, so allocation latency and MN CPU both scale with granularity.
#include "systems/common/chunk_table.h"
#include "systems/common/cn_base.h"
#include "systems/common/mn_base.h"
#include "systems/registry.h"

namespace dmb::systems {
namespace {

constexpr uint32_t kRemoteAccess =
    fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;

class FineMrMn : public MnBase {
 public:
  FineMrMn(const Deployment& d, const Knobs& k) : MnBase(d, k) {}

  Task<ReclaimReport> ReclaimCn(uint32_t cn) override {
    ReclaimReport r;
    for (uint64_t i : table_.OwnedByCn(cn)) {
      co_await Revoke(i);
      ++r.chunks_reclaimed;
    }
    co_return r;
  }

 protected:
  Task<void> Setup() override {
    const uint64_t g = knobs_.Size("granularity");
    if (g > pool_bytes_) {
      throw ConfigError("fine_mr.granularity: " + FormatSize(g) + " is larger than the " +
                        FormatSize(pool_bytes_) + " MN pool");
    }
    table_.Init(pool_addr_, g, pool_bytes_ / g);
    mrs_.assign(table_.count(), nullptr);
    co_return;
  }

  Task<void> Handle(MnLane& lane, const RpcRequest& req, RpcReply& reply) override {
    co_await node_->cpu().Work(node_->Cost("mn.bookkeeping"));
    if (req.op == kRpcAlloc) {
      auto i = table_.Take(lane.cn_index);
      if (!i) {
        reply.code = static_cast<uint32_t>(Code::kOutOfMemory);
        co_return;
      }
      mrs_[*i] = co_await node_->RegMr(pd_, table_.addr(*i), table_.chunk_bytes(), kRemoteAccess);
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
      co_await Revoke(i);
    } else {
      reply.code = static_cast<uint32_t>(Code::kInvalidArgument);
    }
  }

  uint64_t chunks_total() const override { return table_.count(); }
  uint64_t chunks_in_use() const override { return table_.in_use(); }

 private:
  Task<void> Revoke(uint64_t i) {
    table_.MarkPending(i);
    fabric::Mr* mr = mrs_[i];
    mrs_[i] = nullptr;
    co_await node_->DeregMr(mr);  // the rkey is invalid from here on
    table_.Release(i);
  }

  ChunkTable table_;
  std::vector<fabric::Mr*> mrs_;
};

Capabilities FineMrCaps(const Knobs& k) {
  Capabilities c;
  c.granularity_bytes = k.Size("granularity");
  c.isolation = Isolation::kChunkRkey;
  c.mn_cpu_on_alloc = true;
  return c;
}

class FineMrCn : public RpcCn {
 public:
  FineMrCn(const Deployment& d, uint32_t cn, FineMrMn* mn, const Knobs& k)
      : RpcCn(d, cn, mn, FineMrCaps(k)) {}
};

}  // namespace

extern const SystemInfo kFineMr;
const SystemInfo kFineMr{
    "fine_mr",
    "an MR registered by the MN CPU per allocation and deregistered on free",
    {{"granularity", KnobKind::kSize, "1MB", "size of each allocation's MR (1MB, 4MB)", 4096}},
    [](const Deployment& d, const Knobs& k) -> std::unique_ptr<MemoryManager> {
      return std::make_unique<BasicManager<FineMrMn, FineMrCn>>("fine_mr", d, k);
    }};

}  // namespace dmb::systems
