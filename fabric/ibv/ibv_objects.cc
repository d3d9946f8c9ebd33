#include "fabric/ibv/ibv_objects.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

namespace dmb::fabric::ibv {
namespace {

constexpr uint64_t kRecvTag = 1ull << 63;

WcStatus FromIbv(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS:
      return WcStatus::kSuccess;
    case IBV_WC_LOC_LEN_ERR:
      return WcStatus::kLocLenErr;
    case IBV_WC_LOC_QP_OP_ERR:
      return WcStatus::kLocQpOpErr;
    case IBV_WC_LOC_PROT_ERR:
      return WcStatus::kLocProtErr;
    case IBV_WC_WR_FLUSH_ERR:
      return WcStatus::kWrFlushErr;
    case IBV_WC_MW_BIND_ERR:
      return WcStatus::kMwBindErr;
    case IBV_WC_REM_INV_REQ_ERR:
      return WcStatus::kRemInvReqErr;
    case IBV_WC_REM_ACCESS_ERR:
      return WcStatus::kRemAccessErr;
    case IBV_WC_REM_OP_ERR:
      return WcStatus::kRemOpErr;
    case IBV_WC_RETRY_EXC_ERR:
      return WcStatus::kRetryExcErr;
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return WcStatus::kRnrRetryExcErr;
    case IBV_WC_LOC_ACCESS_ERR:
      return WcStatus::kLocAccessErr;
    case IBV_WC_BAD_RESP_ERR:
      return WcStatus::kRemOpErr;
    default:
      return WcStatus::kLocQpOpErr;  // general/EEC/RDD errors: a local QP failure
  }
}

ibv_qp_state ToIbv(QpState s) {
  switch (s) {
    case QpState::kReset:
      return IBV_QPS_RESET;
    case QpState::kInit:
      return IBV_QPS_INIT;
    case QpState::kRtr:
      return IBV_QPS_RTR;
    case QpState::kRts:
      return IBV_QPS_RTS;
    case QpState::kErr:
      return IBV_QPS_ERR;
  }
  return IBV_QPS_ERR;
}

// The verbs QP state table (IBA 10.3.1, ib_modify_qp_is_ok): RESET cannot go
// to ERR; INIT->INIT and RTS->RTS re-apply attributes.
bool Legal(QpState from, QpState to) {
  if (to == QpState::kReset) return true;
  if (to == QpState::kErr) return from != QpState::kReset;
  return (from == QpState::kReset && to == QpState::kInit) ||
         (from == QpState::kInit && to == QpState::kInit) ||
         (from == QpState::kRts && to == QpState::kRts) ||
         (from == QpState::kInit && to == QpState::kRtr) ||
         (from == QpState::kRtr && to == QpState::kRts);
}

unsigned IbvSendFlags(uint8_t flags) {
  return (flags & kSignaled ? IBV_SEND_SIGNALED : 0) | (flags & kFence ? IBV_SEND_FENCE : 0);
}

}  // namespace

int IbvAccess(uint32_t a) {
  int f = 0;
  if (a & kLocalWrite) f |= IBV_ACCESS_LOCAL_WRITE;
  if (a & kRemoteWrite) f |= IBV_ACCESS_REMOTE_WRITE;
  if (a & kRemoteRead) f |= IBV_ACCESS_REMOTE_READ;
  if (a & kRemoteAtomic) f |= IBV_ACCESS_REMOTE_ATOMIC;
  if (a & kMwBind) f |= IBV_ACCESS_MW_BIND;
  return f;
}

// ---- Memory -----------------------------------------------------------------

IbvMemory::IbvMemory(std::string node_name, uint64_t size)
    : node_name_(std::move(node_name)), size_(size), alloc_(node_name_, 4096, size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    throw VerbsError(errno, "node '" + node_name_ + "': cannot map " + std::to_string(size) +
                                " bytes of memory: " + strerror(errno));
  }
  base_ = static_cast<uint8_t*>(p);
}

IbvMemory::~IbvMemory() { munmap(base_, size_); }

void IbvMemory::Check(uint64_t addr, uint64_t n, const char* what) const {
  if (addr > size_ || n > size_ - addr) {
    throw std::out_of_range(std::string(what) + " [" + std::to_string(addr) + ", +" +
                            std::to_string(n) + ") outside node '" + node_name_ + "' memory of " +
                            std::to_string(size_) + " bytes");
  }
}

