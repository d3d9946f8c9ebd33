// Access microbenchmark: each CN thread allocates one chunk and then READs
// (or WRITEs) `size_bytes` from it, one operation outstanding, `ops` times.
// Reports latency and the aggregate operation rate. On the ibv backend this is
// what `dmbench micro access --backend ibv` compares with perftest's
// ib_read_lat / ib_read_bw on the same device (our overhead above raw verbs).
#pragma once

#include <string>

#include "microbench/alloc_bench.h"

namespace dmb::microbench {

struct AccessBenchSpec {
  harness::TestbedSpec bed;
  int threads = 1;  // per CN, each with its own lane
  int ops_per_thread = 10000;
  int warmup_per_thread = 100;
  uint32_t size_bytes = 64;
  bool write = false;
};

struct AccessBenchResult {
  std::string system, knobs, backend;
  int threads = 0, cns = 0;
  uint32_t size_bytes = 0;
  OpStats op;
  double mops = 0;  // completed operations per microsecond of (virtual or wall) time
  double elapsed_us = 0;
};

AccessBenchResult RunAccessBench(const AccessBenchSpec& spec);

}  // namespace dmb::microbench
