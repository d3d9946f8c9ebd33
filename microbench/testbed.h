// Testbed: one approach deployed on a fresh simulated cluster (one MN, N CNs),
// started and ready. Shared by the conformance/attack suites, `dmbench micro`
// and the experiment runner.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fabric/sim/sim_cluster.h"
#include "systems/registry.h"

namespace dmb::microbench {

struct TestbedSpec {
  std::string system;
  std::map<std::string, std::string> knobs;
  int cns = 1;
  int cn_cores = 24;
  int mn_cores = 1;  // kUnlimitedCores: one core per CN thread in any figure
  uint64_t pool_bytes = 256ull << 20;
  uint64_t seed = 1;
  std::string profile = "cx5";
};
inline constexpr int kUnlimitedCores = 512;

class Testbed {
 public:
  // Builds the cluster and the approach and runs its MN setup; throws
  // systems::ConfigError for a bad system or knob.
  explicit Testbed(const TestbedSpec& spec);
  ~Testbed();

  sim::SimCluster& cluster() { return *cluster_; }
  systems::MemoryManager& mm() { return *mm_; }
  systems::CnSide& cn(size_t i) { return mm_->cn(i); }
  fabric::Node* mn_node() { return mn_; }
  Ps now() { return cluster_->sim().now(); }
  // Runs `task` until it finishes (background services may still be pending).
  void Run(Task<void> task) { cluster_->RunToCompletion(std::move(task)); }
  // Runs every task concurrently (app threads) until all have finished.
  void RunAll(std::vector<Task<void>> tasks);

 private:
  std::unique_ptr<sim::SimCluster> cluster_;
  fabric::Node* mn_ = nullptr;
  std::unique_ptr<systems::MemoryManager> mm_;
};

}  // namespace dmb::microbench
