// How fast the simulator itself runs: simulated work requests per wall-clock
// second on one core, for a READ ping-pong and for 288 QPs x 24 outstanding.
// Reports `sim_wr_per_s` as a counter (JSON with --benchmark_format=json).
#include <benchmark/benchmark.h>

#include "microbench/primitives.h"

namespace dmb::microbench {
namespace {

void Run(benchmark::State& state, const LoadSpec& spec) {
  const auto profile = sim::Profile::Cx5();
  uint64_t wrs = 0, events = 0;
  for (auto _ : state) {
    const LoadResult r = RunLoad(profile, spec, 1);
    wrs += r.ops;
    events += r.events;
  }
  state.counters["sim_wr_per_s"] =
      benchmark::Counter(static_cast<double>(wrs), benchmark::Counter::kIsRate);
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

}  // namespace
}  // namespace dmb::microbench

BENCHMARK_MAIN();
