// Access microbenchmark: each CN thread allocates one chunk and then READs
// (or WRITEs) `size_bytes` from it `ops` times, with `depth` operations
// outstanding on its one lane (each slot its own part of the group buffer).
// Reports per-operation latency and the aggregate operation rate. On the ibv
// backend this is what `dmbench micro access --backend ibv` compares with
// perftest's ib_read_lat (depth 1) and ib_read_bw (threads x depth READs in
// flight) on the same device (our overhead above raw verbs).
#pragma once

#include <string>

#include "microbench/alloc_bench.h"

namespace dmb::microbench {

struct AccessBenchSpec {
  harness::TestbedSpec bed;
  int threads = 1;  // per CN, each with its own lane
  int ops_per_thread = 10000;
  int warmup_per_thread = 100;  // unmeasured, split over the slots like `ops`
  int depth = 1;                // operations outstanding per thread
  uint32_t size_bytes = 64;
  bool write = false;
};

struct AccessBenchResult {
  std::string system, knobs, backend;
  int threads = 0, cns = 0, depth = 1;
  uint32_t size_bytes = 0;
  OpStats op;
  double mops = 0;  // completed operations per microsecond of (virtual or wall) time
  double elapsed_us = 0;
};

AccessBenchResult RunAccessBench(const AccessBenchSpec& spec);

}  // namespace dmb::microbench
