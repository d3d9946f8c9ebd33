#include "apps/kvstore/mt64.h"

#include <gtest/gtest.h>

#include <random>

namespace dmb::apps::kv {
namespace {

TEST(Mt64, YieldsStdMt19937_64sSequence) {
  for (uint64_t seed : {0ull, 1ull, 5489ull, 0x9E3779B97F4A7C15ull, ~0ull}) {
    std::mt19937_64 ref(seed);
    Mt64 mine(seed);
    for (int i = 0; i < 100000; ++i) ASSERT_EQ(mine(), ref()) << "seed " << seed << " draw " << i;
  }
}

}  // namespace
}  // namespace dmb::apps::kv
