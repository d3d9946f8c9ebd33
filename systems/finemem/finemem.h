// finemem: FineMem ([FM] §3-4, OSDI'25; docs/references.md).
//
// MN side (FineMemMn): registers the pool once as an MR that only allows MW
// binding, pre-binds TWO type-1 memory windows per chunk (main and backup) at
// Start, and keeps the metadata of finemem_layout.h in one MR that only the
// per-CN trusted services can reach. Its CPU is not on the allocation path:
//  - rkey regeneration (a coroutine for the MN's lifetime): every
//    `regen_period_us` it scans the capability table; an entry whose backup is
//    0 gets the window that was main before the last free rebound (the old
//    rkey dies) and installed as the new backup by a loopback RDMA CAS (CNs
//    CAS the same word). From a free until that scan the former owner's rkey
//    still reaches the chunk: the "stale window".
//  - crash recovery (ReclaimCn): flushes the crashed CN's temporary logs from
//    span headers into the redo log, then frees every chunk the redo log says
//    that CN holds (its keys rotated, bits cleared by loopback CAS).
//  - one rare RPC (see Free): rotate a chunk's stale window now.
//
// CN side (FineMemCn, the per-CN trusted allocation service): applications
// reach it by IPC (cost "finemem.ipc" per request); it works with one-sided
// READ/WRITE/CAS on lane 0 of the caller's group, landing results in the
// lane's 256 B control area.
//  - Alloc: pick a span from cached section hints and span headers (partial
//    before empty before contended, first fit from section 0), CAS the span
//    header (bits + temporary log: the commit point), WRITE the section hint
//    if the span's state changed (unsignaled), READ the chunk's
//    capability+redo entry (main rkey), CAS the redo entry to the committed
//    record. A failed CAS returns the current header, which refreshes the
//    cache; the failures count towards contention control. When the cache
//    finds nothing, it is dropped and the search runs once more reading span
//    headers, not hints (a hint can call a span full that is not): out of
//    memory means the commit points say so.
//  - Free: READ capability+redo (the redo entry must say "allocated by this
//    CN", else kNotOwner and nothing changes), CAS the capability
//    (M,B)->(B,0) (the chunk's next owner gets B; M dies at the next scan),
//    CAS the span header (bits cleared), CAS the redo entry. The key swap
//    precedes the bit clear, so a new owner is never handed the old key.
//    If the backup is still 0 (freed before and not yet regenerated), the
//    service first asks the MN by RPC to rotate the stale window now; the
//    free then proceeds as usual (MN CPU on this rare path only).
//  - Eviction rule (crash consistency, [FM] §4.2): before a CAS replaces a
//    span header's temporary log, the service makes sure that log reached the
//    redo log (READ the entry, then the header again, in one pipelined batch;
//    if the header is unchanged the entry cannot be newer than the log, so a
//    CAS entry->record is safe). So every committed op is in its span header
//    or in the redo log, and recovery needs only both.
#pragma once

#include <coroutine>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "systems/common/cn_base.h"
#include "systems/common/mn_base.h"
#include "systems/finemem/finemem_layout.h"

namespace dmb::systems {

namespace finemem {

// Pre-bound type-1 windows and the CNs' CAS on the bitmap.
inline const std::vector<std::string> kNeeds = {"mw_type1", "atomics"};

}  // namespace finemem

struct FineMemMnStats {
  uint64_t scans = 0;             // capability-table scans
  uint64_t keys_regenerated = 0;  // windows rebound (scan, refill RPC, recovery)
  uint64_t backups_refilled = 0;  // refill RPCs served
  uint64_t logs_flushed = 0;      // temporary logs the MN flushed
  uint64_t chunks_reclaimed = 0;
};

class FineMemMn : public MnBase {
 public:
  FineMemMn(const Deployment& d, const Knobs& k);

  Task<ReclaimReport> ReclaimCn(uint32_t cn) override;
  // Valid after Start; a CN's service gets it at bootstrap.
  const finemem::MetaLayout& layout() const { return layout_; }
  std::string Published() const override {
    return std::string(reinterpret_cast<const char*>(&layout_), sizeof layout_);
  }
  const FineMemMnStats& fm_stats() const { return fm_stats_; }

 protected:
  Task<void> Setup() override;
  CapsNeed Needs() const override { return {"finemem", finemem::kNeeds}; }
  Task<void> Handle(MnLane& lane, const RpcRequest& req, RpcReply& reply) override;
  uint64_t chunks_total() const override { return layout_.chunks; }
  uint64_t chunks_in_use() const override;

 private:
  void InitLayout();
  void InitHeaders();
  Task<void> BindInitialWindows();
  Task<uint32_t> Rotate(uint64_t chunk, fabric::Mw* mw);
  Task<bool> AdminCas(uint64_t addr, uint64_t expected, uint64_t desired);
  fabric::Mw* OtherWindow(uint64_t chunk, uint32_t rkey);
  fabric::Mw* WindowWithKey(uint64_t chunk, uint32_t rkey);
  Task<void> RegenLoop();
  Task<void> RegenScan();
  Task<bool> SettleEntry(uint64_t chunk);
  Task<bool> RotateBoth(uint64_t chunk, uint64_t cap);
  Task<void> RevokeForReclaim(uint64_t chunk);
  Task<void> ReleaseChunk(uint64_t chunk);
  Task<void> FlushLog(uint64_t span, uint64_t header);
  void NoteHint(uint64_t span, uint64_t header);

