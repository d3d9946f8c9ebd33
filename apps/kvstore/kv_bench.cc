// kv_bench: a quick KV-store measurement in virtual time. Every client
// thread inserts its own keys, reads them all back, then deletes them all;
// each phase starts when every thread is ready (barrier) and reports
// throughput over the phase and per-op latency.
//
//   kv_bench --system onesided_mw [--set granularity=4KB] [--cns 1]
//            [--threads 24] [--ops 1000] [--value 1024] [--pool 1GB]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/kvstore/kv_client.h"
#include "fabric/histogram.h"
#include "harness/testbed.h"
#include "systems/common/wait_list.h"
#include "systems/knobs.h"

namespace dmb::apps::kv {
namespace {

struct Args {
  harness::TestbedSpec bed;
  int threads = 24;
  int ops = 1000;
  size_t value = 1024;
};

struct Phase {
  const char* name;
  Histogram lat;
  Ps first = -1, last = 0;
  uint64_t errors = 0;
  std::string first_error;
  void Record(Ps t0, Ps t1) {
    lat.Record(t1 - t0);
    if (first < 0 || t0 < first) first = t0;
    last = std::max(last, t1);
  }
  void Fail(const systems::Status& st) {
    if (errors++ == 0) first_error = st.ToString();
  }
};

struct Shared {
  int threads = 0;
  int arrived = 0;
  uint64_t generation = 0;
  systems::WaitList wake;
  Phase phases[3] = {{"insert", {}}, {"get", {}}, {"delete", {}}};
  uint64_t peak_bytes = 0, chunks_returned = 0, chunks_allocated = 0;
  std::string commit;
};

Task<void> Barrier(Shared* sh) {
  const uint64_t gen = sh->generation;
  if (++sh->arrived == sh->threads) {
    sh->arrived = 0;
    ++sh->generation;
    sh->wake.NotifyAll();
    co_return;
  }
  while (sh->generation == gen) co_await sh->wake.Wait();
}

Task<void> Client(harness::Testbed* tb, const Args* a, KvOptions o, uint32_t cn, uint32_t t,
                  Shared* sh) {
  KvClient kv(tb->mm(), o, cn, t);
  systems::Status st = co_await kv.Open();
  if (!st.ok()) throw std::runtime_error("open: " + st.ToString());
  sh->commit = std::string(CommitModeName(kv.commit_mode()));
  std::vector<std::string> keys;
  for (uint64_t i = 0; keys.size() < static_cast<size_t>(a->ops); ++i) {
    std::string k = "user" + std::to_string(i);
    if (KvClient::PartitionOf(k, o) == kv.partition()) keys.push_back(std::move(k));
  }
  const std::string value(a->value, 'v');
  fabric::Runtime& rt = tb->runtime();
  co_await Barrier(sh);
  for (const auto& k : keys) {
    const Ps t0 = rt.now();
    st = co_await kv.Put(k, value);
    if (!st.ok()) sh->phases[0].Fail(st);
    sh->phases[0].Record(t0, rt.now());
  }
  co_await Barrier(sh);
  for (const auto& k : keys) {
    const Ps t0 = rt.now();
    auto g = co_await kv.Get(k);
    if (!g.ok() || !g.value || g.value->size() != a->value) {
      sh->phases[1].Fail(g.ok() ? systems::Status(systems::Code::kInvalidArgument, "lost " + k)
                                : g.status);
    }
    sh->phases[1].Record(t0, rt.now());
  }
  co_await Barrier(sh);
  for (const auto& k : keys) {
    const Ps t0 = rt.now();
    auto d = co_await kv.Delete(k);
    if (!d.ok() || !d.value) sh->phases[2].Fail(d.status);
    sh->phases[2].Record(t0, rt.now());
  }
  co_await Barrier(sh);
  sh->peak_bytes += kv.alloc_stats().peak_bytes_held();
  sh->chunks_allocated += kv.alloc_stats().chunks_allocated;
  sh->chunks_returned += kv.alloc_stats().chunks_returned;
  (void)co_await kv.Close();
}

Args Parse(int argc, char** argv) {
  Args a;
  a.bed.system = "onesided_mw";
  a.bed.pool_bytes = 1ull << 30;
  a.bed.cn_cores = harness::kUnlimitedCores;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (i + 1 >= argc) throw systems::ConfigError(f + ": missing value");
    const std::string v = argv[++i];
    if (f == "--system")
      a.bed.system = v;
    else if (f == "--set")
      systems::AddAssignment(v, &a.bed.knobs);
    else if (f == "--cns")
      a.bed.cns = std::stoi(v);
    else if (f == "--threads")
      a.threads = std::stoi(v);
    else if (f == "--ops")
      a.ops = std::stoi(v);
    else if (f == "--value")
      a.value = std::stoul(v);
    else if (f == "--pool") {
      const auto s = systems::ParseSize(v);
      if (!s) throw systems::ConfigError("--pool: expected a size like 1GB, got " + v);
      a.bed.pool_bytes = *s;
    } else
      throw systems::ConfigError("unknown flag " + f);
  }
  return a;
}

int Main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  harness::Testbed tb(a.bed);
  KvOptions o;
  o.num_cns = static_cast<uint32_t>(a.bed.cns);
  o.threads_per_cn = static_cast<uint32_t>(a.threads);
  o.buckets_per_partition = std::max(16, a.ops / 4);  // 8 slots each: 50% full
  Shared sh;
  sh.threads = a.bed.cns * a.threads;
  std::vector<Task<void>> tasks;
  for (uint32_t cn = 0; cn < static_cast<uint32_t>(a.bed.cns); ++cn) {
    for (uint32_t t = 0; t < static_cast<uint32_t>(a.threads); ++t) {
      tasks.push_back(Client(&tb, &a, o, cn, t, &sh));
    }
  }
  tb.RunAll(std::move(tasks));
  std::printf("system=%s knobs=%s cns=%d threads=%d ops/thread=%d value=%zuB commit=%s\n",
              a.bed.system.c_str(), tb.mm().knobs().ToString().c_str(), a.bed.cns, a.threads, a.ops,
              a.value, sh.commit.c_str());
  int rc = 0;
  for (const Phase& p : sh.phases) {
    const double us = p.first < 0 ? 0 : PsToUs(p.last - p.first);
    std::printf("  %-6s %8.3f Mops  p50 %7.2f us  p99 %7.2f us  (%lu ops, %lu errors)\n", p.name,
                us > 0 ? p.lat.count() / us : 0.0, p.lat.p50_us(), p.lat.p99_us(),
                static_cast<unsigned long>(p.lat.count()), static_cast<unsigned long>(p.errors));
    if (p.errors) {
      std::printf("    first error: %s\n", p.first_error.c_str());
      rc = 1;
    }
  }
  std::printf(
      "  value chunks: %lu allocated, %lu returned; peak MN bytes held %s (sum over "
      "threads); MN chunks in use after close %lu\n",
      static_cast<unsigned long>(sh.chunks_allocated),
      static_cast<unsigned long>(sh.chunks_returned), systems::FormatSize(sh.peak_bytes).c_str(),
      static_cast<unsigned long>(tb.mm().mn().stats().chunks_in_use));
  return rc;
}

}  // namespace
}  // namespace dmb::apps::kv

int main(int argc, char** argv) {
  try {
    return dmb::apps::kv::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "kv_bench: " << e.what() << "\n";
    return 2;
  }
}
