// MnBase: what every approach's MN side shares.
//  - a PD, the pool of MN memory the approach manages, an admin loopback QP
//    (MN-internal: binds/invalidations the MN CPU posts and awaits);
//  - lanes: the MN end of every CN lane, with RECV slots for RPCs;
//  - the RPC service: `cores` worker coroutines (one per MN core) that take a
//    request from the shared receive CQ, declare the dispatch CPU cost, call
//    the approach's Handle(), and post the reply on the same QP. WRs the
//    handler posts on that QP before returning (e.g. a BIND_MW) execute before
//    the reply, by QP ordering, so the CN never sees an rkey that is not live.
// Costs (calibrated, see profile_cx5.cc): rpc.dispatch per request,
// verbs.post_send per WR the CPU posts, and mn.cq_wakeup each time an RPC
// worker that found its receive CQ empty and went to sleep is woken by a
// request (the papers' interrupt-driven notification path; 0 under the
// profile reading +mn_poll). A worker that finds requests waiting takes them
// without sleeping: a saturated core pays no wake-ups. The admin CQ's
// completions (binds, invalidations the MN CPU awaits) are charged none: one
// MN thread polls both CQs, and its wake-ups are the requests'.
#pragma once

#include <coroutine>
#include <cstdint>
#include <memory>
#include <vector>

#include "systems/common/rpc.h"
#include "systems/common/wait_list.h"
#include "systems/memory_manager.h"

namespace dmb::systems {

// ibv_inc_rkey: the next rkey of a window (only the low 8 bits change).
inline uint32_t NextRkey(uint32_t rkey) { return (rkey & ~0xffu) | ((rkey + 1) & 0xffu); }

struct MnLane {
  uint32_t cn_index = 0;
  fabric::Qp* qp = nullptr;
  uint64_t slots_addr = 0;  // kRecvSlots x (request slot, reply slot)
  uint32_t serving = 0;     // requests of it a worker is serving
  bool released = false;    // ReleaseLane: destroyed once serving is 0
};

class MnBase : public MnSide {
 public:
  MnBase(const Deployment& d, const Knobs& knobs);
  ~MnBase() override;

  Task<void> Start() override;
  fabric::Qp* CreateLaneQp(uint32_t cn_index) override;
  void LaneConnected(uint32_t cn_index, fabric::Qp* mn_qp) override;
  void ReleaseLane(uint32_t cn_index, uint32_t mn_qpn) override;
  Task<void> ChargeQpSetup() override;
  MnStats stats() const override;
  fabric::Node* node() const override { return node_; }

  static constexpr uint32_t kRecvSlots = 4;

 protected:
  // What the approach needs of the MN's RNIC, checked first thing in Start
  // (fails naming the missing capability, e.g. "mw_type2"); see DeviceCaps.
  struct CapsNeed {
    std::string who;  // e.g. "rpc_mw with mw_type=2"
    std::vector<std::string> caps;
  };
  virtual CapsNeed Needs() const { return {}; }
  // Approach setup (memory registration, MW pools, metadata).
  virtual Task<void> Setup() = 0;
  // Serves one request from `lane`; fills `reply`. Runs on an MN core.
  virtual Task<void> Handle(MnLane& lane, const RpcRequest& req, RpcReply& reply) = 0;
  virtual uint64_t chunks_total() const = 0;
  virtual uint64_t chunks_in_use() const = 0;

  // Is `qpn` the MN end of a lane of CN `cn_index`? (type-2 binds must only
  // name the requester's own QPs.)
  MnLane* LaneOf(uint32_t cn_index, uint32_t qpn);
  // Posts `wr` (signaled) on the admin QP and waits for its completion.
  Task<fabric::WorkCompletion> AdminExec(fabric::SendWr wr);
  // ibv_bind_mw of a type-1 window on the admin QP (length 0 unbinds).
  Task<fabric::WorkCompletion> AdminBindType1(fabric::Mw* mw, fabric::Mr* mr, uint64_t addr,
                                              uint64_t length, uint32_t access, uint32_t new_rkey);
  // Declares the CPU cost of posting one WR.
  auto PostCost() { return node_->cpu().Work(cost_post_send_); }
  // Declares the CPU cost of one free-list / owner-table update.
  auto BookkeepingCost() { return node_->cpu().Work(cost_bookkeeping_); }
  fabric::Runtime& runtime() { return deployment_.cluster->runtime(); }

  Deployment deployment_;
  Knobs knobs_;
  fabric::Node* node_;
  fabric::Pd* pd_ = nullptr;
  uint64_t pool_addr_ = 0;
  uint64_t pool_bytes_ = 0;
  fabric::Qp* admin_qp_ = nullptr;
  uint64_t rpcs_served_ = 0;
  uint64_t rpcs_rejected_ = 0;

 private:
  struct AdminWaiter {
    std::coroutine_handle<> h;
    fabric::WorkCompletion wc;
    bool done = false;
  };
  struct AdminAwaiter {
    AdminWaiter* w;
    bool await_ready() const noexcept { return w->done; }
    void await_suspend(std::coroutine_handle<> h) { w->h = h; }
    fabric::WorkCompletion await_resume() const { return w->wc; }
  };
  Task<fabric::WorkCompletion> AwaitAdmin(AdminWaiter* w, int post_rc);
  // The next completion of `cq`: taken at once if one is waiting, else after
  // sleeping until one arrives and paying mn.cq_wakeup.
  Task<fabric::WorkCompletion> NextOrWake(fabric::Cq* cq);
  Task<void> Worker();
  // Serves the request that completed `wc` on `lane` and posts the reply.
  Task<void> Serve(MnLane& lane, const fabric::WorkCompletion& wc);
  Task<void> AdminReaper();
  void PostSlot(MnLane& lane, uint32_t slot);
  // Destroys a released lane's QP; its slots go to free_slots_.
  void DestroyLane(MnLane* lane);

  fabric::Cq* recv_cq_ = nullptr;
  fabric::Cq* send_cq_ = nullptr;  // lanes' unsignaled SENDs (errors counted only)
  fabric::Cq* admin_cq_ = nullptr;
  WaitList admin_room_;             // posters waiting for a free admin send-ring slot
  fabric::Mr* arena_mr_ = nullptr;  // RPC slots of every lane
  uint64_t arena_next_ = 0;
  std::vector<uint64_t> free_slots_;  // arena slots of destroyed lanes
  std::vector<std::unique_ptr<MnLane>> lanes_;
  std::vector<MnLane*> lane_by_qpn_;
  fabric::CpuCost cost_dispatch_;
  fabric::CpuCost cost_post_send_;
  fabric::CpuCost cost_bookkeeping_;
  fabric::CpuCost cost_wakeup_;
};

}  // namespace dmb::systems
