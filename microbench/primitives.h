// Primitive microbenchmarks on the simulated cluster: the measurements the
// calibration profile is checked against, and a load generator that the
// simulator-speed benchmark reuses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/histogram.h"
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
inline constexpr int kCalibrationPrimitives = 10;
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

// Control-path primitives at any size, measured like the calibration ones
// (fresh one-node cluster, virtual time, one operation at a time).
//
// MR registration: registers `regions` fresh, disjoint regions of `bytes` on
// the node's CPU one after the other, then deregisters them.
struct MrRegResult {
  Histogram reg;    // one sample per registration
  Histogram dereg;  // one sample per deregistration
};
// `page_bytes`: the OS pages backing the region (4 KB, or 2 MB hugepages as
// Patronus and FineMem use); registration pins and maps per page.
MrRegResult MeasureMrReg(const sim::Profile& profile, uint64_t bytes, int regions,
                         uint64_t seed = 1, uint64_t page_bytes = 4096);

// Memory-window binds over `bytes` of one MR, as the posting CPU sees them
// (post -> completion observed), on a loopback QP: `windows` fresh windows are
// bound once each (`bind`), then each is bound again (`rebind`): type 1 binds
// the bound window anew (ibv_bind_mw, Qp::BindMw); type 2 posts LOCAL_INV,
// waits for it, then a BIND_MW WR (`rebind` covers both, `invalidate` the
// LOCAL_INV alone).
struct MwBindResult {
  Histogram bind;
  Histogram rebind;
  Histogram invalidate;  // type 2 only
};
MwBindResult MeasureMwBind(const sim::Profile& profile, fabric::MwType type, uint64_t bytes,
                           int windows, uint64_t seed = 1);

}  // namespace dmb::microbench
