#include "fabric/sim/profile.h"

#include <cstring>
#include <stdexcept>

namespace dmb::sim {

Profile Profile::ByName(std::string_view name) {
  if (name == "cx5") return Cx5();
  throw std::invalid_argument("unknown calibration profile '" + std::string(name) +
                              "'; known profiles: cx5");
}

uint64_t Profile::Hash() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over names and values
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const auto& prm : Describe()) {
    mix(prm.name.data(), prm.name.size());
    mix(&prm.value, sizeof prm.value);
  }
  for (const auto& c : cpu_costs) {
    mix(c.name.data(), c.name.size());
    mix(&c.us, sizeof c.us);
  }
  return h;
}

}  // namespace dmb::sim
