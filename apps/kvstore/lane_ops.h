// One-sided verbs the KV store posts on a lane itself, beyond CnSide's
// Read/Write: a batch of READs behind one doorbell (both candidate buckets of
// a key in one round trip, as RACE does) and an 8-byte CAS (slot commits).
//
// Contract: the caller owns the lane (one thread per group, nothing else
// outstanding on it). Work requests carry wr_ids with the top bit set, so
// they never match the ids CnBase uses for its own work on the same lane.
// Remote addresses are chunk.addr + offset with the chunk's rkey for the
// lane; bounds are checked against the chunk before posting. A refusal by
// the MN's RNIC gives kAccessDenied (and leaves the lane broken, as the
// hardware does); any other failed completion gives kLaneBroken.
#pragma once

#include <cstdint>
#include <vector>

#include "systems/memory_manager.h"

namespace dmb::apps::kv {

struct ReadOp {
  const systems::Chunk* chunk = nullptr;
  uint64_t offset = 0;
  uint32_t length = 0;
  uint64_t local_addr = 0;  // inside the lane's group buffer
};

// Posts every READ (all signaled, one after the other on the SQ) and awaits
// all their completions. kOk only if every READ succeeded.
Task<systems::Status> ReadMany(systems::Lane& lane, const std::vector<ReadOp>& ops);

// CMP_AND_SWP on the 8-byte aligned word at chunk offset `offset`: the old
// value lands at `local_addr` (8 bytes of the group buffer, in the CN's
// memory `local`) and is returned.
Task<systems::Result<uint64_t>> CompareAndSwap(systems::Lane& lane, const systems::Chunk& chunk,
                                               uint64_t offset, uint64_t compare, uint64_t swap,
                                               uint64_t local_addr, const fabric::Memory& local);

}  // namespace dmb::apps::kv
