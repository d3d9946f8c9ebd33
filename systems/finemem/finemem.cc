// finemem: the protocol is described in finemem.h, the bits in finemem_layout.h;
// the MN side is finemem_mn.cc, the CN side finemem_cn.cc. Here: the
// registration.
#include "systems/finemem/finemem.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "systems/finemem/finemem_impl.h"
#include "systems/registry.h"

namespace dmb::systems {

// ---- Registration --------------------------------------------------------------

extern const SystemInfo kFineMem;
const SystemInfo kFineMem{
    "finemem",
    "one-sided CAS bitmap allocation, pre-bound type-1 MWs, redo log, per-CN service (FineMem)",
    {{"granularity", KnobKind::kSize, "4KB", "chunk size: a power of two, 4KB..128KB", 4096,
      131072},
     {"regen_period_us", KnobKind::kInt, "100000",
      "rkey regeneration scan period (FineMem: 100 ms)", 1, 100000000}},
    [](const Deployment& d, const Knobs& k) -> std::unique_ptr<MemoryManager> {
      return std::make_unique<BasicManager<FineMemMn, FineMemCn>>("finemem", d, k);
    },
    {},
    {{"granularity", "64KB"}},
    [](const Knobs&) { return finemem::kNeeds; },
    [](const Knobs& k, uint64_t pool) {
      const uint64_t g = k.Size("granularity");
      if (!std::has_single_bit(g)) {
        throw ConfigError("finemem.granularity: expected a power of two (4KB..128KB), got " +
                          std::to_string(g) + " B");
      }
      GranularityFitsPool("finemem", k, pool);
    }};

}  // namespace dmb::systems
