// The workloads' algorithms: results are right, traces are deterministic,
// touch only mapped memory, and are cached.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <optional>
#include <set>

#include "apps/swap/app_cost.h"
#include "apps/swap/bc.h"
#include "apps/swap/graph.h"
#include "apps/swap/kmeans.h"
#include "apps/swap/memcached.h"
#include "apps/swap/pagerank.h"
#include "apps/swap/rng.h"
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

// Empirical CDF of `n` samples of `q` at x vs the analytic `cdf`.
template <typename Q, typename Cdf>
void ExpectQuantileMatchesCdf(Q q, Cdf cdf, std::initializer_list<double> xs) {
  const int n = 200000;
  Rng rng(17);
  std::vector<double> v(n);
  for (double& x : v) x = q(rng.Uniform());
  std::sort(v.begin(), v.end());
  for (double x : xs) {
    double emp = static_cast<double>(std::upper_bound(v.begin(), v.end(), x) - v.begin()) / n;
    EXPECT_NEAR(emp, cdf(x), 0.005) << "x=" << x;  // ~4.5 sigma at n = 2e5
  }
}

TEST(MemcachedTest, EtcKeySizesFollowTheGev) {
  const double mu = 30.7984, sigma = 8.20449, xi = 0.078688;
  auto cdf = [&](double x) { return std::exp(-std::pow(1 + xi * (x - mu) / sigma, -1 / xi)); };
  ExpectQuantileMatchesCdf(EtcKeySizeQuantile, cdf, {20, 25, 30, 35, 40, 50, 70});
  // Mean of GEV(xi < 1): mu + sigma (Gamma(1 - xi) - 1) / xi, about 36.
  const double mean = mu + sigma * (std::tgamma(1 - xi) - 1) / xi;
  Rng rng(3);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    uint32_t k = EtcKeySize(rng);
    ASSERT_GE(k, 1u);
    ASSERT_LE(k, 250u);
    sum += k;
  }
  EXPECT_NEAR(sum / n, mean, 0.15);
}

TEST(MemcachedTest, EtcValueSizesFollowTheGeneralizedPareto) {
  const double sigma = 214.476, xi = 0.348238;
  auto cdf = [&](double x) { return 1 - std::pow(1 + xi * x / sigma, -1 / xi); };
  ExpectQuantileMatchesCdf(EtcValueSizeQuantile, cdf, {10, 50, 100, 200, 500, 1000, 5000});
  Rng rng(4);
  double sum = 0;
  const int n = 400000;
  for (int i = 0; i < n; ++i) {
    uint32_t v = EtcValueSize(rng, 250);
    ASSERT_LE(kMemcachedHeaderBytes + 250 + v, kMemcachedSlabBytes);
    sum += v;
  }
  EXPECT_NEAR(sum / n, sigma / (1 - xi), 0.03 * sigma / (1 - xi));  // mean ~329 B
}

TEST(MemcachedTest, ZipfRanksFollowThePowerLaw) {
  for (double s : {0.99, 1.0, 1.2}) {
    const uint64_t n = 1000;
    double norm = 0;
    for (uint64_t k = 1; k <= n; ++k) norm += std::pow(k, -s);
    ZipfSampler zipf(n, s);
    Rng rng(8);
    std::vector<uint64_t> hits(n);
    const int draws = 500000;
    for (int i = 0; i < draws; ++i) {
      uint64_t r = zipf.Sample(rng);
      ASSERT_LT(r, n);
      ++hits[r];
    }
    for (uint64_t k : {0, 1, 2, 9, 99}) {
      double p = std::pow(k + 1, -s) / norm;
      EXPECT_NEAR(static_cast<double>(hits[k]) / draws, p, 5 * std::sqrt(p / draws) + 1e-4)
          << "s=" << s << " rank=" << k;
    }
    double tail = 0;
    for (uint64_t k = n / 2; k < n; ++k) tail += std::pow(k + 1, -s) / norm;
    uint64_t tail_hits = std::accumulate(hits.begin() + n / 2, hits.end(), uint64_t{0});
    EXPECT_NEAR(static_cast<double>(tail_hits) / draws, tail, 0.003) << "s=" << s;
  }
}

