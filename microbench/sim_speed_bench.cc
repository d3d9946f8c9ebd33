// How fast the simulator itself runs: simulated work requests per wall-clock
// second on one core, for a READ ping-pong, 288 QPs x 24 outstanding and
// 6,912 QPs x 4 outstanding. Each case also runs, in the same iteration, a
// bare reference loop of the same shape (the same Simulator's event queue
// and coroutines only: one coroutine per outstanding WR, one timed sleep per
// WR; no RNIC, no memory, no WQE), so the counters say what the model costs
// on top of the loop (issue 18):
//   sim_wr_per_s      the model's simulated WRs per wall second
//   bare_wr_per_s     the bare loop's
//   model_over_bare   their ratio (1 = the model costs nothing over the loop)
//   events_per_wr     the model's events per WR
// JSON with --benchmark_format=json; `make bench` runs it.
#include <benchmark/benchmark.h>

#include <chrono>

#include "fabric/sim/simulator.h"
#include "microbench/primitives.h"

namespace dmb::microbench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// `workers` coroutines, each sleeping `ops` times (one event per "WR").
uint64_t BareLoop(uint64_t workers, uint64_t ops) {
  sim::Simulator s(1);
  auto worker = [](sim::Simulator& sim, uint64_t n, Ps step) -> Task<void> {
    for (uint64_t i = 0; i < n; ++i) co_await sim.SleepFor(step + static_cast<Ps>(i % 7));
  };
  for (uint64_t w = 0; w < workers; ++w) s.Spawn(worker(s, ops, 2000 + static_cast<Ps>(w % 13)));
  s.Run();
  return workers * ops;
}

void Run(benchmark::State& state, const LoadSpec& spec) {
  const auto profile = sim::Profile::Cx5();
  const uint64_t workers = static_cast<uint64_t>(spec.cns) * spec.qps_per_cn * spec.depth;
  const uint64_t ops_per_worker = spec.ops_per_qp / spec.depth;
  uint64_t wrs = 0, events = 0, bare_wrs = 0;
  double model_s = 0, bare_s = 0;
  for (auto _ : state) {
    Clock::time_point t0 = Clock::now();
    const LoadResult r = RunLoad(profile, spec, 1);
    model_s += Seconds(t0);
    wrs += r.ops;
    events += r.events;
    t0 = Clock::now();
    bare_wrs += BareLoop(workers, ops_per_worker);
    bare_s += Seconds(t0);
  }
  const double model_rate = static_cast<double>(wrs) / model_s;
  const double bare_rate = static_cast<double>(bare_wrs) / bare_s;
  state.counters["sim_wr_per_s"] = model_rate;
  state.counters["bare_wr_per_s"] = bare_rate;
  state.counters["model_over_bare"] = model_rate / bare_rate;
  state.counters["events_per_wr"] = static_cast<double>(events) / static_cast<double>(wrs);
}

void BM_ReadPingPong(benchmark::State& state) {
  LoadSpec s;
  s.bytes = 64;
  s.ops_per_qp = 200000;
  Run(state, s);
}
BENCHMARK(BM_ReadPingPong)->Unit(benchmark::kMillisecond)->MinTime(1.0);

void BM_Read288QpsDepth24(benchmark::State& state) {
  LoadSpec s;
  s.cns = 12;
  s.qps_per_cn = 24;
  s.depth = 24;
  s.bytes = 64;
  s.ops_per_qp = 200;
  Run(state, s);
}
BENCHMARK(BM_Read288QpsDepth24)->Unit(benchmark::kMillisecond)->MinTime(1.0);

void BM_Read6912QpsDepth4(benchmark::State& state) {
  LoadSpec s;
  s.cns = 24;
  s.qps_per_cn = 288;
  s.depth = 4;
  s.bytes = 64;
  s.ops_per_qp = 20;
  Run(state, s);
}
BENCHMARK(BM_Read6912QpsDepth4)->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
}  // namespace dmb::microbench

BENCHMARK_MAIN();
