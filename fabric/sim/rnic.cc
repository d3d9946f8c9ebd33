#include "fabric/sim/rnic.h"

#include <algorithm>
#include <cstring>

namespace dmb::sim {

using fabric::Access;
using fabric::DecodedSendWqe;
using fabric::Opcode;
using fabric::QpState;
using fabric::Sge;
using fabric::WcStatus;
using fabric::WorkCompletion;

namespace {

enum EventKind : uint32_t {
  kQpStart = 10,
  kRespArrive = 11,
  kComplete = 12,
  kRecvComplete = 13,
};

bool IsRdAtomic(Opcode op) {
  return op == Opcode::kRead || op == Opcode::kCmpAndSwp || op == Opcode::kFetchAndAdd ||
         op == Opcode::kMaskedFetchAndAdd;
}
bool IsAtomic(Opcode op) {
  return op == Opcode::kCmpAndSwp || op == Opcode::kFetchAndAdd || op == Opcode::kMaskedFetchAndAdd;
}
bool IsRemote(Opcode op) {
  switch (op) {
    case Opcode::kWrite:
    case Opcode::kWriteWithImm:
    case Opcode::kSend:
    case Opcode::kSendWithInv:
    case Opcode::kRead:
    case Opcode::kCmpAndSwp:
    case Opcode::kFetchAndAdd:
    case Opcode::kMaskedFetchAndAdd:
      return true;
    default:
      return false;
  }
}
bool CarriesPayload(Opcode op) {
  return op == Opcode::kWrite || op == Opcode::kWriteWithImm || op == Opcode::kSend ||
         op == Opcode::kSendWithInv;
}

// Masked fetch-and-add (mlx5 extended atomics): `boundary` bit i set means a
// carry out of bit i does not propagate into bit i+1 (fields end at set bits).
uint64_t MaskedAdd(uint64_t old, uint64_t add, uint64_t boundary) {
  uint64_t result = 0;
  uint64_t carry = 0;
  for (int i = 0; i < 64; ++i) {
    const uint64_t a = (old >> i) & 1, b = (add >> i) & 1;
    const uint64_t s = a + b + carry;
    result |= (s & 1) << i;
    carry = ((boundary >> i) & 1) ? 0 : (s >> 1);
  }
  return result;
}

uint64_t SgeTotal(const DecodedSendWqe& w) {
  uint64_t n = 0;
  for (int i = 0; i < w.num_sge; ++i) n += w.sge[i].length;
  return n;
}

SimCluster* ClusterOf(SimQp* qp) { return qp->node()->cluster(); }

}  // namespace

// ---- Resources ---------------------------------------------------------------

namespace {
// Time every WR on node n's NIC pays for the QPs holding offloaded WRs
// (which QPs count: the profile's offload_counts_loopback).
Ps OffloadPenalty(const Timing& tm, const SimNode* n) {
  return n->offloaded_qps() * tm.offload_penalty_per_qp;
}
}  // namespace

Ps Rnic::ClaimPu(SimNode* n, Ps earliest, Ps proc) {
  auto pu = std::min_element(n->pu_free_.begin(), n->pu_free_.end());
  const Ps start = std::max(earliest, *pu);
  *pu = start + proc;
  return start;
}

// Serializes `payload` (+ headers) out of `from`'s port and into `to`'s port;
// returns when the last byte has arrived. Loopback stays inside the NIC.
Ps Rnic::Transmit(SimNode* from, SimNode* to, Ps ready, uint64_t payload) {
  const Timing& tm = from->cluster()->timing();
  const Ps ser = tm.Serialize(payload);
  const Ps t_tx = std::max(ready, from->tx_free_);
  from->tx_free_ = t_tx + ser;
  if (from == to) return t_tx + ser;
  const Ps t_rx = std::max(t_tx + tm.wire, to->rx_free_);
  to->rx_free_ = t_rx + ser;
  return t_rx + ser;
}

// ---- Protection ----------------------------------------------------------------

WcStatus Rnic::CheckRemote(SimNode* n, SimQp* p, uint32_t rkey, uint64_t addr, uint64_t len,
                           uint32_t need) {
  if ((p->attr_.access & need) != need) return WcStatus::kRemInvReqErr;
  if (len == 0) return WcStatus::kSuccess;  // zero-length: no key check (IB spec)
  const uint32_t idx = rkey >> 8;
  const uint8_t key = rkey & 0xff;
  KeyTable::Entry* e = n->keys_.Find(idx);
  if (!e) return WcStatus::kRemAccessErr;
  uint64_t base, size;
  uint32_t access;
  const fabric::Pd* pd;
  if (e->mr) {
    const SimMr* mr = e->mr;
    if (!mr->valid_ || (mr->key_ & 0xff) != key) return WcStatus::kRemAccessErr;
    base = mr->addr_, size = mr->length_, access = mr->access_, pd = mr->pd_;
  } else if (const SimMw* mw = e->LiveMw()) {
    if (mw->key_ != key || mw->state_ != SimMw::State::kValid || mw->length_ == 0) {
      return WcStatus::kRemAccessErr;
    }
    if (mw->type_ == fabric::MwType::kType2 && mw->qpn_ != p->qpn_) return WcStatus::kRemAccessErr;
    base = mw->addr_, size = mw->length_, access = mw->access_, pd = mw->pd_;
  } else {
    return WcStatus::kRemAccessErr;
  }
  if (pd != p->pd_) return WcStatus::kRemAccessErr;
  if ((access & need) != need) return WcStatus::kRemAccessErr;
  if (addr < base || len > size || addr - base > size - len) return WcStatus::kRemAccessErr;
  return WcStatus::kSuccess;
}

WcStatus Rnic::CheckLocal(SimNode* n, SimQp* qp, const Sge& sge, bool write) {
  if (sge.length == 0) return WcStatus::kSuccess;
  const uint32_t idx = sge.lkey >> 8;
  const SimMr* mr = n->keys_.MrAt(idx);
  if (!mr) return WcStatus::kLocProtErr;
  if (!mr->valid_ || mr->key_ != sge.lkey || mr->pd_ != qp->pd_) return WcStatus::kLocProtErr;
  if (write && !(mr->access_ & Access::kLocalWrite)) return WcStatus::kLocProtErr;
  if (sge.addr < mr->addr_ || sge.length > mr->length_ ||
      sge.addr - mr->addr_ > mr->length_ - sge.length) {
    return WcStatus::kLocProtErr;
  }
  return WcStatus::kSuccess;
}

// ---- Memory windows, invalidation, cross-channel --------------------------------

WcStatus Rnic::DoBind(SimQp* qp, const DecodedSendWqe& w) {
  SimNode* n = qp->node_;
  const uint32_t mw_rkey = w.rkey;
  const uint32_t new_rkey = w.aux;
  const uint32_t idx = mw_rkey >> 8;
  SimMw* mw = n->keys_.LiveMwAt(idx);
  if (!mw) return WcStatus::kMwBindErr;
  if (mw->rkey() != mw_rkey || (new_rkey >> 8) != idx) {
    return WcStatus::kMwBindErr;
  }
  if (mw->pd_ != qp->pd_) return WcStatus::kMwBindErr;
  const uint64_t length = w.operand0;
  const uint32_t mr_lkey = static_cast<uint32_t>(w.operand1 >> 32);
  const uint32_t access = static_cast<uint32_t>(w.operand1);
  const uint64_t addr = w.remote_addr;
  uint32_t bound_qpn = 0;
  if (mw->type_ == fabric::MwType::kType2) {
    if (mw->state_ != SimMw::State::kFree) return WcStatus::kMwBindErr;  // must be invalidated
    if (length == 0) return WcStatus::kMwBindErr;  // type-2 cannot be unbound by a bind
    bound_qpn = w.imm_inv_qpn ? w.imm_inv_qpn : qp->qpn_;
    SimQp* target = n->SimQpByNum(bound_qpn);
    if (!target || target->pd_ != qp->pd_) return WcStatus::kMwBindErr;
  }
  SimMr* mr = nullptr;
  if (length > 0) {
    const uint32_t mr_idx = mr_lkey >> 8;
    mr = n->keys_.MrAt(mr_idx);
    if (!mr) return WcStatus::kMwBindErr;
    if (!mr->valid_ || mr->key_ != mr_lkey || mr->pd_ != qp->pd_) return WcStatus::kMwBindErr;
    if (!(mr->access_ & Access::kMwBind)) return WcStatus::kMwBindErr;
    if ((access & (Access::kRemoteWrite | Access::kRemoteAtomic)) &&
        !(mr->access_ & Access::kLocalWrite)) {
      return WcStatus::kMwBindErr;
    }
    if (addr < mr->addr_ || length > mr->length_ || addr - mr->addr_ > mr->length_ - length) {
      return WcStatus::kMwBindErr;
    }
  }
  if (mw->mr_) --mw->mr_->bound_mws_;
  mw->mr_ = mr;
  if (mr) ++mr->bound_mws_;
  mw->key_ = new_rkey & 0xff;
  mw->addr_ = length ? addr : 0;
  mw->length_ = length;
  mw->access_ = access;
  mw->qpn_ = bound_qpn;
  mw->state_ = SimMw::State::kValid;
  return WcStatus::kSuccess;
}

// Invalidates a type-2 MW. Only the QP the window is bound to may do so,
// unless the invalidating QP was created with invalidate_any_qp (MN-only).
WcStatus Rnic::DoLocalInv(SimQp* qp, uint32_t rkey, bool remote) {
  SimNode* n = qp->node_;
  const WcStatus err = remote ? WcStatus::kRemInvReqErr : WcStatus::kLocQpOpErr;
  const uint32_t idx = rkey >> 8;
  SimMw* mw = n->keys_.LiveMwAt(idx);
  if (!mw) return err;
  if (mw->rkey() != rkey || mw->type_ != fabric::MwType::kType2 ||
      mw->state_ != SimMw::State::kValid || mw->pd_ != qp->pd_) {
    return err;
  }
  if (mw->qpn_ != qp->qpn_ && !(qp->attr_.invalidate_any_qp && !remote)) return err;
  if (mw->mr_) --mw->mr_->bound_mws_;
  mw->mr_ = nullptr;
  mw->state_ = SimMw::State::kFree;
  mw->length_ = 0;
  mw->qpn_ = 0;
  return WcStatus::kSuccess;
}

WcStatus Rnic::DoEnable(SimQp* qp, const DecodedSendWqe& w) {
  SimQp* target = qp->node_->SimQpByNum(w.rkey);
  if (!target) return WcStatus::kLocQpOpErr;
  const Timing& tm = ClusterOf(qp)->timing();
  const Ps now = ClusterOf(qp)->sim().now();
  if (w.opcode == Opcode::kSendEnable) {
    if (!target->attr_.manage_send) return WcStatus::kLocQpOpErr;
    if (w.operand0 > target->sq_enabled_) {
      target->sq_enabled_ = w.operand0;
      target->refetch_at_ = std::max(target->refetch_at_, now + tm.gate_fetch);
      Kick(target);
    }
  } else {
    if (!target->attr_.manage_recv) return WcStatus::kLocQpOpErr;
    target->rq_enabled_ = std::max(target->rq_enabled_, w.operand0);
  }
  return WcStatus::kSuccess;
}

// ---- Send queue ----------------------------------------------------------------

void Rnic::Kick(SimQp* qp) {
  if (qp->start_pending_ || qp->block_ != SimQp::Block::kNone) return;
  if (qp->state_ != QpState::kRts || qp->node_->crashed_) return;
  const bool managed = qp->attr_.manage_send;
  if (qp->sq_exec_ >= (managed ? qp->sq_enabled_ : qp->sq_posted_)) return;
  Simulator& sim = ClusterOf(qp)->sim();
  Ps ready = qp->refetch_at_;
  if (!managed) ready = std::max(ready, qp->sq_visible_at_[qp->sq_exec_ & (qp->sq_size_ - 1)]);
  const Ps t = std::max({sim.now(), qp->next_start_, ready});
  qp->start_pending_ = true;
  // Named by number: the QP may be destroyed before the event runs.
  sim.Schedule(t, kQpStart, OnQpStart, qp->node_, qp->qpn_);
}

void Rnic::OnQpStart(void* ctx, uint64_t qpn) {
  SimQp* qp = static_cast<SimNode*>(ctx)->SimQpByNum(static_cast<uint32_t>(qpn));
  if (!qp) return;
  qp->start_pending_ = false;
  StartNext(qp);
}

// Starts the QP's next send WQE: decodes it from queue memory, checks what
// may hold it (a WAIT short of its count, a FENCE or the READ/atomic limit),
// queues it in WQE order and hands it to the local or the remote path.
void Rnic::StartNext(SimQp* qp) {
  if (qp->state_ != QpState::kRts || qp->node_->crashed_) return;
  const bool managed = qp->attr_.manage_send;
  if (qp->sq_exec_ >= (managed ? qp->sq_enabled_ : qp->sq_posted_)) return;
  SimNode* a = qp->node_;
  SimCluster* cl = a->cluster();
  const Timing& tm = cl->timing();
  const Ps now = cl->sim().now();

  // The RNIC reads the WQE from node memory now, as it executes it.
  uint8_t buf[512];
  a->memory_.Read(qp->SendWqeAddr(qp->sq_exec_), buf, qp->sq_stride_);
  Op* op = cl->NewOp();
  DecodedSendWqe& w = op->wqe;
  fabric::DecodeSendWqe(buf, qp->sq_stride_, &w);

  WcStatus early = WcStatus::kSuccess;
  if (!PassWait(qp, w, &early)) {
    cl->FreeOp(op);
    return;
  }
  const bool rd_atomic = IsRdAtomic(w.opcode);
  if (((w.flags & fabric::kFence) && qp->outstanding_rd_atomic_ > 0) ||
      (rd_atomic && qp->outstanding_rd_atomic_ >= qp->attr_.max_rd_atomic)) {
    qp->block_ = SimQp::Block::kRdAtomic;
    cl->FreeOp(op);
    return;
  }
  if (static_cast<uint8_t>(w.opcode) > static_cast<uint8_t>(Opcode::kRecvEnable) ||
      w.opcode == Opcode::kRecv) {
    early = WcStatus::kLocQpOpErr;  // garbage opcode (e.g. a chain wrote junk)
  }
  Enqueue(qp, op, early);

  const Ps penalty = OffloadPenalty(tm, a);
  const Ps t_pu = ClaimPu(a, now, tm.wr_proc + (tm.offload_occupies_pu ? penalty : 0));
  const Ps t_done = t_pu + tm.wr_proc + penalty;
  qp->next_start_ = t_done;
  if (early != WcStatus::kSuccess || !IsRemote(w.opcode)) {
    StartLocal(qp, op, t_done);
  } else {
    StartRemote(qp, op, t_done);
  }
  Kick(qp);
}

// A WAIT short of its count blocks the QP (false: the WQE does not start);
// one that passes after it stalled makes the QP fetch the WQEs after it
// again, from the moment the RNIC saw the CQE that released it.
bool Rnic::PassWait(SimQp* qp, const DecodedSendWqe& w, WcStatus* early) {
  if (w.opcode != Opcode::kWait) return true;
  SimCq* cq = qp->node_->CqByNum(w.rkey);
  if (!cq) {
    *early = WcStatus::kLocQpOpErr;
  } else if (cq->total_completions() < w.operand0) {
    qp->block_ = SimQp::Block::kWait;
    cq->AddWaitingQp(qp, w.operand0);
    return false;
  } else if (qp->waited_) {
    qp->waited_ = false;
    const Timing& tm = ClusterOf(qp)->timing();
    qp->refetch_at_ = std::max(qp->refetch_at_, qp->wait_seen_at_ + tm.gate_fetch);
  }
  return true;
}

// Puts a started WQE at the tail of the QP's in-order FIFO.
void Rnic::Enqueue(SimQp* qp, Op* op, WcStatus early) {
  SimCluster::Attach(op, qp);
  op->epoch = qp->epoch_;
  op->in_flight = true;  // until its Complete event runs
  op->wqe_index = qp->sq_exec_;
  op->status = early;
  if (qp->fifo_tail_) {
    qp->fifo_tail_->next = op;
  } else {
    qp->fifo_head_ = op;
  }
  qp->fifo_tail_ = op;
  ++qp->sq_exec_;
  ++qp->counters_.send_wrs_executed;
  ClusterOf(qp)->CountWrExecuted();
  ClusterOf(qp)->sim().TraceMix(static_cast<uint64_t>(op->wqe.opcode) << 32 | qp->qpn_);
}

// Local WQE: its effect (and CQE, when it writes one) land together; later
// WQEs wait for it. Hardware writes no CQE for an unsignaled WR that
// succeeds, so an unsignaled NOP, WAIT or ENABLE holds the QP only for its
// processing (a WAIT still counts only the CQEs others write).
void Rnic::StartLocal(SimQp* qp, Op* op, Ps t_done) {
  const Timing& tm = ClusterOf(qp)->timing();
  const DecodedSendWqe& w = op->wqe;
  const bool writes_cqe = (w.flags & fabric::kSignaled) || op->status != WcStatus::kSuccess;
  Ps t = writes_cqe ? t_done + tm.PcieWrite(64) : t_done;
  if (w.opcode == Opcode::kBindMw || w.opcode == Opcode::kLocalInv) t += tm.umr;
  qp->next_start_ = t;
  ClusterOf(qp)->sim().Schedule(t, kComplete, OnComplete, op, op->wqe_index);
}

// Remote WQE: validate the local buffers, gather the payload now, send it.
void Rnic::StartRemote(SimQp* qp, Op* op, Ps t_done) {
  SimNode* a = qp->node_;
  SimCluster* cl = a->cluster();
  Simulator& sim = cl->sim();
  const Timing& tm = cl->timing();
  const DecodedSendWqe& w = op->wqe;
  const bool rd_atomic = IsRdAtomic(w.opcode);
  op->remote = true;
  op->rd_atomic = rd_atomic;
  op->sent_at = sim.now();
  for (int i = 0; i < w.num_sge; ++i) {
    const WcStatus st = CheckLocal(a, qp, w.sge[i], /*write=*/rd_atomic);
    if (st != WcStatus::kSuccess) {
      op->status = st;
      op->remote = false;
      sim.Schedule(t_done, kComplete, OnComplete, op, op->wqe_index);
      return;
    }
  }
  if (rd_atomic) ++qp->outstanding_rd_atomic_;
  uint64_t payload = 0;
  Ps t_ready = t_done;
  if (CarriesPayload(w.opcode)) {
    payload = SgeTotal(w);
    op->data.resize(payload);
    uint64_t off = 0;
    for (int i = 0; i < w.num_sge; ++i) {
      a->memory_.Read(w.sge[i].addr, op->data.data() + off, w.sge[i].length);
      off += w.sge[i].length;
    }
    if (payload > 0) t_ready += tm.PcieRead(payload);
  } else if (IsAtomic(w.opcode)) {
    payload = 28;  // AtomicETH
  }
  qp->counters_.bytes_sent += CarriesPayload(w.opcode) ? payload : 0;
  SimNode* b = cl->sim_node(qp->dest_node_);
  const Ps arrive = Transmit(a, b, t_ready, payload);
  sim.Schedule(arrive, kRespArrive, OnRespArrive, op, op->wqe_index);
}

// ---- Responder -----------------------------------------------------------------

void Rnic::OnRespArrive(void* ctx, uint64_t) {
  Op* op = static_cast<Op*>(ctx);
  SimQp* qp = op->qp;
  SimCluster* cl = ClusterOf(qp);
  if (op->epoch != qp->epoch_ || op->abandoned) {  // requester flushed or reset meanwhile
    cl->FreeOp(op);
    return;
  }
  SimNode* b = cl->sim_node(qp->dest_node_);
  SimQp* p = b ? b->SimQpByNum(qp->dest_qpn_) : nullptr;
  const bool answers = b && !b->crashed_ && p &&
                       (p->state_ == QpState::kRtr || p->state_ == QpState::kRts) &&
                       p->dest_qpn_ == qp->qpn_ && p->dest_node_ == qp->node_->id();
  if (!answers) {
    // Nobody answers: the requester retries until its ack timeout expires.
    op->status = WcStatus::kRetryExcErr;
    const Ps t = std::max(cl->sim().now(), op->sent_at + cl->timing().retry_timeout);
    cl->sim().Schedule(t, kComplete, OnComplete, op, op->wqe_index);
    return;
  }
  Respond(op, b, p);
}

void Rnic::DeliverRecvError(SimQp* p, WcStatus st, uint64_t wr_id) {
  WorkCompletion wc;
  wc.wr_id = wr_id;
  wc.status = st;
  wc.opcode = Opcode::kRecv;
  wc.qp_num = p->qpn_;
  wc.timestamp_ps = ClusterOf(p)->sim().now();
  ++p->counters_.errors;
  if (!p->node_->crashed_) p->recv_cq_->Deliver(wc);
}

void Rnic::Respond(Op* op, SimNode* b, SimQp* p) {
  SimNode* a = op->qp->node_;
  SimCluster* cl = a->cluster();
  Simulator& sim = cl->sim();
  const Timing& tm = cl->timing();
  const Opcode opc = op->wqe.opcode;

  const Ps penalty = OffloadPenalty(tm, b);
  const Ps t_p = ClaimPu(b, std::max(sim.now(), p->resp_free_),
                         tm.wr_proc + (tm.offload_occupies_pu ? penalty : 0));
  const Ps t_done = t_p + tm.wr_proc + penalty;
  p->resp_free_ = t_done;
  ++p->counters_.requests_served;

  Response r = Execute(op, b, p, t_done);
  // Two-sided: SEND, SEND_WITH_INV and WRITE_WITH_IMM consume a RECV.
  const bool consumes_recv = opc == Opcode::kSend || opc == Opcode::kSendWithInv ||
                             (opc == Opcode::kWriteWithImm && r.st == WcStatus::kSuccess);
  if (consumes_recv && !ConsumeRecv(op, b, p, t_done, &r)) return;  // RNR: retried later

  if (r.st != WcStatus::kSuccess) {
    // NAK: the requester sees the error; the responder QP moves to ERR.
    op->status = r.st;
    ++p->counters_.errors;
    r.payload = 0;
    if (p->state_ != QpState::kErr) EnterError(p);
  } else if (opc == Opcode::kSend || opc == Opcode::kSendWithInv) {
    op->byte_len = static_cast<uint32_t>(op->data.size());
  }
  const Ps arrive = Transmit(b, a, r.t_data, r.payload);
  const Ps t_c = arrive + tm.PcieWrite(r.payload + 64);  // data, then the CQE
  sim.Schedule(t_c, kComplete, OnComplete, op, op->wqe_index);
}

// The one-sided part at the responder: protection check and memory effect of
// a READ, an atomic or a WRITE (SENDs have none here).
Rnic::Response Rnic::Execute(Op* op, SimNode* b, SimQp* p, Ps t_done) {
  const Timing& tm = b->cluster()->timing();
  const DecodedSendWqe& w = op->wqe;
  Response r{WcStatus::kSuccess, 0, t_done};
  if (w.opcode == Opcode::kRead) {
    const uint64_t len = SgeTotal(w);
    r.st = CheckRemote(b, p, w.rkey, w.remote_addr, len, Access::kRemoteRead);
    if (r.st == WcStatus::kSuccess) {
      op->data.resize(len);
      if (len) b->memory_.Read(w.remote_addr, op->data.data(), len);
      op->byte_len = static_cast<uint32_t>(len);
      r.payload = len;
      r.t_data = t_done + tm.PcieRead(len);
    }
  } else if (IsAtomic(w.opcode)) {
    ExecuteAtomic(op, b, p, t_done, &r);
  } else if (w.opcode == Opcode::kWrite || w.opcode == Opcode::kWriteWithImm) {
    const uint64_t len = op->data.size();
    r.st = CheckRemote(b, p, w.rkey, w.remote_addr, len, Access::kRemoteWrite);
    if (r.st == WcStatus::kSuccess) {
      if (len) b->memory_.Write(w.remote_addr, op->data.data(), len);
      p->counters_.bytes_received += len;
      r.t_data = t_done + tm.PcieWrite(len);  // acked once placed
      op->byte_len = static_cast<uint32_t>(len);
    }
  }
  return r;
}

// An 8-byte aligned atomic through the node's one atomic unit.
void Rnic::ExecuteAtomic(Op* op, SimNode* b, SimQp* p, Ps t_done, Response* r) {
  const Timing& tm = b->cluster()->timing();
  const DecodedSendWqe& w = op->wqe;
  if (SgeTotal(w) != 8 || (w.remote_addr & 7) != 0) {
    r->st = WcStatus::kRemInvReqErr;
  } else {
    r->st = CheckRemote(b, p, w.rkey, w.remote_addr, 8, Access::kRemoteAtomic);
  }
  if (r->st != WcStatus::kSuccess) return;
  const Ps t_a = std::max(t_done, b->atomic_free_);
  b->atomic_free_ = t_a + tm.atomic;
  const uint64_t old = b->memory_.LoadU64(w.remote_addr);
  uint64_t next = old;
  if (w.opcode == Opcode::kCmpAndSwp) {
    if (old == w.operand0) next = w.operand1;
  } else if (w.opcode == Opcode::kFetchAndAdd) {
    next = old + w.operand0;
  } else {
    next = MaskedAdd(old, w.operand0, w.operand1);
  }
  if (next != old) b->memory_.StoreU64(w.remote_addr, next);
  op->data.resize(8);
  std::memcpy(op->data.data(), &old, 8);
  op->byte_len = 8;
  r->payload = 8;
  r->t_data = t_a + tm.atomic;
  b->cluster()->sim().TraceMix(old);
}

// Consumes the responder's next RECV for a SEND, SEND_WITH_INV or
// WRITE_WITH_IMM and schedules its completion. False when there is none the
// QP may use: the request was NAKed receiver-not-ready and is retried (or
// fails after 7 tries); the caller then does nothing more.
bool Rnic::ConsumeRecv(Op* op, SimNode* b, SimQp* p, Ps t_done, Response* r) {
  SimCluster* cl = b->cluster();
  Simulator& sim = cl->sim();
  const Timing& tm = cl->timing();
  const Opcode opc = op->wqe.opcode;
  uint8_t dbr_bytes[4];
  b->memory_.Read(p->rq_dbr_, dbr_bytes, 4);
  const uint32_t dbr = fabric::LoadBe32(dbr_bytes);
  const uint32_t avail = dbr - static_cast<uint32_t>(p->rq_consumed_);
  const bool enabled = !p->attr_.manage_recv || p->rq_consumed_ < p->rq_enabled_;
  if (avail == 0 || avail > p->rq_size_ || !enabled) {
    // Receiver not ready: RNR NAK, retried after the RNR timer.
    if (op->rnr_tries++ < 7) {
      sim.Schedule(sim.now() + tm.rnr_delay, kRespArrive, OnRespArrive, op, op->wqe_index);
      return false;
    }
    op->status = WcStatus::kRnrRetryExcErr;
    sim.Schedule(Transmit(b, op->qp->node_, t_done, 0), kComplete, OnComplete, op, op->wqe_index);
    return false;
  }
  const uint64_t slot = p->rq_consumed_ & (p->rq_size_ - 1);
  uint8_t rbuf[fabric::kMaxSge * fabric::WqeLayout::kSegBytes];
  b->memory_.Read(p->RecvWqeAddr(p->rq_consumed_), rbuf, p->rq_stride_);
  Sge sges[fabric::kMaxSge];
  const int n = fabric::DecodeRecvWqe(rbuf, p->rq_stride_, sges);
  const uint64_t wr_id = p->rq_wrid_[slot];
  ++p->rq_consumed_;
  ++p->counters_.recvs_consumed;
  WorkCompletion wc;
  wc.wr_id = wr_id;
  wc.qp_num = p->qpn_;
  wc.opcode = opc == Opcode::kWriteWithImm ? Opcode::kRecvRdmaWithImm : Opcode::kRecv;
  if (opc == Opcode::kWriteWithImm) {
    wc.with_imm = true;
    wc.imm_data = op->wqe.imm_inv_qpn;
    wc.byte_len = static_cast<uint32_t>(op->data.size());
  } else {
    ScatterSend(op, b, p, sges, n, &wc, &r->st);
  }
  // The RECV completion lands after the data, in arrival order.
  const Ps t_cqe = std::max(p->last_recv_cqe_, t_done + tm.PcieWrite(op->data.size() + 64));
  p->last_recv_cqe_ = t_cqe;
  Op* rc = cl->NewOp();
  SimCluster::Attach(rc, p);
  rc->epoch = p->epoch_;
  rc->recv_wc = wc;
  sim.Schedule(t_cqe, kRecvComplete, OnRecvComplete, rc, wr_id);
  r->t_data = std::max(r->t_data, t_done + tm.PcieWrite(op->data.size()));
  return true;
}

// A SEND's payload into the RECV's SGEs (and SEND_WITH_INV's invalidation);
// a failure sets the RECV's completion status and the requester's NAK `st`.
void Rnic::ScatterSend(Op* op, SimNode* b, SimQp* p, const Sge* sges, int n, WorkCompletion* wc,
                       WcStatus* st) {
  const uint64_t len = op->data.size();
  uint64_t cap = 0;
  for (int i = 0; i < n; ++i) cap += sges[i].length;
  WcStatus rst = len > cap ? WcStatus::kLocLenErr : WcStatus::kSuccess;
  for (int i = 0; i < n && rst == WcStatus::kSuccess; ++i) rst = CheckLocal(b, p, sges[i], true);
  if (rst == WcStatus::kSuccess) {
    uint64_t off = 0;
    for (int i = 0; i < n && off < len; ++i) {
      const uint64_t k = std::min<uint64_t>(sges[i].length, len - off);
      b->memory_.Write(sges[i].addr, op->data.data() + off, k);
      off += k;
    }
    wc->byte_len = static_cast<uint32_t>(len);
    p->counters_.bytes_received += len;
    if (op->wqe.opcode == Opcode::kSendWithInv) {
      if (DoLocalInv(p, op->wqe.imm_inv_qpn, true) == WcStatus::kSuccess) {
        wc->invalidated_rkey = op->wqe.imm_inv_qpn;
      } else {
        rst = WcStatus::kRemInvReqErr;
      }
    }
  }
  if (rst != WcStatus::kSuccess) {
    *st = rst == WcStatus::kLocLenErr || rst == WcStatus::kRemInvReqErr ? WcStatus::kRemInvReqErr
                                                                        : WcStatus::kRemOpErr;
    wc->status = rst == WcStatus::kRemInvReqErr ? WcStatus::kRemInvReqErr : rst;
  }
}

void Rnic::OnRecvComplete(void* ctx, uint64_t) {
  Op* rc = static_cast<Op*>(ctx);
  SimQp* p = rc->qp;
  SimCluster* cl = ClusterOf(p);
  if (rc->epoch == p->epoch_ && !p->node_->crashed_) {
    rc->recv_wc.timestamp_ps = cl->sim().now();
    if (p->state_ == QpState::kErr && rc->recv_wc.status == WcStatus::kSuccess) {
      rc->recv_wc.status = WcStatus::kWrFlushErr;
    }
    if (rc->recv_wc.status != WcStatus::kSuccess) ++p->counters_.errors;
    p->recv_cq_->Deliver(rc->recv_wc);
  }
  cl->FreeOp(rc);
}

// ---- Requester completion ------------------------------------------------------

void Rnic::ApplyLocal(Op* op) {
  SimQp* qp = op->qp;
  switch (op->wqe.opcode) {
    case Opcode::kBindMw:
      op->status = DoBind(qp, op->wqe);
      break;
    case Opcode::kLocalInv:
      op->status = DoLocalInv(qp, op->wqe.imm_inv_qpn, false);
      break;
    case Opcode::kSendEnable:
    case Opcode::kRecvEnable:
      op->status = DoEnable(qp, op->wqe);
      break;
    default:
      break;
  }
}

void Rnic::OnComplete(void* ctx, uint64_t) {
  Op* op = static_cast<Op*>(ctx);
  SimQp* qp = op->qp;
  SimCluster* cl = ClusterOf(qp);
  if (op->epoch != qp->epoch_ || op->abandoned) {
    cl->FreeOp(op);
    return;
  }
  if (op->rd_atomic) --qp->outstanding_rd_atomic_;
  const bool in_error = qp->state_ == QpState::kErr;
  if (in_error && op->status == WcStatus::kSuccess) {
    op->status = WcStatus::kWrFlushErr;
  } else if (op->status == WcStatus::kSuccess) {
    if (op->remote) {
      if (IsRdAtomic(op->wqe.opcode)) {  // scatter the response into local memory
        uint64_t off = 0;
        const DecodedSendWqe& w = op->wqe;
        for (int i = 0; i < w.num_sge && off < op->data.size(); ++i) {
          const uint64_t k = std::min<uint64_t>(w.sge[i].length, op->data.size() - off);
          qp->node_->memory_.Write(w.sge[i].addr, op->data.data() + off, k);
          off += k;
        }
        qp->counters_.bytes_received += op->data.size();
      }
    } else {
      ApplyLocal(op);
    }
  }
  op->done = true;
  op->in_flight = false;
  cl->sim().TraceMix(static_cast<uint64_t>(op->status) << 48 | op->wqe_index);
  if (op->status != WcStatus::kSuccess && op->status != WcStatus::kWrFlushErr && !in_error) {
    ++qp->counters_.errors;
    EnterError(qp);
  }
  Retire(qp);
  if (qp->block_ == SimQp::Block::kRdAtomic) Unblock(qp);
}

void Rnic::Retire(SimQp* qp) {
  SimCluster* cl = ClusterOf(qp);
  while (qp->fifo_head_ && qp->fifo_head_->done) {
    Op* op = qp->fifo_head_;
    qp->fifo_head_ = op->next;
    if (!qp->fifo_head_) qp->fifo_tail_ = nullptr;
    ++qp->sq_retired_;
    const bool signaled = (op->wqe.flags & fabric::kSignaled) != 0;
    if ((signaled || op->status != WcStatus::kSuccess) && !qp->node_->crashed_) {
      WorkCompletion wc;
      wc.wr_id = op->wqe.wr_id;
      wc.status = op->status;
      wc.opcode = op->wqe.opcode;
      wc.byte_len = op->byte_len;
      wc.qp_num = qp->qpn_;
      wc.timestamp_ps = cl->sim().now();
      qp->send_cq_->Deliver(wc);
    }
    if (op->in_flight) {
      op->abandoned = true;  // its pending event frees it
    } else {
      cl->FreeOp(op);
    }
  }
}

void Rnic::Unblock(SimQp* qp) {
  qp->block_ = SimQp::Block::kNone;
  Kick(qp);
}

void Rnic::ReleaseWait(SimQp* qp, Ps seen_at) {
  if (qp->block_ != SimQp::Block::kWait || qp->state_ != QpState::kRts) return;
  qp->waited_ = true;
  qp->wait_seen_at_ = seen_at;
  Unblock(qp);
}

// ---- Errors --------------------------------------------------------------------

void Rnic::FlushUnstarted(SimQp* qp) {
  SimCluster* cl = ClusterOf(qp);
  SimNode* n = qp->node_;
  uint8_t buf[512];
  for (; qp->sq_exec_ < qp->sq_posted_; ++qp->sq_exec_) {
    Op* op = cl->NewOp();
    SimCluster::Attach(op, qp);
    op->epoch = qp->epoch_;
    n->memory_.Read(qp->SendWqeAddr(qp->sq_exec_), buf, qp->sq_stride_);
    fabric::DecodeSendWqe(buf, qp->sq_stride_, &op->wqe);
    op->status = WcStatus::kWrFlushErr;
    op->done = true;
    op->flushed_only = true;
    if (qp->fifo_tail_) {
      qp->fifo_tail_->next = op;
    } else {
      qp->fifo_head_ = op;
    }
    qp->fifo_tail_ = op;
  }
  for (; qp->rq_consumed_ < qp->rq_posted_; ++qp->rq_consumed_) {
    DeliverRecvError(qp, WcStatus::kWrFlushErr,
                     qp->rq_wrid_[qp->rq_consumed_ & (qp->rq_size_ - 1)]);
  }
  Retire(qp);
}

void Rnic::EnterError(SimQp* qp) {
  qp->SetState(QpState::kErr);
  qp->block_ = SimQp::Block::kNone;
  // WRs still in flight flush now, as hardware does; their pending events
  // find them abandoned. The responder may still execute requests that were
  // already on the wire.
  for (Op* op = qp->fifo_head_; op; op = op->next) {
    if (!op->done) {
      op->done = true;
      op->status = WcStatus::kWrFlushErr;
    }
  }
  qp->outstanding_rd_atomic_ = 0;
  FlushUnstarted(qp);
}

}  // namespace dmb::sim