TEST(MemcachedTest, EveryGetWritesItsItemsPageAndAMissWritesNothing) {
  TraceRecorder rec;
  Rng rng(5);
  std::vector<uint64_t> item;  // per GET: its item's page, or ~0 on a miss
  {
    MemcachedServer s(rec, 8 << 20);
    for (uint32_t k = 0; k < 5000; ++k) {
      uint32_t kb = EtcKeySize(rng);
      ASSERT_TRUE(s.Set(k, kb, EtcValueSize(rng, kb)));
    }
    rec.Barrier();
    for (int i = 0; i < 3000; ++i) {
      std::optional<uint64_t> a = s.Get(static_cast<uint32_t>(rng.Below(6000)));
      item.push_back(a ? *a / kPageBytes : ~uint64_t{0});
      rec.Barrier();  // delimits this GET's events
    }
    EXPECT_EQ(s.stats().gets, 3000u);
    EXPECT_GT(s.stats().hits, 2000u);
  }
  Trace t = rec.Finish();
  auto it = std::find_if(t.events.begin(), t.events.end(),
                         [](const TraceEvent& e) { return e.op == TraceOp::kBarrier; });
  for (uint64_t page : item) {
    auto end = std::find_if(it + 1, t.events.end(),
                            [](const TraceEvent& e) { return e.op == TraceOp::kBarrier; });
    bool wrote_item = false, wrote_any = false;
    for (auto e = it + 1; e != end; ++e) {
      if (e->op != TraceOp::kWrite) continue;
      wrote_any = true;
      wrote_item |= e->first_page <= page && page < e->first_page + e->pages;
    }
    EXPECT_EQ(wrote_any, page != ~uint64_t{0});
    EXPECT_EQ(wrote_item, page != ~uint64_t{0});
    it = end;
  }
}

TEST(MemcachedTest, AFullClassEvictsItsLeastRecentlyUsedItem) {
  TraceRecorder rec;
  MemcachedServer s(rec, kMemcachedSlabBytes);  // -m 1 MB: one slab page
  uint32_t k = 0;
  while (s.Set(k, 8, 40, false)) ++k;  // 48 + 8 + 40 = 96 B: the smallest class
  EXPECT_EQ(k, kMemcachedSlabBytes / 96);
  EXPECT_EQ(s.stats().slab_pages, 1u);
  EXPECT_EQ(s.stats().evictions, 0u);
  ASSERT_TRUE(s.Get(0));  // bumped to the head: key 1 is now the LRU tail
  EXPECT_TRUE(s.Set(k, 8, 40));
  EXPECT_EQ(s.stats().evictions, 1u);
  EXPECT_FALSE(s.Get(1));
  EXPECT_TRUE(s.Get(0));
  EXPECT_TRUE(s.Get(k));
  EXPECT_EQ(s.stats().items, k);
  // A class without a page gets one even past the limit, as in memcached.
  EXPECT_TRUE(s.Set(k + 1, 8, 1000, false));
  EXPECT_EQ(s.stats().slab_pages, 2u);
  // Replacing a key frees its old chunk: same item count, and the new item
  // (another class) is what GET finds.
  std::optional<uint64_t> before = s.Get(5);
  EXPECT_TRUE(s.Set(5, 8, 1000));
  EXPECT_EQ(s.stats().items, k + 1);
  EXPECT_NE(s.Get(5), before);
}

TEST(MemcachedTest, TheHashTableDoublesPastOneAndAHalfItemsPerBucket) {
  TraceRecorder rec;
  {
    MemcachedServer s(rec, 64 << 20, 4);  // 16 buckets
    for (uint32_t k = 0; k < 100; ++k) ASSERT_TRUE(s.Set(k, 10, 100));
    EXPECT_EQ(s.stats().buckets, 128u);  // 100 > 1.5 x 64
    for (uint32_t k = 0; k < 100; ++k) EXPECT_TRUE(s.Get(k)) << k;
    EXPECT_FALSE(s.Get(100));
  }
  Trace t = rec.Finish();
  EXPECT_EQ(Count(t, TraceOp::kMap), 4u + 1);  // tables of 16, 32, 64, 128 buckets; one page
  EXPECT_EQ(Count(t, TraceOp::kUnmap), Count(t, TraceOp::kMap));
  ExpectTouchesMapped(t);
}

TEST(MemcachedTest, EtcRunFillsTheMemoryAndIssuesThirtyGetsPerSet) {
  MemcachedParams p{.memory_bytes = 16 << 20, .slab_page_bytes = 256 << 10, .seed = 1};
  MemcachedResult r = RunMemcached(p);
  EXPECT_EQ(r.trace.threads, 1u);
  EXPECT_GE(r.run.slab_pages * p.slab_page_bytes, p.memory_bytes);
  // Past the limit only classes without a page get one.
  EXPECT_LE(r.run.slab_pages * p.slab_page_bytes, p.memory_bytes * 5 / 4);
  // Items average ~48 + 36 + 329 B and fill their chunks to ~80%.
  EXPECT_GT(r.loaded * 413, p.memory_bytes / 2);
  EXPECT_LT(r.loaded * 413, p.memory_bytes);
  EXPECT_EQ(r.run.gets + r.run.sets, 2 * r.loaded);
  double ratio = static_cast<double>(r.run.gets) / r.run.sets;
  EXPECT_GT(ratio, 27.0);
  EXPECT_LT(ratio, 33.0);
  EXPECT_GT(r.run.hits, 0.95 * r.run.gets);  // only evicted keys miss
  EXPECT_EQ(Count(r.trace, TraceOp::kMap), Count(r.trace, TraceOp::kUnmap));
  ExpectTouchesMapped(r.trace);
  EXPECT_EQ(RunMemcached(p).trace, r.trace);
  p.seed = 2;
  EXPECT_NE(RunMemcached(p).trace, r.trace);
}

