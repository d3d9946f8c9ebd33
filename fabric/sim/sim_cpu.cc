#include "fabric/sim/sim_cpu.h"

#include <algorithm>

namespace dmb::sim {

SimCpu::SimCpu(Simulator* sim, int cores, const std::vector<std::string>* cost_names)
    : sim_(sim),
      cost_names_(cost_names),
      free_at_(std::max(1, cores), 0),
      busy_by_cost_(cost_names->size(), 0) {}

void SimCpu::ResumeIfAlive(void* ctx, uint64_t arg) {
  auto* self = reinterpret_cast<SimCpu*>(arg);
  if (!self->halted_) std::coroutine_handle<>::from_address(ctx).resume();
}

void SimCpu::Submit(std::coroutine_handle<> h, fabric::CpuCost cost, uint64_t multiplier) {
  if (halted_) return;  // the coroutine never resumes: its node is gone
  const Ps dur = cost.ps * static_cast<Ps>(multiplier);
  auto core = std::min_element(free_at_.begin(), free_at_.end());
  const Ps start = std::max(*core, sim_->now());
  const Ps end = start + dur;
  *core = end;
  busy_ps_ += dur;
  if (cost.id < busy_by_cost_.size()) busy_by_cost_[cost.id] += dur;
  AddBusy(start, end);
  sim_->Schedule(end, 2, ResumeIfAlive, h.address(), reinterpret_cast<uint64_t>(this));
}

void SimCpu::AddBusy(Ps start, Ps end) {
  const size_t last = static_cast<size_t>((end - 1) / kBucketPs);
  if (buckets_.size() <= last) buckets_.resize(last + 1, 0);
  for (Ps t = start; t < end;) {
    const size_t b = static_cast<size_t>(t / kBucketPs);
    const Ps bucket_end = static_cast<Ps>(b + 1) * kBucketPs;
    const Ps seg_end = std::min(end, bucket_end);
    buckets_[b] += seg_end - t;
    t = seg_end;
  }
}

double SimCpu::PeakBusyFraction(Ps window_ps, Ps since_ps) const {
  const size_t per_window = static_cast<size_t>(std::max<Ps>(1, window_ps / kBucketPs));
  // The first whole bucket at or after since_ps: work that ran earlier in
  // the bucket since_ps falls in is not the measured phase's.
  const size_t first = static_cast<size_t>((since_ps + kBucketPs - 1) / kBucketPs);
  const Ps capacity = static_cast<Ps>(per_window) * kBucketPs * cores();
  double peak = 0;
  for (size_t w = first; w < buckets_.size(); w += per_window) {
    Ps sum = 0;
    for (size_t b = w; b < std::min(buckets_.size(), w + per_window); ++b) sum += buckets_[b];
    peak = std::max(peak, static_cast<double>(sum) / static_cast<double>(capacity));
  }
  return peak;
}

double SimCpu::BusyFraction(Ps from_ps, Ps to_ps) const {
  if (to_ps <= from_ps) return 0;
  double busy = 0;
  for (size_t b = static_cast<size_t>(from_ps / kBucketPs);
       b < buckets_.size() && static_cast<Ps>(b) * kBucketPs < to_ps; ++b) {
    const Ps lo = std::max(from_ps, static_cast<Ps>(b) * kBucketPs);
    const Ps hi = std::min(to_ps, static_cast<Ps>(b + 1) * kBucketPs);
    busy += static_cast<double>(buckets_[b]) * static_cast<double>(hi - lo) /
            static_cast<double>(kBucketPs);
  }
  return busy / (static_cast<double>(to_ps - from_ps) * cores());
}

std::vector<std::pair<std::string, Ps>> SimCpu::BusyByCost() const {
  std::vector<std::pair<std::string, Ps>> out;
  for (size_t i = 0; i < busy_by_cost_.size(); ++i) {
    if (busy_by_cost_[i] > 0) out.emplace_back((*cost_names_)[i], busy_by_cost_[i]);
  }
  return out;
}

}  // namespace dmb::sim
