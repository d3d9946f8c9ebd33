#include "systems/common/cn_base.h"

#include <cstring>
#include <string>

namespace dmb::systems {

using fabric::Opcode;
using fabric::WcStatus;

namespace {
constexpr uint64_t kCtrlBytes = 2 * kRpcSlotBytes;
}

CnBase::CnBase(const Deployment& d, uint32_t cn_index, MnControl* mn, const Capabilities& caps)
    : deployment_(d),
      cn_index_(cn_index),
      mn_(mn),
      caps_(caps),
      node_(d.cns.at(cn_index - d.cn_index_base)) {}

CnBase::~CnBase() = default;

CnBase::QpPair CnBase::Connect() {
  if (!pd_) pd_ = node_->AllocPd();
  QpPair p;
  p.cq = node_->CreateCq(1024);
  fabric::QpInitAttr a;
  a.pd = pd_;
  a.send_cq = p.cq;
  a.recv_cq = p.cq;
  a.max_send_wr = 256;
  a.max_recv_wr = 16;
  a.max_send_sge = 4;
  p.qp = node_->CreateQp(a);
  fabric::Qp* mn_qp = mn_->CreateLaneQp(cn_index_);
  deployment_.cluster->Connect(p.qp, mn_qp);
  mn_->LaneConnected(cn_index_, mn_qp);
  p.mn_qpn = mn_qp->qp_num();
  return p;
}

Task<AccessGroup*> CnBase::OpenGroup(int lanes, uint64_t buffer_bytes) {
  if (lanes < 1 || lanes > caps_.max_group_lanes) {
    throw ConfigError("an access group needs 1.." + std::to_string(caps_.max_group_lanes) +
                      " lanes for this approach, asked for " + std::to_string(lanes));
  }
  if (!pd_) pd_ = node_->AllocPd();
  const uint64_t total = lanes * kCtrlBytes + buffer_bytes;
  const uint64_t base = node_->memory().Alloc(total, 4096);
  fabric::Mr* mr = co_await node_->RegMr(
      pd_, base, total, fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite);
  auto g = std::make_unique<AccessGroup>(cn_index_, mr, base + lanes * kCtrlBytes, buffer_bytes);
  for (int i = 0; i < lanes; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->group = g.get();
    lane->index = static_cast<size_t>(i);
    const QpPair p = Connect();
    lane->qp = p.qp;
    lane->cq = p.cq;
    lane->mn_qpn = p.mn_qpn;
    lane->ctrl_addr = base + i * kCtrlBytes;
    Lane* raw = lane.get();
    g->AddLane(std::move(lane));
    if (spare_qps_) spares_[raw] = Connect();
  }
  groups_.push_back(std::move(g));
  co_return groups_.back().get();
}

Task<void> CnBase::MakeSpare(Lane* lane) {
  co_await node_->cpu().Work(node_->Cost("verbs.qp_modify"), 3);
  co_await mn_->ChargeQpSetup();
  spares_[lane] = Connect();
}

Task<Status> CnBase::RecoverLane(Lane& lane) {
  if (!lane.broken()) co_return Status::Ok();
  const uint32_t old_mn_qpn = lane.mn_qpn;
  auto it = spares_.find(&lane);
  if (spare_qps_ && it != spares_.end() && it->second.qp) {
    // Promote the pre-connected spare; rebuild a new spare off the critical path.
    lane.qp = it->second.qp;
    lane.cq = it->second.cq;
    lane.mn_qpn = it->second.mn_qpn;
    it->second = {};
    deployment_.cluster->runtime().Spawn(MakeSpare(&lane));
  } else {
    // create + INIT + RTR + RTS on both ends, then connect.
    co_await node_->cpu().Work(node_->Cost("verbs.qp_modify"), 3);
    co_await mn_->ChargeQpSetup();
    const QpPair p = Connect();
    lane.qp = p.qp;
    lane.cq = p.cq;
    lane.mn_qpn = p.mn_qpn;
  }
  // The MN gives the old end back. This CN keeps its own old QP and CQ: a
  // request of the lane may still await its flushed completion there.
  mn_->ReleaseLane(cn_index_, old_mn_qpn);
  ++lane.recoveries;
  co_return Status::Ok();
}

int CnBase::PostSignaled(Lane& lane, fabric::SendWr& wr) {
  wr.wr_id = wr_seq_++;
  wr.flags |= fabric::kSignaled;
  return lane.qp->PostSend(wr);
}

fabric::WorkCompletion CnBase::NotPosted() {
  fabric::WorkCompletion wc;
  wc.status = WcStatus::kWrFlushErr;
  return wc;
}

Task<fabric::WorkCompletion> CnBase::Exec(Lane& lane, fabric::SendWr wr) {
  if (PostSignaled(lane, wr) != 0) co_return NotPosted();
  co_return co_await lane.cq->NextFor(wr.wr_id);
}

Task<Result<RpcReply>> CnBase::Call(Lane& lane, const RpcRequest& req) {
  Result<RpcReply> out;
  if (lane.broken()) {
    out.status = LaneBroken();
    co_return out;
  }
  auto& mem = node_->memory();
  mem.Write(lane.ctrl_addr, &req, sizeof(req));
  const uint32_t lkey = lane.group->lkey();
  fabric::RecvWr r;
  r.wr_id = wr_seq_++;
  r.sg_list = {{lane.ctrl_addr + kRpcSlotBytes, kRpcSlotBytes, lkey}};
  fabric::SendWr s;
  s.wr_id = wr_seq_++;
  s.opcode = Opcode::kSend;
  s.flags = 0;
  s.sg_list = {{lane.ctrl_addr, static_cast<uint32_t>(sizeof(req)), lkey}};
  if (lane.qp->PostRecv(r) != 0 || lane.qp->PostSend(s) != 0) {
    out.status = Status(Code::kLaneBroken, "cannot post the RPC on the lane");
    co_return out;
  }
  // The reply's RECV completion (the unsignaled SEND's error completion, if
  // any, stays queued: the lane is broken then and gets a new CQ).
  const fabric::WorkCompletion wc = co_await lane.cq->NextFor(r.wr_id);
  if (wc.status != WcStatus::kSuccess) {
    out.status = Status(Code::kLaneBroken,
                        std::string("RPC failed: ") + std::string(fabric::WcStatusName(wc.status)));
    co_return out;
  }
  mem.Read(lane.ctrl_addr + kRpcSlotBytes, &out.value, sizeof(RpcReply));
  co_return out;
}

RpcRequest CnBase::GroupRequest(AccessGroup& g, uint32_t op) {
  RpcRequest req;
  req.op = op;
  req.lanes = static_cast<uint32_t>(g.size());
  for (size_t i = 0; i < g.size(); ++i) req.lane_qpns[i] = g.lane(i).mn_qpn;
  return req;
}

Status CnBase::StatusFromReply(const Result<RpcReply>& r, const char* what) {
  if (!r.ok()) return r.status;
  const auto code = static_cast<Code>(r.value.code);
  if (code == Code::kOk) return Status::Ok();
  if (code == Code::kUnsupported) {
    return Status(code, std::string(what) +
                            " refused by the MN: its RDMA device cannot do what this request "
                            "needs (a type-2 window per lane of a multi-lane group needs "
                            "qpn_in_bind; see `dmbench devices`)");
  }
  return Status(code, std::string(what) + " refused by the MN");
}

Result<Chunk> CnBase::ChunkFromReply(const Result<RpcReply>& r, const char* what) {
  Result<Chunk> out;
  out.status = StatusFromReply(r, what);
  if (!out.ok()) return out;
  out.value.addr = r.value.addr;
  out.value.bytes = r.value.bytes;
  out.value.id = r.value.id;
  const uint32_t n = std::min<uint32_t>(std::max<uint32_t>(1, r.value.n_rkeys), kMaxGroupLanes);
  out.value.rkeys.assign(r.value.rkeys, r.value.rkeys + n);
  out.value.lease.header_addr = r.value.aux[0];
  out.value.lease.expires_us = r.value.aux[1];
  out.value.lease.header_rkey = r.value.aux_rkey;
  return out;
}

Status CnBase::CheckIo(const Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                       uint64_t local_addr) const {
  if (caps_.fixed_io_bytes != 0 &&
      (length != caps_.fixed_io_bytes || offset % caps_.fixed_io_bytes != 0)) {
    return Status(Code::kUnsupported,
                  "this approach does only " + std::to_string(caps_.fixed_io_bytes) +
                      " B I/O at offsets that are multiples of it; asked for " +
                      std::to_string(length) + " B at +" + std::to_string(offset));
  }
  if (length == 0 || offset >= chunk.bytes || length > chunk.bytes - offset) {
    return Status(Code::kInvalidArgument, std::to_string(length) + " B at +" +
                                              std::to_string(offset) + " is outside the " +
                                              std::to_string(chunk.bytes) + " B chunk");
  }
  const AccessGroup& g = *lane.group;
  if (local_addr < g.buffer_addr() || local_addr + length > g.buffer_addr() + g.buffer_bytes()) {
    return Status(Code::kInvalidArgument, "local buffer [" + std::to_string(local_addr) + ", +" +
                                              std::to_string(length) +
                                              ") is outside the group's registered buffer");
  }
  return Status::Ok();
}

Status CnBase::FromWc(const fabric::WorkCompletion& wc, const char* what) {
  switch (wc.status) {
    case WcStatus::kSuccess:
      return Status::Ok();
    case WcStatus::kRemAccessErr:
      return Status(Code::kAccessDenied, std::string(what) + " refused by the MN's RNIC (" +
                                             std::string(fabric::WcStatusName(wc.status)) + ")");
    default:
      return Status(Code::kLaneBroken, std::string(what) + " failed (" +
                                           std::string(fabric::WcStatusName(wc.status)) + ")");
  }
}

Status CnBase::LaneBroken() {
  return Status(Code::kLaneBroken, "lane QP is in the error state; RecoverLane first");
}

Task<Status> CnBase::OneSided(Opcode op, Lane& lane, const Chunk& chunk, uint64_t offset,
                              uint32_t length, uint64_t local_addr) {
  Status st = CheckIo(lane, chunk, offset, length, local_addr);
  if (!st.ok()) co_return st;
  if (lane.broken()) {
    co_return LaneBroken();
  }
  // The shared scratch WR (posting copies it; no suspension before that):
  // its sg_list keeps its capacity, so the hot path allocates nothing.
  fabric::SendWr& wr = io_wr_;
  wr.opcode = op;
  wr.flags = fabric::kSignaled;
  wr.sg_list.resize(1);
  wr.sg_list[0] = {local_addr, length, lane.group->lkey()};
  wr.remote_addr = chunk.addr + offset;
  wr.rkey = chunk.RkeyForLane(lane.index);
  // Exec's steps inline: the hot path of every READ/WRITE saves a coroutine frame.
  const char* what = op == Opcode::kRead ? "READ" : "WRITE";
  if (PostSignaled(lane, wr) != 0) co_return FromWc(NotPosted(), what);
  const uint64_t wr_id = wr.wr_id;
  const fabric::WorkCompletion wc = co_await lane.cq->NextFor(wr_id);
  if (wc.status == WcStatus::kSuccess) co_return Status::Ok();  // the common case, no call
  co_return FromWc(wc, what);
}

Task<Status> CnBase::Read(Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                          uint64_t local_addr) {
  return OneSided(Opcode::kRead, lane, chunk, offset, length, local_addr);
}

Task<Status> CnBase::Write(Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                           uint64_t local_addr) {
  return OneSided(Opcode::kWrite, lane, chunk, offset, length, local_addr);
}

Task<Status> CnBase::Extend(Lane&, Chunk&) {
  co_return Status(Code::kUnsupported, "this approach has no leases to extend");
}

Task<Result<Chunk>> RpcCn::Alloc(AccessGroup& g) {
  co_return ChunkFromReply(co_await Call(g.lane(0), GroupRequest(g, kRpcAlloc)), "alloc");
}

Task<Status> RpcCn::Free(AccessGroup& g, const Chunk& c) {
  RpcRequest req = GroupRequest(g, kRpcFree);
  req.arg[0] = c.id;
  co_return StatusFromReply(co_await Call(g.lane(0), req), "free");
}

}  // namespace dmb::systems
