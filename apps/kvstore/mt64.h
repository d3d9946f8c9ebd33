// Mt64: the MT19937-64 generator, output for output the same as
// std::mt19937_64 (the C++ standard fixes that sequence, so workloads keep
// their keys), about 3x faster on this code's builds: libstdc++'s refill
// branches on each word's low bit, which keeps GCC -O2 from vectorising it;
// here that bit selects the twist constant by a mask. Each refill also
// tempers the block of outputs in one loop, which the compiler vectorises
// (a figure-7 point draws 288 candidate keys of 16 words per key it keeps).
//
// Contract: Mt64(s)() yields std::mt19937_64(s)()'s values in order
// (mt64_test checks 10^5 of them for several seeds). UniformRandomBitGenerator.
#pragma once

#include <cstdint>
#include <limits>

namespace dmb::apps::kv {

class Mt64 {
 public:
  using result_type = uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<uint64_t>::max(); }

  explicit Mt64(uint64_t seed) {
    x_[0] = seed;
    for (int k = 1; k < kN; ++k) {
      x_[k] = 6364136223846793005ull * (x_[k - 1] ^ (x_[k - 1] >> 62)) + k;
    }
  }

  result_type operator()() {
    if (i_ >= kN) Refill();
    return out_[i_++];
  }

 private:
  static constexpr int kN = 312, kM = 156;
  static constexpr uint64_t kTwist = 0xB5026F5AA96619E9ull;
  static constexpr uint64_t kUpper = ~0ull << 31, kLower = ~kUpper;

  static uint64_t Twist(uint64_t hi, uint64_t next, uint64_t far) {
    const uint64_t y = (hi & kUpper) | (next & kLower);
    return far ^ (y >> 1) ^ (-(y & 1) & kTwist);
  }
  void Refill() {
    for (int k = 0; k < kN - kM; ++k) x_[k] = Twist(x_[k], x_[k + 1], x_[k + kM]);
    for (int k = kN - kM; k < kN - 1; ++k) x_[k] = Twist(x_[k], x_[k + 1], x_[k + kM - kN]);
    x_[kN - 1] = Twist(x_[kN - 1], x_[0], x_[kM - 1]);
    for (int k = 0; k < kN; ++k) out_[k] = Temper(x_[k]);
    i_ = 0;
  }
  static uint64_t Temper(uint64_t z) {
    z ^= (z >> 29) & 0x5555555555555555ull;
    z ^= (z << 17) & 0x71D67FFFEDA60000ull;
    z ^= (z << 37) & 0xFFF7EEE000000000ull;
    return z ^ (z >> 43);
  }

  uint64_t x_[kN];
  uint64_t out_[kN];  // x_ tempered: the outputs, made in one loop per refill
  int i_ = kN;
};

}  // namespace dmb::apps::kv
