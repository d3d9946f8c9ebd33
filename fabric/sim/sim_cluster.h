// The sim backend: a deterministic simulated RDMA cluster.
//
// What it models (all timing from sim/profile.h, nothing from above fabric):
//  - Each node: sparse real memory, CPU cores (queueing), one RNIC with
//    `nic_pus` processing units, a port (tx/rx serialization at link_gbps),
//    one atomic unit, and the key table shared by MRs and MWs.
//  - Send WQEs are read from node memory when they start; a WQE becomes
//    visible doorbell + fetch after it is posted (or after the SEND_ENABLE
//    that releases it on a managed QP, or after the WAIT before it releases).
//  - Per QP: WQEs start in order, one per nic_wr_proc_ns; READ/atomics are
//    limited by max_rd_atomic; FENCE waits for earlier READ/atomics;
//    completions are delivered in WQE order.
//  - Memory effects happen at event times in virtual-time order: a responder
//    applies a WRITE/atomic/SEND scatter when the request arrives, reads READ
//    data then, and the requester scatters READ/atomic results when the
//    response lands.
//  - Protection as in the IB spec and rxe: rkey index/key, PD, bounds, access
//    flags, MW state, and the bound QP for type-2 MWs. A violation NAKs and
//    moves both QPs to ERR; outstanding WRs flush.
//  - Fault hooks: CrashNode (its CPU halts, its QPs stop answering), FailQp.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "fabric/node.h"
#include "fabric/sim/keys.h"
#include "fabric/sim/profile.h"
#include "fabric/sim/sim_cpu.h"
#include "fabric/sim/simulator.h"
#include "fabric/sim/sparse_memory.h"
#include "fabric/wqe_layout.h"

namespace dmb::sim {

class SimNode;
class SimQp;
class SimCluster;

// Profile values converted to picoseconds once.
struct Timing {
  Ps pcie_oneway;
  uint64_t pcie_ps_per_byte_fx;  // ps per byte, 16.16 fixed point
  uint64_t link_ps_per_byte_fx;
  Ps wire;
  uint32_t header_bytes;
  uint32_t mtu;
  int mtu_shift;  // mtu is a power of two
  int pus;
  Ps wr_proc;
  Ps atomic;
  Ps umr;
  Ps offload_penalty_per_qp;
  bool offload_counts_loopback;
  bool offload_occupies_pu;
  Ps gate_fetch;
  Ps cqe_notify;
  Ps retry_timeout;
  Ps rnr_delay;

  explicit Timing(const Profile& p);
  Ps PcieRead(uint64_t bytes) const {  // DMA read round trip
    return 2 * pcie_oneway + static_cast<Ps>((pcie_ps_per_byte_fx * bytes) >> 16);
  }
  Ps PcieWrite(uint64_t bytes) const {  // posted write lands
    return pcie_oneway + static_cast<Ps>((pcie_ps_per_byte_fx * bytes) >> 16);
  }
  Ps Serialize(uint64_t payload) const {
    const uint64_t packets = payload == 0 ? 1 : (payload + mtu - 1) >> mtu_shift;
    return static_cast<Ps>((link_ps_per_byte_fx * (payload + packets * header_bytes)) >> 16);
  }
};

class SimCq : public fabric::Cq {
 public:
  SimCq(SimNode* node, uint32_t num, uint32_t capacity, bool ignore_overrun)
      : node_(node), num_(num), capacity_(capacity), ignore_overrun_(ignore_overrun) {}
  uint32_t cq_num() const override { return num_; }
  uint64_t total_completions() const override { return total_; }
  uint64_t successful_completions() const override { return ok_; }
  int Poll(std::span<fabric::WorkCompletion> out) override;

  // Delivers one completion at now(): counts it, wakes WAITs that reached
  // their count, hands it to a waiting coroutine or queues it.
  void Deliver(const fabric::WorkCompletion& wc);
  void AddWaitingQp(SimQp* qp, uint64_t count);
  void RemoveWaitingQp(const SimQp* qp);

 protected:
  friend class SimNode;
  bool TryPop(fabric::WorkCompletion* wc, uint64_t wr_id) override;
  void AddWaiter(Waiter* w) override;
  void RemoveWaiter(Waiter* w) override { UnlinkWaiter(&waiters_head_, &waiters_tail_, w); }

