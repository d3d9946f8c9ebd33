#include "apps/swap/kmeans.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "apps/swap/rng.h"
#include "apps/swap/traced_array.h"

namespace dmb::apps::swap {
namespace {

constexpr uint64_t kChunk = 256;  // sklearn's CHUNK_SIZE

using Vec = std::vector<double>;

double Dist(const double* a, const double* b, uint32_t d) {
  double s = 0;
  for (uint32_t f = 0; f < d; ++f) s += (a[f] - b[f]) * (a[f] - b[f]);
  return std::sqrt(s);
}

struct Ctx {
  const KmeansParams& p;
  TraceRecorder& rec;
  TracedArray<double>& x;
  TracedArray<double>& norms;
  uint32_t d() const { return p.features; }
  uint32_t k() const { return p.clusters; }
  uint64_t n() const { return p.samples; }
};

// make_blobs-like data, written row by row as a loader would.
void Generate(TracedArray<double>& x, const KmeansParams& p, Rng& rng) {
  Vec centres(uint64_t{p.clusters} * p.features);
  for (double& c : centres) c = rng.Uniform() * 20 - 10;
  for (uint64_t i = 0; i < p.samples; ++i) {
    double* row = x.Write(i * p.features, p.features);
    uint64_t c = rng.Below(p.clusters);
    for (uint32_t f = 0; f < p.features; ++f) {
      row[f] = centres[c * p.features + f] + p.blob_std * rng.Normal();
    }
  }
}

// sklearn's _tolerance: mean per-feature variance x tol.
double Tolerance(Ctx& c) {
  Vec mean(c.d()), sq(c.d());
  for (uint64_t i = 0; i < c.n(); ++i) {
    const double* row = c.x.Read(i * c.d(), c.d());
    for (uint32_t f = 0; f < c.d(); ++f) mean[f] += row[f], sq[f] += row[f] * row[f];
  }
  double var = 0;
  for (uint32_t f = 0; f < c.d(); ++f) {
    double m = mean[f] / c.n();
    var += sq[f] / c.n() - m * m;
  }
  return var / c.d() * c.p.tol;
}

// One candidate's squared distances to every sample, min'ed with `closest`:
// _euclidean_distances(X[cand], X, squared=True) then np.minimum.
double CandidatePot(Ctx& c, const double* cand, TracedArray<double>& dist, uint64_t row,
                    TracedArray<double>& closest) {
  double cn = 0, pot = 0;
  for (uint32_t f = 0; f < c.d(); ++f) cn += cand[f] * cand[f];
  for (uint64_t i = 0; i < c.n(); ++i) {
    const double* xi = c.x.Read(i * c.d(), c.d());
    double dot = 0;
    for (uint32_t f = 0; f < c.d(); ++f) dot += cand[f] * xi[f];
    double d2 = std::max(0.0, cn - 2 * dot + c.norms.Get(i));
    d2 = std::min(d2, closest.Get(i));
    dist.Set(row * c.n() + i, d2);
    pot += d2;
  }
  return pot;
}

// _kmeans_plusplus with n_local_trials = 2 + int(ln k).
Vec KmeansPlusPlus(Ctx& c, Rng& rng) {
  const uint32_t trials = 2 + static_cast<uint32_t>(std::log(c.k()));
  Vec centers(uint64_t{c.k()} * c.d());
  uint64_t first = rng.Below(c.n());
  std::copy_n(c.x.Read(first * c.d(), c.d()), c.d(), centers.begin());
  TracedArray<double> closest(c.rec, c.n(), std::numeric_limits<double>::max());
  double pot = CandidatePot(c, centers.data(), closest, 0, closest);
  for (uint32_t ci = 1; ci < c.k(); ++ci) {
    TracedArray<double> cumsum(c.rec, c.n());  // stable_cumsum: a fresh array
    double run = 0;
    for (uint64_t i = 0; i < c.n(); ++i) cumsum.Set(i, run += closest.Get(i));
    std::vector<uint64_t> cand(trials);
    for (uint64_t& id : cand) {
      double r = rng.Uniform() * pot;
      const std::vector<double>& cs = cumsum.untraced();
      id = std::min<uint64_t>(std::lower_bound(cs.begin(), cs.end(), r) - cs.begin(), c.n() - 1);
      cumsum.Read(id);  // searchsorted lands here
    }
    TracedArray<double> dist(c.rec, uint64_t{trials} * c.n());
    uint32_t best = 0;
    double best_pot = std::numeric_limits<double>::max();
    for (uint32_t t = 0; t < trials; ++t) {
      const double* row = c.x.Read(cand[t] * c.d(), c.d());
      Vec xc(row, row + c.d());
      double tp = CandidatePot(c, xc.data(), dist, t, closest);
      if (tp < best_pot) best_pot = tp, best = t;
    }
    pot = best_pot;
    for (uint64_t i = 0; i < c.n(); ++i) closest.Set(i, dist.Get(best * c.n() + i));
    std::copy_n(c.x.Read(cand[best] * c.d(), c.d()), c.d(), centers.begin() + ci * c.d());
  }
  return centers;
}

// One restart's arrays (allocated fresh per restart, as sklearn does).
struct RunArrays {
  TracedArray<int32_t> labels, labels_old;
  TracedArray<double> upper, lower;
  RunArrays(TraceRecorder& r, uint64_t n, uint32_t k)
      : labels(r, n, -1), labels_old(r, n, -1), upper(r, n), lower(r, n * k) {}
};

struct CenterInfo {
  Vec half;  // k x k: half the distance between centres
  Vec next;  // per centre: half the distance to its nearest other centre
};

CenterInfo CenterDistances(const Vec& centers, uint32_t k, uint32_t d) {
  CenterInfo ci{Vec(uint64_t{k} * k), Vec(k, std::numeric_limits<double>::max())};
  for (uint32_t a = 0; a < k; ++a) {
    for (uint32_t b = 0; b < k; ++b) {
      ci.half[a * k + b] = Dist(&centers[a * d], &centers[b * d], d) / 2;
      if (a != b) ci.next[a] = std::min(ci.next[a], ci.half[a * k + b]);
    }
  }
  return ci;
}

// _elkan.init_bounds_dense.
void InitBounds(Ctx& c, RunArrays& a, const Vec& centers, const CenterInfo& ci) {
  for (uint64_t i = 0; i < c.n(); ++i) {
    const double* xi = c.x.Read(i * c.d(), c.d());
    double* lower = a.lower.Write(i * c.k(), c.k());
    int32_t best = 0;
    double min_dist = Dist(xi, &centers[0], c.d());
    lower[0] = min_dist;
    for (uint32_t j = 1; j < c.k(); ++j) {
      if (min_dist > ci.half[best * c.k() + j]) {
        double dj = Dist(xi, &centers[j * c.d()], c.d());
        lower[j] = dj;
        if (dj < min_dist) min_dist = dj, best = static_cast<int32_t>(j);
      }
    }
    a.labels.Set(i, best);
    a.upper.Set(i, min_dist);
  }
}

// The label loop of one sample in elkan_iter_chunked_dense.
void ElkanSample(Ctx& c, RunArrays& a, uint64_t i, const Vec& centers, const CenterInfo& ci) {
  double upper = a.upper.Get(i);
  int32_t label = a.labels.Get(i);
  if (ci.next[label] >= upper) return;
  const double* xi = c.x.Read(i * c.d(), c.d());
  double* lower = a.lower.Write(i * c.k(), c.k());
  bool tight = false;
  for (uint32_t j = 0; j < c.k(); ++j) {
    if (static_cast<int32_t>(j) == label || upper <= lower[j] ||
        upper <= ci.half[label * c.k() + j]) {
      continue;
    }
    if (!tight) {
      upper = lower[label] = Dist(xi, &centers[label * c.d()], c.d());
      tight = true;
      if (upper <= lower[j] || upper <= ci.half[label * c.k() + j]) continue;
    }
    double dj = lower[j] = Dist(xi, &centers[j * c.d()], c.d());
    if (dj < upper) label = static_cast<int32_t>(j), upper = dj;
  }
  a.labels.Set(i, label);
  a.upper.Set(i, upper);
}

// One elkan_iter: labels by chunk; with update, new centres (reading every
// X row), then bounds shifted. Returns the squared centre shift.
double ElkanIter(Ctx& c, RunArrays& a, Vec& centers, const CenterInfo& ci, bool update) {
  Vec sums(centers.size()), weight(c.k());
  for (uint64_t s = 0; s < c.n(); s += kChunk) {
    uint64_t e = std::min(c.n(), s + kChunk);
    for (uint64_t i = s; i < e; ++i) ElkanSample(c, a, i, centers, ci);
    if (!update) continue;
    for (uint64_t i = s; i < e; ++i) {
      int32_t l = a.labels.Get(i);
      const double* xi = c.x.Read(i * c.d(), c.d());
      weight[l] += 1;
      for (uint32_t f = 0; f < c.d(); ++f) sums[l * c.d() + f] += xi[f];
    }
  }
  if (!update) return 0;
  Vec shift(c.k());
  double total = 0;
  for (uint32_t j = 0; j < c.k(); ++j) {
    if (weight[j] == 0) continue;  // empty cluster: keep its centre
    for (uint32_t f = 0; f < c.d(); ++f) sums[j * c.d() + f] /= weight[j];
    shift[j] = Dist(&sums[j * c.d()], &centers[j * c.d()], c.d());
    std::copy_n(&sums[j * c.d()], c.d(), &centers[j * c.d()]);
    total += shift[j] * shift[j];
  }
  for (uint64_t i = 0; i < c.n(); ++i) {
    a.upper.Write(i)[0] += shift[a.labels.Get(i)];
    double* lower = a.lower.Write(i * c.k(), c.k());
    for (uint32_t j = 0; j < c.k(); ++j) lower[j] = std::max(0.0, lower[j] - shift[j]);
  }
  return total;
}

double Inertia(Ctx& c, TracedArray<int32_t>& labels, const Vec& centers) {
  double s = 0;
  for (uint64_t i = 0; i < c.n(); ++i) {
    double dd = Dist(c.x.Read(i * c.d(), c.d()), &centers[labels.Get(i) * c.d()], c.d());
    s += dd * dd;
  }
  return s;
}

struct RunOut {
  TracedArray<int32_t> labels;
  Vec centers;
  double inertia;
  uint32_t iterations;
};

// _kmeans_single_elkan.
RunOut ElkanSingle(Ctx& c, Vec centers, double tol) {
  RunArrays a(c.rec, c.n(), c.k());
  CenterInfo ci = CenterDistances(centers, c.k(), c.d());
  InitBounds(c, a, centers, ci);
  bool strict = false;
  uint32_t it = 0;
  while (it < c.p.max_iter) {
    ++it;
    double shift = ElkanIter(c, a, centers, ci, true);
    ci = CenterDistances(centers, c.k(), c.d());
    const int32_t* now = a.labels.Read(0, c.n());
    const int32_t* old = a.labels_old.Read(0, c.n());
    if (std::equal(now, now + c.n(), old)) {
      strict = true;
      break;
    }
    if (shift <= tol) break;
    std::copy_n(now, c.n(), a.labels_old.Write(0, c.n()));
  }
  if (!strict) ElkanIter(c, a, centers, ci, false);
  double inertia = Inertia(c, a.labels, centers);
  return {std::move(a.labels), std::move(centers), inertia, it};
}

}  // namespace

KmeansParams KmeansParams::ForWorkingSet(uint64_t bytes, uint64_t seed) {
  KmeansParams p;
  p.seed = seed;
  p.samples = std::max<uint64_t>(bytes / p.BytesPerSample(), 4 * p.clusters);
  return p;
}

KmeansResult RunKmeans(const KmeansParams& p, const RecorderOptions& ro) {
  TraceRecorder rec(ro);
  Rng rng(p.seed);
  KmeansResult out;
  {
    TracedArray<double> x(rec, p.samples * p.features);
    Generate(x, p, rng);
    TracedArray<double> norms(rec, p.samples);
    for (uint64_t i = 0; i < p.samples; ++i) {
      const double* row = x.Read(i * p.features, p.features);
      double s = 0;
      for (uint32_t f = 0; f < p.features; ++f) s += row[f] * row[f];
      norms.Set(i, s);
    }
    Ctx c{p, rec, x, norms};
    double tol = Tolerance(c);
    std::optional<RunOut> best;
    for (uint32_t r = 0; r < p.n_init; ++r) {
      RunOut run = ElkanSingle(c, KmeansPlusPlus(c, rng), tol);
      out.iterations.push_back(run.iterations);
      if (!best || run.inertia < best->inertia) best.emplace(std::move(run));
    }
    out.centers = best->centers;
    out.labels = best->labels.untraced();
    out.inertia = best->inertia;
  }
  out.trace = rec.Finish();
  return out;
}

}  // namespace dmb::apps::swap
