// Betweenness centrality as GAPBS's bc.cc runs it (Brandes with Madduri et
// al.'s successor bitmap, from `sources` roots, scores normalized by their
// maximum), on a TracedGraph, with every array access recorded.
//
// Arrays: scores (float), path_counts (double), the successor bitmap (one bit
// per out-edge, 64-bit words) and the BFS queue (int32, one slot per vertex)
// live for the whole run; depths (int32, filled with -1) and each thread's
// 16,384-entry local queue (QueueBuffer) for one BFS; deltas (float, zeroed)
// for one back-propagation.
//
// Per source (drawn at random, redrawn while its out-degree is 0, as GAPBS's
// SourcePicker): path_counts zeroed, the bitmap cleared (serially, as
// Bitmap::reset), then a level-synchronous BFS: a frontier vertex's
// out-edges claim unvisited vertices (depths CAS, local queue push, local
// queues flushed into the shared queue when full and at the level's end)
// and, for an edge into the next level, set the edge's successor bit and add
// the path count. Then levels deepest first: delta_u = sum over successor
// edges (u, v) of path_counts[u] / path_counts[v] x (1 + delta_v), and
// scores[u] += delta_u, the source's own dependency included (GAPBS and its
// verifier both count it). Last, the maximum score, then every score divided
// by it.
//
// Threads: `omp for schedule(dynamic, 64)` loops (BFS levels, back-propagation
// levels) are recorded as 64-entry chunks of the level dealt round-robin to
// `threads` threads; plain `omp parallel for` loops (pvector fills, the
// normalization) as `threads` contiguous blocks; a barrier ends each loop and
// each BFS level. Local queues are flushed in thread order.
//
// Sources: GAPBS's bc runs one source by default (-i1), the default here;
// its benchmark spec (benchmark/bench.mk) runs -i4, as the "bc" workload does.
//
// Contract: g has an edge; threads in [1, 32].
#pragma once

#include <cstdint>
#include <vector>

#include "apps/swap/graph.h"
#include "apps/swap/trace.h"

namespace dmb::apps::swap {

struct BcParams {
  uint32_t sources = 1;
  uint32_t threads = 4;
  uint32_t chunk = 64;  // schedule(dynamic, 64)
  uint64_t seed = 0;    // source picking
};

struct BcResult {
  std::vector<float> scores;
  std::vector<uint32_t> sources;
  std::vector<uint32_t> levels;  // BFS levels per source
};

// Runs on `g`, recording on the recorder `g` was built with.
BcResult RunBc(TracedGraph& g, TraceRecorder& rec, const BcParams& p);

}  // namespace dmb::apps::swap
