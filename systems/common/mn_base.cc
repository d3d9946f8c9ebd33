#include "systems/common/mn_base.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dmb::systems {

using fabric::Opcode;
using fabric::WcStatus;

namespace {
constexpr uint64_t kMaxLanes = 8192;
constexpr uint64_t kLaneSlotBytes = MnBase::kRecvSlots * 2 * kRpcSlotBytes;
}  // namespace

MnBase::MnBase(const Deployment& d, const Knobs& knobs)
    : deployment_(d), knobs_(knobs), node_(d.mn) {
  cost_dispatch_ = node_->Cost("rpc.dispatch");
  cost_post_send_ = node_->Cost("verbs.post_send");
  cost_bookkeeping_ = node_->Cost("mn.bookkeeping");
  cost_wakeup_ = node_->Cost("mn.cq_wakeup");
}

MnBase::~MnBase() = default;

Task<void> MnBase::Start() {
  const CapsNeed need = Needs();
  fabric::RequireCaps(*node_, need.caps, need.who);
  pd_ = node_->AllocPd();
  pool_bytes_ = deployment_.pool_bytes;
  pool_addr_ = node_->memory().Alloc(pool_bytes_, 1ull << 21);
  recv_cq_ = node_->CreateCq(1u << 20);
  send_cq_ = node_->CreateCq(1u << 16, /*ignore_overrun=*/true);
  admin_cq_ = node_->CreateCq(1u << 16);
  const uint64_t arena_bytes = kMaxLanes * kLaneSlotBytes;
  const uint64_t arena = node_->memory().Alloc(arena_bytes, 4096);
  arena_next_ = arena;
  arena_mr_ = co_await node_->RegMr(pd_, arena, arena_bytes, fabric::kLocalWrite);
  // The admin QP: a loopback pair owned by the MN CPU. invalidate_any_qp lets
  // it retire type-2 windows bound to any lane (MN-only, never CN-facing).
  fabric::QpInitAttr a;
  a.pd = pd_;
  a.send_cq = admin_cq_;
  a.recv_cq = admin_cq_;
  a.max_send_wr = 4096;  // a full ring makes posters wait for room (AdminPost)
  a.invalidate_any_qp = true;
  admin_qp_ = node_->CreateQp(a);
  fabric::QpInitAttr peer = a;
  peer.send_cq = send_cq_;
  peer.recv_cq = send_cq_;
  peer.max_send_wr = 16;
  peer.invalidate_any_qp = false;
  fabric::Qp* admin_peer = node_->CreateQp(peer);
  deployment_.cluster->Connect(admin_qp_, admin_peer);
  co_await Setup();
  runtime().Spawn(AdminReaper());
  for (int i = 0; i < node_->cpu().cores(); ++i) runtime().Spawn(Worker());
}

fabric::Qp* MnBase::CreateLaneQp(uint32_t cn_index) {
  if (lanes_.size() >= kMaxLanes) {
    throw std::runtime_error("MN '" + node_->name() + "': more than " + std::to_string(kMaxLanes) +
                             " lanes; use fewer threads or lanes");
  }
  fabric::QpInitAttr a;
  a.pd = pd_;
  a.send_cq = send_cq_;
  a.recv_cq = recv_cq_;
  a.max_send_wr = 256;
  a.max_recv_wr = kRecvSlots;
  fabric::Qp* qp = node_->CreateQp(a);
  auto lane = std::make_unique<MnLane>();
  lane->cn_index = cn_index;
  lane->qp = qp;
  if (free_slots_.empty()) {
    lane->slots_addr = arena_next_;
    arena_next_ += kLaneSlotBytes;
  } else {
    lane->slots_addr = free_slots_.back();
    free_slots_.pop_back();
  }
  if (lane_by_qpn_.size() <= qp->qp_num()) lane_by_qpn_.resize(qp->qp_num() + 1, nullptr);
  lane_by_qpn_[qp->qp_num()] = lane.get();
  lanes_.push_back(std::move(lane));
  return qp;
}

void MnBase::PostSlot(MnLane& lane, uint32_t slot) {
  fabric::RecvWr r;
  r.wr_id = (static_cast<uint64_t>(lane.qp->qp_num()) << 8) | slot;
  r.sg_list = {{lane.slots_addr + slot * 2 * kRpcSlotBytes, kRpcSlotBytes, arena_mr_->lkey()}};
  lane.qp->PostRecv(r);  // fails only on a broken lane, which is abandoned
}

void MnBase::LaneConnected(uint32_t cn_index, fabric::Qp* mn_qp) {
  MnLane* lane = LaneOf(cn_index, mn_qp->qp_num());
  if (!lane) throw std::logic_error("LaneConnected: not a lane of this CN");
  for (uint32_t s = 0; s < kRecvSlots; ++s) PostSlot(*lane, s);
}

void MnBase::ReleaseLane(uint32_t cn_index, uint32_t mn_qpn) {
  MnLane* lane = LaneOf(cn_index, mn_qpn);
  if (!lane || lane->released) {
    throw std::invalid_argument("MN '" + node_->name() + "': QP " + std::to_string(mn_qpn) +
                                " is no lane of CN " + std::to_string(cn_index));
  }
  lane->released = true;
  if (lane->serving == 0) DestroyLane(lane);
}

// No completion comes of it (a destroyed QP's outstanding WRs are dropped);
// completions it delivered before are skipped by Worker.
void MnBase::DestroyLane(MnLane* lane) {
  const uint32_t qpn = lane->qp->qp_num();
  node_->DestroyQp(lane->qp);
  free_slots_.push_back(lane->slots_addr);
  lane_by_qpn_[qpn] = nullptr;
  std::erase_if(lanes_, [lane](const std::unique_ptr<MnLane>& l) { return l.get() == lane; });
}

