// Backend: a cluster plus the way to run code on it, so tests and tools can be
// written once and run on the simulator or on real verbs.
//
//   auto b = fabric::MakeBackend({.kind = "sim", .seed = 7});
//   Node* a = b->cluster().AddNode({...});
//   b->Run(MyScenario(b->cluster()));
//
// Contract:
//  - Run(task) runs `task` (and what it spawns) until `task` finishes and
//    rethrows its exception (or a spawned task's). Background services that
//    never finish (pollers, timers) do not keep Run from returning.
//  - sim: deterministic, virtual time, calibrated CPU costs.
//    ibv: real devices (node i uses devices[i % devices.size()]), wall-clock
//    time, CPU work is the real work the code does (declared costs are free).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/node.h"

namespace dmb::fabric {

struct BackendOptions {
  std::string kind = "sim";          // "sim" | "ibv"
  uint64_t seed = 1;                 // sim
  std::string profile = "cx5";       // sim: the calibration profile (sim/profile.h)
  std::vector<std::string> devices;  // ibv: RDMA device names, e.g. {"rxe0", "rxe1"}
  int gid_index = -1;                // ibv: -1 = first RoCEv2/IB GID that is usable
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view kind() const = 0;
  virtual Cluster& cluster() = 0;
  virtual void Run(Task<void> task) = 0;
  // Stops every coroutine still suspended on the cluster (pollers, MN
  // workers) so that what they reference can be destroyed.
  virtual void Shutdown() = 0;
};

// Throws std::invalid_argument naming the problem (unknown kind, no device,
// ibv support not compiled in); an unknown profile throws what
// sim::Profile::ByName throws.
std::unique_ptr<Backend> MakeBackend(const BackendOptions& opts);

}  // namespace dmb::fabric
