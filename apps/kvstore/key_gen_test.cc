#include "apps/kvstore/key_gen.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <unordered_set>

#include "apps/kvstore/race_index.h"

namespace dmb::apps::kv {
namespace {

// The plain loop KeyGen must match: one candidate at a time, kept keys in a
// set of strings.
class PlainKeyGen {
 public:
  PlainKeyGen(uint32_t partitions, uint32_t partition, uint32_t key_bytes, Mt64 rng)
      : partitions_(partitions), partition_(partition), candidate_(key_bytes, '\0'), rng_(rng) {}
  std::string Next() {
    for (;;) {
      for (char& c : candidate_) c = kKeyAlphabet[rng_() % kKeyAlphabet.size()];
      if (PartitionOfKey(candidate_, partitions_) == partition_ &&
          seen_.insert(candidate_).second) {
        return candidate_;
      }
    }
  }

 private:
  uint32_t partitions_;
  uint32_t partition_;
  std::string candidate_;
  Mt64 rng_;
  std::unordered_set<std::string> seen_;
};

void ExpectSameKeys(uint32_t partitions, uint32_t partition, uint32_t key_bytes, uint64_t seed,
                    int keys) {
  KeyGen fast(partitions, partition, key_bytes, Mt64(seed));
  PlainKeyGen plain(partitions, partition, key_bytes, Mt64(seed));
  for (int i = 0; i < keys; ++i) {
    ASSERT_EQ(fast.Next(), plain.Next()) << "key " << i << " of partition " << partition << "/"
                                         << partitions << ", " << key_bytes << " B, seed " << seed;
  }
}

TEST(KeyGen, YieldsThePlainLoopsKeys) {
  ExpectSameKeys(24, 0, 16, 1, 20000);
  ExpectSameKeys(24, 23, 16, 7, 20000);
  ExpectSameKeys(288, 131, 16, 1, 3000);
  ExpectSameKeys(1, 0, 8, 3, 20000);
  ExpectSameKeys(32, 5, 9, 11, 5000);  // a power of two: the hash's low bits are alike
}

// Two-character keys: 3,844 exist, so most late candidates repeat a kept key
// and must be refused (the table's byte comparison, and its growth).
TEST(KeyGen, RefusesRepeatsWhenKeysRunShort) {
  ExpectSameKeys(1, 0, 2, 5, 3500);
  KeyGen gen(1, 0, 2, Mt64(9));
  std::unordered_set<std::string> seen;
  for (int i = 0; i < 3844; ++i) ASSERT_TRUE(seen.insert(gen.Next()).second) << "key " << i;
}

TEST(KeyGen, RefusesAPartitionOutsideTheCountOrAnEmptyKey) {
  EXPECT_THROW(KeyGen(0, 0, 16, Mt64(1)), std::invalid_argument);
  EXPECT_THROW(KeyGen(24, 24, 16, Mt64(1)), std::invalid_argument);
  EXPECT_THROW(KeyGen(24, 3, 0, Mt64(1)), std::invalid_argument);
  KeyGen ok(24, 23, 8, Mt64(1));
  EXPECT_EQ(ok.Next().size(), 8u);
}

}  // namespace
}  // namespace dmb::apps::kv