Task<void> MnBase::ChargeQpSetup() {
  // create + INIT + RTR + RTS of the MN end.
  co_await node_->cpu().Work(node_->Cost("verbs.qp_modify"), 3);
}

MnLane* MnBase::LaneOf(uint32_t cn_index, uint32_t qpn) {
  if (qpn >= lane_by_qpn_.size() || !lane_by_qpn_[qpn]) return nullptr;
  MnLane* l = lane_by_qpn_[qpn];
  return l->cn_index == cn_index ? l : nullptr;
}

Task<fabric::WorkCompletion> MnBase::NextOrWake(fabric::Cq* cq) {
  fabric::WorkCompletion wc;
  if (cq->Poll({&wc, 1}) == 1) co_return wc;
  wc = co_await cq->Next();
  co_await node_->cpu().Work(cost_wakeup_);
  co_return wc;
}

Task<void> MnBase::Worker() {
  for (;;) {
    const fabric::WorkCompletion wc = co_await NextOrWake(recv_cq_);
    if (wc.status != WcStatus::kSuccess) continue;  // flushed RECV of a broken lane
    const uint32_t qpn = static_cast<uint32_t>(wc.wr_id >> 8);
    MnLane* lane = qpn < lane_by_qpn_.size() ? lane_by_qpn_[qpn] : nullptr;
    if (!lane || lane->released) continue;  // a request the CN gave up with its lane
    ++lane->serving;
    co_await Serve(*lane, wc);
    if (--lane->serving == 0 && lane->released) DestroyLane(lane);
  }
}

Task<void> MnBase::Serve(MnLane& lane, const fabric::WorkCompletion& wc) {
  auto& mem = node_->memory();
  const uint32_t slot = static_cast<uint32_t>(wc.wr_id & 0xff);
  co_await node_->cpu().Work(cost_dispatch_);
  const uint64_t req_addr = lane.slots_addr + slot * 2 * kRpcSlotBytes;
  RpcRequest req;
  mem.Read(req_addr, &req, sizeof(req));
  PostSlot(lane, slot);
  RpcReply reply;
  if (wc.byte_len != sizeof(RpcRequest) || req.lanes > kMaxGroupLanes) {
    reply.code = static_cast<uint32_t>(Code::kInvalidArgument);
    ++rpcs_rejected_;
  } else {
    co_await Handle(lane, req, reply);
    if (reply.code == static_cast<uint32_t>(Code::kNotOwner) ||
        reply.code == static_cast<uint32_t>(Code::kInvalidArgument)) {
      ++rpcs_rejected_;
    }
  }
  ++rpcs_served_;
  const uint64_t reply_addr = req_addr + kRpcSlotBytes;
  mem.Write(reply_addr, &reply, sizeof(reply));
  fabric::SendWr s;
  s.opcode = Opcode::kSend;
  s.flags = 0;  // unsignaled: errors still complete (and are only counted)
  s.sg_list = {{reply_addr, static_cast<uint32_t>(sizeof(RpcReply)), arena_mr_->lkey()}};
  lane.qp->PostSend(s);
  co_await PostCost();
}

Task<fabric::WorkCompletion> MnBase::AwaitAdmin(AdminWaiter* w, int post_rc) {
  if (post_rc != 0) {
    throw std::runtime_error("MN '" + node_->name() + "': admin QP post failed (errno " +
                             std::to_string(post_rc) + ")");
  }
  co_await PostCost();
  co_return co_await AdminAwaiter{w};
}

Task<fabric::WorkCompletion> MnBase::AdminExec(fabric::SendWr wr) {
  AdminWaiter w;
  wr.wr_id = reinterpret_cast<uint64_t>(&w);
  wr.flags |= fabric::kSignaled;
  int rc;
  while ((rc = admin_qp_->PostSend(wr)) == ENOMEM) co_await admin_room_.Wait();
  co_return co_await AwaitAdmin(&w, rc);
}

Task<fabric::WorkCompletion> MnBase::AdminBindType1(fabric::Mw* mw, fabric::Mr* mr, uint64_t addr,
                                                    uint64_t length, uint32_t access,
                                                    uint32_t new_rkey) {
  AdminWaiter w;
  int rc;
  while ((rc = admin_qp_->BindMw(mw, reinterpret_cast<uint64_t>(&w), mr, addr, length, access,
                                 new_rkey, fabric::kSignaled)) == ENOMEM) {
    co_await admin_room_.Wait();  // many MN cores outpace the admin QP: backpressure
  }
  co_return co_await AwaitAdmin(&w, rc);
}

Task<void> MnBase::AdminReaper() {
  for (;;) {
    // No wake-up charged: a real MN thread polls its admin CQ on its way
    // through the loop that serves requests, whose wake-ups are charged.
    const fabric::WorkCompletion wc = co_await admin_cq_->Next();
    auto* w = reinterpret_cast<AdminWaiter*>(wc.wr_id);
    w->wc = wc;
    w->done = true;
    if (w->h) w->h.resume();
    admin_room_.NotifyUntilOneParks();  // a ring slot is free again: who waited longest
  }
}

MnStats MnBase::stats() const {
  MnStats s;
  s.pool_bytes = pool_bytes_;
  s.chunks_total = chunks_total();
  s.chunks_in_use = chunks_in_use();
  s.rpcs_served = rpcs_served_;
  s.rpcs_rejected = rpcs_rejected_;
  return s;
}

}  // namespace dmb::systems
