// FineMem's metadata in MN memory: where each word lives and the bit layout
// of every 64-bit word that CNs and the MN update with RDMA atomics.
// [FM] §4 (docs/references.md).
//
// Address space. The pool is cut into 4 KB units; a span is 32 units
// (128 KB) and a section 16 spans (2 MB). A chunk is `granularity` bytes =
// 2^k units (k = 0..5), naturally aligned: chunk c covers units
// [c * 2^k, (c + 1) * 2^k). Units past the last whole chunk are "reserved":
// set in their span's bitmap from the start and never handed out.
//
// Metadata region (one MR; remote read/write/atomic through the metadata rkey,
// which only the per-CN trusted allocation service holds; applications only
// ever see chunk rkeys):
//   [section headers  sections x 8 B]
//   [span headers     sections x 16 x 8 B]  (a section's 16 spans contiguous:
//                                            one 128 B READ loads them all)
//   [chunk entries    chunks x 16 B]        (+0 capability, +8 redo log; one
//                                            16 B READ fetches both)
//
// Span header: the commit point of every allocation and free (RDMA CAS only).
//   bits  0..31  bitmap: bit u set = unit u in use
//   bits 32..33  contention level of the last committing allocation:
//                0 normal (< kLowRetries failed CAS), 1 warm, 2 contended
//                (>= kHighRetries); once 2 it drops only below kLowRetries
//   bits 34..38  temporary log: first unit of the last op's chunk
//   bits 39..41  temporary log: log2(units) of that chunk
//   bits 42..48  temporary log: timestamp (7 bits)
//   bits 49..62  temporary log: user id (14 bits; kNoUser = no op yet)
//   bit  63      reserved, 0
// The last op was an allocation iff its chunk's bits are set in the bitmap.
// The timestamp advances (mod 128) when an op's kind differs from the last
// op's kind, so two consecutive ops on one chunk never share a timestamp.
//
// Section header: a search hint (optimistic RDMA WRITE of the whole word,
// repaired when a CN loads the section's span headers and finds it stale).
//   bits 2j..2j+1  span j: 00 free, 01 partial, 10 contended, 11 full
//   bits 32..63    reserved, 0 (FineMem keeps a section-level temporary log
//                  here for >= 128 KB allocations; this implementation commits
//                  every allocation, 128 KB included, on a span header)
//
// Capability entry: bits 0..31 main rkey, bits 32..63 backup rkey.
//   (M, B)  M is (or will be) the holder's key, B is pre-bound for the next
//           free; (M, 0) the backup is pending regeneration by the MN. rkeys
//           are never 0 (key index 0 is invalid), so 0 marks "pending".
//
// Redo entry: bits 0..1 kind (0 never used, 1 alloc, 2 free), bits 2..8
// timestamp, bits 9..22 user id, bits 23..63 reserved.
//
// Users: kNoUser (0), CN i is i + 1, the MN (recovery) is kMnUser.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <type_traits>

