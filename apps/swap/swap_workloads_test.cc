// The workloads' algorithms: results are right, traces are deterministic,
// touch only mapped memory, and are cached.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>

#include "apps/swap/graph.h"
#include "apps/swap/kmeans.h"
#include "apps/swap/pagerank.h"
#include "apps/swap/workloads.h"

namespace dmb::apps::swap {
namespace {

// Every read/write lies in a region that is mapped at that point.
void ExpectTouchesMapped(const Trace& t) {
  std::vector<uint8_t> mapped(t.address_pages, 0);
  uint64_t bad = 0;
  for (const TraceEvent& e : t.events) {
    for (uint64_t p = e.first_page; p < e.first_page + e.pages; ++p) {
      if (e.op == TraceOp::kMap) mapped[p] = 1;
      if (e.op == TraceOp::kUnmap) mapped[p] = 0;
      if ((e.op == TraceOp::kRead || e.op == TraceOp::kWrite) && !mapped[p]) ++bad;
    }
  }
  EXPECT_EQ(bad, 0u);
}

uint64_t Count(const Trace& t, TraceOp op) {
  return std::count_if(t.events.begin(), t.events.end(),
                       [op](const TraceEvent& e) { return e.op == op; });
}

TEST(KmeansTest, FindsSeparatedBlobs) {
  KmeansParams p;
  p.samples = 3000;
  p.features = 4;
  p.blob_std = 0.05;
  p.n_init = 3;
  p.seed = 11;
  KmeansResult r = RunKmeans(p);
  // Each point sits near its blob's centre: mean squared error ~ d * std^2.
  EXPECT_LT(r.inertia / p.samples, 2 * p.features * p.blob_std * p.blob_std);
  for (uint32_t it : r.iterations) EXPECT_LT(it, p.max_iter);
  EXPECT_EQ(std::set<int32_t>(r.labels.begin(), r.labels.end()).size(), p.clusters);
}

TEST(KmeansTest, TraceIsDeterministicPerSeedAndReallocatesPerRestart) {
  KmeansParams p = KmeansParams::ForWorkingSet(1 << 20, 3);
  p.n_init = 4;
  KmeansResult a = RunKmeans(p), b = RunKmeans(p);
  EXPECT_EQ(a.trace, b.trace);
  p.seed = 4;
  EXPECT_NE(RunKmeans(p).trace, a.trace);
  // X, norms, then per restart: k-means++ temporaries and 4 run arrays.
  EXPECT_GE(Count(a.trace, TraceOp::kMap), 2 + 4 * p.n_init);
  EXPECT_EQ(Count(a.trace, TraceOp::kMap), Count(a.trace, TraceOp::kUnmap));  // all freed at exit
  ExpectTouchesMapped(a.trace);
  // Every restart streams X and the bounds many times.
  EXPECT_GT(a.trace.TouchedPages(), 10 * (1u << 20) / kPageBytes);  // swap-intensive: many passes
}

TEST(GraphTest, KroneckerGraphHasTheDegreeAndASkewedInDegree) {
  std::vector<Edge> e = KroneckerEdges(4096, 24, 5);
  EXPECT_EQ(e.size(), 24u * 4096);
  std::set<Edge> uniq(e.begin(), e.end());
  EXPECT_EQ(uniq.size(), e.size());
  std::vector<uint32_t> indeg(4096);
  for (auto [u, v] : e) {
    EXPECT_NE(u, v);
    ++indeg[v];
  }
  EXPECT_GT(*std::max_element(indeg.begin(), indeg.end()), 10 * 24u);  // power law
  EXPECT_EQ(KroneckerEdges(4096, 24, 5), e);
}

TEST(PageRankTest, RingWithChordsSumsToOne) {
  TraceRecorder rec({.threads = 2});
  std::vector<Edge> e;
  for (uint32_t u = 0; u < 6; ++u) e.push_back({u, (u + 1) % 6}), e.push_back({u, (u + 3) % 6});
  TracedGraph g(rec, 6, e);
  PageRankParams p{.max_iters = 200, .epsilon = 1e-9, .threads = 2, .chunk_nodes = 3};
  PageRankResult r = RunPageRank(g, rec, p);
  EXPECT_NEAR(std::accumulate(r.scores.begin(), r.scores.end(), 0.0), 1.0, 1e-4);
  for (float s : r.scores) EXPECT_NEAR(s, 1.0 / 6, 1e-4);  // vertex-transitive graph
  Trace t = rec.Finish();
  EXPECT_EQ(Count(t, TraceOp::kBarrier), r.iterations + 1);
  std::set<int> threads;
  for (const TraceEvent& ev : t.events) threads.insert(ev.thread);
  EXPECT_EQ(threads, (std::set<int>{0, 1}));
}

TEST(PageRankTest, HubsRankHighOnAKroneckerGraph) {
  TraceRecorder rec({.threads = 4});
  std::vector<Edge> e = KroneckerEdges(8192, 24, 9);
  TracedGraph g(rec, 8192, e);
  PageRankResult r = RunPageRank(g, rec, {});
  double sum = std::accumulate(r.scores.begin(), r.scores.end(), 0.0);
  EXPECT_LE(sum, 1.0 + 1e-3);  // dangling nodes leak rank, as in GAPBS
  EXPECT_GT(sum, 0.5);
  uint32_t top = std::max_element(r.scores.begin(), r.scores.end()) - r.scores.begin();
  const std::vector<int64_t>& in = g.in_index.untraced();
  EXPECT_GT(in[top + 1] - in[top], 5 * 24);
  Trace t = rec.Finish();
  ExpectTouchesMapped(t);
}

TEST(WorkloadsTest, TracesAreCachedByWorkloadScaleAndSeed) {
  auto dir = std::filesystem::temp_directory_path() / ("dmb_wl_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  TraceCache cache(dir);
  const double scale = 1.0 / 8192;
  for (const std::string& name : WorkloadNames()) {
    if (name == "kmeans-32g") continue;  // same algorithm as kmeans, 16x the size
    bool hit = true;
    Trace a = WorkloadTrace(cache, name, scale, 1, &hit);
    EXPECT_FALSE(hit) << name;
    Trace b = WorkloadTrace(cache, name, scale, 1, &hit);
    EXPECT_TRUE(hit) << name;
    EXPECT_EQ(a, b) << name;
    EXPECT_EQ(a, RecordWorkload(name, scale, 1)) << name;  // deterministic per seed
    EXPECT_GT(a.TouchedPages(), 0u);
  }
  EXPECT_THROW(WorkloadKey("nope", 1, 1), std::invalid_argument);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dmb::apps::swap
