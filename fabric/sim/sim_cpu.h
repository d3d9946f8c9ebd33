// CPU cores of a simulated node: a queueing resource. Work goes to the
// earliest-free core; busy time is accounted per core, per named cost and per
// 10 us bucket (for peak-over-window and per-interval figures).
#pragma once

#include <string>
#include <vector>

#include "fabric/node.h"
#include "fabric/sim/simulator.h"

namespace dmb::sim {

class SimCpu : public fabric::Cpu {
 public:
  SimCpu(Simulator* sim, int cores, const std::vector<std::string>* cost_names);

  int cores() const override { return static_cast<int>(free_at_.size()); }
  Ps busy_ps() const override { return busy_ps_; }
  double PeakBusyFraction(Ps window_ps, Ps since_ps = 0) const override;
  // Exact at bucket boundaries; a partial bucket counts its share of the
  // bucket's busy time.
  double BusyFraction(Ps from_ps, Ps to_ps) const override;
  std::vector<std::pair<std::string, Ps>> BusyByCost() const override;
  // A halted CPU (crashed node) never finishes work it was given.
  void Halt() { halted_ = true; }
  bool halted() const { return halted_; }

  static constexpr Ps kBucketPs = 10 * kPsPerUs;

 protected:
  void Submit(std::coroutine_handle<> h, fabric::CpuCost cost, uint64_t multiplier) override;

 private:
  void AddBusy(Ps start, Ps end);
  static void ResumeIfAlive(void* ctx, uint64_t arg);

  Simulator* sim_;
  const std::vector<std::string>* cost_names_;
  std::vector<Ps> free_at_;
  std::vector<Ps> busy_by_cost_;
  std::vector<Ps> buckets_;
  Ps busy_ps_ = 0;
  bool halted_ = false;
};

}  // namespace dmb::sim
