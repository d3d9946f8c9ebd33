// dmb_micro alloc: allocation and free latency and rate of an approach.
#include <memory>

#include "cli/dmb_micro.h"
#include "microbench/alloc_bench.h"

namespace dmb::microbench {
namespace {

struct AllocArgs : BedArgs {
  int threads = 1;
  int ops = 200;
  int batch = 8;
};

Report RunAlloc(const AllocArgs& a) {
  AllocBenchSpec spec;
  spec.bed = BedSpec(a);
  spec.threads = a.threads;
  spec.ops_per_thread = a.ops;
  spec.batch = a.batch;
  const AllocBenchResult r = RunAllocBench(spec);
  Report rep;
  rep.name = "alloc";
  rep.label = BedLabel(a, spec.bed, a.threads) + KnobsLabel(r.knobs);
  rep.seconds = r.elapsed_us * 1e-6;
  rep.counters = {{"lat_us_p50", r.alloc.lat_us_p50},
                  {"lat_us_p99", r.alloc.lat_us_p99},
                  {"lat_us_mean", r.alloc.lat_us_mean},
                  {"kops", r.alloc.kops},
                  {"free_kops", r.free.kops},
                  {"free_lat_us_p50", r.free.lat_us_p50},
                  {"free_lat_us_p99", r.free.lat_us_p99},
                  {"free_lat_us_mean", r.free.lat_us_mean},
                  {"count", static_cast<double>(r.alloc.count)},
                  {"failures", static_cast<double>(r.alloc.failures)},
                  {"free_failures", static_cast<double>(r.free.failures)},
                  {"mn_cpu_busy_frac", r.mn_cpu_busy_frac}};
  return rep;
}

}  // namespace

void SetupAlloc(CLI::App& app, BenchFn* chosen) {
  auto a = std::make_shared<AllocArgs>();
  auto* alloc =
      app.add_subcommand("alloc",
                         "Each CN thread repeatedly allocates a batch of chunks from\n"
                         "--system and frees them; --ops measured allocations per thread,\n"
                         "--batch chunks held before freeing (default 8; >= ops + 16:\n"
                         "allocate only, so kops is the sustained allocation rate).\n"
                         "Counters: lat_us_p50 lat_us_p99 lat_us_mean kops (allocation),\n"
                         "free_lat_us_p50 free_lat_us_p99 free_lat_us_mean free_kops,\n"
                         "count, failures, free_failures, mn_cpu_busy_frac");
  AddBedOptions(alloc, a.get(), "MN memory the approach manages");
  AddIbvOptions(alloc, a.get());
  AddThreadsOption(alloc, &a->threads);
  AddOpsOption(alloc, &a->ops, "Measured allocations per thread");
  alloc->add_option("--batch", a->batch, "Chunks each thread holds before freeing them")
      ->transform(IntIn(1, 100'000'000))
      ->capture_default_str();
  alloc->callback([a, chosen] { *chosen = [a] { return RunAlloc(*a); }; });
}

}  // namespace dmb::microbench
