// The fabric contract: a verbs-shaped API that every backend (sim, ibv)
// implements and every system above fabric/ is written against.
//
// Names, states, error codes and the rkey layout follow ibverbs so that a
// reader who knows verbs needs no glossary:
//  - rkey/lkey = 24-bit index << 8 | 8-bit key. A memory-window rebind changes
//    only the low 8 bits.
//  - Type-1 MWs are bound by their owner with Qp::BindMw (libibverbs'
//    ibv_bind_mw, which posts a bind WQE) and are usable from any QP of the PD.
//  - Type-2 MWs are bound by a BIND_MW work request and are usable only through
//    the QP whose number is in the bind WQE's qpn field (by default the QP
//    that posted the bind; a chain may rewrite it before the WQE executes).
//  - Any protection violation NAKs, moves the requester QP (and the responder
//    QP) to ERR and flushes its outstanding WRs with kWrFlushErr.
//  - Work queues live in node memory (see wqe_layout.h); the RNIC reads a WQE
//    when it executes it.
//
// Objects are owned by their Node and live until the node is destroyed, or a
// QP or CQ until Node::DestroyQp / DestroyCq; the pointers handed out are
// stable (like ibverbs' struct pointers).
#pragma once

#include <coroutine>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/task.h"
#include "fabric/time.h"

namespace dmb::fabric {

// ---- Enumerations ---------------------------------------------------------

enum class Opcode : uint8_t {
  kNop = 0,
  kWrite = 1,
  kWriteWithImm = 2,
  kSend = 3,
  kSendWithInv = 4,
  kRead = 5,
  kCmpAndSwp = 6,
  kFetchAndAdd = 7,
  kMaskedFetchAndAdd = 8,
  kBindMw = 9,
  kLocalInv = 10,
  kWait = 11,             // block this SQ until CQ `wait_cq` has `wait_count` completions
  kSendEnable = 12,       // let managed QP `enable_qpn` execute SQ WQEs below `enable_index`
  kRecvEnable = 13,       // let managed QP `enable_qpn` consume RQ WQEs below `enable_index`
  kRecv = 14,             // only in work completions
  kRecvRdmaWithImm = 15,  // only in work completions
};
std::string_view OpcodeName(Opcode op);

enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocLenErr,
  kLocQpOpErr,
  kLocProtErr,
  kWrFlushErr,
  kMwBindErr,
  kRemInvReqErr,
  kRemAccessErr,
  kRemOpErr,
  kRetryExcErr,
  kRnrRetryExcErr,
  kLocAccessErr,
};
std::string_view WcStatusName(WcStatus s);

// Access flags (ibv_access_flags values).
enum Access : uint32_t {
  kLocalWrite = 1u << 0,
  kRemoteWrite = 1u << 1,
  kRemoteRead = 1u << 2,
  kRemoteAtomic = 1u << 3,
  kMwBind = 1u << 4,
};

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kErr };
std::string_view QpStateName(QpState s);

enum class MwType : uint8_t { kType1 = 1, kType2 = 2 };

// Send flags.
enum SendFlags : uint8_t {
  kSignaled = 1u << 0,
  kFence = 1u << 1,  // start only after earlier READ/atomic WRs completed
};

// ---- Work requests and completions -----------------------------------------

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

inline constexpr int kMaxSge = 16;

struct SendWr {
  uint64_t wr_id = 0;
  Opcode opcode = Opcode::kNop;
  uint8_t flags = kSignaled;
  std::vector<Sge> sg_list;
  uint32_t imm_data = 0;         // WRITE_WITH_IMM
  uint32_t invalidate_rkey = 0;  // SEND_WITH_INV, LOCAL_INV
  // READ / WRITE / atomics
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;  // CAS compare, FAA add
  uint64_t swap = 0;         // CAS swap; masked FAA: field boundary mask
  // BIND_MW (type-2 through post_send, type-1 through Qp::BindMw)
  uint32_t bind_mw_rkey = 0;   // the MW's current rkey (index and key must match)
  uint32_t bind_new_rkey = 0;  // new rkey: same index, new low 8 bits
  uint32_t bind_mr_lkey = 0;   // parent MR (0 with length 0 unbinds a type-1 MW)
  uint64_t bind_addr = 0;
  uint64_t bind_length = 0;
  uint32_t bind_access = 0;
  uint32_t bind_qpn = 0;  // type-2: QP allowed to use the MW; 0 = the posting QP
  // WAIT / SEND_ENABLE / RECV_ENABLE
  uint32_t wait_cq = 0;
  uint64_t wait_count = 0;  // absolute number of completions on wait_cq
  uint32_t enable_qpn = 0;
  uint64_t enable_index = 0;  // absolute WQE index (exclusive)
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::vector<Sge> sg_list;
};