void IbvMemory::Read(uint64_t addr, void* dst, uint64_t n) const {
  Check(addr, n, "read");
  std::memcpy(dst, base_ + addr, n);
}

void IbvMemory::Write(uint64_t addr, const void* src, uint64_t n) {
  Check(addr, n, "write");
  std::memcpy(base_ + addr, src, n);
}

void IbvMemory::Fill(uint64_t addr, uint8_t byte, uint64_t n) {
  Check(addr, n, "fill");
  std::memset(base_ + addr, byte, n);
}

uint64_t IbvMemory::Alloc(uint64_t bytes, uint64_t align) { return alloc_.Alloc(bytes, align); }

void IbvMemory::Free(uint64_t addr, uint64_t bytes) {
  alloc_.Free(addr, bytes);
  std::memset(base_ + addr, 0, bytes);
}

// ---- CQ ---------------------------------------------------------------------

int IbvCq::PollDevice() {
  ibv_wc wcs[32];
  const int n = ibv_poll_cq(cq_, 32, wcs);
  if (n < 0) throw VerbsError(EIO, "ibv_poll_cq failed on CQ " + std::to_string(num_));
  // One clock read per batch: the time they were seen to arrive.
  const Ps now = n > 0 ? node_->cluster()->rt().now() : 0;
  for (int i = 0; i < n; ++i) {
    ++total_;
    ok_ += wcs[i].status == IBV_WC_SUCCESS;
    IbvQp* qp = node_->LocalQp(wcs[i].qp_num);
    WorkCompletion wc;
    if (qp) {
      qp->Translate(wcs[i], &wc);
    } else {
      wc.wr_id = wcs[i].wr_id;
      wc.status = FromIbv(wcs[i].status);
      wc.qp_num = wcs[i].qp_num;
    }
    wc.timestamp_ps = now;
    if (!ignore_overrun_) Deliver(wc);
  }
  return n;
}

// The common case without the queue: nothing older is queued, so `wc` goes
// straight to the oldest waiter that wants it (what Wake would do next).
void IbvCq::Deliver(const WorkCompletion& wc) {
  if (ready_.empty() && head_) {
    if (Waiter* w = TakeWaiterFor(&head_, &tail_, wc)) {
      w->wc = wc;
      node_->cluster()->rt().Ready(w->handle);
      return;
    }
  }
  ready_.push_back(wc);
}

// Hands each polled completion, in order, to the oldest waiter that wants
// it; one nobody waits for stays in ready_.
void IbvCq::Wake() {
  for (auto it = ready_.begin(); head_ && it != ready_.end();) {
    Waiter* w = TakeWaiterFor(&head_, &tail_, *it);
    if (!w) {
      ++it;
      continue;
    }
    w->wc = *it;
    it = ready_.erase(it);
    node_->cluster()->rt().Ready(w->handle);
  }
}

int IbvCq::Pump() {
  const int n = PollDevice();
  // Queued completions only matter to the waiters there are now; a later
  // waiter looks at them itself (AddWaiter).
  if (n > 0 && head_ && !ready_.empty()) Wake();
  return n;
}

// Always suspends: the waiter is resumed from the runtime loop. Completing
// inline when a completion is already there would let a loop of operations
// run without ever returning to the loop, and every Task hand-off that the
// compiler does not turn into a tail call (ASan builds) would then grow the
// stack until it overflows. One loop turn per completion is cheap.
bool IbvCq::TryPop(WorkCompletion*, uint64_t) { return false; }

void IbvCq::AddWaiter(Waiter* w) {
  if (!listed_) {
    listed_ = true;
    node_->NoteAwaited(this);
  }
  w->next = nullptr;
  if (tail_) {
    tail_->next = w;
  } else {
    head_ = w;
  }
  tail_ = w;
  if (!ready_.empty()) Wake();  // a completion already polled goes to it on the next loop turn
}

void IbvCq::DeliverUnposted(const WorkCompletion& wc) {
  ++total_;
  if (!ignore_overrun_) Deliver(wc);
}

