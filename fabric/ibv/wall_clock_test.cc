#include "fabric/ibv/wall_clock.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <thread>

namespace dmb::fabric::ibv {
namespace {

// Over `ms` of sleep, the clock advances as steady_clock does (within 2%)
// and never goes back.
void ExpectTracksSteadyClock(const WallClock& c, int ms) {
  const auto s0 = std::chrono::steady_clock::now();
  const Ps t0 = c.now();
  Ps prev = t0;
  for (int i = 0; i < 1000; ++i) {
    const Ps t = c.now();
    ASSERT_GE(t, prev);
    prev = t;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  const Ps t1 = c.now();
  const auto s1 = std::chrono::steady_clock::now();
  const double steady_ps =
      std::chrono::duration_cast<std::chrono::nanoseconds>(s1 - s0).count() * 1000.0;
  EXPECT_NEAR(static_cast<double>(t1 - t0), steady_ps, 0.02 * steady_ps);
}

TEST(WallClock, SteadyClockWhenForced) {
  setenv("DMB_IBV_CLOCK", "steady", 1);
  WallClock c;
  unsetenv("DMB_IBV_CLOCK");
  EXPECT_FALSE(c.uses_tsc());
  ExpectTracksSteadyClock(c, 50);
}

TEST(WallClock, TscWhenForcedTracksSteadyClock) {
  setenv("DMB_IBV_CLOCK", "tsc", 1);
  WallClock c;
  unsetenv("DMB_IBV_CLOCK");
#if defined(__x86_64__) || defined(__i386__)
  EXPECT_TRUE(c.uses_tsc());
#endif
  ExpectTracksSteadyClock(c, 50);
}

TEST(WallClock, StartsNearZero) {
  WallClock c;
  EXPECT_GE(c.now(), 0);
  EXPECT_LT(c.now(), 1000 * kPsPerMs);  // since construction (+ calibration)
}

}  // namespace
}  // namespace dmb::fabric::ibv