namespace dmb::systems::finemem {

inline constexpr uint64_t kUnitBytes = 4096;
inline constexpr uint32_t kUnitsPerSpan = 32;
inline constexpr uint64_t kSpanBytes = kUnitBytes * kUnitsPerSpan;  // 128 KB
inline constexpr uint32_t kSpansPerSection = 16;
inline constexpr uint64_t kEntryBytes = 16;

// Contention control thresholds ([FM] §4.1: "e.g. 10" and "e.g. 3").
inline constexpr uint32_t kHighRetries = 10;
inline constexpr uint32_t kLowRetries = 3;

inline constexpr uint32_t kNoUser = 0;
inline constexpr uint32_t kMnUser = 0x3fff;
inline constexpr uint32_t UserOfCn(uint32_t cn) { return cn + 1; }

enum SpanState : uint32_t { kSpanFree = 0, kSpanPartial = 1, kSpanContended = 2, kSpanFull = 3 };
enum RedoKind : uint32_t { kRedoNone = 0, kRedoAlloc = 1, kRedoFree = 2 };

// ---- Span header -----------------------------------------------------------

struct TempLog {
  uint32_t unit = 0;       // 5 bits
  uint32_t size_log2 = 0;  // 3 bits
  uint32_t ts = 0;         // 7 bits
  uint32_t user = 0;       // 14 bits
};

inline constexpr uint32_t Bitmap(uint64_t h) { return static_cast<uint32_t>(h); }
inline constexpr uint32_t Contention(uint64_t h) { return (h >> 32) & 0x3; }
// The 29 temporary-log bits as one value (for "have I seen this log?").
inline constexpr uint32_t LogBits(uint64_t h) { return (h >> 34) & ((1u << 29) - 1); }
inline constexpr TempLog LogOf(uint64_t h) {
  return {static_cast<uint32_t>((h >> 34) & 0x1f), static_cast<uint32_t>((h >> 39) & 0x7),
          static_cast<uint32_t>((h >> 42) & 0x7f), static_cast<uint32_t>((h >> 49) & 0x3fff)};
}
inline constexpr uint64_t MakeSpanHeader(uint32_t bitmap, uint32_t contention, const TempLog& l) {
  return uint64_t{bitmap} | uint64_t{contention & 0x3} << 32 | uint64_t{l.unit & 0x1f} << 34 |
         uint64_t{l.size_log2 & 0x7} << 39 | uint64_t{l.ts & 0x7f} << 42 |
         uint64_t{l.user & 0x3fff} << 49;
}
// Bits of the 2^size_log2 units starting at `unit`.
inline constexpr uint32_t RunMask(uint32_t unit, uint32_t size_log2) {
  const uint64_t n = uint64_t{1} << size_log2;
  return static_cast<uint32_t>(((uint64_t{1} << n) - 1) << unit);
}
inline constexpr bool LastOpWasAlloc(uint64_t h) {
  const TempLog l = LogOf(h);
  const uint32_t m = RunMask(l.unit, l.size_log2);
  return (Bitmap(h) & m) == m;
}
// First free naturally aligned run of 2^size_log2 units in `bitmap`.
inline std::optional<uint32_t> FindRun(uint32_t bitmap, uint32_t size_log2) {
  const uint32_t n = 1u << size_log2;
  for (uint32_t u = 0; u < kUnitsPerSpan; u += n) {
    if ((bitmap & RunMask(u, size_log2)) == 0) return u;
  }
  return std::nullopt;
}
// Contention level to write with a successful CAS after `failures` failed
// ones on this span ([FM] §4.1 back-pressure with two thresholds).
inline constexpr uint32_t NextContention(uint32_t prev, uint32_t failures) {
  if (failures >= kHighRetries) return 2;
  if (failures < kLowRetries) return 0;
  return prev == 2 ? 2 : 1;
}
// The header after allocating (alloc) or freeing the run at `unit` by `user`,
// with the temporary log and the timestamp rule applied.
inline constexpr uint64_t CommitOp(uint64_t h, uint32_t unit, uint32_t size_log2, bool alloc,
                                   uint32_t user, uint32_t contention) {
  const TempLog prev = LogOf(h);
  uint32_t ts = prev.ts;
  if (prev.user != kNoUser && LastOpWasAlloc(h) != alloc) ts = (ts + 1) & 0x7f;
  const uint32_t m = RunMask(unit, size_log2);
  const uint32_t bitmap = alloc ? (Bitmap(h) | m) : (Bitmap(h) & ~m);
  return MakeSpanHeader(bitmap, contention, {unit, size_log2, ts, user});
}
inline constexpr SpanState StateOf(uint64_t h) {
  if (Bitmap(h) == 0) return kSpanFree;
  if (Bitmap(h) == 0xffffffffu) return kSpanFull;
  return Contention(h) == 2 ? kSpanContended : kSpanPartial;
}

// ---- Section header --------------------------------------------------------

inline constexpr SpanState HintOf(uint64_t section, uint32_t j) {
  return static_cast<SpanState>((section >> (2 * j)) & 0x3);
}
inline constexpr uint64_t WithHint(uint64_t section, uint32_t j, SpanState s) {
  return (section & ~(uint64_t{3} << (2 * j))) | uint64_t{s} << (2 * j);
}

// ---- Capability and redo entries -------------------------------------------

inline constexpr uint32_t MainKey(uint64_t cap) { return static_cast<uint32_t>(cap); }
inline constexpr uint32_t BackupKey(uint64_t cap) { return static_cast<uint32_t>(cap >> 32); }
inline constexpr uint64_t MakeCap(uint32_t main, uint32_t backup) {
  return uint64_t{main} | uint64_t{backup} << 32;
}

inline constexpr uint64_t MakeRedo(RedoKind kind, uint32_t ts, uint32_t user) {
  return uint64_t{kind} | uint64_t{ts & 0x7f} << 2 | uint64_t{user & 0x3fff} << 9;
}
inline constexpr RedoKind KindOf(uint64_t redo) { return static_cast<RedoKind>(redo & 0x3); }
inline constexpr uint32_t TsOf(uint64_t redo) { return (redo >> 2) & 0x7f; }
inline constexpr uint32_t UserOf(uint64_t redo) { return (redo >> 9) & 0x3fff; }
// The redo record that span header `h`'s temporary log stands for.
inline constexpr uint64_t RedoForLog(uint64_t h) {
  const TempLog l = LogOf(h);
  return MakeRedo(LastOpWasAlloc(h) ? kRedoAlloc : kRedoFree, l.ts, l.user);
}

// ---- Where things are --------------------------------------------------------

struct MetaLayout {
  uint64_t pool_addr = 0;
  uint64_t chunk_bytes = 0;
  uint32_t size_log2 = 0;  // log2(units per chunk)
  uint64_t chunks = 0;
  uint64_t spans = 0;     // spans that hold at least one unit of the pool
  uint64_t sections = 0;  // sections * 16 span headers exist (extra spans are full)
  uint64_t meta_addr = 0;
  uint64_t meta_bytes = 0;
  uint32_t meta_rkey = 0;