int IbvCq::Poll(std::span<WorkCompletion> out) {
  node_->FlushPosts();  // a WR the caller posted must be on the device before we look
  if (ready_.empty() || head_) PollDevice();
  Wake();
  int n = 0;
  while (!head_ && !ready_.empty() && n < static_cast<int>(out.size())) {
    out[n++] = ready_.front();
    ready_.pop_front();
  }
  return n;
}

// ---- QP ---------------------------------------------------------------------

IbvQp::IbvQp(IbvNode* node, ibv_qp* qp, const QpInitAttr& attr, uint32_t sq_size, uint32_t rq_size)
    : node_(node),
      qp_(qp),
      attr_(attr),
      sq_size_(std::max(1u, sq_size)),
      rq_size_(std::max(1u, rq_size)),
      sq_meta_(std::bit_ceil(sq_size_)),
      rq_meta_(std::bit_ceil(rq_size_)) {}

void IbvQp::Refuse(const char* what) const {
  throw std::logic_error(std::string("ibv: Qp::") + what + " (QP " + std::to_string(qp_num()) +
                         "): the work queues of a verbs QP live in the provider's memory; "
                         "WQE-level chains need the mlx5 cross-channel encoders");
}

void IbvQp::Translate(const ibv_wc& in, WorkCompletion* out) {
  const bool recv = in.wr_id & kRecvTag;
  const uint64_t index = in.wr_id & ~kRecvTag;
  const Meta& m = recv ? RqMeta(index) : SqMeta(index);
  out->wr_id = m.wr_id;
  out->status = FromIbv(in.status);
  out->qp_num = in.qp_num;
  out->byte_len = in.byte_len;
  if (recv) {
    out->opcode = in.status == IBV_WC_SUCCESS && in.opcode == IBV_WC_RECV_RDMA_WITH_IMM
                      ? Opcode::kRecvRdmaWithImm
                      : Opcode::kRecv;
    ++counters_.recvs_consumed;
    if (in.status == IBV_WC_SUCCESS) counters_.bytes_received += in.byte_len;
    if (in.status == IBV_WC_SUCCESS && (in.wc_flags & IBV_WC_WITH_IMM)) {
      out->with_imm = true;
      out->imm_data = ntohl(in.imm_data);
    }
    if (in.status == IBV_WC_SUCCESS && (in.wc_flags & IBV_WC_WITH_INV)) {
      out->invalidated_rkey = in.invalidated_rkey;
    }
  } else {
    out->opcode = m.opcode;
    acked_ = std::max(acked_, index + 1);
  }
  if (in.status != IBV_WC_SUCCESS) {
    ++counters_.errors;
    state_ = QpState::kErr;  // an RC QP is in ERR after any error completion
  }
}

QpState IbvQp::QueryState() {
  Flush();
  ibv_qp_attr a = {};
  ibv_qp_init_attr ia = {};
  if (ibv_query_qp(qp_, &a, IBV_QP_STATE, &ia) != 0) return state_;
  switch (a.qp_state) {
    case IBV_QPS_RESET:
      state_ = QpState::kReset;
      break;
    case IBV_QPS_INIT:
      state_ = QpState::kInit;
      break;
    case IBV_QPS_RTR:
      state_ = QpState::kRtr;
      break;
    case IBV_QPS_RTS:
      state_ = QpState::kRts;
      break;
    default:
      state_ = QpState::kErr;
      break;  // ERR, SQE, SQD: no longer usable
  }
  return state_;
}

