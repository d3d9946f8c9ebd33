#include "systems/remote/remote_mn.h"

#include <cstdlib>
#include <iostream>
#include <stdexcept>

namespace dmb::systems::remote {
namespace {

// The MN end of a lane: connecting it is a request to the daemon.
class BootstrapQp : public fabric::ibv::RemoteQp {
 public:
  BootstrapQp(const RemoteMn* mn, uint32_t cn, uint32_t node_id, fabric::ibv::QpAddr addr)
      : RemoteQp(node_id, addr), mn_(mn), cn_(cn) {}
  void ConnectRemote(const fabric::ibv::QpAddr& peer) override {
    mn_->Call("connect " + std::to_string(cn_) + " " + std::to_string(qp_num()) + " " +
              EncodeQp(peer));
  }

 private:
  const RemoteMn* mn_;
  uint32_t cn_;
};

}  // namespace

RemoteMn::RemoteMn(fabric::ibv::IbvCluster* cluster, const std::string& endpoint,
                   const std::string& system, const Knobs& knobs, uint32_t cns,
                   std::string operator_token)
    : cluster_(cluster),
      endpoint_(endpoint),
      token_(std::move(operator_token)),
      conn_(std::make_unique<LineConn>(LineConn::Dial(endpoint))) {
  const auto w =
      Call("hello " + system + " " + KnobsWord(knobs.values()) + " " + std::to_string(cns));
  if (w.size() != 3) throw std::runtime_error("MN daemon at " + endpoint + ": bad hello reply");
  cn_index_base_ = static_cast<uint32_t>(std::stoul(w[2]));
  node_ = cluster_->AddRemoteNode("mn@" + endpoint, DecodePort(w[0]));
  published_ = FromHex(w[1]);
}

RemoteMn::~RemoteMn() = default;

std::vector<std::string> RemoteMn::Call(const std::string& request) const {
  static const bool verbose = std::getenv("DMB_MN_VERBOSE") != nullptr;
  if (verbose) std::cerr << "cn -> " << request << std::endl;
  conn_->WriteLine(request);
  const std::string reply = conn_->ReadLine();
  if (verbose) std::cerr << "cn <- " << reply << std::endl;
  if (reply.rfind("ok", 0) != 0) {
    throw std::runtime_error("MN daemon at " + endpoint_ + " refused '" +
                             request.substr(0, request.find(' ')) + "': " + reply);
  }
  auto w = SplitWords(reply);
  w.erase(w.begin());
  return w;
}

fabric::Qp* RemoteMn::CreateLaneQp(uint32_t cn_index) {
  const auto w = Call("lane " + std::to_string(cn_index));
  fabric::ibv::QpAddr addr{cluster_->PortOf(node_->id()),
                           static_cast<uint32_t>(std::stoul(w.at(0)))};
  lanes_.push_back(std::make_unique<BootstrapQp>(this, cn_index, node_->id(), addr));
  return lanes_.back().get();
}

void RemoteMn::ReleaseLane(uint32_t cn_index, uint32_t mn_qpn) {
  (void)Call("release " + std::to_string(cn_index) + " " + std::to_string(mn_qpn));
  std::erase_if(lanes_,
                [mn_qpn](const std::unique_ptr<fabric::Qp>& q) { return q->qp_num() == mn_qpn; });
}

Task<ReclaimReport> RemoteMn::ReclaimCn(uint32_t cn_index) {
  const auto w =
      Call("reclaim " + std::to_string(cn_index) + " " + (token_.empty() ? "-" : token_));
  ReclaimReport r;
  r.chunks_reclaimed = std::stoull(w.at(0));
  co_return r;
}

MnStats RemoteMn::stats() const {
  const auto w = Call("stats");
  if (w.size() != 5) throw std::runtime_error("MN daemon at " + endpoint_ + ": bad stats reply");
  MnStats s;
  s.pool_bytes = std::stoull(w[0]);
  s.chunks_total = std::stoull(w[1]);
  s.chunks_in_use = std::stoull(w[2]);
  s.rpcs_served = std::stoull(w[3]);
  s.rpcs_rejected = std::stoull(w[4]);
  return s;
}

void RemoteMn::Shutdown() { Call("shutdown " + (token_.empty() ? "-" : token_)); }

}  // namespace dmb::systems::remote
