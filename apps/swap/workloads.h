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
// algorithm or sizing changes so stale traces are re-recorded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/swap/trace.h"
#include "apps/swap/trace_cache.h"

namespace dmb::apps::swap {

std::vector<std::string> WorkloadNames();
// Paper-scale working set of `name`, in bytes (0 if unknown).
uint64_t PaperWorkingSetBytes(const std::string& name);
// The cache key of (name, scale, seed); throws std::invalid_argument for an
// unknown name or a scale <= 0.
TraceKey WorkloadKey(const std::string& name, double scale, uint64_t seed);
// Runs the algorithm and returns its trace (`record` false: runs it with the
// recorder off and returns a trace with no touches). `input_cpu_s`, when
// given, receives the CPU time spent generating the input (the graph's
// edges), which is not the application's work.
Trace RecordWorkload(const std::string& name, double scale, uint64_t seed, bool record = true,
                     double* input_cpu_s = nullptr);
// CPU time of the calling thread, in seconds.
double ThreadCpuSeconds();
// The trace from `cache`, recorded on a miss.
Trace WorkloadTrace(TraceCache& cache, const std::string& name, double scale, uint64_t seed,
                    bool* hit = nullptr);

}  // namespace dmb::apps::swap
