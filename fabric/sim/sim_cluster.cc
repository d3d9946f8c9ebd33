#include "fabric/sim/sim_cluster.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <stdexcept>

#include "fabric/sim/rnic.h"

namespace dmb::sim {

using fabric::Access;
using fabric::Opcode;
using fabric::QpState;
using fabric::WcStatus;

Timing::Timing(const Profile& p)
    : pcie_oneway(NsToPs(p.pcie_oneway_ns)),
      pcie_ps_per_byte_fx(static_cast<uint64_t>(65536.0 * 1000.0 / p.pcie_bytes_per_ns + 0.5)),
      link_ps_per_byte_fx(static_cast<uint64_t>(65536.0 * 8000.0 / p.link_gbps + 0.5)),
      wire(NsToPs(p.wire_latency_ns)),
      header_bytes(static_cast<uint32_t>(p.wire_header_bytes)),
      mtu(static_cast<uint32_t>(p.mtu_bytes)),
      mtu_shift(std::countr_zero(static_cast<uint32_t>(p.mtu_bytes))),
      pus(static_cast<int>(p.nic_pus)),
      wr_proc(NsToPs(p.nic_wr_proc_ns)),
      atomic(NsToPs(p.nic_atomic_ns)),
      umr(NsToPs(p.nic_umr_ns)),
      offload_penalty_per_qp(NsToPs(p.offload_penalty_ns_per_qp)),
      offload_counts_loopback(p.offload_counts_loopback != 0),
      offload_occupies_pu(p.offload_occupies_pu != 0),
      gate_fetch(NsToPs(p.gate_fetch_ns)),
      cqe_notify(NsToPs(p.cqe_notify_ns)),
      retry_timeout(UsToPs(p.retry_timeout_us)),
      rnr_delay(UsToPs(p.rnr_delay_us)) {
  if (!std::has_single_bit(mtu)) {
    throw std::invalid_argument("profile " + p.name + ": mtu_bytes must be a power of two");
  }
}

// ---- CQ ------------------------------------------------------------------------

int SimCq::Poll(std::span<fabric::WorkCompletion> out) {
  int n = 0;
  while (n < static_cast<int>(out.size()) && !entries_.empty()) {
    out[n++] = entries_.front();
    entries_.pop_front();
  }
  return n;
}

bool SimCq::TryPop(fabric::WorkCompletion* wc, uint64_t wr_id) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (wr_id != kAnyWrId && it->wr_id != wr_id) continue;
    *wc = *it;
    entries_.erase(it);
    return true;
  }
  return false;
}

void SimCq::AddWaiter(Waiter* w) {
  w->next = nullptr;
  if (waiters_tail_) {
    waiters_tail_->next = w;
  } else {
    waiters_head_ = w;
  }
  waiters_tail_ = w;
}

void SimCq::AddWaitingQp(SimQp* qp, uint64_t count) {
  waiting_qps_.emplace_back(qp, count);
  qp->waiting_on_cqs_.push_back(num_);
}

void SimCq::RemoveWaitingQp(const SimQp* qp) {
  std::erase_if(waiting_qps_, [qp](const auto& w) { return w.first == qp; });
}

namespace {
void EraseOne(std::vector<uint32_t>* v, uint32_t x) {
  if (auto it = std::find(v->begin(), v->end(), x); it != v->end()) v->erase(it);
}
}  // namespace

