// Allocation microbenchmark: `threads` CN threads per CN, each with its own
// access group, repeatedly allocate a batch of chunks and free it again; the
// latency of every alloc and free is recorded in virtual time, and the MN
// CPU's busy time over the measured phase gives its busy fraction.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "harness/testbed.h"

namespace dmb::microbench {

struct AllocBenchSpec {
  harness::TestbedSpec bed;  // system, knobs, cns, mn_cores, pool, seed
  int threads = 1;           // per CN
  int ops_per_thread = 200;  // allocations (and as many frees) per thread, measured
  int warmup_per_thread = 16;
  // Chunks a thread holds before freeing them (reduced to fit the pool).
  // batch >= warmup + ops: threads only allocate, so `kops` is the rate the
  // approach sustains with `threads` allocations outstanding.
  int batch = 8;
};

struct OpStats {
  std::string op;  // "alloc" or "free"
  uint64_t count = 0;
  double lat_us_p50 = 0;
  double lat_us_p99 = 0;
  double lat_us_mean = 0;
  // Measured operations per virtual second / 1000, over the span from the
  // first measured one's start to the last one's end (frees included when
  // the threads interleave them: see AllocBenchSpec::batch).
  double kops = 0;
  uint64_t failures = 0;
};

struct AllocBenchResult {
  std::string system;
  std::string knobs;  // "granularity=4KB,mw_type=2"
  int threads = 0;    // per CN
  int cns = 0;
  int mn_cores = 0;
  int batch = 0;
  OpStats alloc;
  OpStats free;
  double mn_cpu_busy_frac = 0;   // busy / (elapsed x cores)
  double mn_cpu_cores_busy = 0;  // busy / elapsed (cores' worth of work)
  double elapsed_us = 0;
  uint64_t trace_hash = 0;
  // sim, measured phase: send WQEs the simulated RNICs started (CN and MN
  // chain WRs), events run, and the wall-clock seconds the phase took (the
  // simulator's own speed: sim_speed_bench).
  uint64_t sim_wrs = 0;
  uint64_t sim_events = 0;
  double wall_s = 0;
};

// Throws systems::ConfigError (bad system/knob, pool too small).
AllocBenchResult RunAllocBench(const AllocBenchSpec& spec);

}  // namespace dmb::microbench
