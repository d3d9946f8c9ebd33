// The applications' own CPU per page touched (the profile's
// swap.app_page_<application>, the workload's name up to its first '-'),
// measured the way the issue defines it: the algorithm run with all memory
// local. The pages its trace touches come from the trace cache (recorded
// once on a miss); then the workload runs `reps` times at `scale` with the
// recorder off, timing the calling thread's CPU (input generation, the
// graph's edges, left out), and the fastest run counts. cpu_s / pages is the
// work the swap model charges per page touched. Wall clock is not used, so a
// busy machine changes the result little.
#pragma once

#include <cstdint>
#include <string>

#include "apps/swap/trace_cache.h"

namespace dmb::apps::swap {

struct AppCost {
  std::string workload;
  double scale = 0;
  uint64_t pages_touched = 0;  // Trace::TouchedPages of the recorded trace
  double cpu_s = 0;            // the run with the recorder off, input generation excluded
  double input_cpu_s = 0;      // the input generation left out
  double us_per_page() const { return pages_touched ? cpu_s * 1e6 / pages_touched : 0; }
};

// `reps` runs with the recorder off; the fastest counts (the least
// disturbed). Throws std::invalid_argument for an unknown workload.
AppCost MeasureAppCost(TraceCache& cache, const std::string& workload, double scale, uint64_t seed,
                       int reps = 3);

}  // namespace dmb::apps::swap
