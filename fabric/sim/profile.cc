#include "fabric/sim/profile.h"

#include <cstring>
#include <stdexcept>

namespace dmb::sim {

Profile Profile::ByName(std::string_view name) {
  const size_t plus = name.find('+');
  const std::string_view base = name.substr(0, plus);
  if (base != "cx5") {
    throw std::invalid_argument("unknown calibration profile '" + std::string(name) +
                                "'; known profiles: cx5 (readings: +cn_facing, +latency_only)");
  }
  Profile p = Cx5();
  std::string_view rest = plus == std::string_view::npos ? "" : name.substr(plus + 1);
  while (plus != std::string_view::npos) {
    const size_t next = rest.find('+');
    const std::string_view reading = rest.substr(0, next);
    if (reading == "cn_facing") {
      p.offload_counts_loopback = 0;
    } else if (reading == "latency_only") {
      p.offload_occupies_pu = 0;
    } else {
      throw std::invalid_argument("profile '" + std::string(name) + "': unknown reading '" +
                                  std::string(reading) +
                                  "'; known: +cn_facing (only QPs connected to another node "
                                  "carry the offload penalty), +latency_only (it holds no "
                                  "processing unit)");
    }
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + 1);
  }
  p.name = std::string(name);
  return p;
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
