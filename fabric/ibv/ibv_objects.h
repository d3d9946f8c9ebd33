// Internal: the ibv backend's implementations of the fabric objects.
#pragma once

#include <infiniband/verbs.h>

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fabric/ibv/ibv_cluster.h"
#include "fabric/range_alloc.h"

namespace dmb::fabric::ibv {

class IbvNode;

// fabric::Access bits -> ibv_access_flags.
int IbvAccess(uint32_t access);

// One anonymous mapping; addresses are offsets into it (0 stays unused).
class IbvMemory : public Memory {
 public:
  IbvMemory(std::string node_name, uint64_t size);
  ~IbvMemory() override;
  uint64_t size_bytes() const override { return size_; }
  void Read(uint64_t addr, void* dst, uint64_t n) const override;
  void Write(uint64_t addr, const void* src, uint64_t n) override;
  void Fill(uint64_t addr, uint8_t byte, uint64_t n) override;
  uint64_t Alloc(uint64_t bytes, uint64_t align) override;
  void Free(uint64_t addr, uint64_t bytes) override;
  uint64_t in_use_bytes() const override { return alloc_.in_use_bytes(); }
  uint64_t resident_bytes() const override { return alloc_.top(); }
  uint8_t* host(uint64_t addr) const { return base_ + addr; }

 private:
  void Check(uint64_t addr, uint64_t n, const char* what) const;
  std::string node_name_;
  uint8_t* base_ = nullptr;
  uint64_t size_;
  RangeAllocator alloc_;  // from 4096: address 0 stays unused
};

// Real CPU work is the code that runs: declared costs take no time.
class IbvCpu : public Cpu {
 public:
  explicit IbvCpu(int cores) : cores_(cores) {}
  int cores() const override { return cores_; }
  Ps busy_ps() const override { return 0; }
  double PeakBusyFraction(Ps, Ps) const override { return 0; }
  double BusyFraction(Ps, Ps) const override { return 0; }
  std::vector<std::pair<std::string, Ps>> BusyByCost() const override { return {}; }

 protected:
  void Submit(std::coroutine_handle<> h, CpuCost, uint64_t) override { h.resume(); }

 private:
  int cores_;
};

class IbvPd : public Pd {
 public:
  IbvPd(ibv_pd* pd, uint32_t handle) : pd_(pd), handle_(handle) {}
  uint32_t handle() const override { return handle_; }
  ibv_pd* raw() const { return pd_; }

 private:
  ibv_pd* pd_;
  uint32_t handle_;
};

class IbvMr : public Mr {
 public:
  IbvMr(ibv_mr* mr, IbvPd* pd, uint64_t addr, uint64_t len, uint32_t access)
      : mr_(mr), pd_(pd), addr_(addr), len_(len), access_(access) {}
  uint64_t addr() const override { return addr_; }
  uint64_t length() const override { return len_; }
  uint32_t lkey() const override { return mr_->lkey; }
  uint32_t rkey() const override { return mr_->rkey; }
  uint32_t access() const override { return access_; }
  Pd* pd() const override { return pd_; }
  ibv_mr* raw() const { return mr_; }

 private:
  ibv_mr* mr_;
  IbvPd* pd_;
  uint64_t addr_, len_;
  uint32_t access_;
};

class IbvMw : public Mw {
 public:
  IbvMw(ibv_mw* mw, IbvPd* pd, MwType type) : mw_(mw), pd_(pd), type_(type) {}
  MwType type() const override { return type_; }
  uint32_t rkey() const override { return mw_->rkey; }
  Pd* pd() const override { return pd_; }
  ibv_mw* raw() const { return mw_; }
  void set_rkey(uint32_t k) { mw_->rkey = k; }
  // The MR of the last bind (a type-1 unbind names it again with length 0:
  // the rxe provider dereferences bind_info.mr even for an unbind).
  IbvMr* last_mr = nullptr;

