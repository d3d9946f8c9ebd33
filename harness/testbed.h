// Testbed: one approach deployed on a fresh cluster (one MN, N CNs), started
// and ready. Shared by the conformance/attack suites, `dmbench micro` and the
// experiment runner.
//
// Backends: "sim" (default) builds a simulated cluster. "ibv" runs on real
// RDMA devices: the CNs live in this process; the MN runs in this process
// (mn_endpoint ""), in a `dmbench mn` daemon this testbed starts and stops
// ("spawn"), or in a daemon already running at HOST:PORT.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fabric/backend.h"
#include "fabric/sim/sim_cluster.h"
#include "systems/registry.h"

namespace dmb::harness {

struct TestbedSpec {
  std::string system;
  std::map<std::string, std::string> knobs;
  int cns = 1;
  int cn_cores = 24;
  int mn_cores = 1;  // kUnlimitedCores: one core per CN thread in any figure
  uint64_t pool_bytes = 256ull << 20;
  // sim: MN memory beyond the pool (metadata, WQ rings, chains' scratch), at
  // least as much as the pool: OneSidedMW keeps 144 B per chunk, 28% of a
  // pool of 512 B chunks. Sparse: only the bytes touched cost host memory.
  uint64_t mn_extra_bytes = 256ull << 20;
  uint64_t seed = 1;
  std::string profile = "cx5";
  std::string backend = "sim";       // "sim" | "ibv"
  std::vector<std::string> devices;  // ibv: devices of this process's nodes (round robin)
  std::string mn_endpoint;           // ibv: "" | "spawn" | HOST:PORT
  std::string mn_device;             // ibv with "spawn": the daemon's device
  fabric::DeviceCaps mn_caps;        // sim: what the MN's simulated RNIC offers
};
inline constexpr int kUnlimitedCores = 512;

class Testbed {
 public:
  // Builds the cluster and the approach and runs its MN setup; throws
  // systems::ConfigError for a bad system or knob.
  explicit Testbed(const TestbedSpec& spec);
  ~Testbed();

  // The simulated cluster; throws std::logic_error on another backend.
  sim::SimCluster& cluster();
  fabric::Runtime& runtime() { return cluster_->runtime(); }
  systems::MemoryManager& mm() { return *mm_; }
  systems::CnSide& cn(size_t i) { return mm_->cn(i); }
  fabric::Node* mn_node() { return mn_; }
  Ps now() { return cluster_->runtime().now(); }
  const std::string& backend() const { return spec_.backend; }
  uint64_t pool_bytes() const { return spec_.pool_bytes; }
  // Runs `task` until it finishes (background services may still be pending).
  void Run(Task<void> task);
  // Runs every task concurrently (app threads) until all have finished.
  void RunAll(std::vector<Task<void>> tasks);

 private:
  void BuildIbv(systems::Deployment* d);
  void SpawnMnDaemon();
  void WatchMnDaemon();
  // Throws the named error once a spawned daemon has exited (reaping it),
  // waiting up to `grace` for one that is still dying.
  void ThrowIfMnDaemonDied(std::chrono::milliseconds grace);
  void StopMnDaemon();

  TestbedSpec spec_;
  std::unique_ptr<fabric::Backend> backend_;  // fabric::MakeBackend's
  fabric::Cluster* cluster_ = nullptr;        // backend_'s
  sim::SimCluster* sim_ = nullptr;            // the same cluster when it is the simulator's
  fabric::Node* mn_ = nullptr;
  std::unique_ptr<systems::MnSide> remote_mn_;
  int mn_pid_ = -1;
  std::string mn_dir_;
  std::unique_ptr<systems::MemoryManager> mm_;
};

// What the MN's RNIC of a testbed built from `spec` offers, without building
// it: the sim's configured caps, or (ibv) the caps the MN's device reports
// (spec.mn_device, else the first of spec.devices). Throws ConfigError when
// the ibv device is absent.
fabric::DeviceCaps MnCaps(const TestbedSpec& spec);
// The capabilities `spec`'s approach needs (SystemInfo::needs with its
// knobs) that MnCaps(spec) lacks: empty when it can run there.
std::vector<std::string> MissingMnCaps(const TestbedSpec& spec);

}  // namespace dmb::harness
