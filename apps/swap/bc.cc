#include "apps/swap/bc.h"

#include <algorithm>

#include "apps/swap/rng.h"
#include "apps/swap/traced_array.h"

namespace dmb::apps::swap {
namespace {

constexpr uint64_t kLocalQueue = 16384;  // QueueBuffer's default size

struct Bc {
  TracedGraph& g;
  TraceRecorder& rec;
  const BcParams& p;
  TracedArray<float> scores;
  TracedArray<double> path_counts;
  TracedArray<uint64_t> succ;  // bit e: out-edge e leads to the next level
  TracedArray<int32_t> queue;

  // The thread running entry i of a schedule(dynamic, chunk) loop.
  uint8_t Dynamic(uint64_t i) const { return static_cast<uint8_t>(i / p.chunk % p.threads); }
  // u's out-neighbours, read by thread t; *first is u's first edge.
  const int32_t* Out(uint32_t u, uint8_t t, int64_t* first, int64_t* deg) {
    const int64_t* o = g.out_index.Read(u, 2, t);
    *first = o[0];
    *deg = o[1] - o[0];
    return g.out_neigh.Read(o[0], *deg, t);
  }
};

// `omp parallel for` (static schedule): thread t runs f(t, begin, end) on
// the t-th contiguous block of [0, n).
template <typename F>
void Static(Bc& c, uint64_t n, F f) {
  const uint64_t block = (n + c.p.threads - 1) / c.p.threads;
  for (uint32_t t = 0; t < c.p.threads; ++t) {
    uint64_t b = std::min(n, t * block), e = std::min(n, b + block);
    if (b < e) f(static_cast<uint8_t>(t), b, e);
  }
  c.rec.Barrier();
}

// pvector::fill.
template <typename T>
void Fill(Bc& c, TracedArray<T>& a, T v) {
  Static(c, a.size(),
         [&](uint8_t t, uint64_t b, uint64_t e) { std::fill_n(a.Write(b, e - b, t), e - b, v); });
}

struct LocalQueue {
  TracedArray<int32_t> buf;
  uint64_t in = 0;
};

struct Bfs {
  Bc& c;
  TracedArray<int32_t> depths;
  std::vector<LocalQueue> local;  // per thread
  uint64_t tail = 0;              // the shared queue's shared_in
};

// QueueBuffer::flush: append thread t's local queue to the shared one.
void FlushLocal(Bfs& b, uint8_t t) {
  LocalQueue& q = b.local[t];
  if (q.in == 0) return;
  std::copy_n(q.buf.Read(0, q.in, t), q.in, b.c.queue.Write(b.tail, q.in, t));
  b.tail += q.in;
  q.in = 0;
}

void Push(Bfs& b, uint8_t t, int32_t v) {
  LocalQueue& q = b.local[t];
  if (q.in == q.buf.size()) FlushLocal(b, t);
  q.buf.Set(q.in++, v, t);
}

// Frontier vertex u's out-edges, on thread t, claiming level `depth`.
void Visit(Bfs& b, uint32_t u, int32_t depth, uint8_t t) {
  Bc& c = b.c;
  int64_t first, deg;
  const int32_t* nb = c.Out(u, t, &first, &deg);
  for (int64_t k = 0; k < deg; ++k) {
    int32_t v = nb[k];
    if (b.depths.Get(v, t) == -1) {  // compare_and_swap(depths[v], -1, depth)
      b.depths.Set(v, depth, t);
      Push(b, t, v);
    }
    if (b.depths.Get(v, t) != depth) continue;
    uint64_t e = static_cast<uint64_t>(first + k);
    c.succ.Write(e / 64, 1, t)[0] |= uint64_t{1} << (e % 64);
    double pu = c.path_counts.Get(u, t);
    c.path_counts.Write(v, 1, t)[0] += pu;
  }
}

// PBFS from `source`: GAPBS's depth_index, the queue offsets of the levels.
std::vector<uint64_t> RunBfs(Bc& c, uint32_t source) {
  Bfs b{c, TracedArray<int32_t>(c.rec, c.g.nodes), {}};
  Fill(c, b.depths, -1);
  b.depths.Set(source, 0);
  c.path_counts.Set(source, 1);
  c.queue.Set(0, static_cast<int32_t>(source));
  b.tail = 1;
  b.local.reserve(c.p.threads);
  for (uint32_t t = 0; t < c.p.threads; ++t) {
    b.local.push_back({TracedArray<int32_t>(c.rec, kLocalQueue, 0, static_cast<uint8_t>(t))});
  }
  std::vector<uint64_t> index{0};
  uint64_t begin = 0, end = 1;  // the sliding window: the current level
  for (int32_t depth = 1; begin < end; ++depth) {
    for (uint64_t i = begin; i < end; ++i) {
      uint8_t t = c.Dynamic(i - begin);
      Visit(b, static_cast<uint32_t>(c.queue.Get(i, t)), depth, t);
    }
    for (uint32_t t = 0; t < c.p.threads; ++t) FlushLocal(b, static_cast<uint8_t>(t));
    c.rec.Barrier();
    index.push_back(begin);
    begin = end;
    end = b.tail;
  }
  index.push_back(begin);
  return index;
}

// u's dependency from its successors' (already final) ones, on thread t.
void Dependency(Bc& c, TracedArray<float>& deltas, uint32_t u, uint8_t t) {
  int64_t first, deg;
  const int32_t* nb = c.Out(u, t, &first, &deg);
  float delta = 0;
  for (int64_t k = 0; k < deg; ++k) {
    uint64_t e = static_cast<uint64_t>(first + k);
    if (((c.succ.Get(e / 64, t) >> (e % 64)) & 1) == 0) continue;
    int32_t v = nb[k];
    delta += (c.path_counts.Get(u, t) / c.path_counts.Get(v, t)) * (1 + deltas.Get(v, t));
  }
  deltas.Set(u, delta, t);
  c.scores.Write(u, 1, t)[0] += delta;
}

void BackPropagate(Bc& c, const std::vector<uint64_t>& index) {
  TracedArray<float> deltas(c.rec, c.g.nodes);
  Fill(c, deltas, 0.0f);
  for (int64_t d = static_cast<int64_t>(index.size()) - 2; d >= 0; --d) {
    for (uint64_t i = index[d]; i < index[d + 1]; ++i) {
      uint8_t t = c.Dynamic(i - index[d]);
      Dependency(c, deltas, static_cast<uint32_t>(c.queue.Get(i, t)), t);
    }
    c.rec.Barrier();
  }
}

void Normalize(Bc& c) {
  float biggest = 0;
  Static(c, c.scores.size(), [&](uint8_t t, uint64_t b, uint64_t e) {
    const float* s = c.scores.Read(b, e - b, t);
    biggest = std::max(biggest, *std::max_element(s, s + (e - b)));
  });
  Static(c, c.scores.size(), [&](uint8_t t, uint64_t b, uint64_t e) {
    float* s = c.scores.Write(b, e - b, t);
    for (uint64_t i = 0; i < e - b; ++i) s[i] = s[i] / biggest;
  });
}

// SourcePicker::PickNext: uniform, redrawn while the out-degree is 0.
uint32_t PickSource(Bc& c, Rng& rng) {
  while (true) {
    uint32_t s = static_cast<uint32_t>(rng.Below(c.g.nodes));
    const int64_t* o = c.g.out_index.Read(s, 2);
    if (o[1] > o[0]) return s;
  }
}

}  // namespace

BcResult RunBc(TracedGraph& g, TraceRecorder& rec, const BcParams& p) {
  const uint32_t n = g.nodes;
  Bc c{g,
       rec,
       p,
       TracedArray<float>(rec, n),
       TracedArray<double>(rec, n),
       TracedArray<uint64_t>(rec, (g.edges() + 63) / 64),
       TracedArray<int32_t>(rec, n)};
  Fill(c, c.scores, 0.0f);
  Rng rng(p.seed);
  BcResult r;
  for (uint32_t i = 0; i < p.sources; ++i) {
    uint32_t source = PickSource(c, rng);
    r.sources.push_back(source);
    Fill(c, c.path_counts, 0.0);
    std::fill_n(c.succ.Write(0, c.succ.size()), c.succ.size(), 0);  // Bitmap::reset
    std::vector<uint64_t> index = RunBfs(c, source);
    r.levels.push_back(static_cast<uint32_t>(index.size() - 2));
    BackPropagate(c, index);
  }
  Normalize(c);
  r.scores = c.scores.untraced();
  return r;
}

}  // namespace dmb::apps::swap