 private:
  ibv_mw* mw_;
  IbvPd* pd_;
  MwType type_;
};

class IbvQp;

class IbvCq : public Cq {
 public:
  IbvCq(IbvNode* node, ibv_cq* cq, uint32_t num, bool ignore_overrun)
      : node_(node), cq_(cq), num_(num), ignore_overrun_(ignore_overrun) {}
  uint32_t cq_num() const override { return num_; }
  uint64_t total_completions() const override { return total_; }
  uint64_t successful_completions() const override { return ok_; }
  int Poll(std::span<WorkCompletion> out) override;
  // Drains the device CQ and wakes waiting coroutines; returns how many
  // completions arrived.
  int Pump();
  // The idle drain (IbvNode::Pump): a CQ nobody awaits is looked at in period
  // p when p is a multiple of 2^(its looks in a row that found nothing, at
  // most 3): every kIdleCqPeriod turns while it gets completions, every 8
  // periods once it has been idle a while.
  bool IdleLookDue(uint64_t period) const {
    return (period & ((uint64_t{1} << empty_looks_) - 1)) == 0;  // a mask: no division
  }
  int PumpIdle() {
    const int n = Pump();
    empty_looks_ = n > 0 ? 0 : std::min(empty_looks_ + 1, 3);
    return n;
  }
  ibv_cq* raw() const { return cq_; }
  bool awaited() const { return head_ != nullptr; }
  // On its node's list of CQs polled every turn (it had a waiter).
  bool listed() const { return listed_; }
  void set_listed(bool on) { listed_ = on; }
  // A completion for a WR the provider refused after PostSend had accepted
  // it (IbvQp's batched doorbell): delivered as if polled.
  void DeliverUnposted(const WorkCompletion& wc);

 protected:
  bool TryPop(WorkCompletion* wc, uint64_t wr_id) override;
  void AddWaiter(Waiter* w) override;
  void RemoveWaiter(Waiter* w) override { UnlinkWaiter(&head_, &tail_, w); }

 private:
  int PollDevice();
  void Deliver(const WorkCompletion& wc);
  void Wake();
  IbvNode* node_;
  ibv_cq* cq_;
  uint32_t num_;
  bool ignore_overrun_;
  bool listed_ = false;
  int empty_looks_ = 0;
  uint64_t total_ = 0;
  uint64_t ok_ = 0;
  std::deque<WorkCompletion> ready_;
  Waiter* head_ = nullptr;
  Waiter* tail_ = nullptr;
};

class IbvQp : public Qp {
 public:
  IbvQp(IbvNode* node, ibv_qp* qp, const QpInitAttr& attr, uint32_t sq_size, uint32_t rq_size);
  uint32_t qp_num() const override { return qp_->qp_num; }
  QpState state() const override { return state_; }
  QpState QueryState() override;
  Pd* pd() const override { return attr_.pd; }
  void Modify(QpState target, const QpAttr& attr = {}) override;
  int PostSend(const SendWr& wr, uint64_t* wqe_index = nullptr) override;
  int PostRecv(const RecvWr& wr, uint64_t* wqe_index = nullptr) override;
  int BindMw(Mw* mw, uint64_t wr_id, Mr* mr, uint64_t addr, uint64_t length, uint32_t access,
             uint32_t new_rkey, uint8_t flags = kSignaled) override;
  uint64_t next_send_index() const override { return sq_next_; }
  uint64_t next_recv_index() const override { return rq_next_; }
  uint64_t SendWqeAddr(uint64_t) const override { Refuse("SendWqeAddr"); }
  uint64_t RecvWqeAddr(uint64_t) const override { Refuse("RecvWqeAddr"); }
  uint32_t wq_lkey() const override { Refuse("wq_lkey"); }
  uint32_t send_wqe_stride() const override { Refuse("send_wqe_stride"); }
  uint32_t recv_wqe_stride() const override { Refuse("recv_wqe_stride"); }
  uint32_t send_ring_size() const override { return sq_size_; }
  uint32_t recv_ring_size() const override { return rq_size_; }
  uint64_t recv_doorbell_addr() const override { Refuse("recv_doorbell_addr"); }
  const QpCounters& counters() const override { return counters_; }

