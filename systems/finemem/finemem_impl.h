// FineMem's implementation files share these: the lane control area's
// layout, access masks, the RPC id, and the names of finemem_layout.h.
// Internal to finemem*.cc (the using-declarations would leak anywhere else).
#pragma once

#include <cstdint>

#include "systems/finemem/finemem.h"

namespace dmb::systems {

using fabric::Opcode;
using fabric::WcStatus;
using finemem::BackupKey;
using finemem::Bitmap;
using finemem::CommitOp;
using finemem::Contention;
using finemem::FindRun;
using finemem::HintOf;
using finemem::KindOf;
using finemem::kMnUser;
using finemem::kNoUser;
using finemem::kRedoAlloc;
using finemem::kSpanContended;
using finemem::kSpanFree;
using finemem::kSpanFull;
using finemem::kSpanPartial;
using finemem::kSpansPerSection;
using finemem::kUnitBytes;
using finemem::kUnitsPerSpan;
using finemem::LogOf;
using finemem::MainKey;
using finemem::MakeCap;
using finemem::MetaLayout;
using finemem::NextContention;
using finemem::RedoForLog;
using finemem::RunMask;
using finemem::SpanState;
using finemem::StateOf;
using finemem::UserOf;
using finemem::WithHint;

// Landing and source slots in a lane's 256 B control area.
inline constexpr uint64_t kLandBlock = 0;    // 128 B: 16 section hints or 16 span headers
inline constexpr uint64_t kLandEntry = 128;  // 16 B: capability + redo entry
inline constexpr uint64_t kLandCas = 144;    // 8 B: CAS result
inline constexpr uint64_t kLandAux = 152;    // 8 B: a redo entry (eviction check)
inline constexpr uint64_t kLandAux2 = 160;   // 8 B: a span header
inline constexpr uint64_t kHintSrc = 192;    // 8 x 8 B: sources of unsignaled hint WRITEs
inline constexpr uint64_t kHintSlots = 8;
inline constexpr uint64_t kScratchSlots = 64;  // MN landing words for loopback CAS

inline constexpr uint32_t kMetaAccess =
    fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;
inline constexpr uint32_t kDataAccess =
    fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;
inline constexpr int kSettleAttempts = 4;
inline constexpr uint32_t kRpcRefillBackup = kRpcFirstCustom;

inline Capabilities FineMemCaps(const Knobs& k) {
  Capabilities c;
  c.granularity_bytes = k.Size("granularity");
  c.isolation = Isolation::kChunkRkey;
  c.mn_cpu_on_alloc = false;
  c.fixed_io_bytes = 0;
  return c;
}

}  // namespace dmb::systems
