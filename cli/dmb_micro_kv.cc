// dmb_micro kv: the OneSidedMW paper's KV store on an approach (§6.1,
// Figures 6 and 7; apps/kvstore/kv_workload.h).
#include <cstdio>
#include <memory>

#include "apps/kvstore/kv_workload.h"
#include "cli/dmb_micro.h"
#include "systems/knobs.h"

namespace dmb::microbench {
namespace {

using harness::Testbed;
using harness::TestbedSpec;
using systems::ConfigError;

struct KvArgs : BedArgs {
  int threads = 1;
  std::string workload = "fillsync";
  std::string value = "1KB";
  std::string kv_size = "block";  // what --value sizes
  uint64_t keys = 1000000;
  uint32_t key_bytes = 16;
};

// The counters every workload reports, after its latencies. mn_cpu_peak and
// mn_cpu_mean only when the workload measured them (the simulator's MN): on
// ibv the MN's CPU is a daemon's or is not accounted, and a 0 would be a
// number nobody measured.
void AddKvCounters(const KvArgs& a, const apps::kv::KvWorkloadResult& r, uint64_t value,
                   Report* rep) {
  const auto d = [](uint64_t v) { return static_cast<double>(v); };
  rep->counters.push_back({"count", d(r.ops)});
  rep->counters.push_back({"failures", d(r.failures)});
  rep->counters.push_back({"dealloc_rate", r.dealloc_rate});
  if (r.mn_cpu_measured) {
    rep->counters.push_back({"mn_cpu_peak", r.mn_cpu_peak});
    rep->counters.push_back({"mn_cpu_mean", r.mn_cpu_mean});
  }
  for (const auto& c : std::vector<std::pair<std::string, double>>{
           {"alloc_bytes", d(r.granularity_bytes)},
           {"value_bytes", d(value)},
           {"block_bytes", d(r.block_bytes)},
           {"keys", d(a.keys)},
           {"threads_total", d(static_cast<uint64_t>(r.threads_total))},
           {"peak_mn_bytes", d(r.peak_mn_bytes)},
           {"buckets_per_partition", d(r.buckets_per_partition)}}) {
    rep->counters.push_back(c);
  }
}

Report RunKv(const KvArgs& a) {
  const uint64_t value = SizeOf(a.value);
  if (value > (32ull << 10)) {
    throw ConfigError(
        "--value: the KV store's largest block is 32KB (header and key included), "
        "got \"" +
        a.value + "\"; use a smaller --value");
  }
  apps::kv::KvWorkloadSpec spec;
  spec.workload = a.workload;
  spec.threads = a.threads;
  spec.keys = a.keys;
  spec.value_bytes = static_cast<uint32_t>(value);
  spec.size_is = a.kv_size;
  spec.key_bytes = a.key_bytes;
  spec.seed = a.seed;
  const TestbedSpec bed = BedSpec(a);
  Testbed tb(bed);
  const apps::kv::KvWorkloadResult r = apps::kv::RunKvWorkload(tb, spec);
  if (r.failures > 0 && r.first_failure_oom) {
    throw ConfigError(
        std::to_string(r.failures) + " ops ran out of memory, first: " + r.first_failure +
        "; use a larger --pool (now " + systems::FormatSize(bed.pool_bytes) + ") or fewer --keys");
  }
  if (r.failures > 0) {
    std::fprintf(stderr, "dmb_micro: warning: %lu failed ops, first: %s\n",
                 static_cast<unsigned long>(r.failures), r.first_failure.c_str());
  }
  Report rep;
  rep.name = "kv";
  rep.label = BedLabel(a, bed, a.threads) + ",workload=" + a.workload +
              ",value=" + systems::FormatSize(value) + ",kv_size=" + a.kv_size +
              ",keys=" + std::to_string(a.keys) + ",key_bytes=" + std::to_string(a.key_bytes) +
              ",commit=" + r.commit + KnobsLabel(r.knobs);
  rep.seconds = PsToS(r.phase1_ps);
  rep.counters = {{"tput_mops", r.tput_mops()},
                  {"lat_us_p50", r.lat.p50_us()},
                  {"lat_us_p99", r.lat.p99_us()},
                  {"lat_us_mean", r.lat.mean_us()},
                  {"insert_lat_us_p99", r.insert_lat.p99_us()}};
  if (a.workload == "ycsbd") rep.counters.push_back({"get_lat_us_p99", r.get_lat.p99_us()});
  if (a.workload != "insert") rep.counters.push_back({"delete_tput_mops", r.delete_tput_mops()});
  AddKvCounters(a, r, value, &rep);
  return rep;
}

}  // namespace

void SetupKv(CLI::App& app, BenchFn* chosen) {
  auto a = std::make_shared<KvArgs>();
  auto* kv =
      app.add_subcommand("kv",
                         "The OneSidedMW paper's KV store (RACE index, slab allocator) on\n"
                         "--system: cns x threads clients, one partition each, --keys\n"
                         "random keys of --key-bytes in --value byte blocks (§6.1).\n"
                         "--workload fillsync: insert every key (measured), then delete a\n"
                         "random 90% (deleterandom); ycsbd: --keys ops, 50% inserts, 50%\n"
                         "reads of keys already inserted, then delete 90%; insert:\n"
                         "inserts only (Figure 7). Manual time = the measured phase\n"
                         "(virtual on the simulator; wall clock with --backend ibv, the\n"
                         "clients being coroutines of this process's polling thread).\n"
                         "Counters: tput_mops lat_us_p50 lat_us_p99 lat_us_mean\n"
                         "insert_lat_us_p99, get_lat_us_p99 (ycsbd), delete_tput_mops\n"
                         "(fillsync, ycsbd), count, failures, dealloc_rate (MN memory\n"
                         "the store gave back after the workload / its peak), mn_cpu_peak\n"
                         "(MN cores busy in the busiest of 20 intervals per phase, the\n"
                         "first and last dropped: the steady state),\n"
                         "mn_cpu_mean (phase 1), alloc_bytes, value_bytes, block_bytes, keys,\n"
                         "threads_total, peak_mn_bytes, buckets_per_partition.\n"
                         "mn_cpu_peak and mn_cpu_mean are the simulated MN's: --backend ibv\n"
                         "omits them (the MN is a `dmbench mn` daemon or an in-process node\n"
                         "whose CPU is not accounted; sample it on the MN host instead)");
  AddBedOptions(kv, a.get(), "MN memory the approach manages");
  AddIbvOptions(kv, a.get());
  AddThreadsOption(kv, &a->threads);
  kv->add_option("--workload", a->workload, "fillsync, ycsbd or insert")
      ->check(OneOf({"fillsync", "ycsbd", "insert"}))
      ->capture_default_str();
  kv->add_option("--value", a->value,
                 "The size the paper's Figures 6-7 label: with --kv-size block the whole KV\n"
                 "block (8 B header + key + value), with --kv-size value the value alone;\n"
                 "the block must fit the approach's chunk")
      ->check(Size())
      ->capture_default_str();
  kv->add_option("--kv-size", a->kv_size,
                 "What --value sizes (block: a 1 KB point fills the 1 KB size class, as the\n"
                 "paper's deallocation rates 0.9^k say; value: db_bench's --value_size, a 2 KB\n"
                 "block)")
      ->check(OneOf({"block", "value"}))
      ->capture_default_str();
  kv->add_option("--keys", a->keys,
                 "Keys over all threads (ycsbd: ops; db_bench's and the paper's default; the\n"
                 "figure specs use fewer)")
      ->transform(IntIn<uint64_t>(1, 100'000'000))
      ->capture_default_str();
  kv->add_option("--key-bytes", a->key_bytes, "Key bytes")
      ->transform(IntIn<uint32_t>(8, 1024))
      ->capture_default_str();
  kv->callback([a, chosen] { *chosen = [a] { return RunKv(*a); }; });
}

}  // namespace dmb::microbench
