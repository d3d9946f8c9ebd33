#include "microbench/alloc_bench.h"

#include <algorithm>
#include <chrono>

#include "fabric/histogram.h"

namespace dmb::microbench {
namespace {

// The span of one op's measured instances, for its rate.
struct Span {
  Ps first = -1, last = 0;
  void Add(Ps t0, Ps t1) {
    if (first < 0 || t0 < first) first = t0;
    last = std::max(last, t1);
  }
};

struct Shared {
  Histogram alloc_lat;
  Histogram free_lat;
  Span alloc_span, free_span;
  uint64_t alloc_fail = 0;
  uint64_t free_fail = 0;
  int ready = 0;
  int done = 0;
  Ps measure_start = -1;
};

OpStats Summarize(const char* op, const Histogram& h, const Span& span, uint64_t fails) {
  OpStats s;
  if (span.first >= 0 && span.last > span.first) {
    s.kops = static_cast<double>(h.count()) / PsToUs(span.last - span.first) * 1e3;
  }
  s.op = op;
  s.count = h.count();
  s.lat_us_p50 = h.p50_us();
  s.lat_us_p99 = h.p99_us();
  s.lat_us_mean = h.mean_us();
  s.failures = fails;
  return s;
}

Task<void> Open(harness::Testbed* tb, uint32_t cn_i, systems::AccessGroup** g) {
  *g = co_await tb->cn(cn_i).OpenGroup(1, 4096);
}

Task<void> Thread(harness::Testbed* tb, uint32_t cn_i, systems::AccessGroup* g,
                  const AllocBenchSpec* spec, int batch, Shared* sh) {
  systems::CnSide& cn = tb->cn(cn_i);
  fabric::Runtime& rt = tb->runtime();
  std::vector<std::pair<systems::Chunk, bool>> held;  // chunk, its alloc was measured
  const int total = spec->warmup_per_thread + spec->ops_per_thread;
  for (int done = 0; done < total;) {
    for (int k = 0; k < batch && done < total; ++k, ++done) {
      const bool measure = done >= spec->warmup_per_thread;
      const Ps t0 = rt.now();
      auto r = co_await cn.Alloc(*g);
      if (!r.ok()) {
        ++sh->alloc_fail;
        continue;
      }
      if (measure) {
        sh->alloc_lat.Record(rt.now() - t0);
        sh->alloc_span.Add(t0, rt.now());
      }
      held.emplace_back(r.value, measure);
    }
    for (const auto& [c, measure] : held) {
      const Ps t0 = rt.now();
      systems::Status st = co_await cn.Free(*g, c);
      if (!st.ok()) ++sh->free_fail;
      if (measure) {
        sh->free_lat.Record(rt.now() - t0);
        sh->free_span.Add(t0, rt.now());
      }
    }
    held.clear();
  }
  ++sh->done;
}

// The simulator's running totals (zero on another backend).
struct SimCounts {
  uint64_t wrs = 0, events = 0;
};
SimCounts Counts(harness::Testbed& tb) {
  if (tb.backend() != "sim") return {};
  return {tb.cluster().wrs_executed(), tb.cluster().sim().events_executed()};
}

}  // namespace

AllocBenchResult RunAllocBench(const AllocBenchSpec& spec) {
  harness::Testbed tb(spec.bed);
  const auto& caps = tb.mm().caps();
  const uint64_t chunks = tb.mm().mn().stats().chunks_total;
  const uint64_t threads_total = static_cast<uint64_t>(spec.threads) * spec.bed.cns;
  const int batch = static_cast<int>(
      std::min<uint64_t>(spec.batch, chunks / std::max<uint64_t>(1, threads_total)));
  if (batch < 1) {
    throw systems::ConfigError(
        spec.bed.system + ": the " + systems::FormatSize(spec.bed.pool_bytes) + " MN pool holds " +
        std::to_string(chunks) + " chunks of " + systems::FormatSize(caps.granularity_bytes) +
        ", fewer than the " + std::to_string(threads_total) +
        " threads need to hold one each; use a larger --pool or a smaller granularity");
  }
  Shared sh;
  // A remote MN (ibv, `dmbench mn` daemon) keeps its CPU to itself.
  const bool mn_local = spec.bed.mn_endpoint.empty();
  fabric::Cpu* mn_cpu = mn_local ? &tb.mn_node()->cpu() : nullptr;
  // Setup (groups, and the chains some approaches arm per group) is not measured.
  const size_t n = static_cast<size_t>(spec.threads) * spec.bed.cns;
  std::vector<systems::AccessGroup*> groups(n);
  std::vector<Task<void>> open;
  for (size_t i = 0; i < n; ++i) {
    open.push_back(Open(&tb, static_cast<uint32_t>(i / spec.threads), &groups[i]));
  }
  tb.RunAll(std::move(open));
  const Ps busy0 = mn_cpu ? mn_cpu->busy_ps() : 0;
  const Ps t0 = tb.now();
  const SimCounts sim0 = Counts(tb);
  const auto wall0 = std::chrono::steady_clock::now();
  std::vector<Task<void>> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.push_back(
        Thread(&tb, static_cast<uint32_t>(i / spec.threads), groups[i], &spec, batch, &sh));
  }
  tb.RunAll(std::move(threads));
  const Ps elapsed = tb.now() - t0;
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const SimCounts sim1 = Counts(tb);
  AllocBenchResult r;
  r.system = spec.bed.system;
  r.knobs = tb.mm().knobs().ToString();
  r.threads = spec.threads;
  r.cns = spec.bed.cns;
  r.mn_cores = mn_cpu ? mn_cpu->cores() : spec.bed.mn_cores;
  r.batch = batch;
  r.alloc = Summarize("alloc", sh.alloc_lat, sh.alloc_span, sh.alloc_fail);
  r.free = Summarize("free", sh.free_lat, sh.free_span, sh.free_fail);
  const double busy = mn_cpu ? static_cast<double>(mn_cpu->busy_ps() - busy0) : 0;
  r.elapsed_us = PsToUs(elapsed);
  r.mn_cpu_cores_busy = elapsed > 0 ? busy / static_cast<double>(elapsed) : 0;
  r.mn_cpu_busy_frac = r.mn_cpu_cores_busy / std::max(1, r.mn_cores);
  if (tb.backend() == "sim") r.trace_hash = tb.cluster().sim().trace_hash();
  r.sim_wrs = sim1.wrs - sim0.wrs;
  r.sim_events = sim1.events - sim0.events;
  r.wall_s = wall_s;
  return r;
}

}  // namespace dmb::microbench