 private:
  SimNode* node_;
  uint32_t num_;
  uint32_t capacity_;
  bool ignore_overrun_;
  uint64_t total_ = 0;
  uint64_t ok_ = 0;
  std::deque<fabric::WorkCompletion> entries_;
  Waiter* waiters_head_ = nullptr;
  Waiter* waiters_tail_ = nullptr;
  std::vector<std::pair<SimQp*, uint64_t>> waiting_qps_;
  uint32_t users_ = 0;  // QP queues completing here (DestroyCq refuses while > 0)
};

// One WQE in flight (pooled per cluster).
struct Op {
  SimQp* qp = nullptr;  // set through SimCluster::Attach (counted: see SimQp::live_ops_)
  uint64_t wqe_index = 0;
  fabric::DecodedSendWqe wqe{};
  fabric::WcStatus status = fabric::WcStatus::kSuccess;
  uint32_t byte_len = 0;
  bool done = false;
  bool remote = false;
  bool rd_atomic = false;
  bool flushed_only = false;  // a flush completion for an unstarted WQE
  bool in_flight = false;     // an event still refers to it
  bool abandoned = false;     // retired (flushed) while in flight: the event frees it
  uint32_t rnr_tries = 0;
  uint32_t epoch = 0;  // the QP's epoch when started (a reset orphans the op)
  Ps sent_at = 0;
  fabric::WorkCompletion recv_wc;  // for RECV completion records
  std::vector<uint8_t> data;       // payload (WRITE/SEND) or response (READ/atomic)
  Op* next = nullptr;              // completion FIFO / free list
};

class SimQp : public fabric::Qp {
 public:
  SimQp(SimNode* node, uint32_t qpn, const fabric::QpInitAttr& attr);

  uint32_t qp_num() const override { return qpn_; }
  fabric::QpState state() const override { return state_; }
  fabric::Pd* pd() const override { return pd_; }
  void Modify(fabric::QpState target, const fabric::QpAttr& attr = {}) override;
  int PostSend(const fabric::SendWr& wr, uint64_t* wqe_index = nullptr) override;
  int PostRecv(const fabric::RecvWr& wr, uint64_t* wqe_index = nullptr) override;
  int BindMw(fabric::Mw* mw, uint64_t wr_id, fabric::Mr* mr, uint64_t addr, uint64_t length,
             uint32_t access, uint32_t new_rkey, uint8_t flags) override;
  uint64_t next_send_index() const override { return sq_posted_; }
  uint64_t next_recv_index() const override { return rq_posted_; }
  uint64_t SendWqeAddr(uint64_t index) const override {
    return sq_base_ + (index & (sq_size_ - 1)) * sq_stride_;
  }
  uint64_t RecvWqeAddr(uint64_t index) const override {
    return rq_base_ + (index & (rq_size_ - 1)) * rq_stride_;
  }
  uint32_t wq_lkey() const override { return wq_mr_->lkey(); }
  uint32_t send_wqe_stride() const override { return sq_stride_; }
  uint32_t recv_wqe_stride() const override { return rq_stride_; }
  uint32_t send_ring_size() const override { return sq_size_; }
  uint32_t recv_ring_size() const override { return rq_size_; }
  uint64_t recv_doorbell_addr() const override { return rq_dbr_; }
  const fabric::QpCounters& counters() const override { return counters_; }

  SimNode* node() const { return node_; }
  bool cross_channel() const { return attr_.cross_channel; }
  // Sets the state and keeps the node's count of offload-holding QPs.
  void SetState(fabric::QpState s);

  enum class Block : uint8_t { kNone, kWait, kRdAtomic };

 private:
  friend class SimNode;
  friend class SimCq;
  friend class SimCluster;
  friend class Rnic;

