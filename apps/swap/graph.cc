#include "apps/swap/graph.h"

#include <algorithm>
#include <numeric>

#include "apps/swap/rng.h"

namespace dmb::apps::swap {
namespace {

uint32_t LogCeil(uint32_t n) {
  uint32_t s = 0;
  while ((uint64_t{1} << s) < n) ++s;
  return s;
}

Edge RmatEdge(Rng& rng, uint32_t scale) {
  uint32_t u = 0, v = 0;
  for (uint32_t bit = 0; bit < scale; ++bit) {
    double r = rng.Uniform();
    bool down = r >= 0.57 + 0.19;                       // quadrants C, D
    bool right = (r >= 0.57 && r < 0.76) || r >= 0.95;  // B, D
    u = (u << 1) | down;
    v = (v << 1) | right;
  }
  return {u, v};
}

// CSR of `edges` keyed by .first: offsets (n + 1) and sorted neighbours.
void BuildCsr(uint32_t n, const std::vector<Edge>& edges, bool by_src, std::vector<int64_t>* idx,
              std::vector<int32_t>* neigh) {
  idx->assign(uint64_t{n} + 1, 0);
  for (const Edge& e : edges) ++(*idx)[(by_src ? e.first : e.second) + 1];
  std::partial_sum(idx->begin(), idx->end(), idx->begin());
  neigh->assign(edges.size(), 0);
  std::vector<int64_t> pos(idx->begin(), idx->end() - 1);
  for (const Edge& e : edges) {
    (*neigh)[pos[by_src ? e.first : e.second]++] =
        static_cast<int32_t>(by_src ? e.second : e.first);
  }
  for (uint32_t u = 0; u < n; ++u)
    std::sort(neigh->begin() + (*idx)[u], neigh->begin() + (*idx)[u + 1]);
}

template <typename T>
void Load(TracedArray<T>& dst, const std::vector<T>& src) {
  const uint64_t step = kPageBytes / sizeof(T);
  for (uint64_t i = 0; i < src.size(); i += step) {
    uint64_t k = std::min<uint64_t>(step, src.size() - i);
    std::copy_n(src.begin() + i, k, dst.Write(i, k));
  }
}

}  // namespace

std::vector<Edge> KroneckerEdges(uint32_t nodes, uint32_t avg_degree, uint64_t seed) {
  Rng rng(seed);
  const uint32_t scale = LogCeil(nodes);
  std::vector<uint32_t> perm(uint64_t{1} << scale);
  std::iota(perm.begin(), perm.end(), 0);
  for (uint64_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[rng.Below(i + 1)]);
  const uint64_t want =
      std::min<uint64_t>(uint64_t{avg_degree} * nodes, uint64_t{nodes} * (nodes - 1));
  std::vector<Edge> edges;
  while (edges.size() < want) {
    uint64_t missing = want - edges.size();
    for (uint64_t i = 0; i < missing + missing / 8 + 16; ++i) {
      Edge e = RmatEdge(rng, scale);
      e = {perm[e.first], perm[e.second]};
      if (e.first < nodes && e.second < nodes && e.first != e.second) edges.push_back(e);
    }
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  }
  // Keep exactly `want`, dropping a random surplus.
  for (uint64_t i = edges.size() - 1; i > 0; --i) std::swap(edges[i], edges[rng.Below(i + 1)]);
  edges.resize(want);
  return edges;
}

TracedGraph::TracedGraph(TraceRecorder& rec, uint32_t n, const std::vector<Edge>& edges)
    : nodes(n),
      out_index(rec, uint64_t{n} + 1),
      in_index(rec, uint64_t{n} + 1),
      out_neigh(rec, edges.size()),
      in_neigh(rec, edges.size()) {
  std::vector<int64_t> idx;
  std::vector<int32_t> neigh;
  BuildCsr(n, edges, true, &idx, &neigh);
  Load(out_index, idx);
  Load(out_neigh, neigh);
  BuildCsr(n, edges, false, &idx, &neigh);
  Load(in_index, idx);
  Load(in_neigh, neigh);
}

}  // namespace dmb::apps::swap
