// Shared by chains.cc (geometry, re-arm values, headers), chains_mn.cc (the
// MN's chains) and chains_cn.cc (the CN side); internal to them.
#pragma once

#include <cstdint>
#include <vector>

#include "systems/odrp/chains.h"

namespace dmb::systems::odrp::impl {

// Posts `wr` on a chain QP; throws naming the chain and `what` if refused.
void Post(fabric::Qp* qp, const fabric::SendWr& wr, const char* what);

// READ of an 8-byte entry as FETCH_ADD 0: the same bytes land at `dst` (the
// RNIC returns the word as it is in memory), the entry is unchanged, and an
// address that is not 8-byte aligned fails (REM_INV_REQ) instead of reading
// across two entries ([ODRP] §4.5.2 "misaligned tt_addr").
fabric::SendWr AtomicRead(uint64_t src, uint32_t src_rkey, uint64_t dst, uint32_t dst_lkey);

// Where RearmValues land: (role, WQE within the instance); always operand0
// (the WAIT count or the ENABLE index). Role: 0 = L, 1 = R, 2 = C.
struct Target {
  uint8_t role;
  uint32_t wqe;
};

// C_w's stages of each kind (chains.h "Pipelining"): stage i enables L_w up
// to WQE ends[i] of the instance, then waits until the lane's lcq_w counts
// waits[i] of the instance's signaled L completions (waits.back(): all).
struct Stages {
  std::vector<uint32_t> ends;
  std::vector<uint32_t> waits;
};
const Stages& StagesOf(ChainKind kind);

// C0 (WAIT rcq), each stage's ENABLE and WAIT, the WAIT on gcq and the
// ENABLE of R (C_w), then R1 (ENABLE C_w's next instance).
std::vector<Target> RearmTargets(ChainKind kind);

}  // namespace dmb::systems::odrp::impl
