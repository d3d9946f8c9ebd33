#include "apps/kvstore/lane_ops.h"

#include <string>

namespace dmb::apps::kv {

using systems::Code;
using systems::Status;

namespace {

constexpr uint64_t kWrIdTag = 1ull << 63;
uint64_t next_wr_id = 1;

Status CheckRange(const systems::Lane& lane, const systems::Chunk& chunk, uint64_t offset,
                  uint32_t length, uint64_t local_addr, const char* what) {
  if (length == 0 || offset >= chunk.bytes || length > chunk.bytes - offset) {
    return Status(Code::kInvalidArgument, std::string(what) + " of " + std::to_string(length) +
                                              " B at +" + std::to_string(offset) +
                                              " is outside the " + std::to_string(chunk.bytes) +
                                              " B chunk");
  }
  const systems::AccessGroup& g = *lane.group;
  if (local_addr < g.buffer_addr() || local_addr + length > g.buffer_addr() + g.buffer_bytes()) {
    return Status(Code::kInvalidArgument,
                  std::string(what) + ": local buffer is outside the group's registered buffer");
  }
  return Status::Ok();
}

Status FromWc(const fabric::WorkCompletion& wc, const char* what) {
  if (wc.status == fabric::WcStatus::kSuccess) return Status::Ok();
  const Code code =
      wc.status == fabric::WcStatus::kRemAccessErr ? Code::kAccessDenied : Code::kLaneBroken;
  return Status(
      code, std::string(what) + " failed (" + std::string(fabric::WcStatusName(wc.status)) + ")");
}

Status Broken() {
  return Status(Code::kLaneBroken, "lane QP is in the error state; RecoverLane first");
}

// Awaits the completions of `ids` (in posting order, as an RC SQ delivers
// them); the first failure is the result.
Task<Status> AwaitAll(systems::Lane& lane, std::vector<uint64_t> ids, const char* what) {
  Status first;
  size_t next = 0;
  while (next < ids.size()) {
    const fabric::WorkCompletion wc = co_await lane.cq->Next();
    if (wc.wr_id != ids[next]) continue;  // someone else's (unsignaled) error completion
    ++next;
    Status st = FromWc(wc, what);
    if (first.ok() && !st.ok()) first = st;
  }
  co_return first;
}

}  // namespace

Task<Status> ReadMany(systems::Lane& lane, const std::vector<ReadOp>& ops) {
  for (const ReadOp& op : ops) {
    Status st = CheckRange(lane, *op.chunk, op.offset, op.length, op.local_addr, "READ");
    if (!st.ok()) co_return st;
  }
  if (lane.broken()) co_return Broken();
  std::vector<uint64_t> ids;
  Status post_error;
  for (const ReadOp& op : ops) {
    fabric::SendWr wr;
    wr.wr_id = kWrIdTag | next_wr_id++;
    wr.opcode = fabric::Opcode::kRead;
    wr.flags = fabric::kSignaled;
    wr.sg_list = {{op.local_addr, op.length, lane.group->lkey()}};
    wr.remote_addr = op.chunk->addr + op.offset;
    wr.rkey = op.chunk->RkeyForLane(lane.index);
    if (lane.qp->PostSend(wr) != 0) {
      post_error = Status(Code::kLaneBroken, "cannot post a READ on the lane");
      break;
    }
    ids.push_back(wr.wr_id);
  }
  Status st = co_await AwaitAll(lane, std::move(ids), "READ");
  co_return st.ok() ? post_error : st;
}

Task<systems::Result<uint64_t>> CompareAndSwap(systems::Lane& lane, const systems::Chunk& chunk,
                                               uint64_t offset, uint64_t compare, uint64_t swap,
                                               uint64_t local_addr, const fabric::Memory& local) {
  systems::Result<uint64_t> out;
  if (offset % 8 != 0) {
    out.status = Status(Code::kInvalidArgument,
                        "CAS needs an 8-byte aligned offset, got +" + std::to_string(offset));
    co_return out;
  }
  out.status = CheckRange(lane, chunk, offset, 8, local_addr, "CAS");
  if (!out.ok()) co_return out;
  if (lane.broken()) {
    out.status = Broken();
    co_return out;
  }
  fabric::SendWr wr;
  wr.wr_id = kWrIdTag | next_wr_id++;
  wr.opcode = fabric::Opcode::kCmpAndSwp;
  wr.flags = fabric::kSignaled;
  wr.sg_list = {{local_addr, 8, lane.group->lkey()}};
  wr.remote_addr = chunk.addr + offset;
  wr.rkey = chunk.RkeyForLane(lane.index);
  wr.compare_add = compare;
  wr.swap = swap;
  if (lane.qp->PostSend(wr) != 0) {
    out.status = Status(Code::kLaneBroken, "cannot post a CAS on the lane");
    co_return out;
  }
  std::vector<uint64_t> ids(1, wr.wr_id);  // (a braced list inside co_await trips GCC)
  out.status = co_await AwaitAll(lane, std::move(ids), "CAS");
  if (out.ok()) out.value = local.LoadU64(local_addr);
  co_return out;
}

}  // namespace dmb::apps::kv