void SimCq::Deliver(const fabric::WorkCompletion& wc) {
  ++total_;
  ok_ += wc.status == WcStatus::kSuccess;
  Simulator& sim = node_->cluster()->sim();
  if (!ignore_overrun_) {
    if (Waiter* w = TakeWaiterFor(&waiters_head_, &waiters_tail_, wc)) {
      w->wc = wc;
      sim.ResumeAt(w->handle, sim.now() + node_->cluster()->timing().cqe_notify);
    } else {
      if (entries_.size() >= capacity_) {
        throw std::runtime_error("CQ overrun on node '" + node_->name() + "' cq " +
                                 std::to_string(num_) + " (capacity " + std::to_string(capacity_) +
                                 "): poll it, enlarge it, or create it with ignore_overrun");
      }
      entries_.push_back(wc);
    }
  }
  if (!waiting_qps_.empty()) {
    for (size_t i = 0; i < waiting_qps_.size();) {
      if (waiting_qps_[i].second <= total_) {
        SimQp* qp = waiting_qps_[i].first;
        waiting_qps_[i] = waiting_qps_.back();
        waiting_qps_.pop_back();
        EraseOne(&qp->waiting_on_cqs_, num_);
        // Every CQE reaches host memory over PCIe; the RNIC, which counts
        // the CQ, saw it one PCIe hop before it landed (now).
        Rnic::ReleaseWait(qp, sim.now() - node_->cluster()->timing().pcie_oneway);
      } else {
        ++i;
      }
    }
  }
}

// ---- QP ------------------------------------------------------------------------

SimQp::SimQp(SimNode* node, uint32_t qpn, const fabric::QpInitAttr& attr)
    : node_(node), qpn_(qpn), attr_(attr) {
  pd_ = static_cast<SimPd*>(attr.pd);
  send_cq_ = static_cast<SimCq*>(attr.send_cq);
  recv_cq_ = static_cast<SimCq*>(attr.recv_cq);
  sq_size_ = std::bit_ceil(std::max(1u, attr.max_send_wr));
  rq_size_ = std::bit_ceil(std::max(1u, attr.max_recv_wr));
  sq_stride_ = fabric::WqeLayout::SendStride(attr.max_send_sge);
  rq_stride_ = fabric::WqeLayout::RecvStride(attr.max_recv_sge);
  const uint64_t bytes = uint64_t{sq_size_} * sq_stride_ + uint64_t{rq_size_} * rq_stride_ + 64;
  fabric::Memory& mem = node->memory();
  sq_base_ = mem.Alloc(bytes, 4096);
  ring_bytes_ = bytes;
  rq_base_ = sq_base_ + uint64_t{sq_size_} * sq_stride_;
  rq_dbr_ = rq_base_ + uint64_t{rq_size_} * rq_stride_;
  sq_visible_at_.assign(sq_size_, 0);
  rq_wrid_.assign(rq_size_, 0);
}

void SimQp::SetState(QpState s) {
  state_ = s;
  const bool holds = attr_.cross_channel && (s == QpState::kRtr || s == QpState::kRts);
  if (holds != counted_offload_) {
    node_->offload_qps_all_ += holds ? 1 : -1;
    counted_offload_ = holds;
  }
  const bool facing = holds && dest_node_ != node_->id();
  if (facing != counted_cn_facing_) {
    node_->offload_qps_cn_facing_ += facing ? 1 : -1;
    counted_cn_facing_ = facing;
  }
}

void SimQp::Modify(QpState target, const fabric::QpAttr& attr) {
  const QpState from = state_;
  bool ok = false;
  switch (target) {
    case QpState::kReset:
      ok = true;
      break;
    case QpState::kErr:  // not from RESET (mlx4/mlx5, ib_modify_qp_is_ok)
      ok = from != QpState::kReset;
      break;
    case QpState::kInit:
      ok = from == QpState::kReset || from == QpState::kInit;
      break;
    case QpState::kRtr:
      ok = from == QpState::kInit;
      break;
    case QpState::kRts:
      ok = from == QpState::kRtr || from == QpState::kRts;
      break;
  }
  if (!ok) {
    throw fabric::VerbsError(EINVAL, "illegal QP transition " +
                                         std::string(fabric::QpStateName(from)) + " -> " +
                                         std::string(fabric::QpStateName(target)) + " on qp " +
                                         std::to_string(qpn_) + " of node '" + node_->name() + "'");
  }
  if (target == QpState::kRtr) {
    SimNode* dest = node_->cluster()->sim_node(attr.dest_node);
    if (!dest || !dest->SimQpByNum(attr.dest_qp_num)) {
      throw fabric::VerbsError(EINVAL, "RTR needs an existing destination: node " +
                                           std::to_string(attr.dest_node) + " qp " +
                                           std::to_string(attr.dest_qp_num) + " not found");
    }
    dest_node_ = attr.dest_node;
    dest_qpn_ = attr.dest_qp_num;
  }
  if (target == QpState::kErr) {
    if (from != QpState::kErr) Rnic::EnterError(this);
    return;
  }
  if (target == QpState::kReset) {
    ++epoch_;  // in-flight ops are orphaned and dropped when their events fire
    Op* op = fifo_head_;
    while (op) {
      Op* next = op->next;
      if (!op->in_flight) node_->cluster()->FreeOp(op);
      op = next;
    }
    fifo_head_ = fifo_tail_ = nullptr;
    sq_posted_ = sq_exec_ = sq_enabled_ = sq_retired_ = 0;
    rq_posted_ = rq_consumed_ = rq_enabled_ = 0;
    outstanding_rd_atomic_ = 0;
    block_ = Block::kNone;
    waited_ = false;
    start_pending_ = false;  // a pending start event finds nothing to do
    node_->memory().Fill(rq_dbr_, 0, 4);
  }
  SetState(target);
  if (target == QpState::kRts) Rnic::Kick(this);
}

