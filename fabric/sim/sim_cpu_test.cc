#include "fabric/sim/sim_cpu.h"

#include <gtest/gtest.h>

namespace dmb::sim {
namespace {

TEST(SimCpu, OneCoreQueuesWorkTwoCoresOverlapIt) {
  for (int cores : {1, 2}) {
    Simulator sim(1);
    std::vector<std::string> names = {"job"};
    SimCpu cpu(&sim, cores, &names);
    std::vector<Ps> done;
    for (int i = 0; i < 2; ++i) {
      sim.Spawn([](SimCpu& c, std::vector<Ps>* d, Simulator& s) -> Task<void> {
        co_await c.Work(fabric::CpuCost{0, 10 * kPsPerUs});
        d->push_back(s.now());
      }(cpu, &done, sim));
    }
    sim.Run();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[1], (cores == 1 ? 20 : 10) * kPsPerUs) << cores << " cores";
    EXPECT_EQ(cpu.busy_ps(), 20 * kPsPerUs);
    EXPECT_EQ(cpu.BusyByCost().at(0).second, 20 * kPsPerUs);
  }
}

TEST(SimCpu, PeakBusyFractionOverWindows) {
  Simulator sim(1);
  std::vector<std::string> names = {"job"};
  SimCpu cpu(&sim, 1, &names);
  sim.Spawn([](SimCpu& c, Simulator& s) -> Task<void> {
    co_await c.Work(fabric::CpuCost{0, 500 * kPsPerUs});  // busy 0.5 ms
    co_await s.SleepFor(2 * kPsPerMs);
    co_await c.Work(fabric::CpuCost{0, 100 * kPsPerUs});
  }(cpu, sim));
  sim.Run();
  EXPECT_DOUBLE_EQ(cpu.PeakBusyFraction(kPsPerMs), 0.5);
  EXPECT_DOUBLE_EQ(cpu.PeakBusyFraction(kPsPerMs, 2 * kPsPerMs), 0.1);
}

// A phase that starts inside the last window of earlier work (a setup that
// ends just before the measured phase) does not count that work: windows
// start at or after since_ps.
TEST(SimCpu, PeakBusyFractionIgnoresWorkBeforeTheWindowStart) {
  Simulator sim(1);
  std::vector<std::string> names = {"job"};
  SimCpu cpu(&sim, 1, &names);
  sim.Spawn([](SimCpu& c) -> Task<void> {
    co_await c.Work(fabric::CpuCost{0, 450 * kPsPerUs});
  }(cpu));
  sim.Run();
  EXPECT_DOUBLE_EQ(cpu.PeakBusyFraction(100 * kPsPerUs, 0), 1.0);
  EXPECT_DOUBLE_EQ(cpu.PeakBusyFraction(100 * kPsPerUs, 425 * kPsPerUs), 0.2);
  EXPECT_DOUBLE_EQ(cpu.PeakBusyFraction(100 * kPsPerUs, 400 * kPsPerUs), 0.5);
}

// One sample over an interval, as a tool reading /proc/stat would take it:
// exact on bucket edges, prorated inside a bucket.
TEST(SimCpu, BusyFractionOverAnInterval) {
  Simulator sim(1);
  std::vector<std::string> names = {"job"};
  SimCpu cpu(&sim, 2, &names);
  sim.Spawn([](SimCpu& c) -> Task<void> {
    co_await c.Work(fabric::CpuCost{0, 300 * kPsPerUs});  // one of two cores, 0..300 us
  }(cpu));
  sim.Run();
  EXPECT_DOUBLE_EQ(cpu.BusyFraction(0, 300 * kPsPerUs), 0.5);
  EXPECT_DOUBLE_EQ(cpu.BusyFraction(0, 600 * kPsPerUs), 0.25);
  EXPECT_DOUBLE_EQ(cpu.BusyFraction(300 * kPsPerUs, kPsPerMs), 0.0);
  EXPECT_DOUBLE_EQ(cpu.BusyFraction(295 * kPsPerUs, 305 * kPsPerUs), 0.25);  // half a bucket
  EXPECT_DOUBLE_EQ(cpu.BusyFraction(5 * kPsPerUs, 5 * kPsPerUs), 0.0);
}

TEST(SimCpu, HaltedCpuNeverFinishesWork) {
  Simulator sim(1);
  std::vector<std::string> names = {"job"};
  SimCpu cpu(&sim, 1, &names);
  bool finished = false;
  sim.Spawn([](SimCpu& c, bool* f) -> Task<void> {
    co_await c.Work(fabric::CpuCost{0, kPsPerUs});
    *f = true;
  }(cpu, &finished));
  cpu.Halt();
  sim.Run();
  EXPECT_FALSE(finished);
}

}  // namespace
}  // namespace dmb::sim
