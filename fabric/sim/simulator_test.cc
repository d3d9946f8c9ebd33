#include "fabric/sim/simulator.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace dmb::sim {
namespace {

TEST(Simulator, EventsRunInTimeThenSchedulingOrder) {
  Simulator sim(1);
  std::vector<int> order;
  auto rec = [](void* ctx, uint64_t arg) {
    static_cast<std::vector<int>*>(ctx)->push_back(static_cast<int>(arg));
  };
  sim.Schedule(200, 0, rec, &order, 3);
  sim.Schedule(100, 0, rec, &order, 1);
  sim.Schedule(100, 0, rec, &order, 2);
  sim.Run();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(sim.now(), 200);
  EXPECT_THROW(sim.Schedule(10, 0, rec, &order, 0), std::logic_error);
}

Task<int> Add(Simulator& sim, int a, int b) {
  co_await sim.SleepFor(5);
  co_return a + b;
}

TEST(Simulator, TasksSleepAndReturnValues) {
  Simulator sim(1);
  int result = 0;
  sim.Spawn([](Simulator& s, int* out) -> Task<void> {
    *out = co_await Add(s, 2, 3);
    *out += co_await Add(s, 10, 0);
  }(sim, &result));
  sim.Run();
  EXPECT_EQ(result, 15);
  EXPECT_EQ(sim.now(), 10);
  EXPECT_EQ(sim.live_tasks(), 0u);
}

TEST(Simulator, ExceptionInASpawnedTaskStopsTheRun) {
  Simulator sim(1);
  sim.Spawn([](Simulator& s) -> Task<void> {
    co_await s.SleepFor(3);
    throw std::runtime_error("boom");
  }(sim));
  EXPECT_THROW(sim.Run(), std::runtime_error);
}

TEST(Simulator, ShutdownDestroysBlockedTasks) {
  struct Flag {
    bool* destroyed;
    ~Flag() { *destroyed = true; }
  };
  bool destroyed = false;
  {
    Simulator sim(1);
    sim.Spawn([](Simulator& s, bool* d) -> Task<void> {
      Flag f{d};
      co_await s.SleepUntil(1'000'000);
    }(sim, &destroyed));
    sim.RunUntil(10);
    EXPECT_EQ(sim.live_tasks(), 1u);
  }
  EXPECT_TRUE(destroyed);
}

TEST(Simulator, SameSeedSameTraceDifferentStreamsDiffer) {
  auto run = [](uint64_t seed) {
    Simulator sim(seed);
    Rng rng = sim.MakeRng("test");
    for (int i = 0; i < 100; ++i) {
      sim.Schedule(
          static_cast<Ps>(rng.Uniform(1000)), 7, [](void*, uint64_t) {}, nullptr, rng.Next());
    }
    sim.Run();
    return sim.trace_hash();
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  EXPECT_NE(Rng(1, "a").Next(), Rng(1, "b").Next());
}

}  // namespace
}  // namespace dmb::sim