struct WorkCompletion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  Opcode opcode = Opcode::kNop;
  uint32_t byte_len = 0;
  uint32_t qp_num = 0;
  uint32_t imm_data = 0;
  bool with_imm = false;
  uint32_t invalidated_rkey = 0;
  Ps timestamp_ps = 0;  // when the CQE became visible to the CPU
};

// Thrown by control-path verbs (the analogue of a non-zero errno return).
class VerbsError : public std::runtime_error {
 public:
  VerbsError(int err, const std::string& what) : std::runtime_error(what), err_(err) {}
  int err() const { return err_; }

 private:
  int err_;
};

// ---- Objects ---------------------------------------------------------------

class Pd {
 public:
  virtual ~Pd() = default;
  virtual uint32_t handle() const = 0;
};

class Mr {
 public:
  virtual ~Mr() = default;
  virtual uint64_t addr() const = 0;
  virtual uint64_t length() const = 0;
  virtual uint32_t lkey() const = 0;
  virtual uint32_t rkey() const = 0;
  virtual uint32_t access() const = 0;
  virtual Pd* pd() const = 0;
};

class Mw {
 public:
  virtual ~Mw() = default;
  virtual MwType type() const = 0;
  virtual uint32_t rkey() const = 0;  // current rkey (changes on each bind)
  virtual Pd* pd() const = 0;
};

// Completion consumers. Awaiting Next() suspends until a completion is
// available and returns it; completions are delivered in order. Awaiting
// NextFor(wr_id) returns the completion of that one WR: several coroutines
// can then keep WRs in flight on one QP (as a real application demultiplexes
// ibv_poll_cq by wr_id), each woken by its own completion. A completion goes
// to the oldest waiter that wants it; one nobody waits for stays queued
// (Poll, Next or a later NextFor of its wr_id takes it). A coroutine
// destroyed while it awaits (a runtime shut down with work in flight) leaves
// the CQ's list of waiters: nothing is resumed in a freed frame, and the CQ
// can be destroyed afterwards.
class Cq {
 public:
  static constexpr uint64_t kAnyWrId = ~uint64_t{0};
  struct Waiter {
    std::coroutine_handle<> handle;
    WorkCompletion wc;
    Waiter* next = nullptr;
    uint64_t wr_id = kAnyWrId;  // the WR whose completion it awaits (kAnyWrId: the next one)
    bool queued = false;  // on the CQ's list (the backend clears it when it hands a completion)
    bool Wants(const WorkCompletion& c) const { return wr_id == kAnyWrId || wr_id == c.wr_id; }
  };
  struct NextAwaiter {
    Cq* cq;
    Waiter waiter;
    NextAwaiter(Cq* c, uint64_t wr_id) : cq(c) { waiter.wr_id = wr_id; }
    NextAwaiter(const NextAwaiter&) = delete;
    NextAwaiter& operator=(const NextAwaiter&) = delete;
    ~NextAwaiter() {
      if (waiter.queued) cq->RemoveWaiter(&waiter);
    }
    bool await_ready() { return cq->TryPop(&waiter.wc, waiter.wr_id); }
    void await_suspend(std::coroutine_handle<> h) {
      waiter.handle = h;
      waiter.queued = true;
      cq->AddWaiter(&waiter);
    }
    WorkCompletion await_resume() { return waiter.wc; }
  };

  virtual ~Cq() = default;
  virtual uint32_t cq_num() const = 0;
  // Completions ever delivered to this CQ (what WAIT counts).
  virtual uint64_t total_completions() const = 0;
  // Those of them with status kSuccess (flushes and errors excluded): how far
  // a chain of signaled WRs really got, also after it faulted.
  virtual uint64_t successful_completions() const = 0;
  // Non-blocking poll; returns how many were written.
  virtual int Poll(std::span<WorkCompletion> out) = 0;
  NextAwaiter Next() { return NextAwaiter(this, kAnyWrId); }
  NextAwaiter NextFor(uint64_t wr_id) { return NextAwaiter(this, wr_id); }

 protected:
  // Takes the oldest queued completion `wr_id` wants (kAnyWrId: the oldest).
  virtual bool TryPop(WorkCompletion* wc, uint64_t wr_id) = 0;
  virtual void AddWaiter(Waiter* w) = 0;
  virtual void RemoveWaiter(Waiter* w) = 0;
  // The backends' FIFO of waiters (head .. tail, linked by next): takes `w`
  // out wherever it is and clears its `queued`.
  static void UnlinkWaiter(Waiter** head, Waiter** tail, Waiter* w) {
    Waiter* prev = nullptr;
    for (Waiter* p = *head; p != nullptr; prev = p, p = p->next) {
      if (p != w) continue;
      (prev ? prev->next : *head) = p->next;
      if (*tail == p) *tail = prev;
      p->queued = false;
      return;
    }
  }
  // The oldest waiter that wants `wc`, taken off the list; nullptr if none.
  static Waiter* TakeWaiterFor(Waiter** head, Waiter** tail, const WorkCompletion& wc) {
    for (Waiter* p = *head; p != nullptr; p = p->next) {
      if (!p->Wants(wc)) continue;
      UnlinkWaiter(head, tail, p);
      return p;
    }
    return nullptr;
  }
};

