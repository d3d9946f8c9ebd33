#include "apps/swap/app_cost.h"

#include <algorithm>
#include <limits>

#include "apps/swap/workloads.h"

namespace dmb::apps::swap {

AppCost MeasureAppCost(TraceCache& cache, const std::string& workload, double scale, uint64_t seed,
                       int reps) {
  AppCost c;
  c.workload = workload;
  c.scale = scale;
  c.pages_touched = WorkloadTrace(cache, workload, scale, seed).TouchedPages();
  c.cpu_s = std::numeric_limits<double>::infinity();
  for (int i = 0; i < std::max(reps, 1); ++i) {
    double input_s = 0;
    const double t0 = ThreadCpuSeconds();
    (void)RecordWorkload(workload, scale, seed, /*record=*/false, &input_s);
    const double run_s = ThreadCpuSeconds() - t0 - input_s;
    if (run_s < c.cpu_s) {
      c.cpu_s = run_s;
      c.input_cpu_s = input_s;
    }
  }
  return c;
}

}  // namespace dmb::apps::swap
