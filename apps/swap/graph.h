// Graphs for the GAPBS workloads: a generated Kronecker (R-MAT) power-law
// graph and its CSR form held in traced arrays.
//
// KroneckerEdges follows GAPBS's generator: R-MAT quadrant probabilities
// A=0.57, B=0.19, C=0.19 over 2^s ids, ids permuted at random; here ids at
// or above `nodes` are redrawn so any node count works, and edges are drawn
// until `avg_degree` x nodes distinct directed non-loop edges exist
// (Twitter, the papers' input, averages about 24).
//
// TracedGraph holds out- and in-CSR (int64 offsets, int32 neighbours, sorted
// per node) like GAPBS's CSRGraph for a directed graph; building it records
// the arrays being written in order, as loading a serialized graph does.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "apps/swap/trace.h"
#include "apps/swap/traced_array.h"

namespace dmb::apps::swap {

using Edge = std::pair<uint32_t, uint32_t>;

std::vector<Edge> KroneckerEdges(uint32_t nodes, uint32_t avg_degree, uint64_t seed);

struct TracedGraph {
  uint32_t nodes = 0;
  TracedArray<int64_t> out_index, in_index;  // nodes + 1 offsets
  TracedArray<int32_t> out_neigh, in_neigh;

  // Records the build (sequential writes) on `rec`.
  TracedGraph(TraceRecorder& rec, uint32_t nodes, const std::vector<Edge>& edges);
  uint64_t edges() const { return out_neigh.size(); }
  // Bytes of the CSR arrays for n nodes and m edges.
  static uint64_t Bytes(uint64_t n, uint64_t m) { return 2 * (n + 1) * 8 + 2 * m * 4; }
};

}  // namespace dmb::apps::swap
