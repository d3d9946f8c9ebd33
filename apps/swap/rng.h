// Rng: a small portable PRNG (splitmix64) so recorded traces depend only on
// the seed, not on the standard library's distributions.
#pragma once

#include <cmath>
#include <cstdint>

namespace dmb::apps::swap {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t Below(uint64_t n) { return Next() % n; }
  double Normal() {  // Box-Muller
    double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t s_;
};

}  // namespace dmb::apps::swap
