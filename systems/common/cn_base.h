// CnBase: what every approach's CN side shares.
//  - OpenGroup: a registered local buffer and `lanes` QPs connected to the MN
//    through MnControl;
//  - Call: one RPC over a lane (RECV for the reply, SEND of the request);
//  - Read/Write: one-sided READ/WRITE with the chunk's rkey for that lane,
//    after checking the range against the chunk and the group buffer;
//  - RecoverLane: a fresh QP pair (CPU work for the QP state changes on both
//    ends), or a pre-connected spare when `spare_qps` is set; the MN then
//    destroys the old MN end (MnControl::ReleaseLane, no virtual time: the
//    fabric charges no QP destroy). The CN keeps its old QP and CQ.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "systems/common/rpc.h"
#include "systems/memory_manager.h"

namespace dmb::systems {

class CnBase : public CnSide {
 public:
  CnBase(const Deployment& d, uint32_t cn_index, MnControl* mn, const Capabilities& caps);
  ~CnBase() override;

  const Capabilities& caps() const override { return caps_; }
  uint32_t cn_index() const override { return cn_index_; }
  fabric::Node* node() const override { return node_; }
  Task<AccessGroup*> OpenGroup(int lanes, uint64_t buffer_bytes) override;
  Task<Status> Read(Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                    uint64_t local_addr) override;
  Task<Status> Write(Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                     uint64_t local_addr) override;
  Task<Status> Extend(Lane& lane, Chunk& chunk) override;
  Task<Status> RecoverLane(Lane& lane) override;

 protected:
  // One RPC on `lane`. A broken lane or a failed exchange gives kLaneBroken.
  Task<Result<RpcReply>> Call(Lane& lane, const RpcRequest& req);
  // Posts one signaled WR on `lane` and awaits its completion (routed by
  // wr_id: other operations may be in flight on the lane meanwhile).
  Task<fabric::WorkCompletion> Exec(Lane& lane, fabric::SendWr wr);
  // Exec's post: `wr` signaled with the next wr_id; 0 or the post's error.
  int PostSignaled(Lane& lane, fabric::SendWr& wr);
  // The completion Exec gives a WR that could not be posted (WR_FLUSH_ERR).
  static fabric::WorkCompletion NotPosted();
  // A request carrying the group's MN-side QP numbers.
  static RpcRequest GroupRequest(AccessGroup& g, uint32_t op);
  // Chunk from an alloc reply (kOk) or the reply's Status.
  static Result<Chunk> ChunkFromReply(const Result<RpcReply>& r, const char* what);
  static Status StatusFromReply(const Result<RpcReply>& r, const char* what);
  // kOk, or why [offset, offset+length) / local_addr is not a valid I/O.
  Status CheckIo(const Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                 uint64_t local_addr) const;
  static Status FromWc(const fabric::WorkCompletion& wc, const char* what);
  // kLaneBroken for a lane whose QP is in ERR, saying how to go on.
  static Status LaneBroken();
  Task<Status> OneSided(fabric::Opcode op, Lane& lane, const Chunk& chunk, uint64_t offset,
                        uint32_t length, uint64_t local_addr);

  Deployment deployment_;
  uint32_t cn_index_;
  MnControl* mn_;
  Capabilities caps_;
  fabric::Node* node_;
  fabric::Pd* pd_ = nullptr;
  bool spare_qps_ = false;
  uint64_t wr_seq_ = 1;
  // OneSided's WR, filled and posted without suspending in between.
  fabric::SendWr io_wr_;

 private:
  struct QpPair {
    fabric::Qp* qp = nullptr;
    fabric::Cq* cq = nullptr;
    uint32_t mn_qpn = 0;
  };
  QpPair Connect();
  std::vector<std::unique_ptr<AccessGroup>> groups_;
  Task<void> MakeSpare(Lane* lane);
  std::unordered_map<Lane*, QpPair> spares_;  // spare_qps: one pre-connected pair per lane
};

// A CN side whose alloc and free are one RPC each (static_mr, fine_mr, rpc_mw).
class RpcCn : public CnBase {
 public:
  using CnBase::CnBase;
  Task<Result<Chunk>> Alloc(AccessGroup& g) override;
  Task<Status> Free(AccessGroup& g, const Chunk& c) override;
};

}  // namespace dmb::systems