int SimQp::PostSend(const fabric::SendWr& wr, uint64_t* wqe_index) {
  if (state_ != QpState::kRts && state_ != QpState::kErr) return EINVAL;
  if (wr.sg_list.size() > attr_.max_send_sge) return EINVAL;
  const bool cross = wr.opcode == Opcode::kWait || wr.opcode == Opcode::kSendEnable ||
                     wr.opcode == Opcode::kRecvEnable;
  if (cross && !attr_.cross_channel) return EINVAL;
  const fabric::DeviceCaps& caps = node_->caps_ref();
  if (wr.opcode == Opcode::kBindMw && wr.bind_qpn != 0 && wr.bind_qpn != qpn_ &&
      !caps.qpn_in_bind) {
    return EINVAL;  // this RNIC binds a type-2 window only to the posting QP
  }
  if (wr.opcode == Opcode::kMaskedFetchAndAdd && !caps.masked_atomics) return EINVAL;
  if (wr.opcode == Opcode::kRecv || wr.opcode == Opcode::kRecvRdmaWithImm) return EINVAL;
  if (sq_posted_ - sq_retired_ >= sq_size_) return ENOMEM;
  uint8_t buf[512];
  fabric::EncodeSendWqe(wr, buf, sq_stride_);
  node_->memory().Write(SendWqeAddr(sq_posted_), buf, sq_stride_);
  const Timing& tm = node_->cluster()->timing();
  // Doorbell over PCIe, then the NIC fetches the WQE by DMA.
  sq_visible_at_[sq_posted_ & (sq_size_ - 1)] =
      node_->cluster()->sim().now() + tm.pcie_oneway + tm.PcieRead(sq_stride_);
  if (wqe_index) *wqe_index = sq_posted_;
  ++sq_posted_;
  if (state_ == QpState::kErr) {
    Rnic::FlushUnstarted(this);
  } else {
    Rnic::Kick(this);
  }
  return 0;
}

int SimQp::PostRecv(const fabric::RecvWr& wr, uint64_t* wqe_index) {
  if (state_ == QpState::kReset) return EINVAL;
  if (wr.sg_list.size() > attr_.max_recv_sge || wr.sg_list.size() > fabric::kMaxSge) {
    return EINVAL;
  }
  if (rq_posted_ - rq_consumed_ >= rq_size_) return ENOMEM;
  uint8_t buf[fabric::kMaxSge * fabric::WqeLayout::kSegBytes];
  fabric::EncodeRecvWqe(wr, buf, rq_stride_);
  node_->memory().Write(RecvWqeAddr(rq_posted_), buf, rq_stride_);
  rq_wrid_[rq_posted_ & (rq_size_ - 1)] = wr.wr_id;
  if (wqe_index) *wqe_index = rq_posted_;
  ++rq_posted_;
  uint8_t dbr[4];
  fabric::StoreBe32(dbr, static_cast<uint32_t>(rq_posted_));
  node_->memory().Write(rq_dbr_, dbr, 4);
  if (state_ == QpState::kErr) Rnic::FlushUnstarted(this);
  return 0;
}

