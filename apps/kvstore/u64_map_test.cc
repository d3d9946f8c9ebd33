// U64Map against std::unordered_map: random puts, replacements and erases
// over key ranges that force long probe runs and wrap around the array (the
// backward shift of Erase is where an open-addressing table goes wrong), and
// consecutive keys as SlabAllocator's chunk quotients are.
#include "apps/kvstore/u64_map.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

namespace dmb::apps::kv {
namespace {

void ExpectSame(const U64Map<int>& m, const std::unordered_map<uint64_t, int*>& ref,
                uint64_t probe_below) {
  ASSERT_EQ(m.size(), ref.size());
  for (uint64_t k = 0; k < probe_below; ++k) {
    auto it = ref.find(k);
    ASSERT_EQ(m.Find(k), it == ref.end() ? nullptr : it->second) << "key " << k;
  }
  size_t seen = 0;
  m.ForEach([&](uint64_t k, int* v) {
    ++seen;
    auto it = ref.find(k);
    ASSERT_TRUE(it != ref.end()) << "ForEach gave key " << k;
    EXPECT_EQ(v, it->second);
  });
  EXPECT_EQ(seen, ref.size());
}

TEST(U64Map, MatchesUnorderedMapUnderRandomPutsAndErases) {
  std::vector<int> values(64);
  for (uint64_t range : {8ull, 40ull, 1000ull}) {
    std::mt19937_64 rng(range);
    U64Map<int> m;
    std::unordered_map<uint64_t, int*> ref;
    for (int op = 0; op < 20000; ++op) {
      const uint64_t k = rng() % range;
      int* v = &values[rng() % values.size()];
      if (rng() % 3 == 0) {
        m.Erase(k);
        ref.erase(k);
      } else {
        m.Put(k, v);
        ref[k] = v;
      }
      if (op % 997 == 0) ExpectSame(m, ref, range + 5);
    }
    ExpectSame(m, ref, range + 5);
  }
}

TEST(U64Map, ConsecutiveKeysGrowAndDrain) {
  std::vector<int> values(100000);
  U64Map<int> m;
  for (uint64_t k = 0; k < values.size(); ++k) m.Put(1000000 + k, &values[k]);
  EXPECT_EQ(m.size(), values.size());
  for (uint64_t k = 0; k < values.size(); k += 2) m.Erase(1000000 + k);
  EXPECT_EQ(m.size(), values.size() / 2);
  for (uint64_t k = 0; k < values.size(); ++k) {
    EXPECT_EQ(m.Find(1000000 + k), k % 2 ? &values[k] : nullptr) << k;
  }
  m.Erase(5);  // absent: nothing happens
  EXPECT_EQ(m.size(), values.size() / 2);
  m.Clear();
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.Find(1000001), nullptr);
  m.Put(7, &values[7]);
  EXPECT_EQ(m.Find(7), &values[7]);
}

TEST(U64Map, RefusesTheReservedKey) {
  int v = 0;
  U64Map<int> m;
  EXPECT_THROW(m.Put(U64Map<int>::kNoKey, &v), std::invalid_argument);
  EXPECT_EQ(m.Find(U64Map<int>::kNoKey), nullptr);
  EXPECT_TRUE(m.empty());
}

}  // namespace
}  // namespace dmb::apps::kv