struct QpInitAttr {
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  uint32_t max_send_wr = 64;
  uint32_t max_recv_wr = 64;
  uint32_t max_send_sge = 1;
  uint32_t max_recv_sge = 1;
  uint32_t max_rd_atomic = 16;  // outstanding READ/atomic WRs (initiator depth)
  uint32_t access = kRemoteRead | kRemoteWrite | kRemoteAtomic;  // qp_access_flags
  // Cross-channel (mlx5 IBV_QP_CREATE_CROSS_CHANNEL and friends).
  bool cross_channel = false;  // may post WAIT / SEND_ENABLE / RECV_ENABLE
  bool manage_send = false;    // SQ runs only up to the index a SEND_ENABLE sets
  bool manage_recv = false;    // RQ is consumable only up to a RECV_ENABLE index
  // Memory-node-only: LOCAL_INV of a type-2 MW bound to another QP of the PD
  // is allowed from this QP (the qpn check is skipped). Never for CN-facing
  // QPs of an untrusting design.
  bool invalidate_any_qp = false;
};

// Hardware-style per-QP counters (what a memory node may read, e.g. for
// OneSidedMW's budget monitor).
struct QpCounters {
  uint64_t send_wrs_executed = 0;  // SQ WQEs started
  uint64_t requests_served = 0;    // inbound requests this QP responded to
  uint64_t recvs_consumed = 0;
  uint64_t errors = 0;  // error completions + NAKs sent
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
};

struct QpAttr {
  uint32_t dest_node = 0;    // RTR: the remote node's id
  uint32_t dest_qp_num = 0;  // RTR: the remote QP's number
};

class Qp {
 public:
  virtual ~Qp() = default;
  virtual uint32_t qp_num() const = 0;
  // The state as this process knows it: set by Modify, by an error
  // completion of this QP, by an asynchronous QP error. Cheap (data path).
  virtual QpState state() const = 0;
  // Asks the device (ibv_query_qp: a firmware command on ConnectX, so never
  // on the data path). Catches a responder QP the device moved to ERR
  // without any completion here. The sim knows exactly: same as state().
  virtual QpState QueryState() { return state(); }
  virtual Pd* pd() const = 0;
  // The verbs state machine: RESET->INIT->RTR->RTS, INIT->INIT, RTS->RTS,
  // any->RESET, any but RESET->ERR (hardware refuses RESET->ERR).
  // Throws VerbsError(EINVAL) naming both states on an illegal transition.
  // Moving to ERR flushes every outstanding WR with kWrFlushErr.
  virtual void Modify(QpState target, const QpAttr& attr = {}) = 0;

  // Posts one WQE (written into the SQ in node memory) and rings the doorbell.
  // Returns 0 or an errno (ENOMEM: SQ full; EINVAL: bad WR or QP state).
  // *wqe_index receives the WQE's absolute index.
  virtual int PostSend(const SendWr& wr, uint64_t* wqe_index = nullptr) = 0;
  virtual int PostRecv(const RecvWr& wr, uint64_t* wqe_index = nullptr) = 0;
  // ibv_bind_mw for a type-1 MW: posts a bind WQE; the completion carries
  // wr_id. The MW's rkey changes to new_rkey when the bind executes.
  virtual int BindMw(Mw* mw, uint64_t wr_id, Mr* mr, uint64_t addr, uint64_t length,
                     uint32_t access, uint32_t new_rkey, uint8_t flags = kSignaled) = 0;

  // Absolute index the next PostSend/PostRecv will use.
  virtual uint64_t next_send_index() const = 0;
  virtual uint64_t next_recv_index() const = 0;
  // Where WQE `index` (absolute, wraps modulo the ring) lives in node memory,
  // and the lkey that lets local WRs (RECV scatter, READ) write there.
  virtual uint64_t SendWqeAddr(uint64_t index) const = 0;
  virtual uint64_t RecvWqeAddr(uint64_t index) const = 0;
  virtual uint32_t wq_lkey() const = 0;
  virtual uint32_t send_wqe_stride() const = 0;
  virtual uint32_t recv_wqe_stride() const = 0;
  virtual uint32_t send_ring_size() const = 0;
  virtual uint32_t recv_ring_size() const = 0;
  // Address of the RQ doorbell record (big-endian u32: RECV WQEs posted).
  virtual uint64_t recv_doorbell_addr() const = 0;

  virtual const QpCounters& counters() const = 0;
};

}  // namespace dmb::fabric
