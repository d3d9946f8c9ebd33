// RemoteMn: the MN side of an approach as seen from a CN process, i.e. the
// client end of the bootstrap channel (bootstrap.h) to a `dmbench mn` daemon.
// CN sides built on a Deployment with remote_mn = this connect their lanes
// through it exactly as they would through a local MnSide.
#pragma once

#include <memory>
#include <string>

#include "fabric/ibv/ibv_cluster.h"
#include "systems/memory_manager.h"
#include "systems/remote/bootstrap.h"

namespace dmb::systems::remote {

class RemoteMn : public MnSide {
 public:
  // Connects to `endpoint` (HOST:PORT), checks that the daemon runs `system`
  // with exactly `knobs` (validated, defaults filled in), and adds the MN as a
  // remote node of `cluster`. Throws std::runtime_error naming a mismatch.
  // `cns`: how many CN sides this process runs; the daemon assigns them the
  // indexes [cn_index_base(), +cns). `operator_token`: the daemon's (what
  // its start printed, <port-file>.token), needed by ReclaimCn and Shutdown
  // only; a CN process without it cannot declare a CN crashed or stop the MN.
  RemoteMn(fabric::ibv::IbvCluster* cluster, const std::string& endpoint, const std::string& system,
           const Knobs& knobs, uint32_t cns, std::string operator_token = "");
  uint32_t cn_index_base() const { return cn_index_base_; }
  ~RemoteMn() override;

  fabric::Qp* CreateLaneQp(uint32_t cn_index) override;
  void LaneConnected(uint32_t, fabric::Qp*) override {}  // the daemon did it on `connect`
  void ReleaseLane(uint32_t cn_index, uint32_t mn_qpn) override;
  Task<void> ChargeQpSetup() override { co_return; }  // real QP setup is real time
  std::string Published() const override { return published_; }
  Task<void> Start() override { co_return; }  // the daemon started it
  Task<ReclaimReport> ReclaimCn(uint32_t cn_index) override;
  MnStats stats() const override;
  fabric::Node* node() const override { return node_; }
  // Asks the daemon to exit.
  void Shutdown();

  // Sends one request and returns the words after "ok"; throws on "err".
  std::vector<std::string> Call(const std::string& request) const;

 private:
  fabric::ibv::IbvCluster* cluster_;
  std::string endpoint_;
  std::string token_;
  std::unique_ptr<LineConn> conn_;
  fabric::Node* node_ = nullptr;
  std::string published_;
  uint32_t cn_index_base_ = 0;
  std::vector<std::unique_ptr<fabric::Qp>> lanes_;
};

}  // namespace dmb::systems::remote
