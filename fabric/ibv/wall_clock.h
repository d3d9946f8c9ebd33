// WallClock: the ibv runtime's now(), picoseconds of steady-clock time since
// the clock was made.
//
// Contract:
//  - now() never goes backwards and advances at steady_clock's rate.
//  - Where reading steady_clock is cheap (vDSO: tens of ns) now() reads it.
//  - Where it is slow (over kSlowReadNs per read: clock_gettime falls back to
//    a system call, e.g. the HPET clocksource of a TCG guest, 1.5-3.4 us per
//    read) and the CPU has a time-stamp counter, now() reads the TSC, scaled
//    by its rate against steady_clock measured over kCalibrationMs at
//    construction: perftest times its operations with the TSC too, and a
//    benchmark that reads the clock twice per operation must not pay a system
//    call each time.
//  - DMB_IBV_CLOCK=steady or =tsc forces the choice (tsc only where there is one).
#pragma once

#include <chrono>

#include "fabric/time.h"

namespace dmb::fabric::ibv {

class WallClock {
 public:
  static constexpr double kSlowReadNs = 300;
  static constexpr int kCalibrationMs = 5;

  WallClock();
  Ps now() const;
  bool uses_tsc() const { return ps_per_tick_q32_ > 0; }

 private:
  void Calibrate();
  std::chrono::steady_clock::time_point start_;
  uint64_t tsc0_ = 0;
  // Picoseconds per tick in 32.32 fixed point (0: read steady_clock). An
  // integer multiply: floating point is a library call per operation under
  // an emulator (TCG), and now() runs on every operation's timed path.
  uint64_t ps_per_tick_q32_ = 0;
  mutable Ps last_ = 0;  // the TSC of another CPU may lag: never go back
};

}  // namespace dmb::fabric::ibv
