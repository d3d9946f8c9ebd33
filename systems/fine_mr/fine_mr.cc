// fine_mr: every allocation is an RPC in which the MN CPU registers an MR of
// the granularity (1 MB, 4 MB in the papers) over a free chunk; every free
// deregisters it. Registration cost grows with the pages pinned, on the MN's
// (one) core, so allocation latency and MN CPU both scale with granularity.
#include "systems/common/chunk_rpc_mn.h"
#include "systems/common/cn_base.h"
#include "systems/registry.h"

namespace dmb::systems {
namespace {

constexpr uint32_t kRemoteAccess =
    fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;

class FineMrMn : public ChunkRpcMn {
 public:
  using ChunkRpcMn::ChunkRpcMn;

 protected:
  Task<void> SetupChunks() override {
    mrs_.assign(table_.count(), nullptr);
    co_return;
  }
  Task<uint32_t> Grant(uint64_t i) override {
    mrs_[i] = co_await node_->RegMr(pd_, table_.addr(i), table_.chunk_bytes(), kRemoteAccess);
    co_return mrs_[i]->rkey();
  }
  Task<void> Revoke(uint64_t i) override {
    fabric::Mr* mr = std::exchange(mrs_[i], nullptr);
    co_await node_->DeregMr(mr);  // the rkey is invalid from the start of deregistration
    table_.Release(i);
  }

 private:
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
  FineMrCn(const Deployment& d, uint32_t cn, MnControl* mn, const Knobs& k)
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
    },
    {},
    {{"granularity", "64KB"}},
    {},
    [](const Knobs& k, uint64_t pool) { GranularityFitsPool("fine_mr", k, pool); }};

}  // namespace dmb::systems