int SimQp::BindMw(fabric::Mw* mw, uint64_t wr_id, fabric::Mr* mr, uint64_t addr, uint64_t length,
                  uint32_t access, uint32_t new_rkey, uint8_t flags) {
  if (!mw || mw->type() != fabric::MwType::kType1) return EINVAL;
  fabric::SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = Opcode::kBindMw;
  wr.flags = flags;
  wr.bind_mw_rkey = mw->rkey();
  wr.bind_new_rkey = new_rkey;
  wr.bind_mr_lkey = mr ? mr->lkey() : 0;
  wr.bind_addr = addr;
  wr.bind_length = length;
  wr.bind_access = access;
  return PostSend(wr);
}

// ---- Node ----------------------------------------------------------------------

SimNode::SimNode(SimCluster* cluster, uint32_t id, const fabric::NodeConfig& cfg)
    : cluster_(cluster),
      id_(id),
      cfg_(cfg),
      memory_(cfg.name, cfg.memory_bytes),
      cpu_(&cluster->sim(), cfg.cpu_cores, &cluster->cost_names()),
      pu_free_(static_cast<size_t>(std::max(1, cluster->timing().pus)), 0) {
  if (cfg.page_bytes != 4096 && cfg.page_bytes != (2u << 20)) {
    throw std::invalid_argument("node '" + cfg.name +
                                "': page_bytes must be 4096 or 2097152, got " +
                                std::to_string(cfg.page_bytes));
  }
}

SimNode::~SimNode() = default;

fabric::CpuCost SimNode::Cost(std::string_view name) const {
  const auto& names = cluster_->cost_names();
  for (uint32_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return {i, UsToPs(cluster_->profile().cpu_costs[i].us)};
  }
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown CPU cost '" + std::string(name) + "' in profile '" +
                              cluster_->profile().name + "'; known: " + known);
}

fabric::Pd* SimNode::AllocPd() {
  pds_.push_back(std::make_unique<SimPd>(this, static_cast<uint32_t>(pds_.size() + 1)));
  return pds_.back().get();
}

void SimNode::CheckMrArgs(fabric::Pd* pd, uint64_t addr, uint64_t length, uint32_t access) const {
  auto* spd = dynamic_cast<SimPd*>(pd);
  if (!spd || spd->node() != this) {
    throw fabric::VerbsError(EINVAL, "reg_mr on node '" + name() + "': PD of another node");
  }
  if (length == 0 || !memory_.Contains(addr, length)) {
    throw fabric::VerbsError(EINVAL, "reg_mr on node '" + name() + "': range [" +
                                         std::to_string(addr) + ", +" + std::to_string(length) +
                                         ") is empty or outside node memory");
  }
  if ((access & (Access::kRemoteWrite | Access::kRemoteAtomic)) &&
      !(access & Access::kLocalWrite)) {
    throw fabric::VerbsError(EINVAL, "reg_mr: REMOTE_WRITE/REMOTE_ATOMIC need LOCAL_WRITE");
  }
}

SimMr* SimNode::CreateMrNow(SimPd* pd, uint64_t addr, uint64_t length, uint32_t access) {
  auto mr = std::make_unique<SimMr>();
  mr->pd_ = pd;
  mr->addr_ = addr;
  mr->length_ = length;
  mr->access_ = access;
  const uint32_t idx = keys_.Add(name());
  mr->key_ = (idx << 8) | NextKey();
  mr->valid_ = true;
  keys_.Find(idx)->mr = mr.get();
  mrs_.push_back(std::move(mr));
  return mrs_.back().get();
}