void IbvQp::ModifyRaw(QpState target, const QpAddr* peer) {
  if (!Legal(state_, target)) {
    throw VerbsError(EINVAL, "illegal QP transition " + std::string(QpStateName(state_)) + " -> " +
                                 std::string(QpStateName(target)) + " on QP " +
                                 std::to_string(qp_num()));
  }
  Flush();  // WRs posted before a transition (to ERR: flushed by it) reach the device first
  const Device& dev = node_->device();
  ibv_qp_attr a = {};
  int mask = IBV_QP_STATE;
  a.qp_state = ToIbv(target);
  if (target == state_) {
    // INIT->INIT / RTS->RTS: only optional attributes, none needed here.
  } else if (target == QpState::kInit) {
    a.pkey_index = 0;
    a.port_num = dev.addr.port;
    a.qp_access_flags = IbvAccess(attr_.access) & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  } else if (target == QpState::kRtr) {
    a.path_mtu = std::min(dev.addr.active_mtu, peer->port.active_mtu);
    a.dest_qp_num = peer->qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = static_cast<uint8_t>(
        std::min<uint32_t>(attr_.max_rd_atomic, std::max(1, dev.attr.max_qp_rd_atom)));
    a.min_rnr_timer = 12;  // 0.64 ms, as the simulator's RNR timer
    a.ah_attr.port_num = dev.addr.port;
    a.ah_attr.dlid = peer->port.lid;
    if (dev.addr.is_roce) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, peer->port.gid, 16);
      a.ah_attr.grh.sgid_index = dev.addr.gid_index;
      a.ah_attr.grh.hop_limit = 64;
    }
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  } else if (target == QpState::kRts) {
    a.timeout = 14;   // 4.096 us * 2^14 = 67 ms per retry
    a.retry_cnt = 6;  // rxe treats 7 as "retry forever" (like rnr_retry); IBA does not
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = static_cast<uint8_t>(
        std::min<uint32_t>(attr_.max_rd_atomic, std::max(1, dev.attr.max_qp_init_rd_atom)));
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
            IBV_QP_MAX_QP_RD_ATOMIC;
  }
  if (const int rc = ibv_modify_qp(qp_, &a, mask); rc != 0) {
    throw VerbsError(rc, "ibv_modify_qp(QP " + std::to_string(qp_num()) + " " +
                             std::string(QpStateName(state_)) + " -> " +
                             std::string(QpStateName(target)) + ") failed: " + strerror(rc));
  }
  state_ = target;
  if (target == QpState::kReset) sq_next_ = rq_next_ = acked_ = 0;
}

void IbvQp::Modify(QpState target, const QpAttr& attr) {
  if (target == QpState::kRtr) {
    QpAddr peer{node_->cluster()->PortOf(attr.dest_node), attr.dest_qp_num};
    ModifyRaw(target, &peer);
  } else {
    ModifyRaw(target, nullptr);
  }
}

void IbvQp::ConnectTo(const QpAddr& peer) {
  if (state_ != QpState::kReset) ModifyRaw(QpState::kReset, nullptr);
  ModifyRaw(QpState::kInit, nullptr);
  ModifyRaw(QpState::kRtr, &peer);
  ModifyRaw(QpState::kRts, nullptr);
}

// Queued WRs go to the provider at the next Flush, in posting order: when
// the node polls (each loop turn, after the ready coroutines ran), before a
// direct post, a state change, a query or a synchronous Poll.
//
// Only a WR the provider cannot refuse is queued, so that PostSend's return
// stays the provider's answer: READ, WRITE or SEND (no alignment or bind
// checks) within the QP's SGE limit, on an RTS QP whose SQ has room for
// certain. Anything else is posted at once, behind the queued WRs.
bool IbvQp::CanQueue(Opcode op, size_t num_sge) const {
  switch (op) {
    case Opcode::kRead:
    case Opcode::kWrite:
    case Opcode::kWriteWithImm:
    case Opcode::kSend:
      break;
    default:
      return false;
  }
  return node_->post_batching() && state_ == QpState::kRts && num_sge <= attr_.max_send_sge &&
         queued_wr_.size() < kMaxQueued && sq_next_ + 1 - acked_ <= sq_size_;
}

