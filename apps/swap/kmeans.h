// Kmeans as scikit-learn runs it (KMeans(algorithm="elkan"), k=10), on a
// generated blob dataset, with every array access recorded.
//
// Follows sklearn's _kmeans_single_elkan and _elkan.pyx: k-means++ init
// (2 + ln k local trials, each reading all of X into a fresh n_trials x n
// distance array), row norms and a variance-scaled tol, then per restart
// (n_init) freshly allocated labels, labels_old, upper_bounds (n) and
// lower_bounds (n x k): init_bounds, then Elkan iterations over 256-sample
// chunks (skip a sample when its upper bound is within half the distance to
// the next centre; else tighten and test each centre against the bounds),
// centre update reading every X row, bounds shifted by the centre moves,
// stop on unchanged labels or centre shift <= tol. A restart's arrays are
// freed (munmap) when it ends, except the best run's labels.
//
// Contract: samples >= clusters; features >= 1.
#pragma once

#include <cstdint>
#include <vector>

#include "apps/swap/trace.h"

namespace dmb::apps::swap {

struct KmeansParams {
  uint64_t samples = 0;
  uint32_t features = 32;
  uint32_t clusters = 10;
  uint32_t n_init = 10;  // sklearn < 1.4 default
  uint32_t max_iter = 300;
  double tol = 1e-4;
  double blob_std = 5.0;  // dataset: `clusters` Gaussian blobs, centres in [-10, 10]^d
  uint64_t seed = 0;

  // Bytes per sample of the arrays live during a run (X, norms, bounds,
  // labels): samples = bytes / this.
  uint64_t BytesPerSample() const { return 8ull * (features + clusters + 2) + 12; }
  static KmeansParams ForWorkingSet(uint64_t bytes, uint64_t seed);
};

struct KmeansResult {
  Trace trace;
  std::vector<double> centers;  // clusters x features, the best run's
  std::vector<int32_t> labels;
  double inertia = 0;
  std::vector<uint32_t> iterations;  // per restart
};

KmeansResult RunKmeans(const KmeansParams& p, const RecorderOptions& rec = {});

}  // namespace dmb::apps::swap
