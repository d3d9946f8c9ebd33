// Helpers for the suites that run against every registered approach.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "microbench/testbed.h"
#include "systems/registry.h"

namespace dmb::testing {

// ASSERT_* cannot be used inside coroutines (they `return`): these record the
// failure and leave the coroutine.
#define CO_ASSERT_TRUE(c)                       \
  if (!(c)) {                                   \
    ADD_FAILURE() << "CO_ASSERT_TRUE(" #c ")";  \
    co_return;                                  \
  }
#define CO_ASSERT_OK(st)                                               \
  if (!(st).ok()) {                                                    \
    ADD_FAILURE() << #st << " failed: " << (st).ToString();            \
    co_return;                                                         \
  }

inline std::vector<std::string> AllSystems() {
  std::vector<std::string> out;
  for (const auto* s : systems::Registry::All()) out.push_back(s->name);
  return out;
}

// Knobs that make a suite run fast everywhere (small chunks where the
// approach has a granularity knob); everything else at its default.
inline std::map<std::string, std::string> SuiteKnobs(const std::string& system) {
  std::map<std::string, std::string> k;
  const auto& info = systems::Registry::Get(system);
  for (const auto& d : info.knobs) {
    if (d.name == "granularity") k["granularity"] = system == "static_mr" ? "256KB" : "64KB";
  }
  return k;
}

inline microbench::TestbedSpec SuiteSpec(const std::string& system, int cns = 2,
                                         uint64_t pool_bytes = 16ull << 20, uint64_t seed = 1) {
  microbench::TestbedSpec s;
  s.system = system;
  s.knobs = SuiteKnobs(system);
  s.cns = cns;
  s.pool_bytes = pool_bytes;
  s.seed = seed;
  return s;
}

// Deterministic byte pattern for (tag, position).
inline uint8_t PatternByte(uint64_t tag, uint64_t pos) {
  uint64_t x = (tag + 1) * 0x9e3779b97f4a7c15ull + pos * 0xbf58476d1ce4e5b9ull;
  return static_cast<uint8_t>(x >> 56);
}

}  // namespace dmb::testing
