// PageRank as GAPBS's pr.cc runs it (PageRankPullGS: pull-direction
// Gauss-Seidel, damping 0.85, up to 20 iterations, stop when the summed
// score change is below 1e-4), on a TracedGraph, with every array access
// recorded.
//
// Threads: GAPBS's `omp parallel for schedule(dynamic, 16384)` is recorded
// as 16,384-vertex chunks dealt round-robin to `threads` threads, with a
// barrier after each parallel loop.
#pragma once

#include <cstdint>
#include <vector>

#include "apps/swap/graph.h"
#include "apps/swap/trace.h"

namespace dmb::apps::swap {

struct PageRankParams {
  uint32_t max_iters = 20;
  double epsilon = 1e-4;
  uint32_t threads = 4;
  uint32_t chunk_nodes = 16384;
};

struct PageRankResult {
  std::vector<float> scores;
  uint32_t iterations = 0;
};

// Runs on `g`, recording on the recorder `g` was built with.
PageRankResult RunPageRank(TracedGraph& g, TraceRecorder& rec, const PageRankParams& p);

}  // namespace dmb::apps::swap
