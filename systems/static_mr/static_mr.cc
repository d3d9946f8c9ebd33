// static_mr: coarse MRs registered once at start (1 GB for swap, 16 MB for KV
// in the papers) and handed out whole by a cheap RPC. Sub-allocation inside a
// region is the application's business. No revocation: an MR stays valid for
// the MN's lifetime, so whoever once held a region's rkey keeps access to it
// (isolation at region granularity only).
#include "systems/common/chunk_rpc_mn.h"
#include "systems/common/cn_base.h"
#include "systems/registry.h"

namespace dmb::systems {
namespace {

constexpr uint32_t kRemoteAccess =
    fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;

class StaticMrMn : public ChunkRpcMn {
 public:
  using ChunkRpcMn::ChunkRpcMn;

 protected:
  Task<void> SetupChunks() override {
    for (uint64_t i = 0; i < table_.count(); ++i) {
      mrs_.push_back(
          co_await node_->RegMr(pd_, table_.addr(i), table_.chunk_bytes(), kRemoteAccess));
    }
  }
  Task<uint32_t> Grant(uint64_t i) override { co_return mrs_[i]->rkey(); }
  Task<void> Revoke(uint64_t i) override {
    table_.Release(i);  // the MR stays registered: nothing is revoked
    co_return;
  }

 private:
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
  StaticMrCn(const Deployment& d, uint32_t cn, MnControl* mn, const Knobs& k)
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
    },
    {},
    {{"granularity", "256KB"}},
    {},
    [](const Knobs& k, uint64_t pool) { GranularityFitsPool("static_mr", k, pool); }};

}  // namespace dmb::systems
