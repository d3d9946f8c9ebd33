// How fast the simulator itself runs: simulated work requests per wall-clock
// second on one core, for a READ ping-pong, 288 QPs x 24 outstanding,
// 6,912 QPs x 4 outstanding, and an offloaded-chain case: a OneSidedMW
// allocation storm (4 CNs x 24 threads allocating and freeing at once; every
// allocation is an MN-side chain of WRs that rewrite later WRs, and its WRs
// count with the CNs'). Each case also runs, in the same iteration, a bare
// reference loop of the same shape (the same Simulator's event queue and
// coroutines only: one coroutine per outstanding WR, or per CN thread in the
// storm, one timed sleep per WR, as many WRs; no RNIC, no memory, no WQE), so
// the counters say what the model costs on top of the loop (issue 18):
//   sim_wr_per_s      the model's simulated WRs per wall second (the storm:
//                     the send WQEs the RNICs started, SimCluster::wrs_executed,
//                     over its measured phase)
//   bare_wr_per_s     the bare loop's
//   model_over_bare   their ratio (1 = the model costs nothing over the loop)
//   events_per_wr     the model's events per WR
// The bare loop runs one event per WR, so even a model whose events cost no
// more than the loop's would reach model_over_bare = 1 / events_per_wr at
// most (0.25 for the ping-pong's 4 events a READ: start, arrival at the
// responder, response at the requester, resume). The events cannot merge
// while the trace hash folds each one (Simulator::Drain) and must not change.
// JSON with --benchmark_format=json; `make bench` runs it into
// results/simulator-speed/ and plots it (plots/simulator_speed.py).
#include <benchmark/benchmark.h>

#include <chrono>

#include "fabric/sim/simulator.h"
#include "microbench/alloc_bench.h"
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

// Model and bare totals over a case's iterations.
struct Totals {
  uint64_t wrs = 0, events = 0, bare_wrs = 0;
  double model_s = 0, bare_s = 0;
};

void Report(benchmark::State& state, const Totals& t) {
  const double model_rate = static_cast<double>(t.wrs) / t.model_s;
  const double bare_rate = static_cast<double>(t.bare_wrs) / t.bare_s;
  state.counters["sim_wr_per_s"] = model_rate;
  state.counters["bare_wr_per_s"] = bare_rate;
  state.counters["model_over_bare"] = model_rate / bare_rate;
  state.counters["events_per_wr"] = static_cast<double>(t.events) / static_cast<double>(t.wrs);
}

void Run(benchmark::State& state, const LoadSpec& spec) {
  const auto profile = sim::Profile::Cx5();
  const uint64_t workers = static_cast<uint64_t>(spec.cns) * spec.qps_per_cn * spec.depth;
  const uint64_t ops_per_worker = spec.ops_per_qp / spec.depth;
  Totals t;
  for (auto _ : state) {
    Clock::time_point t0 = Clock::now();
    const LoadResult r = RunLoad(profile, spec, 1);
    t.model_s += Seconds(t0);
    t.wrs += r.ops;
    t.events += r.events;
    t0 = Clock::now();
    t.bare_wrs += BareLoop(workers, ops_per_worker);
    t.bare_s += Seconds(t0);
  }
  Report(state, t);
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

// The offloaded-chain case: OneSidedMW (defaults: Sep, one Alloc QP per CN,
// 8 chain lanes) with 4 CNs x 24 threads, each allocating batches of 8
// chunks and freeing them. Only the measured phase counts (RunAllocBench's
// sim_wrs, sim_events, wall_s); the bare loop has one coroutine per thread.
void BM_OneSidedMwAllocStorm(benchmark::State& state) {
  AllocBenchSpec spec;
  spec.bed.system = "onesided_mw";
  spec.bed.cns = 4;
  spec.bed.pool_bytes = 1ull << 30;
  spec.threads = 24;
  spec.ops_per_thread = 100;
  spec.batch = 8;
  const uint64_t workers = static_cast<uint64_t>(spec.threads) * spec.bed.cns;
  Totals t;
  for (auto _ : state) {
    const AllocBenchResult r = RunAllocBench(spec);
    if (r.alloc.failures + r.free.failures > 0) state.SkipWithError("allocations failed");
    t.model_s += r.wall_s;
    t.wrs += r.sim_wrs;
    t.events += r.sim_events;
    const Clock::time_point t0 = Clock::now();
    t.bare_wrs += BareLoop(workers, (r.sim_wrs + workers - 1) / workers);
    t.bare_s += Seconds(t0);
  }
  Report(state, t);
}
BENCHMARK(BM_OneSidedMwAllocStorm)->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
}  // namespace dmb::microbench

BENCHMARK_MAIN();