  SimNode* node_;
  uint32_t qpn_;
  uint32_t live_ops_ = 0;  // Ops naming this QP: a destroyed QP is deleted at 0
  bool destroyed_ = false;
  fabric::QpInitAttr attr_;
  SimPd* pd_;
  SimCq* send_cq_;
  SimCq* recv_cq_;
  fabric::QpState state_ = fabric::QpState::kReset;
  uint32_t epoch_ = 0;
  bool counted_offload_ = false;    // in offload_qps_all_
  bool counted_cn_facing_ = false;  // in offload_qps_cn_facing_
  uint32_t dest_node_ = 0;
  uint32_t dest_qpn_ = 0;
  SimMr* wq_mr_ = nullptr;
  // Send queue.
  uint64_t sq_base_ = 0;
  uint64_t ring_bytes_ = 0;  // SQ, RQ and doorbell record, from sq_base_
  uint32_t sq_size_ = 0;
  uint32_t sq_stride_ = 0;
  uint64_t sq_posted_ = 0;   // producer (doorbell) index
  uint64_t sq_exec_ = 0;     // next WQE to start
  uint64_t sq_enabled_ = 0;  // managed SQ: execution limit
  uint64_t sq_retired_ = 0;  // WQEs whose completion was delivered
  std::vector<Ps> sq_visible_at_;
  Ps refetch_at_ = 0;  // after WAIT or SEND_ENABLE: fetch again from here
  Ps next_start_ = 0;  // per-QP issue rate
  bool start_pending_ = false;
  Block block_ = Block::kNone;
  bool waited_ = false;  // a WAIT stalled: fetch the next WQE again
  Ps wait_seen_at_ = 0;  // when the RNIC saw the CQE that released it
  // CQs whose waiting list holds this QP (a WAIT short of its count): the
  // ones DestroyQp must take it off, without walking every CQ ever made.
  std::vector<uint32_t> waiting_on_cqs_;
  uint32_t outstanding_rd_atomic_ = 0;
  Op* fifo_head_ = nullptr;  // started, not yet retired
  Op* fifo_tail_ = nullptr;
  // Receive queue.
  uint64_t rq_base_ = 0;
  uint32_t rq_size_ = 0;
  uint32_t rq_stride_ = 0;
  uint64_t rq_dbr_ = 0;
  uint64_t rq_posted_ = 0;
  uint64_t rq_consumed_ = 0;
  uint64_t rq_enabled_ = 0;        // managed RQ: consumption limit
  std::vector<uint64_t> rq_wrid_;  // wr_id per RQ slot (driver-side, as in mlx5)
  // Responder.
  Ps resp_free_ = 0;
  Ps last_recv_cqe_ = 0;
  fabric::QpCounters counters_;
};

class SimNode : public fabric::Node {
 public:
  SimNode(SimCluster* cluster, uint32_t id, const fabric::NodeConfig& cfg);
  ~SimNode() override;

  uint32_t id() const override { return id_; }
  const std::string& name() const override { return cfg_.name; }
  fabric::Memory& memory() override { return memory_; }
  fabric::Cpu& cpu() override { return cpu_; }
  fabric::CpuCost Cost(std::string_view name) const override;
  fabric::Pd* AllocPd() override;
  Task<fabric::Mr*> RegMr(fabric::Pd* pd, uint64_t addr, uint64_t length, uint32_t access) override;
  Task<void> DeregMr(fabric::Mr* mr) override;
  fabric::Mw* AllocMw(fabric::Pd* pd, fabric::MwType type) override;
  void DeallocMw(fabric::Mw* mw) override;
  fabric::Cq* CreateCq(uint32_t capacity, bool ignore_overrun) override;
  fabric::Qp* CreateQp(const fabric::QpInitAttr& attr) override;
  fabric::Qp* QpByNum(uint32_t qp_num) override;
  void DestroyQp(fabric::Qp* qp) override;
  void DestroyCq(fabric::Cq* cq) override;
  fabric::DeviceCaps caps() const override { return cfg_.caps; }
  const fabric::DeviceCaps& caps_ref() const { return cfg_.caps; }

  SimCluster* cluster() const { return cluster_; }
  SparseMemory& mem() { return memory_; }
  SimCpu& sim_cpu() { return cpu_; }
  bool crashed() const { return crashed_; }
  // QPs whose offloaded WRs slow every WR of this NIC, by the profile's
  // reading (offload_counts_loopback), and the two counts behind it.
  int offloaded_qps() const;
  int offload_qps_all() const { return offload_qps_all_; }
  int offload_qps_cn_facing() const { return offload_qps_cn_facing_; }
  uint64_t page_bytes() const { return cfg_.page_bytes; }
  SimCq* CqByNum(uint32_t num) {
    return num >= 1 && num <= cqs_.size() ? cqs_[num - 1].get() : nullptr;
  }
  SimQp* SimQpByNum(uint32_t qpn);
  // Destroyed QPs not yet deleted (events still name them).
  size_t destroyed_qps_pending() const { return destroyed_qps_.size(); }

