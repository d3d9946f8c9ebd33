#include "apps/swap/pagerank.h"

#include <algorithm>
#include <cmath>

#include "apps/swap/traced_array.h"

namespace dmb::apps::swap {
namespace {

constexpr float kDamp = 0.85f;

int64_t OutDegree(TracedGraph& g, uint32_t u, uint8_t t) {
  const int64_t* o = g.out_index.Read(u, 2, t);
  return o[1] - o[0];
}

}  // namespace

PageRankResult RunPageRank(TracedGraph& g, TraceRecorder& rec, const PageRankParams& p) {
  const uint32_t n = g.nodes;
  const float init = 1.0f / n;
  const float base = (1.0f - kDamp) / n;
  TracedArray<float> scores(rec, n, init);
  TracedArray<float> contrib(rec, n);
  auto thread_of = [&](uint32_t u) { return static_cast<uint8_t>(u / p.chunk_nodes % p.threads); };
  for (uint32_t u = 0; u < n; ++u) {
    uint8_t t = thread_of(u);
    contrib.Set(u, init / static_cast<float>(OutDegree(g, u, t)), t);
  }
  rec.Barrier();
  PageRankResult r;
  for (uint32_t iter = 0; iter < p.max_iters; ++iter) {
    double error = 0;
    for (uint32_t u = 0; u < n; ++u) {
      uint8_t t = thread_of(u);
      const int64_t* in = g.in_index.Read(u, 2, t);
      const int32_t* nb = g.in_neigh.Read(in[0], in[1] - in[0], t);
      float total = 0;
      for (int64_t e = 0; e < in[1] - in[0]; ++e) total += contrib.Get(nb[e], t);
      float old = scores.Get(u, t);
      float now = base + kDamp * total;
      scores.Set(u, now, t);
      error += std::fabs(now - old);
      contrib.Set(u, now / static_cast<float>(OutDegree(g, u, t)), t);
    }
    rec.Barrier();
    r.iterations = iter + 1;
    if (error < p.epsilon) break;
  }
  r.scores = scores.untraced();
  return r;
}

}  // namespace dmb::apps::swap