void IbvQp::Flush() {
  if (queued_wr_.empty()) return;
  size_t sge = 0;
  for (size_t i = 0; i < queued_wr_.size(); ++i) {
    ibv_send_wr& w = queued_wr_[i];
    w.sg_list = w.num_sge > 0 ? &queued_sge_[sge] : nullptr;
    sge += static_cast<size_t>(w.num_sge);
    w.next = i + 1 < queued_wr_.size() ? &queued_wr_[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(qp_, queued_wr_.data(), &bad) != 0) {
    FailQueued(bad ? static_cast<size_t>(bad - queued_wr_.data()) : 0);
  }
  queued_wr_.clear();
  queued_sge_.clear();
}

// The provider refused queued WRs [from, end) after PostSend had returned 0
// for them: each signaled one completes with WR_FLUSH_ERR (what a caller of
// a failed post reports, e.g. CnBase::NotPosted), so no waiter hangs.
void IbvQp::FailQueued(size_t from) {
  auto* cq = static_cast<IbvCq*>(attr_.send_cq);
  const Ps now = node_->cluster()->rt().now();
  for (size_t i = from; i < queued_wr_.size(); ++i) {
    if (!(queued_wr_[i].send_flags & IBV_SEND_SIGNALED)) continue;
    const Meta& m = SqMeta(queued_wr_[i].wr_id);
    WorkCompletion wc;
    wc.wr_id = m.wr_id;
    wc.status = WcStatus::kWrFlushErr;
    wc.opcode = m.opcode;
    wc.qp_num = qp_num();
    wc.timestamp_ps = now;
    cq->DeliverUnposted(wc);
  }
}

// The verbs fields of `wr` but its SGEs and wr_id; false for an opcode
// upstream verbs lacks (NOP, WAIT, SEND_EN, RECV_EN, masked FAA) and for a
// bind (PostBind).
bool IbvQp::FillWr(const SendWr& wr, ibv_send_wr* w) {
  w->num_sge = static_cast<int>(wr.sg_list.size());
  w->send_flags = IbvSendFlags(wr.flags);
  switch (wr.opcode) {
    case Opcode::kWrite:
    case Opcode::kWriteWithImm:
    case Opcode::kRead:
      w->opcode = wr.opcode == Opcode::kRead    ? IBV_WR_RDMA_READ
                  : wr.opcode == Opcode::kWrite ? IBV_WR_RDMA_WRITE
                                                : IBV_WR_RDMA_WRITE_WITH_IMM;
      w->wr.rdma.remote_addr = wr.remote_addr;
      w->wr.rdma.rkey = wr.rkey;
      w->imm_data = htonl(wr.imm_data);
      return true;
    case Opcode::kSend:
      w->opcode = IBV_WR_SEND;
      return true;
    case Opcode::kSendWithInv:
      w->opcode = IBV_WR_SEND_WITH_INV;
      w->invalidate_rkey = wr.invalidate_rkey;
      return true;
    case Opcode::kCmpAndSwp:
    case Opcode::kFetchAndAdd:
      w->opcode =
          wr.opcode == Opcode::kCmpAndSwp ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
      w->wr.atomic.remote_addr = wr.remote_addr;
      w->wr.atomic.rkey = wr.rkey;
      w->wr.atomic.compare_add = wr.compare_add;
      w->wr.atomic.swap = wr.swap;
      return true;
    case Opcode::kLocalInv:
      w->opcode = IBV_WR_LOCAL_INV;
      w->invalidate_rkey = wr.invalidate_rkey;
      return true;
    default:
      return false;
  }
}

// A WR the provider took (or the queue holds): its SQ index, caller's wr_id
// and opcode for the completion, and the QP's counters.
uint64_t IbvQp::Record(uint64_t wr_id, Opcode op) {
  const uint64_t index = sq_next_++;
  SqMeta(index) = Meta{wr_id, op};
  ++counters_.send_wrs_executed;
  return index;
}

void IbvQp::Accept(const SendWr& wr, uint64_t* wqe_index) {
  const uint64_t index = Record(wr.wr_id, wr.opcode);
  if (wr.opcode != Opcode::kRead && wr.opcode != Opcode::kBindMw) {
    for (const Sge& s : wr.sg_list) counters_.bytes_sent += s.length;
  }
  if (wqe_index) *wqe_index = index;
}

// The hot path (a READ or WRITE of a running QP) builds its verbs WR in the
// doorbell queue itself; everything else is built here and posted at once.
int IbvQp::PostSend(const SendWr& wr, uint64_t* wqe_index) {
  const size_t num_sge = wr.sg_list.size();
  if (num_sge > static_cast<size_t>(kMaxSge)) return EINVAL;
  if (CanQueue(wr.opcode, num_sge)) {
    if (queued_wr_.empty()) {
      queued_wr_.reserve(kMaxQueued);
      node_->NoteQueued(this);
    }
    ibv_send_wr& w = queued_wr_.emplace_back();  // zeroed; sg_list and next set at Flush
    w.wr_id = sq_next_;
    FillWr(wr, &w);
    for (const Sge& s : wr.sg_list) queued_sge_.push_back(ibv_sge{s.addr, s.length, s.lkey});
    Accept(wr, wqe_index);
    return 0;
  }
  if (wr.opcode == Opcode::kBindMw) return PostBind(wr, wqe_index);
  ibv_sge sges[kMaxSge];
  for (size_t i = 0; i < num_sge; ++i) {
    sges[i] = ibv_sge{wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
  }
  ibv_send_wr w = {};
  if (!FillWr(wr, &w)) return EINVAL;
  w.sg_list = sges;
  const int rc = PostNow(&w);
  if (rc == 0) Accept(wr, wqe_index);
  return rc;
}

// Posts `w` (wr_id: the next SQ index) behind the queued WRs.
int IbvQp::PostNow(ibv_send_wr* w) {
  w->wr_id = sq_next_;
  Flush();
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp_, w, &bad);
}

int IbvQp::PostBind(const SendWr& wr, uint64_t* wqe_index) {
  IbvMw* mw = node_->MwByRkey(wr.bind_mw_rkey);
  IbvMr* mr = node_->MrByLkey(wr.bind_mr_lkey);
  if (!mw || mw->type() != MwType::kType2 || mw->rkey() != wr.bind_mw_rkey) return EINVAL;
  if (!mr) return EINVAL;  // providers dereference the MR even for a zero-length bind
  if (wr.bind_qpn != 0 && wr.bind_qpn != qp_num()) return EINVAL;  // no qpn_in_bind
  ibv_send_wr w = {};
  w.opcode = IBV_WR_BIND_MW;
  w.send_flags = IbvSendFlags(wr.flags);
  w.bind_mw.mw = mw->raw();
  w.bind_mw.rkey = wr.bind_new_rkey;
  w.bind_mw.bind_info.mr = mr->raw();
  w.bind_mw.bind_info.addr = wr.bind_addr;
  w.bind_mw.bind_info.length = wr.bind_length;
  w.bind_mw.bind_info.mw_access_flags = IbvAccess(wr.bind_access);
  const int rc = PostNow(&w);
  if (rc != 0) return rc;
  Accept(wr, wqe_index);
  mw->set_rkey(wr.bind_new_rkey);  // verbs leave type-2 keys to the caller
  return 0;
}

int IbvQp::PostRecv(const RecvWr& wr, uint64_t* wqe_index) {
  if (wr.sg_list.size() > static_cast<size_t>(kMaxSge)) return EINVAL;
  ibv_sge sges[kMaxSge];
  for (size_t i = 0; i < wr.sg_list.size(); ++i) {
    sges[i] = ibv_sge{wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
  }
  const uint64_t index = rq_next_;
  ibv_recv_wr w = {};
  w.wr_id = index | kRecvTag;
  w.sg_list = sges;
  w.num_sge = static_cast<int>(wr.sg_list.size());
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_recv(qp_, &w, &bad);
  if (rc != 0) return rc;
  RqMeta(index) = Meta{wr.wr_id, Opcode::kRecv};
  ++rq_next_;
  if (wqe_index) *wqe_index = index;
  return 0;
}

int IbvQp::BindMw(Mw* mw, uint64_t wr_id, Mr* mr, uint64_t addr, uint64_t length, uint32_t access,
                  uint32_t new_rkey, uint8_t flags) {
  auto* m = dynamic_cast<IbvMw*>(mw);
  if (!m || m->type() != MwType::kType1) return EINVAL;
  // ibv_bind_mw picks the next key itself.
  if (new_rkey != ibv_inc_rkey(m->rkey())) return EINVAL;
  auto* r = mr ? dynamic_cast<IbvMr*>(mr) : nullptr;
  if (mr && !r) return EINVAL;
  const bool unbind = r == nullptr;
  if (unbind) {
    if (length != 0) return EINVAL;
    r = m->last_mr;
    if (!r) return EINVAL;  // never bound: nothing to unbind
  }
  Flush();  // the bind goes to the device behind the WRs posted before it
  ibv_mw_bind b = {};
  b.wr_id = sq_next_;
  b.send_flags = IbvSendFlags(flags);
  b.bind_info.mr = r->raw();
  b.bind_info.addr = unbind ? r->addr() : addr;
  b.bind_info.length = unbind ? 0 : length;
  b.bind_info.mw_access_flags = IbvAccess(access);
  const int rc = ibv_bind_mw(qp_, m->raw(), &b);
  if (rc != 0) return rc;
  m->last_mr = r;
  Record(wr_id, Opcode::kBindMw);
  return 0;
}

}  // namespace dmb::fabric::ibv