 private:
  friend class Rnic;
  friend class SimQp;
  friend class SimCluster;

  void ReapQps();
  uint8_t NextKey() { return static_cast<uint8_t>(key_counter_++ * 0x9d + 0x11); }
  SimMr* CreateMrNow(SimPd* pd, uint64_t addr, uint64_t length, uint32_t access);
  void CheckMrArgs(fabric::Pd* pd, uint64_t addr, uint64_t length, uint32_t access) const;

  SimCluster* cluster_;
  uint32_t id_;
  fabric::NodeConfig cfg_;
  SparseMemory memory_;
  SimCpu cpu_;
  bool crashed_ = false;
  uint32_t key_counter_ = 1;
  int offload_qps_all_ = 0;        // cross-channel QPs in RTR/RTS
  int offload_qps_cn_facing_ = 0;  // ... connected to another node
  std::vector<std::unique_ptr<SimPd>> pds_;
  std::vector<std::unique_ptr<SimMr>> mrs_;
  std::vector<std::unique_ptr<SimCq>> cqs_;
  std::vector<std::unique_ptr<SimQp>> qps_;  // by number - 1; null once destroyed
  // Destroyed QPs that pending events still name (they check its epoch and
  // drop themselves); deleted once none is left (ReapQps).
  std::vector<std::unique_ptr<SimQp>> destroyed_qps_;
  KeyTable keys_;  // MRs by pointer, MWs in place
  // RNIC resources ("free at" timestamps).
  std::vector<Ps> pu_free_;
  Ps tx_free_ = 0;
  Ps rx_free_ = 0;
  Ps atomic_free_ = 0;
};

class SimCluster : public fabric::Cluster {
 public:
  explicit SimCluster(uint64_t seed, Profile profile = Profile::Cx5());
  ~SimCluster() override;

  fabric::Runtime& runtime() override { return sim_; }
  Simulator& sim() { return sim_; }
  fabric::Node* AddNode(const fabric::NodeConfig& cfg) override;
  fabric::Node* node(uint32_t id) override;
  size_t num_nodes() const override { return nodes_.size(); }
  void Connect(fabric::Qp* a, fabric::Qp* b) override;

  const Profile& profile() const { return profile_; }
  const Timing& timing() const { return timing_; }
  const std::vector<std::string>& cost_names() const { return cost_names_; }
  SimNode* sim_node(uint32_t id) { return id < nodes_.size() ? nodes_[id].get() : nullptr; }

  // Fault hooks.
  void CrashNode(fabric::Node* node);
  void CrashNodeAt(fabric::Node* node, Ps t);
  void FailQp(fabric::Qp* qp);

  // Runs `task` to completion (spawn + run until it finishes, even if
  // background coroutines still have timers pending); rethrows its exception.
  void RunToCompletion(Task<void> task);

  // Send WQEs the cluster's RNICs have started (every QP's, CN- and MN-side,
  // chain WRs included; a WAIT counts once it passes, flushed WQEs never).
  // A statistic only: nothing in the model reads it, so it leaves event order
  // and the trace hash as they are (sim_speed_bench's WR rate).
  uint64_t wrs_executed() const { return wrs_executed_; }
  void CountWrExecuted() { ++wrs_executed_; }  // Rnic (internal)

  // Op pool (internal). Attach names the op's QP (counted, so a destroyed
  // QP outlives the events of its ops); FreeOp releases it.
  Op* NewOp();
  void FreeOp(Op* op);
  static void Attach(Op* op, SimQp* qp) {
    op->qp = qp;
    ++qp->live_ops_;
  }

 private:
  Simulator sim_;
  Profile profile_;
  Timing timing_;
  std::vector<std::string> cost_names_;
  std::vector<std::unique_ptr<SimNode>> nodes_;
  Op* free_ops_ = nullptr;
  std::vector<std::unique_ptr<Op>> all_ops_;
  uint64_t wrs_executed_ = 0;
};

}  // namespace dmb::sim
