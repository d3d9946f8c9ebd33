// Latency histogram: log-linear buckets (64 per power of two, relative error
// under 1/64), exact count, mean, min and max. Cheap enough to record every
// operation of a run; mergeable across threads and nodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fabric/time.h"

namespace dmb {

class Histogram {
 public:
  void Record(Ps v);
  void Merge(const Histogram& o);
  uint64_t count() const { return count_; }
  Ps min() const { return count_ ? min_ : 0; }
  Ps max() const { return max_; }
  double mean() const { return count_ ? static_cast<double>(sum_) / count_ : 0.0; }
  // Value at quantile q in [0, 1] (bucket midpoint, clamped to [min, max]).
  Ps Percentile(double q) const;

  double mean_us() const { return mean() / kPsPerUs; }
  double p50_us() const { return PsToUs(Percentile(0.50)); }
  double p99_us() const { return PsToUs(Percentile(0.99)); }

 private:
  static constexpr int kSubBits = 6;
  static size_t Index(uint64_t v);
  static uint64_t BucketLow(size_t i);

  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  long double sum_ = 0;  // exact for any realistic count of ps latencies
  Ps min_ = 0;
  Ps max_ = 0;
};

}  // namespace dmb
