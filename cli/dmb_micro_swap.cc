// dmb_micro swap: Fastswap-style swapping to an approach's remote memory
// (apps/swap, OneSidedMW §5.1 and §6.2).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "apps/swap/swap_run.h"
#include "apps/swap/trace_cache.h"
#include "cli/dmb_micro.h"
#include "systems/knobs.h"

namespace dmb::microbench {
namespace {

using harness::Testbed;
using harness::TestbedSpec;

struct SwapArgs : BedArgs {
  apps::swap::SwapRunSpec swap;
};

// A granularity above 4 MB is a fraction of the swap area and shrinks with
// it (see --help); smaller ones (one swap cluster, 1 MB, or less) do not.
void ScaleCoarseGranularity(TestbedSpec* bed, double scale) {
  auto it = bed->knobs.find("granularity");
  if (it == bed->knobs.end()) return;
  const uint64_t g = systems::ParseSize(it->second).value_or(0);
  if (g <= (4ull << 20)) return;
  uint64_t scaled = 1ull << 20;
  while (scaled * 2 <= static_cast<double>(g) * scale) scaled *= 2;
  it->second = systems::FormatSize(scaled);
}

// The testbed of a swap run: the granularity scaled with the area, a pool
// holding every CN's swap area (unless --pool says otherwise), 24 cores a CN.
TestbedSpec SwapBed(const SwapArgs& a, const apps::swap::SwapRunSpec& spec) {
  TestbedSpec bed = BedSpec(a);
  ScaleCoarseGranularity(&bed, spec.scale);
  const uint64_t area = static_cast<uint64_t>(spec.swap_gb * spec.scale * (1ull << 30));
  const uint64_t g =
      systems::ParseSize(bed.knobs.count("granularity") ? bed.knobs["granularity"] : "4KB")
          .value_or(4096);
  if (a.pool_option->count() == 0) {
    bed.pool_bytes = static_cast<uint64_t>(a.cns) * ((area + g - 1) / g * g + g);
  }
  bed.cn_cores = 24;  // [OSMW] §6: two 12-core Xeons per node
  return bed;
}

std::vector<std::pair<std::string, double>> SwapCounters(const apps::swap::SwapRunResult& r,
                                                         int tasks) {
  const auto d = [](uint64_t v) { return static_cast<double>(v); };
  return {{"job_s_mean", r.job_s_mean},
          {"job_s_max", r.job_s_max},
          {"sync_lat_us_mean", r.sync_lat.mean_us()},
          {"sync_lat_us_p99", r.sync_lat.p99_us()},
          {"mem_util", r.mem_util},
          {"mn_cpu_peak", r.mn_cpu_peak},
          {"mn_cpu_mean", r.mn_cpu_mean},
          {"alloc_lat_us_mean", r.alloc_lat.mean_us()},
          {"major_faults", d(r.major_faults)},
          {"swap_writes", d(r.writes)},
          {"segment_allocs", d(r.allocs)},
          {"segment_frees", d(r.frees)},
          {"stamp_mismatches", d(r.stamp_mismatches)},
          {"failures", d(r.failures)},
          {"peak_mapped_bytes", d(r.peak_mapped_bytes)},
          {"working_set_pages", d(r.working_set_pages)},
          {"alloc_bytes", d(r.segment_bytes)},
          {"threads_total", d(static_cast<uint64_t>(tasks))},
          {"count", d(r.touches)},
          {"minor_faults", d(r.minor_faults)},
          {"reclaimed_bg", d(r.reclaimed_bg)},
          {"reclaimed_direct", d(r.reclaimed_direct)},
          {"kept_no_slot", d(r.kept_no_slot)},
          {"swap_reads", d(r.reads)}};
}

// ",skew=S" and ",lane_depth=N" when set (so a default run's label is as
// before).
std::string SwapKnobsLabel(const apps::swap::SwapRunSpec& s) {
  std::string out;
  if (s.workload_knobs.skew != apps::swap::WorkloadKnobs::kDefaultSkew) {
    out += ",skew=" + std::to_string(s.workload_knobs.skew);
  }
  if (s.lane_depth != apps::swap::SwapRunSpec{}.lane_depth) {
    out += ",lane_depth=" + std::to_string(s.lane_depth);
  }
  return out;
}

Report RunSwapBench(const SwapArgs& a) {
  apps::swap::SwapRunSpec spec = a.swap;
  spec.seed = a.seed;
  if (spec.trace_dir.empty()) spec.trace_dir = apps::swap::DefaultTraceDir();
  const TestbedSpec bed = SwapBed(a, spec);
  Testbed tb(bed);
  const apps::swap::SwapRunResult r = apps::swap::RunSwap(tb, spec);
  // A failed operation (a segment whose allocation failed loses its
  // swap-out) means the times are not a working swap system's: the point
  // fails, naming the failure first, since the corruption follows from it.
  if (r.failures > 0) {
    const std::string lost = r.stamp_mismatches == 0
                                 ? ""
                                 : "; then " + std::to_string(r.stamp_mismatches) +
                                       " swapped-in pages did not hold what was swapped out";
    throw std::runtime_error(std::to_string(r.failures) +
                             " swap operations failed, first: " + r.first_failure + lost +
                             " (an allocation the MN refused: give it more memory with --pool)");
  }
  if (r.stamp_mismatches > 0) {
    throw std::runtime_error(
        std::to_string(r.stamp_mismatches) +
        " swapped-in pages did not hold what was swapped out; first: " + r.first_mismatch);
  }
  Report rep;
  rep.name = "swap";
  rep.label = BedLabel(a, bed, spec.tasks) + ",app=" + spec.workload +
              ",tasks=" + std::to_string(spec.tasks) +
              ",local=" + std::to_string(spec.local_ratio) +
              ",scale=" + std::to_string(spec.scale) + ",cover=" + spec.segment_policy +
              SwapKnobsLabel(spec) + KnobsLabel(r.knobs);
  rep.seconds = PsToS(r.run_ps);
  rep.counters = SwapCounters(r, spec.tasks);
  return rep;
}

}  // namespace

void SetupSwap(CLI::App& app, BenchFn* chosen) {
  auto a = std::make_shared<SwapArgs>();
  auto* swap =
      app.add_subcommand("swap",
                         "Fastswap-style swapping (apps/swap, OneSidedMW 5.1/6.2) on\n"
                         "--system: --tasks copies of --app dealt over --cns CNs, each in\n"
                         "a cgroup holding --local of its working set; pages go to\n"
                         "remote memory in segments of the approach's granularity.\n"
                         "--scale shrinks working sets and the --swap-gb swap area (the\n"
                         "paper's 32 GB per CN); a granularity above 4 MB is a fraction\n"
                         "of that area (Static-MR's 1 GB = 1/32) and shrinks with it\n"
                         "(to a power of two, at least 1 MB). --cover: how segments\n"
                         "cover the area (lazy, keep, whole). Traces are recorded once\n"
                         "and cached in --trace-dir. Manual time = the run (first task\n"
                         "start to last exit). Counters: job_s_mean job_s_max\n"
                         "sync_lat_us_mean sync_lat_us_p99 mem_util mn_cpu_peak\n"
                         "mn_cpu_mean alloc_lat_us_mean major_faults swap_writes\n"
                         "segment_allocs segment_frees stamp_mismatches (must be 0)\n"
                         "failures peak_mapped_bytes working_set_pages alloc_bytes\n"
                         "threads_total (tasks)");
  AddBedOptions(swap, a.get(), "MN memory for the CNs' swap areas (default: all of them)");
  apps::swap::SwapRunSpec* s = &a->swap;
  swap->add_option("--app", s->workload, "kmeans, kmeans-32g, pagerank, ...")
      ->capture_default_str();
  swap->add_option("--scale", s->scale, "Fraction of the paper's sizes, (0, 1]")
      ->transform(Fraction(true))
      ->capture_default_str();
  swap->add_option("--skew", s->workload_knobs.skew,
                   "memcached: Zipf exponent of key popularity, (0, 10] (Facebook's ETC\n"
                   "is heavily skewed; 0.99 as YCSB). Other apps refuse it.")
      ->capture_default_str();
  swap->add_option("--tasks", s->tasks, "Application copies over all CNs")
      ->transform(IntIn(1, 4096))
      ->capture_default_str();
  swap->add_option("--local", s->local_ratio, "Local memory / working set, (0, 1]")
      ->transform(Fraction(true))
      ->capture_default_str();
  swap->add_option("--swap-gb", s->swap_gb, "Swap area per CN at scale 1, in GB")
      ->transform(Fraction(false))
      ->capture_default_str();
  swap->add_option("--cover", s->segment_policy,
                   "Segments mapped on first store and freed when empty (lazy), never freed\n"
                   "(keep), or the area mapped at start (whole)")
      ->check(OneOf({"lazy", "keep", "whole"}))
      ->capture_default_str();
  swap->add_option("--lane-depth", s->lane_depth,
                   "4 KB I/Os in flight per pager lane (a QP keeps several WRs outstanding;\n"
                   "capped by the approach's lane depth, 16); 1: one at a time")
      ->transform(IntIn(1, 256))
      ->capture_default_str();
  swap->add_option("--trace-dir", s->trace_dir,
                   "Trace cache (default $DMB_TRACE_DIR, else ~/.cache/dmbench/traces)");
  swap->callback([a, chosen] { *chosen = [a] { return RunSwapBench(*a); }; });
}

}  // namespace dmb::microbench
