#include "apps/swap/workloads.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "apps/swap/bc.h"
#include "apps/swap/graph.h"
#include "apps/swap/kmeans.h"
#include "apps/swap/memcached.h"
#include "apps/swap/pagerank.h"

namespace dmb::apps::swap {
namespace {

constexpr uint64_t kGB = 1ull << 30;

struct Entry {
  const char* name;
  uint64_t paper_bytes;
  const char* version;
};

// v2: the recorder's epoch is ScaledEpochPages() of the working set, not
// a fixed 512 pages (trace.h).
constexpr Entry kEntries[] = {
    {"kmeans", 2 * kGB, "elkan-v2"},   {"kmeans-32g", 32 * kGB, "elkan-v2"},
    {"pagerank", 14 * kGB, "prgs-v2"}, {"memcached", 32 * kGB, "etc-v2"},
    {"bc", 14 * kGB, "bc-v2"},
};

const Entry& Find(const std::string& name) {
  for (const Entry& e : kEntries) {
    if (name == e.name) return e;
  }
  throw std::invalid_argument("unknown swap workload: " + name);
}

uint64_t ScaledBytes(const Entry& e, double scale) {
  if (!(scale > 0)) throw std::invalid_argument("scale must be > 0");
  return static_cast<uint64_t>(static_cast<double>(e.paper_bytes) * scale);
}

std::vector<Edge> TimedEdges(uint32_t nodes, uint32_t degree, uint64_t seed, double* cpu_s) {
  const double t0 = ThreadCpuSeconds();
  std::vector<Edge> edges = KroneckerEdges(nodes, degree, seed);
  if (cpu_s) *cpu_s = ThreadCpuSeconds() - t0;
  return edges;
}

Trace RecordPageRank(uint64_t bytes, uint64_t seed, const RecorderOptions& ro,
                     double* input_cpu_s) {
  const uint32_t degree = 24;
  // CSR + scores + contrib per node.
  uint64_t per_node = TracedGraph::Bytes(1, degree) + 8;
  uint32_t nodes = static_cast<uint32_t>(std::max<uint64_t>(bytes / per_node, 64));
  std::vector<Edge> edges = TimedEdges(nodes, degree, seed, input_cpu_s);
  PageRankParams p;
  TraceRecorder rec({.threads = p.threads, .epoch_pages = ro.epoch_pages, .record = ro.record});
  {
    TracedGraph g(rec, nodes, edges);
    RunPageRank(g, rec, p);
  }
  return rec.Finish();
}

// Below 64 MB the slab pages (-I) shrink to 1/64 of the memory, at least
// 64 KB, so the classes' one-page minimum stays small against it.
Trace RecordMemcached(uint64_t bytes, uint64_t seed, const RecorderOptions& ro, double skew) {
  uint64_t page = kMemcachedSlabBytes;
  while (page > 64 * 1024 && page * 64 > bytes) page /= 2;
  return RunMemcached({.memory_bytes = bytes, .skew = skew, .slab_page_bytes = page, .seed = seed},
                      ro)
      .trace;
}

Trace RecordBc(uint64_t bytes, uint64_t seed, const RecorderOptions& ro, double* input_cpu_s) {
  const uint32_t degree = 24;
  // CSR + scores, path_counts, depths, deltas, queue and successor bits per node.
  uint64_t per_node = TracedGraph::Bytes(1, degree) + 4 + 8 + 4 + 4 + 4 + degree / 8;
  uint32_t nodes = static_cast<uint32_t>(std::max<uint64_t>(bytes / per_node, 64));
  std::vector<Edge> edges = TimedEdges(nodes, degree, seed, input_cpu_s);
  BcParams p{.sources = 4, .seed = seed};  // GAPBS's benchmark spec: bc -i4
  TraceRecorder rec({.threads = p.threads, .epoch_pages = ro.epoch_pages, .record = ro.record});
  {
    TracedGraph g(rec, nodes, edges);
    RunBc(g, rec, p);
  }
  return rec.Finish();
}

}  // namespace

std::vector<std::string> WorkloadNames() {
  std::vector<std::string> v;
  for (const Entry& e : kEntries) v.emplace_back(e.name);
  return v;
}

uint64_t PaperWorkingSetBytes(const std::string& name) {
  for (const Entry& e : kEntries) {
    if (name == e.name) return e.paper_bytes;
  }
  return 0;
}

void CheckKnobs(const std::string& name, const WorkloadKnobs& k) {
  if (k.skew == WorkloadKnobs::kDefaultSkew) return;
  if (name != "memcached") {
    throw std::invalid_argument("skew applies to the memcached workload only, not " + name);
  }
  if (!(k.skew > 0 && k.skew <= 10)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", k.skew);
    throw std::invalid_argument(std::string("skew must be a Zipf exponent in (0, 10], got ") + buf);
  }
}

TraceKey WorkloadKey(const std::string& name, double scale, uint64_t seed, const WorkloadKnobs& k) {
  const Entry& e = Find(name);
  ScaledBytes(e, scale);
  CheckKnobs(name, k);
  TraceKey key{name, scale, seed, e.version, ""};
  if (k.skew != WorkloadKnobs::kDefaultSkew) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "skew=%.6g", k.skew);
    key.knobs = buf;
  }
  return key;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

Trace RecordWorkload(const std::string& name, double scale, uint64_t seed, bool record,
                     double* input_cpu_s, const WorkloadKnobs& k) {
  const Entry& e = Find(name);
  CheckKnobs(name, k);
  uint64_t bytes = ScaledBytes(e, scale);
  if (input_cpu_s) *input_cpu_s = 0;
  const RecorderOptions ro{.epoch_pages = ScaledEpochPages(bytes / kPageBytes), .record = record};
  if (name == "pagerank") return RecordPageRank(bytes, seed, ro, input_cpu_s);
  if (name == "bc") return RecordBc(bytes, seed, ro, input_cpu_s);
  if (name == "memcached") return RecordMemcached(bytes, seed, ro, k.skew);
  return RunKmeans(KmeansParams::ForWorkingSet(bytes, seed), ro).trace;
}

Trace WorkloadTrace(TraceCache& cache, const std::string& name, double scale, uint64_t seed,
                    bool* hit, const WorkloadKnobs& k) {
  return cache.GetOrRecord(
      WorkloadKey(name, scale, seed, k),
      [&] { return RecordWorkload(name, scale, seed, true, nullptr, k); }, hit);
}

}  // namespace dmb::apps::swap
