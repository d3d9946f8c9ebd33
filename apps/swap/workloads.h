// The swap experiments' workloads by name, sized by `scale` (1 = the
// papers' working sets), and their cached traces.
//
//   kmeans      Kmeans (Elkan, k=10), 2 GB working set (OneSidedMW Fig. 2/9)
//   kmeans-32g  the same, 32 GB (Fig. 8)
//   pagerank    GAPBS PageRank, 4 threads, 14 GB (Twitter-sized graph)
//   memcached   Memcached under Facebook's ETC workload, one server thread,
//               32 GB (OneSidedMW §6.2)
//   bc          GAPBS betweenness centrality, 4 sources, 4 threads, 14 GB
//               (the same Kronecker graph shape as pagerank)
//
// A workload's version string goes into its cache key; bump it whenever its
// algorithm or sizing changes so stale traces are re-recorded. Knobs
// (WorkloadKnobs) go into the key too, but only when they differ from their
// default (TraceKey::knobs), so the traces recorded before a knob existed
// keep their keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/swap/trace.h"
#include "apps/swap/trace_cache.h"

namespace dmb::apps::swap {

// A workload's knobs beyond scale and seed.
struct WorkloadKnobs {
  // memcached: Zipf exponent of key popularity (memcached.h, MemcachedParams).
  static constexpr double kDefaultSkew = 0.99;
  double skew = kDefaultSkew;
};
// Throws std::invalid_argument naming the knob when a knob is out of range
// or set for a workload it does not apply to.
void CheckKnobs(const std::string& name, const WorkloadKnobs& k);

std::vector<std::string> WorkloadNames();
// Paper-scale working set of `name`, in bytes (0 if unknown).
uint64_t PaperWorkingSetBytes(const std::string& name);
// The cache key of (name, scale, seed, knobs); throws std::invalid_argument
// for an unknown name, a scale <= 0 or a bad knob (CheckKnobs).
TraceKey WorkloadKey(const std::string& name, double scale, uint64_t seed,
                     const WorkloadKnobs& k = {});
// Runs the algorithm and returns its trace (`record` false: runs it with the
// recorder off and returns a trace with no touches). `input_cpu_s`, when
// given, receives the CPU time spent generating the input (the graph's
// edges), which is not the application's work.
Trace RecordWorkload(const std::string& name, double scale, uint64_t seed, bool record = true,
                     double* input_cpu_s = nullptr, const WorkloadKnobs& k = {});
// CPU time of the calling thread, in seconds.
double ThreadCpuSeconds();
// The trace from `cache`, recorded on a miss.
Trace WorkloadTrace(TraceCache& cache, const std::string& name, double scale, uint64_t seed,
                    bool* hit = nullptr, const WorkloadKnobs& k = {});

}  // namespace dmb::apps::swap