  static uint64_t BytesFor(uint64_t sections, uint64_t chunks) {
    return sections * 8 + sections * kSpansPerSection * 8 + chunks * kEntryBytes;
  }
  uint32_t units_per_chunk() const { return 1u << size_log2; }
  uint64_t span_slots() const { return sections * kSpansPerSection; }
  uint64_t SectionAddr(uint64_t s) const { return meta_addr + s * 8; }
  uint64_t SpanAddr(uint64_t span) const { return meta_addr + sections * 8 + span * 8; }
  uint64_t EntryAddr(uint64_t c) const { return SpanAddr(span_slots()) + c * kEntryBytes; }
  uint64_t CapAddr(uint64_t c) const { return EntryAddr(c); }
  uint64_t RedoAddr(uint64_t c) const { return EntryAddr(c) + 8; }
  uint64_t ChunkAddr(uint64_t c) const { return pool_addr + c * chunk_bytes; }
  uint64_t SpanOfChunk(uint64_t c) const { return (c << size_log2) / kUnitsPerSpan; }
  uint32_t UnitOfChunk(uint64_t c) const { return (c << size_log2) % kUnitsPerSpan; }
  uint64_t ChunkAt(uint64_t span, uint32_t unit) const {
    return (span * kUnitsPerSpan + unit) >> size_log2;
  }
};

static_assert(std::is_trivially_copyable_v<MetaLayout>, "published to CNs as bytes");

inline uint32_t Log2(uint64_t x) { return static_cast<uint32_t>(std::countr_zero(x)); }

}  // namespace dmb::systems::finemem
