// Deterministic random streams split from one root seed.
//
// Contract: Rng(seed, "stream name") gives the same sequence for the same
// (seed, name) on every platform; different names give independent streams,
// so adding a consumer never perturbs another consumer's numbers.
#pragma once

#include <cstdint>
#include <string_view>

namespace dmb {

__extension__ using Uint128 = unsigned __int128;

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  Rng(uint64_t seed, std::string_view stream) : state_(seed ^ HashName(stream)) { Next(); }

  uint64_t Next() {  // splitmix64
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0.
  uint64_t Uniform(uint64_t n) {
    return static_cast<uint64_t>((static_cast<Uint128>(Next()) * n) >> 64);
  }
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  static uint64_t HashName(std::string_view s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
  }

 private:
  uint64_t state_;
};

}  // namespace dmb
