#include "harness/cpu_sampling.h"

#include <algorithm>

namespace dmb::harness {

double SteadyPeakCores(const fabric::Cpu& cpu, const std::vector<Ps>& marks, int samples) {
  double peak = 0;
  for (size_t p = 0; p + 1 < marks.size(); ++p) {
    const Ps len = marks[p + 1] - marks[p];
    for (int k = 1; k + 1 < samples; ++k) {
      const Ps from = marks[p] + len * k / samples;
      const Ps to = marks[p] + len * (k + 1) / samples;
      peak = std::max(peak, cpu.BusyFraction(from, to));
    }
  }
  return peak * cpu.cores();
}

}  // namespace dmb::harness
