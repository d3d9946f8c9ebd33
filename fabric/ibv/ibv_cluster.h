// The ibv backend: the fabric contract on libibverbs (Debian rdma-core 44,
// upstream verbs only), for real RDMA NICs and Soft-RoCE (rxe).
//
// Mapping onto verbs:
//  - Node memory is one anonymous mapping per node. Every MR is registered
//    with ibv_reg_mr_iova so that its I/O virtual addresses are the node-local
//    addresses the contract uses: remote_addr, SGE addr and bind addr mean the
//    same thing on sim and ibv, and nothing above fabric/ sees host pointers.
//  - wr_ids handed to the device are the WQE's absolute index (bit 63 marks
//    the RQ); the caller's wr_id and opcode are restored from a per-QP ring,
//    because verbs leave a flushed completion's opcode undefined.
//  - A QP's state is cached: Modify sets it, an error completion or an
//    asynchronous QP error event moves it to ERR (ibv_query_qp is a firmware
//    command on ConnectX, far too slow for the data path).
//  - Doorbell batching: READ/WRITE/SEND WRs that the coroutines of one loop
//    turn post on a QP reach the provider as one list (one system call on
//    rxe) before the turn polls. Only WRs the provider cannot refuse are
//    held back, so PostSend's return is still the provider's answer; a
//    direct post, Modify, QueryState and Cq::Poll ring the doorbell first.
//    DMB_IBV_POST_BATCH=0 posts every WR at once.
//  - Cpu::Work costs nothing: on real hardware the CPU work is the code that
//    actually runs. Declared cost names are accepted and ignored.
//  - What upstream verbs cannot express is refused with a clear error, never
//    emulated: WAIT/SEND_EN/RECV_EN and masked atomics (EINVAL at post,
//    EOPNOTSUPP for cross-channel QPs), a BIND_MW naming another QP (EINVAL),
//    a type-1 rebind to a key other than ibv_inc_rkey(current) (EINVAL), and
//    the work-queue memory accessors (the rings belong to the provider).
//
// Multi-process clusters: RemoteNode and RemoteQp stand for objects in
// another process (the MN daemon); Connect() with a RemoteQp connects the
// local end and asks the remote owner to connect its end (see bootstrap/).
#pragma once

#include <poll.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "fabric/backend.h"
#include "fabric/ibv/ibv_device.h"
#include "fabric/ibv/ibv_runtime.h"
#include "fabric/node.h"

namespace dmb::fabric::ibv {

class IbvNode;

struct QpAddr {
  PortAddr port;
  uint32_t qpn = 0;
};

// The MN-side end of a lane, living in another process. Only the number and
// the address are known here.
class RemoteQp : public Qp {
 public:
  RemoteQp(uint32_t node_id, QpAddr addr) : node_id_(node_id), addr_(addr) {}
  const QpAddr& addr() const { return addr_; }
  uint32_t node_id() const { return node_id_; }
  // Asks the owning process to connect its QP to `peer` (RESET..RTS).
  virtual void ConnectRemote(const QpAddr& peer) = 0;

  uint32_t qp_num() const override { return addr_.qpn; }
  QpState state() const override { return QpState::kRts; }
  Pd* pd() const override { return nullptr; }
  void Modify(QpState, const QpAttr&) override { Refuse("Modify"); }
  int PostSend(const SendWr&, uint64_t*) override { Refuse("PostSend"); }
  int PostRecv(const RecvWr&, uint64_t*) override { Refuse("PostRecv"); }
  int BindMw(Mw*, uint64_t, Mr*, uint64_t, uint64_t, uint32_t, uint32_t, uint8_t) override {
    Refuse("BindMw");
  }
  uint64_t next_send_index() const override { Refuse("next_send_index"); }
  uint64_t next_recv_index() const override { Refuse("next_recv_index"); }
  uint64_t SendWqeAddr(uint64_t) const override { Refuse("SendWqeAddr"); }
  uint64_t RecvWqeAddr(uint64_t) const override { Refuse("RecvWqeAddr"); }
  uint32_t wq_lkey() const override { Refuse("wq_lkey"); }
  uint32_t send_wqe_stride() const override { Refuse("send_wqe_stride"); }
  uint32_t recv_wqe_stride() const override { Refuse("recv_wqe_stride"); }
  uint32_t send_ring_size() const override { Refuse("send_ring_size"); }
  uint32_t recv_ring_size() const override { Refuse("recv_ring_size"); }
  uint64_t recv_doorbell_addr() const override { Refuse("recv_doorbell_addr"); }
  const QpCounters& counters() const override { Refuse("counters"); }

 private:
  [[noreturn]] void Refuse(const char* what) const;
  uint32_t node_id_;
  QpAddr addr_;
};

class IbvCluster : public Cluster {
 public:
  // Local node i opens devices[i % devices.size()] ({} = the first device).
  explicit IbvCluster(std::vector<std::string> devices = {}, int gid_index = -1,
                      std::chrono::milliseconds stall_limit = DefaultStallLimit());
  ~IbvCluster() override;

  Runtime& runtime() override { return rt_; }
  IbvRuntime& rt() { return rt_; }
  Node* AddNode(const NodeConfig& cfg) override;
  // A node of another process, reached at `port` (its id must match there).
  Node* AddRemoteNode(const std::string& name, const PortAddr& port);
  Node* node(uint32_t id) override;
  size_t num_nodes() const override { return nodes_.size(); }
  void Connect(Qp* a, Qp* b) override;

  // The address a peer needs to connect to local QP `qp`.
  QpAddr AddrOf(Qp* qp) const;
  // Moves local QP `qp` RESET -> INIT -> RTR -> RTS toward `peer`.
  void ConnectTo(Qp* qp, const QpAddr& peer);
  // The port address of node `id` (local or remote).
  const PortAddr& PortOf(uint32_t node_id) const;

  void Run(Task<void> task) { rt_.Run(std::move(task), stall_limit_); }

  // DMB_IBV_STALL_MS or 60 s.
  static std::chrono::milliseconds DefaultStallLimit();

 private:
  int PollAll();
  // The runtime's idle waiter: arms every local node's CQs and, if that
  // found nothing, sleeps in ppoll on their completion channels and
  // asynchronous-event descriptors for at most `max_wait_ps`.
  void SleepUntilEvent(Ps max_wait_ps);
  IbvRuntime rt_;
  std::vector<std::string> devices_;
  int gid_index_;
  std::chrono::milliseconds stall_limit_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<IbvNode*> local_;    // the nodes_ of this process, polled every loop turn
  std::vector<pollfd> sleep_fds_;  // SleepUntilEvent's, kept to not allocate
};

std::unique_ptr<Backend> MakeIbvBackend(const BackendOptions& opts);

}  // namespace dmb::fabric::ibv
