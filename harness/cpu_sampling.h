// How the applications report an MN's CPU as a sampling tool (top, mpstat)
// would over a run much longer than its interval.
#pragma once

#include <vector>

#include "fabric/node.h"

namespace dmb::harness {

// Peak cores busy over the phases [marks[p], marks[p+1]): each phase cut into
// `samples` intervals, its first and last dropped (start-up burst, ramp-down
// while the last clients finish), peak = the busiest interval left, over all
// phases. The interval scales with the phase, so a 4x longer run samples the
// same steady state.
double SteadyPeakCores(const fabric::Cpu& cpu, const std::vector<Ps>& marks, int samples);

}  // namespace dmb::harness
