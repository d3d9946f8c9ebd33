#include "fabric/histogram.h"

#include <algorithm>
#include <bit>

namespace dmb {

size_t Histogram::Index(uint64_t v) {
  constexpr uint64_t kSub = 1ull << kSubBits;
  if (v < kSub) return static_cast<size_t>(v);
  const int e = std::bit_width(v) - 1 - kSubBits;  // v >> e in [64, 128)
  return static_cast<size_t>((e + 1) * kSub + ((v >> e) - kSub));
}

uint64_t Histogram::BucketLow(size_t i) {
  constexpr uint64_t kSub = 1ull << kSubBits;
  if (i < kSub) return i;
  const uint64_t e = i / kSub - 1;
  return (kSub + i % kSub) << e;
}

void Histogram::Record(Ps v) {
  if (v < 0) v = 0;
  const size_t i = Index(static_cast<uint64_t>(v));
  if (buckets_.size() <= i) buckets_.resize(i + 1, 0);
  ++buckets_[i];
  if (count_ == 0 || v < min_) min_ = v;
  if (v > max_) max_ = v;
  ++count_;
  sum_ += static_cast<long double>(v);
}

void Histogram::Merge(const Histogram& o) {
  if (o.count_ == 0) return;
  if (buckets_.size() < o.buckets_.size()) buckets_.resize(o.buckets_.size(), 0);
  for (size_t i = 0; i < o.buckets_.size(); ++i) buckets_[i] += o.buckets_[i];
  min_ = count_ ? std::min(min_, o.min_) : o.min_;
  max_ = std::max(max_, o.max_);
  count_ += o.count_;
  sum_ += o.sum_;
}

Ps Histogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(q * count_ + 0.999999));
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      const uint64_t lo = BucketLow(i), hi = BucketLow(i + 1);
      const Ps mid = static_cast<Ps>(lo + (hi - lo) / 2);
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

}  // namespace dmb
