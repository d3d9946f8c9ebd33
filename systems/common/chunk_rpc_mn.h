// ChunkRpcMn: an MN side that hands out fixed-size chunks of its pool by RPC
// and checks ownership on free. The approach supplies how a chunk is granted
// (returns the rkey the CN uses) and how it is revoked.
#pragma once

#include "systems/common/chunk_table.h"
#include "systems/common/mn_base.h"

namespace dmb::systems {

class ChunkRpcMn : public MnBase {
 public:
  using MnBase::MnBase;

  Task<ReclaimReport> ReclaimCn(uint32_t cn) override {
    ReclaimReport r;
    for (uint64_t i : table_.OwnedByCn(cn)) {
      table_.MarkPending(i);
      co_await Revoke(i);
      ++r.chunks_reclaimed;
    }
    co_return r;
  }

 protected:
  // Makes chunk `i` (just taken from the table) reachable; returns its rkey.
  virtual Task<uint32_t> Grant(uint64_t i) = 0;
  // Makes pending chunk `i` unreachable, then releases it to the table.
  virtual Task<void> Revoke(uint64_t i) = 0;
  // Called after the table is laid out (e.g. to pre-register).
  virtual Task<void> SetupChunks() { co_return; }

  Task<void> Setup() override {
    const uint64_t g = knobs_.Size("granularity");  // fits: SystemInfo::check_pool
    table_.Init(pool_addr_, g, pool_bytes_ / g);
    co_await SetupChunks();
  }

  Task<void> Handle(MnLane& lane, const RpcRequest& req, RpcReply& reply) override {
    co_await BookkeepingCost();
    if (req.op == kRpcAlloc) {
      auto i = table_.Take(lane.cn_index);
      if (!i) {
        reply.code = static_cast<uint32_t>(Code::kOutOfMemory);
        co_return;
      }
      reply.rkeys[0] = co_await Grant(*i);
      reply.n_rkeys = 1;
      reply.addr = table_.addr(*i);
      reply.bytes = table_.chunk_bytes();
      reply.id = *i;
    } else if (req.op == kRpcFree) {
      const uint64_t i = req.arg[0];
      if (!table_.OwnedBy(i, lane.cn_index)) {
        reply.code = static_cast<uint32_t>(Code::kNotOwner);
        co_return;
      }
      table_.MarkPending(i);
      co_await Revoke(i);
    } else {
      reply.code = static_cast<uint32_t>(Code::kInvalidArgument);
    }
  }

  uint64_t chunks_total() const override { return table_.count(); }
  uint64_t chunks_in_use() const override { return table_.in_use(); }

  ChunkTable table_;
};

}  // namespace dmb::systems
