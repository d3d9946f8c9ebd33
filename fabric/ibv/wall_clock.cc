#include "fabric/ibv/wall_clock.h"

#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define DMB_HAVE_TSC 1
#endif

namespace dmb::fabric::ibv {
namespace {

using Clock = std::chrono::steady_clock;

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
  ps_per_tick_ = static_cast<double>(PsSince(t0, t1)) / static_cast<double>(c1 - c0);
}

Ps WallClock::now() const {
  Ps t;
  if (ps_per_tick_ > 0) {
    const uint64_t c = Ticks();
    t = c > tsc0_ ? static_cast<Ps>(static_cast<double>(c - tsc0_) * ps_per_tick_) : 0;
  } else {
    t = PsSince(start_, Clock::now());
  }
  if (t < last_) return last_;
  last_ = t;
  return t;
}

}  // namespace dmb::fabric::ibv
