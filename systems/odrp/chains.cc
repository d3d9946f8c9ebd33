// ODRP chains: kinds, geometry, re-arm values and request headers (chains.h);
// the MN's chains are in chains_mn.cc, the CN side in chains_cn.cc.
#include "systems/odrp/chains.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <stdexcept>
#include <string>

#include "fabric/wqe_layout.h"
#include "systems/common/chain_wr.h"
#include "systems/odrp/chains_impl.h"

namespace dmb::systems::odrp {

using fabric::Opcode;
using fabric::QpState;
using fabric::RecvWr;
using fabric::SendWr;
using fabric::Sge;
using fabric::WqeLayout;

namespace impl {

void Post(fabric::Qp* qp, const SendWr& wr, const char* what) {
  chain::PostOrThrow(qp, wr, "odrp chain", what);
}

SendWr AtomicRead(uint64_t src, uint32_t src_rkey, uint64_t dst, uint32_t dst_lkey) {
  SendWr w;
  w.opcode = Opcode::kFetchAndAdd;
  w.remote_addr = src;
  w.rkey = src_rkey;
  w.compare_add = 0;
  w.sg_list = {{dst, 8, dst_lkey}};
  return w;
}

const Stages& StagesOf(ChainKind kind) {
  static const Stages kLoadStages{{2}, {1}};                           // T, L1 | R0
  static const Stages kMappedStages{{2, 4}, {1, 3}};                   // T, M1 | M2, M3
  static const Stages kStoreStages{{7, 9, 16}, {4, 7, 11}};            // ..A2 | U4, CHK | U7..N
  static const Stages kInvalidateStages{{4, 5, 9, 16}, {2, 3, 7, 9}};  // ..V2 | V3 | ..V6 | V8, N
  switch (kind) {
    case ChainKind::kLoad:
      return kLoadStages;
    case ChainKind::kMappedStore:
      return kMappedStages;
    case ChainKind::kUnmappedStore:
      return kStoreStages;
    case ChainKind::kInvalidate:
      return kInvalidateStages;
  }
  throw std::logic_error("odrp chain: unknown kind");
}

std::vector<Target> RearmTargets(ChainKind kind) {
  const uint32_t c_values = 2 * static_cast<uint32_t>(StagesOf(kind).ends.size()) + 3;
  std::vector<Target> t;
  for (uint32_t i = 0; i < c_values; ++i) t.push_back({2, i});
  t.push_back({1, 1});
  return t;
}

}  // namespace impl

namespace {

void PutBe64(std::vector<uint8_t>* out, uint64_t v) {
  uint8_t b[8];
  fabric::StoreBe64(b, v);
  out->insert(out->end(), b, b + 8);
}
void PutBe32(std::vector<uint8_t>* out, uint32_t v) {
  uint8_t b[4];
  fabric::StoreBe32(b, v);
  out->insert(out->end(), b, b + 4);
}

}  // namespace

using impl::RearmTargets;
using impl::Stages;
using impl::StagesOf;

const char* ChainKindName(ChainKind k) {
  switch (k) {
    case ChainKind::kLoad:
      return "load";
    case ChainKind::kUnmappedStore:
      return "unmapped_store";
    case ChainKind::kMappedStore:
      return "mapped_store";
    case ChainKind::kInvalidate:
      return "invalidate";
  }
  return "?";
}

ChainGeometry ChainGeometry::For(ChainKind kind, uint32_t slots, uint32_t lanes) {
  if (slots < 4 || !std::has_single_bit(slots)) {
    throw std::invalid_argument(
        "odrp chain: slots must be a power of two >= 4 (the re-arm lag "
        "is lanes + 1), got " +
        std::to_string(slots));
  }
  if (lanes == 0 || slots % lanes != 0 || slots / lanes < 4 ||
      !std::has_single_bit(slots / lanes)) {
    throw std::invalid_argument("odrp chain: " + std::string(ChainKindName(kind)) + " with " +
                                std::to_string(lanes) + " lanes and " + std::to_string(slots) +
                                " slots (slots / lanes must be a power of two >= 4: the re-arm "
                                "lag is lanes + 1)");
  }
  ChainGeometry g;
  g.kind = kind;
  g.slots = slots;
  g.lanes = lanes;
  g.r_wrs = 2;  // R0 (reply), R1 (ENABLE C_w)
  switch (kind) {
    case ChainKind::kLoad:
      g.l_wrs = 2, g.c_wrs = 8;
      break;
    case ChainKind::kMappedStore:
      g.l_wrs = 4, g.c_wrs = 8;
      break;
    case ChainKind::kUnmappedStore:
    case ChainKind::kInvalidate:
      g.l_wrs = 16, g.c_wrs = 16;
      break;
  }
  return g;
}

uint32_t ChainGeometry::l_signaled() const { return StagesOf(kind).waits.back(); }

std::vector<uint64_t> RearmValues(ChainKind kind, uint64_t m, uint32_t lanes) {
  const ChainGeometry g = ChainGeometry::For(kind, 4 * lanes, lanes);
  const Stages& st = StagesOf(kind);
  const uint64_t j = m / lanes;       // the lane's instance
  std::vector<uint64_t> v = {m + 1};  // C0 WAIT rcq: request m landed
  for (size_t i = 0; i < st.ends.size(); ++i) {
    v.push_back(j * g.l_wrs + st.ends[i]);          // ENABLE L_w: the stage's steps
    v.push_back(j * g.l_signaled() + st.waits[i]);  // WAIT lcq_w: their results landed
  }
  v.push_back(m);                  // WAIT gcq: instances 0..m-1 enabled their R0
  v.push_back((m + 1) * g.r_wrs);  // ENABLE R0, R1 (signaled: gcq)
  v.push_back((j + 2) * g.c_wrs);  // R1 ENABLE C_w's next instance (request m + W)
  return v;
}

uint32_t DoorbellValue(const ChainGeometry& g, uint64_t n) {
  return static_cast<uint32_t>(std::max<uint64_t>(n + g.slots + 1 - g.rearm_lag(), g.slots));
}

uint32_t HeaderBytes(ChainKind kind) {
  const uint32_t rearm = static_cast<uint32_t>(RearmTargets(kind).size()) * 8;
  return 8 + 8 + 4 + 4 + rearm + 4;
}

std::vector<uint8_t> EncodeHeader(const ChainGeometry& g, uint64_t n, uint64_t tt_addr,
                                  uint64_t dst_addr, uint32_t dst_rkey,
                                  const std::vector<uint64_t>* rearm) {
  std::vector<uint8_t> out;
  PutBe64(&out, tt_addr);
  PutBe64(&out, dst_addr);
  PutBe32(&out, dst_rkey);
  PutBe32(&out, static_cast<uint32_t>(n));
  // n - lag + slots, without underflow (slots >= 4 x lanes > lag).
  const std::vector<uint64_t> honest =
      rearm == nullptr ? RearmValues(g.kind, n + g.slots - g.rearm_lag(), g.lanes)
                       : std::vector<uint64_t>();
  if (rearm != nullptr && rearm->size() != RearmTargets(g.kind).size()) {
    throw std::invalid_argument("odrp EncodeHeader: wrong number of re-arm values");
  }
  for (uint64_t v : rearm == nullptr ? honest : *rearm) PutBe64(&out, v);
  PutBe32(&out, DoorbellValue(g, n));
  return out;
}

}  // namespace dmb::systems::odrp