  finemem::MetaLayout layout_;
  fabric::Mr* pool_mr_ = nullptr;
  fabric::Mr* meta_mr_ = nullptr;
  fabric::Mr* scratch_mr_ = nullptr;
  uint64_t scratch_addr_ = 0;
  uint64_t scratch_next_ = 0;
  uint64_t reserved_units_ = 0;
  std::vector<fabric::Mw*> windows_;  // 2 per chunk
  Ps regen_period_ = 0;
  Ps regen_origin_ = 0;
  CoMutex maint_;  // one MN coroutine at a time rotates a chunk's keys
  fabric::CpuCost cost_scan_;
  fabric::CpuCost cost_recover_;
  FineMemMnStats fm_stats_;
};

struct FineMemCnStats {
  uint64_t allocs = 0;  // successful allocations
  uint64_t frees = 0;   // successful frees
  uint64_t out_of_memory = 0;
  uint64_t cas_retries = 0;       // failed span-header CAS in allocations
  uint64_t max_retries = 0;       // most failed span CAS in one allocation
  uint64_t allocs_retried = 0;    // allocations with at least one failed CAS
  uint64_t contended_marks = 0;   // allocations that marked a span contended
  uint64_t free_cas_retries = 0;  // failed span-header CAS in frees
  uint64_t helped_flushes = 0;    // other ops' temporary logs this CN flushed
  uint64_t header_reads = 0;      // READs of section hints / span headers
  uint64_t hint_repairs = 0;      // section hints found stale and rewritten
  uint64_t backup_refills = 0;    // frees that needed the refill RPC
};

class FineMemCn : public CnBase {
 public:
  FineMemCn(const Deployment& d, uint32_t cn, MnControl* mn, const Knobs& k);

  Task<Result<Chunk>> Alloc(AccessGroup& g) override;
  Task<Status> Free(AccessGroup& g, const Chunk& c) override;

  const FineMemCnStats& fm_stats() const { return stats_; }
  // Test-only fault injection: called after an allocation's span CAS
  // committed and before its redo entry is written; returning true abandons
  // the allocation there (the service thread "dies"), as a crash would.
  void set_after_commit_hook(std::function<bool(uint64_t chunk)> hook) {
    after_commit_hook_ = std::move(hook);
  }

 private:
  struct Claim {
    bool done = false;
    uint64_t span = 0;
    uint32_t unit = 0;
    uint64_t header = 0;  // after the commit
  };

  const finemem::MetaLayout& Layout();
  void InvalidateCache();
  // Verbs on lane 0 (Status kLaneBroken on any failed completion).
  Task<Status> ReadMeta(Lane& lane, uint64_t remote, uint32_t len, uint64_t land_off);
  Task<Status> CasMeta(Lane& lane, uint64_t remote, uint64_t expected, uint64_t desired,
                       uint64_t* seen);
  void PostHintWrite(Lane& lane, uint64_t section);
  // Search.
  Task<Status> LoadHints(Lane& lane, uint64_t section);
  Task<Status> LoadSpans(Lane& lane, uint64_t section);
  finemem::SpanState Effective(uint64_t span) const;
  bool MayFit(uint64_t span) const;
  Task<Status> PickSpan(Lane& lane, bool exhaustive, std::optional<uint64_t>* span);
  Task<Status> ClaimInSpan(Lane& lane, uint64_t span, uint32_t* failures, Claim* claim);
  Task<Status> EnsureLogFlushed(Lane& lane, uint64_t span, uint64_t header, bool* changed);
  Task<Result<Chunk>> FinishAlloc(Lane& lane, const Claim& claim);
  void NoteSpan(Lane& lane, uint64_t span, uint64_t header);
  // Free.
  Task<Status> RefillBackup(AccessGroup& g, uint64_t chunk, uint64_t* cap);
  Task<Status> SwapKeys(Lane& lane, const Chunk& c, uint64_t cap);
  Task<Status> ClearBits(Lane& lane, uint64_t chunk, uint64_t* header);

  finemem::MetaLayout layout_;  // published by the MN, fetched on first use
  uint32_t user_;
  fabric::CpuCost cost_ipc_;
  bool cache_ready_ = false;
  uint64_t cursor_ = 0;  // section where the search starts
  std::vector<uint64_t> hint_;
  std::vector<uint8_t> hint_known_;
  std::vector<uint64_t> span_;
  std::vector<uint8_t> span_known_;
  // Per span: a header value whose temporary log is known to be in the redo log.
  std::vector<uint64_t> flushed_header_;
  uint64_t hint_slot_ = 0;
  std::function<bool(uint64_t)> after_commit_hook_;
  FineMemCnStats stats_;
};

}  // namespace dmb::systems