Task<fabric::Mr*> SimNode::RegMr(fabric::Pd* pd, uint64_t addr, uint64_t length, uint32_t access) {
  CheckMrArgs(pd, addr, length, access);
  const uint64_t page = cfg_.page_bytes;
  const uint64_t pages = (addr + length + page - 1) / page - addr / page;
  const bool huge = page != 4096;
  co_await cpu_.Work(Cost(huge ? "verbs.mr_reg_base_2m" : "verbs.mr_reg_base"));
  co_await cpu_.Work(Cost(huge ? "verbs.mr_reg_page_2m" : "verbs.mr_reg_page_4k"), pages);
  co_return CreateMrNow(static_cast<SimPd*>(pd), addr, length, access);
}

Task<void> SimNode::DeregMr(fabric::Mr* mr) {
  auto* m = dynamic_cast<SimMr*>(mr);
  if (!m || !m->valid_ || m->pd_->node() != this) {
    throw fabric::VerbsError(EINVAL, "dereg_mr on node '" + name() + "': not a live MR here");
  }
  if (m->bound_mws_ > 0) {
    throw fabric::VerbsError(EBUSY, "dereg_mr on node '" + name() +
                                        "': " + std::to_string(m->bound_mws_) +
                                        " memory windows are still bound to it");
  }
  m->valid_ = false;  // invalid from the moment deregistration starts
  keys_.Find(m->key_ >> 8)->mr = nullptr;
  const uint64_t page = cfg_.page_bytes;
  const uint64_t pages = (m->addr_ + m->length_ + page - 1) / page - m->addr_ / page;
  co_await cpu_.Work(Cost(page != 4096 ? "verbs.mr_dereg_base_2m" : "verbs.mr_dereg_base"));
  co_await cpu_.Work(Cost(page != 4096 ? "verbs.mr_dereg_page_2m" : "verbs.mr_dereg_page_4k"),
                     pages);
}

fabric::Mw* SimNode::AllocMw(fabric::Pd* pd, fabric::MwType type) {
  auto* spd = dynamic_cast<SimPd*>(pd);
  if (!spd || spd->node() != this) {
    throw fabric::VerbsError(EINVAL, "alloc_mw on node '" + name() + "': PD of another node");
  }
  if ((type == fabric::MwType::kType1 && !cfg_.caps.mw_type1) ||
      (type == fabric::MwType::kType2 && !cfg_.caps.mw_type2)) {
    throw fabric::VerbsError(EOPNOTSUPP, "alloc_mw on node '" + name() +
                                             "': the RNIC has no type-" +
                                             std::to_string(static_cast<int>(type)) + " windows");
  }
  const uint32_t index = keys_.Add(name());  // throws before anything is kept
  SimMw* mw = &keys_.Find(index)->mw;
  mw->pd_ = spd;
  mw->type_ = type;
  mw->index_ = index;
  mw->key_ = NextKey();
  mw->state_ = type == fabric::MwType::kType2 ? SimMw::State::kFree : SimMw::State::kValid;
  return mw;
}

void SimNode::DeallocMw(fabric::Mw* mw) {
  auto* m = dynamic_cast<SimMw*>(mw);
  if (!m || !m->allocated_) throw fabric::VerbsError(EINVAL, "dealloc_mw: not a live MW");
  if (m->mr_) --m->mr_->bound_mws_;
  m->mr_ = nullptr;
  m->allocated_ = false;  // the entry's LiveMw() is null from now on
}

fabric::Cq* SimNode::CreateCq(uint32_t capacity, bool ignore_overrun) {
  cqs_.push_back(std::make_unique<SimCq>(this, static_cast<uint32_t>(cqs_.size() + 1),
                                         std::max(1u, capacity), ignore_overrun));
  return cqs_.back().get();
}