  // Moves RESET -> INIT -> RTR -> RTS toward `peer`.
  void ConnectTo(const QpAddr& peer);
  // Restores the caller's wr_id/opcode of a device completion.
  void Translate(const ibv_wc& in, WorkCompletion* out);
  void MarkError() { state_ = QpState::kErr; }
  ibv_qp* raw() const { return qp_; }
  bool Uses(const Cq* cq) const { return attr_.send_cq == cq || attr_.recv_cq == cq; }
  // Rings the doorbell for the WRs queued since the last one (see Post).
  void Flush();

 private:
  struct Meta {
    uint64_t wr_id = 0;
    Opcode opcode = Opcode::kNop;
  };
  [[noreturn]] void Refuse(const char* what) const;
  void ModifyRaw(QpState target, const QpAddr* peer);
  bool CanQueue(Opcode op, size_t num_sge) const;
  static bool FillWr(const SendWr& wr, ibv_send_wr* w);
  // A WR the provider took: its metadata at the next SQ index (returned), and
  // the counters. Accept adds a SendWr's bytes and reports the index.
  uint64_t Record(uint64_t wr_id, Opcode op);
  void Accept(const SendWr& wr, uint64_t* wqe_index);
  int PostNow(ibv_send_wr* w);
  int PostBind(const SendWr& wr, uint64_t* wqe_index);
  void FailQueued(size_t from);

  IbvNode* node_;
  ibv_qp* qp_;
  QpInitAttr attr_;
  QpState state_ = QpState::kReset;
  // The caller's wr_id and opcode of each posted WR, by queue index. The
  // rings are a power of two long (at least the queue's size), so a slot is
  // index & mask: a division is a library call per WR under TCG.
  Meta& SqMeta(uint64_t index) { return sq_meta_[index & (sq_meta_.size() - 1)]; }
  Meta& RqMeta(uint64_t index) { return rq_meta_[index & (rq_meta_.size() - 1)]; }
  uint32_t sq_size_, rq_size_;
  std::vector<Meta> sq_meta_, rq_meta_;
  uint64_t sq_next_ = 0, rq_next_ = 0;
  QpCounters counters_;
  // Doorbell batching: send WRs accepted by PostSend while coroutines run,
  // handed to the provider as one list when the node next polls (a system
  // call per ibv_post_send on rxe). Their sg_list pointers are set at Flush.
  static constexpr size_t kMaxQueued = 64;
  std::vector<ibv_send_wr> queued_wr_;
  std::vector<ibv_sge> queued_sge_;
  // Every send WR below this SQ index has completed (an RC QP completes in
  // order): the SQ's free room is at least its size minus (sq_next_ - acked_).
  uint64_t acked_ = 0;
};

class IbvNode : public Node {
 public:
  IbvNode(IbvCluster* cluster, uint32_t id, const NodeConfig& cfg, Device dev);
  ~IbvNode() override;
  uint32_t id() const override { return id_; }
  const std::string& name() const override { return name_; }
  Memory& memory() override { return mem_; }
  Cpu& cpu() override { return cpu_; }
  CpuCost Cost(std::string_view name) const override;
  Pd* AllocPd() override;
  Task<Mr*> RegMr(Pd* pd, uint64_t addr, uint64_t length, uint32_t access) override;
  Task<void> DeregMr(Mr* mr) override;
  Mw* AllocMw(Pd* pd, MwType type) override;
  void DeallocMw(Mw* mw) override;
  Cq* CreateCq(uint32_t capacity, bool ignore_overrun = false) override;
  Qp* CreateQp(const QpInitAttr& attr) override;
  Qp* QpByNum(uint32_t qp_num) override;
  void DestroyQp(Qp* qp) override;
  void DestroyCq(Cq* cq) override;
  DeviceCaps caps() const override { return dev_.caps; }