// GAPBS's BCVerifier: serial Brandes on the untraced CSR, from `sources`.
std::vector<float> ReferenceBc(TracedGraph& g, const std::vector<uint32_t>& sources) {
  const std::vector<int64_t>& idx = g.out_index.untraced();
  const std::vector<int32_t>& nb = g.out_neigh.untraced();
  std::vector<float> scores(g.nodes, 0);
  for (uint32_t s : sources) {
    std::vector<int> depth(g.nodes, -1);
    std::vector<double> paths(g.nodes, 0);
    std::vector<uint32_t> order{s};
    depth[s] = 0, paths[s] = 1;
    for (size_t i = 0; i < order.size(); ++i) {
      uint32_t u = order[i];
      for (int64_t e = idx[u]; e < idx[u + 1]; ++e) {
        if (depth[nb[e]] == -1) depth[nb[e]] = depth[u] + 1, order.push_back(nb[e]);
        if (depth[nb[e]] == depth[u] + 1) paths[nb[e]] += paths[u];
      }
    }
    std::vector<float> delta(g.nodes, 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return depth[a] > depth[b]; });
    for (uint32_t u : order) {
      for (int64_t e = idx[u]; e < idx[u + 1]; ++e) {
        if (depth[nb[e]] == depth[u] + 1) delta[u] += paths[u] / paths[nb[e]] * (1 + delta[nb[e]]);
      }
      scores[u] += delta[u];
    }
  }
  float top = *std::max_element(scores.begin(), scores.end());
  for (float& x : scores) x /= top;
  return scores;
}

TEST(BcTest, CycleScoresCountEachSourcesDependencies) {
  TraceRecorder rec({.threads = 2});
  std::vector<Edge> e{{0, 1}, {1, 2}, {2, 3}, {3, 0}};
  TracedGraph g(rec, 4, e);
  BcResult r = RunBc(g, rec, {.sources = 3, .threads = 2, .chunk = 1, .seed = 6});
  // From s: delta(s + 3) = 0, delta(s + 2) = 1, delta(s + 1) = 2, delta(s) = 3.
  std::vector<float> want(4, 0);
  for (uint32_t s : r.sources) {
    for (uint32_t i = 0; i < 3; ++i) want[(s + i) % 4] += 3.0f - i;
  }
  float top = *std::max_element(want.begin(), want.end());
  for (uint32_t u = 0; u < 4; ++u) EXPECT_FLOAT_EQ(r.scores[u], want[u] / top) << u;
  EXPECT_EQ(r.levels, std::vector<uint32_t>(3, 4));
}

TEST(BcTest, MatchesSerialBrandesOnAKroneckerGraph) {
  TraceRecorder rec({.threads = 4});
  std::vector<Edge> e = KroneckerEdges(3000, 8, 21);
  TracedGraph g(rec, 3000, e);
  BcParams p{.sources = 5, .threads = 4, .chunk = 16, .seed = 2};
  BcResult r = RunBc(g, rec, p);
  ASSERT_EQ(r.sources.size(), 5u);
  std::vector<float> want = ReferenceBc(g, r.sources);
  for (uint32_t u = 0; u < 3000; ++u) ASSERT_NEAR(r.scores[u], want[u], 1e-6) << u;
  EXPECT_FLOAT_EQ(*std::max_element(r.scores.begin(), r.scores.end()), 1.0f);
  Trace t = rec.Finish();
  // Barriers: scores fill; per source path_counts, depths and deltas fills,
  // one per BFS level and one per back-propagation loop (levels + 1); two to
  // normalize.
  uint64_t barriers = 3;
  for (uint32_t levels : r.levels) barriers += 3 + levels + levels + 1;
  EXPECT_EQ(Count(t, TraceOp::kBarrier), barriers);
  std::set<int> threads;
  for (const TraceEvent& ev : t.events) threads.insert(ev.thread);
  EXPECT_EQ(threads, (std::set<int>{0, 1, 2, 3}));
  ExpectTouchesMapped(t);
}