fabric::Qp* SimNode::CreateQp(const fabric::QpInitAttr& attr) {
  auto* pd = dynamic_cast<SimPd*>(attr.pd);
  auto* scq = dynamic_cast<SimCq*>(attr.send_cq);
  auto* rcq = dynamic_cast<SimCq*>(attr.recv_cq);
  if (!pd || pd->node() != this || !scq || !rcq) {
    throw fabric::VerbsError(
        EINVAL, "create_qp on node '" + name() + "': PD and both CQs must belong to this node");
  }
  if ((attr.cross_channel || attr.manage_send || attr.manage_recv) && !cfg_.caps.cross_channel) {
    throw fabric::VerbsError(
        EOPNOTSUPP, "create_qp on node '" + name() + "': the RNIC has no cross-channel QPs");
  }
  if (attr.max_send_sge > fabric::kMaxSge || attr.max_recv_sge > fabric::kMaxSge) {
    throw fabric::VerbsError(
        EINVAL, "create_qp: at most " + std::to_string(fabric::kMaxSge) + " SGEs per WQE");
  }
  if ((attr.manage_send || attr.manage_recv) && !attr.cross_channel) {
    throw fabric::VerbsError(EINVAL, "create_qp: manage_send/manage_recv need cross_channel");
  }
  ReapQps();
  const uint32_t qpn = static_cast<uint32_t>(qps_.size() + 1);
  qps_.push_back(std::make_unique<SimQp>(this, qpn, attr));
  SimQp* qp = qps_.back().get();
  ++scq->users_;
  ++rcq->users_;
  // The driver registers the work queue buffer (local access only) so local
  // WRs (RECV scatter, READ into a WQE) can target it.
  const uint64_t bytes = qp->rq_dbr_ + 64 - qp->sq_base_;
  qp->wq_mr_ = CreateMrNow(pd, qp->sq_base_, bytes, Access::kLocalWrite);
  return qp;
}

fabric::Qp* SimNode::QpByNum(uint32_t qp_num) { return SimQpByNum(qp_num); }

int SimNode::offloaded_qps() const {
  return cluster_->timing().offload_counts_loopback ? offload_qps_all_ : offload_qps_cn_facing_;
}

void SimNode::DestroyQp(fabric::Qp* qp) {
  auto* q = dynamic_cast<SimQp*>(qp);
  if (!q || q->node_ != this || SimQpByNum(q->qpn_) != q) {
    throw fabric::VerbsError(EINVAL, "destroy_qp on node '" + name() + "': not a live QP here");
  }
  // RESET drops every outstanding WR without a completion; events still in
  // flight find the epoch changed and drop themselves (no memory effects).
  if (q->state_ != QpState::kReset) q->Modify(QpState::kReset);
  for (uint32_t num : q->waiting_on_cqs_) {
    if (SimCq* cq = CqByNum(num)) cq->RemoveWaitingQp(q);
  }
  q->waiting_on_cqs_.clear();
  --q->send_cq_->users_;
  --q->recv_cq_->users_;
  q->wq_mr_->valid_ = false;  // the driver's registration of the rings goes with them
  keys_.Find(q->wq_mr_->key_ >> 8)->mr = nullptr;
  memory_.Free(q->sq_base_, q->ring_bytes_);
  q->sq_visible_at_ = {};
  q->rq_wrid_ = {};
  q->destroyed_ = true;
  destroyed_qps_.push_back(std::move(qps_[q->qpn_ - 1]));
  ReapQps();
}

void SimNode::ReapQps() {
  std::erase_if(destroyed_qps_, [](const auto& q) { return q->live_ops_ == 0; });
}

void SimNode::DestroyCq(fabric::Cq* cq) {
  auto* c = dynamic_cast<SimCq*>(cq);
  if (!c || c->node_ != this || CqByNum(c->num_) != c) {
    throw fabric::VerbsError(EINVAL, "destroy_cq on node '" + name() + "': not a live CQ here");
  }
  if (c->users_ > 0 || c->waiters_head_) {
    throw fabric::VerbsError(EBUSY, "destroy_cq on node '" + name() + "': cq " +
                                        std::to_string(c->num_) +
                                        " is still used by a QP or awaited; destroy those first");
  }
  cqs_[c->num_ - 1].reset();
}

SimQp* SimNode::SimQpByNum(uint32_t qpn) {
  return qpn >= 1 && qpn <= qps_.size() ? qps_[qpn - 1].get() : nullptr;
}

