// finemem: placeholder until the FineMem protocol lands (see issue 3).
#include "systems/registry.h"
namespace dmb::systems {
extern const SystemInfo kFineMem;
const SystemInfo kFineMem{"finemem", "FineMem (in progress)", {}, nullptr};
}  // namespace dmb::systems
