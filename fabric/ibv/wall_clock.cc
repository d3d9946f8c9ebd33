#include "fabric/ibv/wall_clock.h"

#include <cmath>
#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define DMB_HAVE_TSC 1
#endif

namespace dmb::fabric::ibv {
namespace {

using Clock = std::chrono::steady_clock;
__extension__ typedef unsigned __int128 Uint128;  // GCC and Clang: x86-64's 64x64 -> 128 multiply

Ps PsSince(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count() * kPsPerNs;
}

uint64_t Ticks() {
#ifdef DMB_HAVE_TSC
  return __rdtsc();
#else
  return 0;
#endif
}

// Mean cost of one steady_clock read, in ns.
double ReadCostNs() {
  constexpr int kReads = 64;
  const auto t0 = Clock::now();
  Clock::time_point t = t0;
  for (int i = 0; i < kReads; ++i) t = Clock::now();
  return static_cast<double>(PsSince(t0, t)) / kPsPerNs / kReads;
}

}  // namespace

WallClock::WallClock() : start_(Clock::now()) {
#ifdef DMB_HAVE_TSC
  const char* env = std::getenv("DMB_IBV_CLOCK");
  const std::string_view choice = env ? env : "auto";
  if (choice == "tsc" || (choice != "steady" && ReadCostNs() > kSlowReadNs)) Calibrate();
#endif
}

void WallClock::Calibrate() {
  const auto t0 = Clock::now();
  const uint64_t c0 = Ticks();
  auto t1 = t0;
  while (PsSince(t0, t1) < kCalibrationMs * kPsPerMs) t1 = Clock::now();
  const uint64_t c1 = Ticks();
  if (c1 <= c0) return;  // no usable counter: stay on steady_clock
  start_ = t0;
  tsc0_ = c0;
  const double ps_per_tick = static_cast<double>(PsSince(t0, t1)) / static_cast<double>(c1 - c0);
  ps_per_tick_q32_ = static_cast<uint64_t>(std::llround(std::ldexp(ps_per_tick, 32)));
}

Ps WallClock::now() const {
  Ps t;
  if (ps_per_tick_q32_ > 0) {
    const uint64_t c = Ticks();
    const auto ps_q32 = static_cast<Uint128>(c > tsc0_ ? c - tsc0_ : 0) * ps_per_tick_q32_;
    t = static_cast<Ps>(ps_q32 >> 32);
  } else {
    t = PsSince(start_, Clock::now());
  }
  if (t < last_) return last_;
  last_ = t;
  return t;
}

}  // namespace dmb::fabric::ibv
