// Primitive microbenchmarks on the simulated cluster: the measurements the
// calibration profile is checked against, and a load generator that the
// simulator-speed benchmark reuses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/sim/profile.h"
#include "fabric/verbs.h"

namespace dmb::microbench {

struct PrimitiveResult {
  std::string name;  // e.g. "read_4k_lat_us"
  double sim;        // what the simulator measures
  double source;     // what the source states
  std::string unit;
  std::string source_ref;  // paper + figure/section
  double ratio() const { return source != 0 ? sim / source : 0; }
};

// Runs every calibration primitive on a fresh cluster per primitive.
// `trace_hash` (optional) receives the hash of the throughput run's trace.
std::vector<PrimitiveResult> RunCalibration(const sim::Profile& profile, uint64_t seed = 1,
                                            uint64_t* trace_hash = nullptr);

// Closed-loop load: `cns` compute nodes x `qps_per_cn` QPs to one memory
// node, each QP keeping `depth` WRs of `opcode` (READ, WRITE or FETCH_AND_ADD)
// of `bytes` outstanding until it has completed `ops_per_qp`.
struct LoadSpec {
  int cns = 1;
  int qps_per_cn = 1;
  int depth = 1;
  uint32_t bytes = 64;
  fabric::Opcode opcode = fabric::Opcode::kRead;
  uint64_t ops_per_qp = 1000;
  int offloaded_mn_qps = 0;  // extra MN QPs holding offloaded (cross-channel) WRs
};
struct LoadResult {
  uint64_t ops = 0;
  Ps elapsed_ps = 0;
  uint64_t events = 0;
  uint64_t trace_hash = 0;  // same seed -> same hash
  double lat_us_mean = 0;
  double lat_us_p99 = 0;
  double mops() const { return elapsed_ps ? ops / (PsToS(elapsed_ps) * 1e6) : 0; }
};
LoadResult RunLoad(const sim::Profile& profile, const LoadSpec& spec, uint64_t seed = 1);

}  // namespace dmb::microbench
