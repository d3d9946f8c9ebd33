#include "fabric/sim/profile.h"

#include <cstring>
#include <stdexcept>

namespace dmb::sim {

Profile Profile::ByName(std::string_view name) {
  const size_t plus = name.find('+');
  const std::string_view base = name.substr(0, plus);
  if (base != "cx5") {
    throw std::invalid_argument(
        "unknown calibration profile '" + std::string(name) +
        "'; known profiles: cx5 (readings: +all_cross_channel, +latency_only, +mn_poll)");
  }
  Profile p = Cx5();
  std::string_view rest = plus == std::string_view::npos ? "" : name.substr(plus + 1);
  while (plus != std::string_view::npos) {
    const size_t next = rest.find('+');
    const std::string_view reading = rest.substr(0, next);
    if (reading == "all_cross_channel") {
      p.offload_counts_loopback = 1;
    } else if (reading == "cn_facing") {
      p.offload_counts_loopback = 0;  // the default since issue 14 #2; kept for old specs
    } else if (reading == "latency_only") {
      p.offload_occupies_pu = 0;
    } else if (reading == "mn_poll") {
      p.SetCpuCost("mn.cq_wakeup", 0);
    } else {
      throw std::invalid_argument("profile '" + std::string(name) + "': unknown reading '" +
                                  std::string(reading) +
                                  "'; known: +all_cross_channel (MN-local loopback chain QPs "
                                  "carry the offload penalty too, not only those connected to "
                                  "another node), +latency_only (it holds no "
                                  "processing unit), +mn_poll (MN threads busy-poll their "
                                  "CQs: no wake-up cost)");
    }
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + 1);
  }
  p.name = std::string(name);
  return p;
}

void Profile::SetCpuCost(std::string_view cost, double us) {
  for (auto& c : cpu_costs) {
    if (c.name == cost) {
      c.us = us;
      return;
    }
  }
  throw std::logic_error("profile '" + name + "' has no CPU cost '" + std::string(cost) + "'");
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
