#include "microbench/access_bench.h"

#include <algorithm>
#include <stdexcept>

#include "fabric/histogram.h"
#include "systems/common/wait_list.h"

namespace dmb::microbench {
namespace {

struct Shared {
  Histogram lat;
  uint64_t fails = 0;
  std::string first_error;
  Ps first_start = -1, last_end = 0;  // the measured phase, over all threads
  // Start barrier: every thread has its group and chunk (setup, e.g. chains
  // armed per group, is not measured and does not stagger the threads).
  int threads = 0;
  int ready = 0;
  systems::WaitList start;
};

Task<void> Ready(Shared* sh) {
  if (++sh->ready == sh->threads) {
    sh->start.NotifyAll();
    co_return;
  }
  while (sh->ready < sh->threads) co_await sh->start.Wait();
}

// `n` operations split over `parts` slots: slot j's share.
int Share(int n, int parts, int j) { return n / parts + (j < n % parts ? 1 : 0); }

// One slot: `warmup` unmeasured, then `ops` measured operations, one at a
// time, between the chunk's start and the slot's `local` buffer.
Task<void> Slot(harness::Testbed* tb, uint32_t cn_i, systems::AccessGroup* g,
                const systems::Chunk* chunk, uint64_t local, int warmup, int ops,
                const AccessBenchSpec* spec, Shared* sh) {
  systems::CnSide& cn = tb->cn(cn_i);
  fabric::Runtime& rt = tb->runtime();
  for (int i = 0; i < warmup + ops; ++i) {
    const Ps t0 = rt.now();
    systems::Status st;  // (no co_await inside ?: — GCC miscompiles it)
    if (spec->write) {
      st = co_await cn.Write(g->lane(0), *chunk, 0, spec->size_bytes, local);
    } else {
      st = co_await cn.Read(g->lane(0), *chunk, 0, spec->size_bytes, local);
    }
    if (!st.ok()) {
      ++sh->fails;
      if (sh->first_error.empty()) sh->first_error = st.ToString();
      co_return;
    }
    if (i >= warmup) {
      const Ps t1 = rt.now();
      sh->lat.Record(t1 - t0);
      if (sh->first_start < 0 || t0 < sh->first_start) sh->first_start = t0;
      sh->last_end = std::max(sh->last_end, t1);
    }
  }
}

// Runs `t` and then counts it done in *left, waking `all` at zero.
Task<void> Counted(Task<void> t, int* left, systems::WaitList* all) {
  co_await t;
  if (--*left == 0) all->NotifyAll();
}

// A thread's `depth` slots on its lane (depth 1: the one slot, inline).
Task<void> Slots(harness::Testbed* tb, uint32_t cn_i, systems::AccessGroup* g,
                 const systems::Chunk* chunk, const AccessBenchSpec* spec, Shared* sh) {
  const int d = spec->depth;
  auto slot = [&](int j) {
    return Slot(tb, cn_i, g, chunk, g->buffer_addr() + 2ull * spec->size_bytes * j,
                Share(spec->warmup_per_thread, d, j), Share(spec->ops_per_thread, d, j), spec, sh);
  };
  if (d == 1) {
    co_await slot(0);
    co_return;
  }
  int left = d;
  systems::WaitList all;
  for (int j = 0; j < d; ++j) tb->runtime().Spawn(Counted(slot(j), &left, &all));
  while (left > 0) co_await all.Wait();
}

Task<void> Thread(harness::Testbed* tb, uint32_t cn_i, const AccessBenchSpec* spec, Shared* sh) {
  systems::CnSide& cn = tb->cn(cn_i);
  const uint64_t buffer = 2ull * spec->size_bytes * static_cast<uint64_t>(spec->depth);
  systems::AccessGroup* g = co_await cn.OpenGroup(1, std::max<uint64_t>(4096, buffer));
  auto chunk = co_await cn.Alloc(*g);
  co_await Ready(sh);
  if (!chunk.ok()) {
    ++sh->fails;
    if (sh->first_error.empty()) {
      sh->first_error =
          chunk.status.ToString() + " (each thread holds one chunk; use a larger --pool)";
    }
    co_return;
  }
  co_await Slots(tb, cn_i, g, &chunk.value, spec, sh);
  (void)co_await cn.Free(*g, chunk.value);
}

}  // namespace

AccessBenchResult RunAccessBench(const AccessBenchSpec& spec) {
  harness::Testbed tb(spec.bed);
  if (spec.size_bytes == 0 || spec.size_bytes > tb.mm().caps().granularity_bytes) {
    throw systems::ConfigError("--size: expected 1 B .. the chunk size (" +
                               systems::FormatSize(tb.mm().caps().granularity_bytes) + ")");
  }
  if (spec.depth < 1) throw systems::ConfigError("--depth: expected at least 1");
  Shared sh;
  sh.threads = spec.threads * spec.bed.cns;
  std::vector<Task<void>> threads;
  for (uint32_t cn = 0; cn < static_cast<uint32_t>(spec.bed.cns); ++cn) {
    for (int t = 0; t < spec.threads; ++t) threads.push_back(Thread(&tb, cn, &spec, &sh));
  }
  tb.RunAll(std::move(threads));
  if (sh.fails) throw std::runtime_error("access bench: " + sh.first_error);
  const Ps elapsed = sh.first_start < 0 ? 0 : sh.last_end - sh.first_start;
  AccessBenchResult r;
  r.system = spec.bed.system;
  r.knobs = tb.mm().knobs().ToString();
  r.backend = spec.bed.backend;
  r.threads = spec.threads;
  r.depth = spec.depth;
  r.cns = spec.bed.cns;
  r.size_bytes = spec.size_bytes;
  r.op.op = spec.write ? "write" : "read";
  r.op.count = sh.lat.count();
  r.op.lat_us_p50 = sh.lat.p50_us();
  r.op.lat_us_p99 = sh.lat.p99_us();
  r.op.lat_us_mean = sh.lat.mean_us();
  r.elapsed_us = PsToUs(elapsed);
  r.mops = r.elapsed_us > 0 ? static_cast<double>(r.op.count) / r.elapsed_us : 0;
  return r;
}

}  // namespace dmb::microbench