TEST(BcTest, TraceIsDeterministicPerSeed) {
  auto record = [](uint64_t seed) {
    TraceRecorder rec({.threads = 4});
    TracedGraph g(rec, 2000, KroneckerEdges(2000, 16, 3));
    RunBc(g, rec, {.sources = 2, .seed = seed});
    return rec.Finish();
  };
  Trace a = record(1);
  EXPECT_EQ(record(1), a);
  EXPECT_NE(record(2), a);  // other sources
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

// memcached's skew knob: a key of its own (file and key line) when set, the
// old key exactly when not; a flatter popularity touches more pages; a knob
// on another workload, or out of range, is refused naming it.
TEST(WorkloadsTest, MemcachedSkewIsPartOfTheTraceKey) {
  const double scale = 1.0 / 8192;
  const TraceKey plain = WorkloadKey("memcached", scale, 1);
  EXPECT_EQ(plain.knobs, "");
  EXPECT_EQ(plain.KeyLine().find("knobs"), std::string::npos);
  EXPECT_EQ(plain.FileName(), "memcached-scale0.00012207-seed1.trace");
  const TraceKey flat = WorkloadKey("memcached", scale, 1, {.skew = 0.5});
  EXPECT_EQ(flat.FileName(), "memcached-scale0.00012207-seed1-skew=0.5.trace");
  EXPECT_NE(flat.KeyLine(), plain.KeyLine());
  const uint64_t pages_default = RecordWorkload("memcached", scale, 1).TouchedPages();
  const uint64_t pages_flat =
      RecordWorkload("memcached", scale, 1, true, nullptr, {.skew = 0.5}).TouchedPages();
  EXPECT_GT(pages_flat, pages_default);
  try {
    WorkloadKey("kmeans", scale, 1, {.skew = 0.5});
    ADD_FAILURE() << "skew on kmeans accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "skew applies to the memcached workload only, not kmeans");
  }
  EXPECT_THROW(WorkloadKey("memcached", scale, 1, {.skew = 0}), std::invalid_argument);
  EXPECT_THROW(WorkloadKey("memcached", scale, 1, {.skew = 11}), std::invalid_argument);
}

// 4x the scale, about 4x the touched pages: the recorder's epoch is a fixed
// fraction of the working set (trace.h, ScaledEpochPages), so the same share
// of touches coalesces (for memcached the Zipf-hot keys take a smaller
// share). Below 1,024 working-set pages the epoch sits at its 16-page floor,
// a larger fraction of the working set, and more coalesces: BC touches 10x
// the pages from 1/16384 (224 pages) to 1/4096, 4.5x from 1/4096 to 1/1024.
TEST(WorkloadsTest, NewWorkloadsTouchPagesInProportionToScale) {
  for (auto [name, scale] : {std::pair{"memcached", 1.0 / 4096}, std::pair{"bc", 1.0 / 4096}}) {
    double small = static_cast<double>(RecordWorkload(name, scale, 1).TouchedPages());
    double large = static_cast<double>(RecordWorkload(name, 4 * scale, 1).TouchedPages());
    EXPECT_GT(large / small, 3.0) << name;
    EXPECT_LT(large / small, 6.5) << name;
  }
}

// The application's own CPU: the recorder off records no touch, and the cost
// per page is the unrecorded run's CPU over the recorded trace's pages.
TEST(AppCostTest, TheRecorderOffRecordsNothingAndTheCostIsPerPageTouched) {
  EXPECT_EQ(RecordWorkload("kmeans", 1.0 / 8192, 1, /*record=*/false).TouchedPages(), 0u);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "dmb_app_cost_test_traces";
  std::filesystem::remove_all(dir);
  TraceCache cache(dir);
  const AppCost c = MeasureAppCost(cache, "kmeans", 1.0 / 8192, 1, 1);
  EXPECT_EQ(c.pages_touched, RecordWorkload("kmeans", 1.0 / 8192, 1).TouchedPages());
  EXPECT_GT(c.pages_touched, 0u);
  EXPECT_GT(c.cpu_s, 0);
  EXPECT_DOUBLE_EQ(c.us_per_page(), c.cpu_s * 1e6 / static_cast<double>(c.pages_touched));
  double input_s = -1;
  (void)RecordWorkload("pagerank", 1.0 / 8192, 1, false, &input_s);
  EXPECT_GT(input_s, 0) << "the graph's generation is timed apart";
  EXPECT_THROW(MeasureAppCost(cache, "kmeans-64g", 0.5, 1, 1), std::invalid_argument);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dmb::apps::swap
