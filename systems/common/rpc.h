// The RPC wire format shared by every approach that asks the MN CPU for
// something: fixed-size request and reply records carried by real SEND/RECV
// over a lane. Host byte order (both ends are little-endian x86/ARM hosts).
#pragma once

#include <cstdint>

namespace dmb::systems {

inline constexpr int kMaxGroupLanes = 16;
inline constexpr uint32_t kRpcSlotBytes = 128;

enum RpcOp : uint32_t {
  kRpcAlloc = 1,
  kRpcFree = 2,
  kRpcFirstCustom = 16,  // approach-specific ops start here
};

struct RpcRequest {
  uint32_t op = 0;
  uint32_t lanes = 0;  // entries used in lane_qpns
  uint64_t arg[4] = {};
  // MN-side QP numbers of the requesting group's lanes (type-2 binds).
  uint32_t lane_qpns[kMaxGroupLanes] = {};
};
static_assert(sizeof(RpcRequest) <= kRpcSlotBytes);

struct RpcReply {
  uint32_t code = 0;  // systems::Code
  uint32_t n_rkeys = 0;
  uint64_t addr = 0;
  uint64_t bytes = 0;
  uint64_t id = 0;
  uint64_t aux[2] = {};   // e.g. lease header address and expiry
  uint32_t aux_rkey = 0;  // e.g. the lease header's rkey
  uint32_t rkeys[kMaxGroupLanes] = {};
};
static_assert(sizeof(RpcReply) <= kRpcSlotBytes);

}  // namespace dmb::systems