// ---- Cluster -------------------------------------------------------------------

SimCluster::SimCluster(uint64_t seed, Profile profile)
    : sim_(seed), profile_(std::move(profile)), timing_(profile_) {
  for (const auto& c : profile_.cpu_costs) cost_names_.push_back(c.name);
}

SimCluster::~SimCluster() { sim_.Shutdown(); }

fabric::Node* SimCluster::AddNode(const fabric::NodeConfig& cfg) {
  fabric::NodeConfig c = cfg;
  if (c.name.empty()) c.name = "node" + std::to_string(nodes_.size());
  nodes_.push_back(std::make_unique<SimNode>(this, static_cast<uint32_t>(nodes_.size()), c));
  return nodes_.back().get();
}

fabric::Node* SimCluster::node(uint32_t id) { return sim_node(id); }

void SimCluster::Connect(fabric::Qp* a, fabric::Qp* b) {
  auto* qa = dynamic_cast<SimQp*>(a);
  auto* qb = dynamic_cast<SimQp*>(b);
  if (!qa || !qb) throw fabric::VerbsError(EINVAL, "Connect: QPs of another backend");
  qa->Modify(QpState::kInit);
  if (qb != qa) qb->Modify(QpState::kInit);
  qa->Modify(QpState::kRtr, {qb->node()->id(), qb->qp_num()});
  if (qb != qa) qb->Modify(QpState::kRtr, {qa->node()->id(), qa->qp_num()});
  qa->Modify(QpState::kRts);
  if (qb != qa) qb->Modify(QpState::kRts);
}

void SimCluster::CrashNode(fabric::Node* node) {
  auto* n = dynamic_cast<SimNode*>(node);
  if (!n || n->crashed_) return;
  n->crashed_ = true;
  n->cpu_.Halt();
  for (auto& qp : n->qps_) {
    if (qp && qp->state() != QpState::kReset) qp->SetState(QpState::kErr);
  }
}

void SimCluster::CrashNodeAt(fabric::Node* node, Ps t) {
  sim_.Schedule(
      t, 20,
      [](void* ctx, uint64_t arg) {
        auto* self = static_cast<SimCluster*>(ctx);
        self->CrashNode(self->node(static_cast<uint32_t>(arg)));
      },
      this, node->id());
}

void SimCluster::FailQp(fabric::Qp* qp) { qp->Modify(QpState::kErr); }

void SimCluster::RunToCompletion(Task<void> task) {
  bool done = false;
  auto wrapper = [](Task<void> t, bool* flag, Simulator* sim) -> Task<void> {
    co_await t;
    *flag = true;
    sim->RequestStop();  // background services (timers) may run forever
  };
  sim_.Spawn(wrapper(std::move(task), &done, &sim_));
  sim_.Run();
  if (!done) {
    throw std::runtime_error("RunToCompletion: the task is blocked forever (no events left) at t=" +
                             std::to_string(PsToUs(sim_.now())) +
                             " us; seed=" + std::to_string(sim_.seed()));
  }
}

Op* SimCluster::NewOp() {
  Op* op = free_ops_;
  if (op) {
    free_ops_ = op->next;
  } else {
    all_ops_.push_back(std::make_unique<Op>());
    op = all_ops_.back().get();
  }
  op->next = nullptr;
  op->qp = nullptr;
  op->done = false;
  op->remote = false;
  op->rd_atomic = false;
  op->flushed_only = false;
  op->in_flight = false;
  op->abandoned = false;
  op->rnr_tries = 0;
  op->byte_len = 0;
  op->status = WcStatus::kSuccess;
  op->data.clear();
  return op;
}

void SimCluster::FreeOp(Op* op) {
  // The last event naming a destroyed QP deletes it (its callers are done
  // with the QP by then: they free the op last).
  if (op->qp && --op->qp->live_ops_ == 0 && op->qp->destroyed_) op->qp->node_->ReapQps();
  op->qp = nullptr;
  op->next = free_ops_;
  free_ops_ = op;
}

}  // namespace dmb::sim