  IbvQp* LocalQp(uint32_t qpn) const;
  IbvMr* MrByLkey(uint32_t lkey) const;
  IbvMw* MwByRkey(uint32_t rkey) const;
  const Device& device() const { return dev_; }
  IbvCluster* cluster() const { return cluster_; }
  // Polls the awaited CQs, every kIdleCqPeriod calls the others that are due
  // (IbvCq::IdleLookDue) and every 1024 the device's asynchronous events.
  int Pump();
  // `cq` has a waiter now: it is polled every turn until it has none.
  void NoteAwaited(IbvCq* cq) { awaited_.push_back(cq); }
  static constexpr uint64_t kIdleCqPeriod = 8;
  // Doorbell batching (IbvQp::Post): on unless DMB_IBV_POST_BATCH=0.
  bool post_batching() const { return post_batching_; }
  void NoteQueued(IbvQp* qp) { queued_qps_.push_back(qp); }
  // Rings every doorbell that WRs wait behind.
  void FlushPosts();
  // Before the loop sleeps (IbvCluster::SleepUntilEvent): acknowledges the
  // completion events of the last sleep, arms every CQ for its next
  // completion and polls them all once, so a completion that came before the
  // arming is not slept through. Returns what that poll found (0 = safe to
  // sleep).
  int ArmForSleep();
  // The descriptors that become readable on a completion event or an
  // asynchronous event of this node.
  int event_fd() const { return channel_->fd; }
  int async_fd() const { return dev_.ctx->async_fd; }

 private:
  int PumpAsyncEvents();
  void AckCqEvents();
  IbvCluster* cluster_;
  uint32_t id_;
  std::string name_;
  Device dev_;
  // Every CQ's completion channel (non-blocking; ArmForSleep).
  ibv_comp_channel* channel_ = nullptr;
  IbvMemory mem_;
  IbvCpu cpu_;
  std::vector<std::unique_ptr<IbvPd>> pds_;
  std::vector<std::unique_ptr<IbvMr>> mrs_;
  std::vector<std::unique_ptr<IbvMw>> mws_;
  std::vector<std::unique_ptr<IbvCq>> cqs_;
  std::vector<std::unique_ptr<IbvQp>> qps_;
  std::vector<IbvCq*> awaited_;  // see NoteAwaited (a CQ without waiters leaves at the next Pump)
  std::unordered_map<uint32_t, IbvQp*> qp_by_num_;
  // LocalQp's last answer: completions come in runs from one QP, and the
  // map's lookup divides by its bucket count (a library call under TCG).
  mutable uint32_t last_qpn_ = 0;
  mutable IbvQp* last_qp_ = nullptr;
  uint32_t next_cq_num_ = 1;
  mutable std::unordered_map<std::string, uint32_t> cost_ids_;
  uint64_t pumps_ = 0;
  bool post_batching_ = true;
  std::vector<IbvQp*> queued_qps_;  // QPs with WRs queued for the next doorbell
};

// A node of another process: only its identity and port are known here.
class RemoteNode : public Node {
 public:
  RemoteNode(uint32_t id, std::string name, PortAddr port)
      : id_(id), name_(std::move(name)), port_(port) {}
  uint32_t id() const override { return id_; }
  const std::string& name() const override { return name_; }
  const PortAddr& port() const { return port_; }
  Memory& memory() override { Refuse("memory"); }
  Cpu& cpu() override { Refuse("cpu"); }
  CpuCost Cost(std::string_view) const override { Refuse("Cost"); }
  Pd* AllocPd() override { Refuse("AllocPd"); }
  Task<Mr*> RegMr(Pd*, uint64_t, uint64_t, uint32_t) override { Refuse("RegMr"); }
  Task<void> DeregMr(Mr*) override { Refuse("DeregMr"); }
  Mw* AllocMw(Pd*, MwType) override { Refuse("AllocMw"); }
  void DeallocMw(Mw*) override { Refuse("DeallocMw"); }
  Cq* CreateCq(uint32_t, bool) override { Refuse("CreateCq"); }
  Qp* CreateQp(const QpInitAttr&) override { Refuse("CreateQp"); }
  Qp* QpByNum(uint32_t) override { Refuse("QpByNum"); }
  void DestroyQp(Qp*) override { Refuse("DestroyQp"); }
  void DestroyCq(Cq*) override { Refuse("DestroyCq"); }

 private:
  [[noreturn]] void Refuse(const char* what) const;
  uint32_t id_;
  std::string name_;
  PortAddr port_;
};

}  // namespace dmb::fabric::ibv
