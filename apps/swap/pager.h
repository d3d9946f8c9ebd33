// Pager: one CN's swap traffic to remote memory through a MemoryManager, as
// Fastswap's frontswap backend does it (OneSidedMW §5.1), in virtual time.
//
// Access groups. One group per CN core that pages (the tasks' cores and the
// reclaim core), each with min(3, caps.max_group_lanes) lanes in Fastswap's
// roles, lane = role % lanes: 0 swap-out (WRITE, and the approach's
// Alloc/Free, which use lane 0 for their RPCs), 1 synchronous swap-in,
// 2 prefetch (readahead). With two lanes (OneSidedMW's group of 3 MWs: MW 0
// on the Free QP + two access QPs) the sync swap-ins have a QP of their own
// and prefetches share the writes'; with one (no Grouping) all three share,
// the interference §4.3 removes.
// Which group serves a segment: an approach whose chunks are bound to the
// QPs they were allocated for (caps.isolation == kChunkQp: type-2 MWs) owns
// each segment by one group, segment index % groups, and every access to it
// goes through that group ("the CN selects the appropriate QP group based on
// the target chunk", §5.1); any other approach uses the acting core's own
// group. A lane keeps up to lane_depth() 4 KB I/Os in flight, each in a page
// buffer of its own (LaneSlots): requests on one QP overlap as a QP's WRs do
// and are processed in order by the RNIC; more wait for a buffer.
//
// Segments (SegmentTable): mapped by Alloc on the owning group before the
// first WRITE into them, freed by Free (policy lazy) when their last slot is
// freed: no copy left and no slot of theirs in use in the swap map (a slot
// parked in a CPU's slot cache is in use: its CPU will write there next).
// Alloc and Free hold lane 0 of their group alone (no I/O in flight on it)
// unless the approach says they do not use it (caps.control_on_lane0). A segment is never freed
// while an I/O or its allocation is in flight, and a WRITE into a segment being freed waits and
// maps it again.
//
// Real bytes. Every swap-out writes a 4 KB page whose first 32 bytes are a
// stamp (magic, cn, cgroup, page, version: a per-CN write counter); the pager
// remembers the stamp per slot and every swap-in checks the landed bytes
// against it and against the (cgroup, page) the paging model expects. A
// mismatch is counted and the first is described: an allocation or
// protection bug shows up as corruption, never as a number.
// Ordering, by copy version: a READ waits until the copy it expects has
// landed (the kernel finds a page under writeback in the swap cache); a
// WRITE waits for an earlier WRITE into the slot and for READs of an older
// copy (a slot handed out again while its old copy was still being read).
//
// Accounting: stored and mapped bytes are integrated over virtual time from
// Begin() to End() for the run's memory utilization.
//
// Contract: one Pager per CN, calls from the CN's coroutines only; Open
// before anything else.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "apps/swap/cgroup_memory.h"
#include "apps/swap/lane_slots.h"
#include "apps/swap/segment_table.h"
#include "fabric/histogram.h"
#include "fabric/task.h"
#include "systems/common/wait_list.h"
#include "systems/memory_manager.h"

namespace dmb::apps::swap {

enum class IoRole : uint8_t { kWrite = 0, kSync = 1, kPrefetch = 2 };

struct PagerSpec {
  uint64_t area_slots = 0;
  uint64_t segment_bytes = 0;  // a multiple of 4 KB: the approach's granularity
  SegmentPolicy policy = SegmentPolicy::kLazy;
  uint32_t cores = 1;  // groups: one per core id 0..cores-1
  // 4 KB I/Os in flight per lane, at most caps().lane_depth (the QP's READ
  // depth); 1: one at a time.
  uint32_t lane_depth = 16;
};

struct PagerStats {
  uint64_t reads = 0, writes = 0, allocs = 0, frees = 0;
  uint64_t failures = 0;  // I/O, Alloc or Free that did not succeed
  std::string first_failure;
  uint64_t stamp_mismatches = 0;
  std::string first_mismatch;
  Histogram alloc_lat;
};

class Pager {
 public:
  // `map` is the CN's swap-slot allocator (outlives the pager).
  Pager(systems::CnSide& cn, fabric::Runtime& rt, const SwapMap& map, const PagerSpec& spec);
  ~Pager();
  Pager(const Pager&) = delete;
  Pager& operator=(const Pager&) = delete;

  Task<systems::Status> Open();
  // Policy kWhole: maps every segment (before the measured run).
  Task<systems::Status> MapWhole();

  // io.page's copy is to be written to io.slot (a new copy: the slot held
  // nothing): from now on READs of the slot wait for it. Call as soon as the
  // paging model hands the slot out, before anything can suspend. Returns
  // the copy's version for SwapOut.
  struct WriteTicket {
    uint64_t version = 0;  // of this copy
    uint64_t prev = 0;     // of the slot's previous copy (0: none)
  };
  WriteTicket QueueWrite(const SwapIo& io);
  // Writes the queued copy once the slot's previous copy has landed and no
  // READ of an older copy is pending (copies of a slot land in order).
  Task<void> SwapOut(uint32_t core, SwapIo io, WriteTicket ticket);
  // A READ of `slot` is coming: until it has landed, a release of the slot
  // waits (the kernel holds the page locked during the read, so the slot
  // cannot be freed under it). Call before anything can suspend. Returns
  // the version of the copy the READ must find (a WRITE of a later copy
  // into a slot handed out again waits for the READ).
  uint64_t Pin(uint64_t slot);
  // Reads copy `version` of io.slot (pinned) back once it has landed, checks
  // its stamp and unpins the slot.
  Task<void> SwapIn(uint32_t core, SwapIo io, IoRole role, uint64_t version);
  // Pins io.slot and reads it in the background (readahead).
  void Prefetch(uint32_t core, const SwapIo& io);
  // The slots' copies are gone (freed to the allocator): frees empty segments
  // in the background. A pinned slot is released when its READ lands.
  void Release(const std::vector<uint64_t>& slots);
  // Whether a READ of `slot` is in flight (a readahead not yet landed).
  bool Reading(uint64_t slot) const { return reading_[slot] != 0; }
  // Waits until no READ of `slot` is in flight.
  Task<void> AwaitRead(uint64_t slot);

  // Waits until every background READ and segment free has finished.
  Task<void> Quiesce();

  void Begin();
  void End();
  // Time-average of stored / mapped bytes over [Begin, End] (while anything
  // is mapped); 1 when nothing was ever mapped.
  double Utilization() const;
  uint64_t mapped_bytes() const { return table_.mapped_segments() * spec_.segment_bytes; }
  uint64_t peak_mapped_bytes() const { return peak_mapped_segments_ * spec_.segment_bytes; }
  const PagerStats& stats() const { return stats_; }
  const SegmentTable& table() const { return table_; }
  // I/Os in flight per lane: min(spec.lane_depth, caps().lane_depth).
  uint32_t lane_depth() const;

 private:
  enum class SegState : uint8_t { kNone, kAllocating, kReady, kFreeing };
  struct Segment {
    SegState state = SegState::kNone;
    systems::Chunk chunk;
    uint32_t inflight = 0;
    systems::WaitList changed;
  };
  struct Group;

  Group& GroupFor(uint32_t core, uint64_t seg);
  Task<bool> EnsureMapped(uint64_t seg);
  Task<void> FreeSegment(uint64_t seg);
  Task<void> Io(uint32_t core, uint64_t seg, SwapIo io, IoRole role, uint64_t version, bool write);
  Task<systems::Status> Recover(Group& g, IoRole role);
  void Fail(const std::string& what);
  void Account();
  void ReleaseOne(uint64_t slot);
  bool OlderReadPending(uint64_t slot, uint64_t version) const;
  bool SlotsInUse(uint64_t seg) const;
  void Background(Task<void> t);
  Task<void> Tracked(Task<void> t);

  systems::CnSide& cn_;
  fabric::Runtime& rt_;
  const SwapMap& map_;
  PagerSpec spec_;
  SegmentTable table_;
  std::vector<std::unique_ptr<Group>> groups_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::vector<uint64_t> stamp_version_;  // per slot: the version written
  std::vector<uint8_t> write_active_, deferred_release_;
  std::vector<uint64_t> landed_version_;                        // per slot: the last copy WRITTEN
  std::vector<uint32_t> reading_;                               // pinned READs
  std::unordered_map<uint64_t, std::vector<uint64_t>> pinned_;  // slot -> versions read
  uint64_t version_ = 0;
  uint64_t background_ = 0;
  systems::WaitList idle_;
  PagerStats stats_;
  // Utilization integral.
  bool running_ = false;
  Ps last_ps_ = 0, begin_ps_ = 0, mapped_ps_ = 0;
  long double ratio_ps_ = 0;
  uint64_t peak_mapped_segments_ = 0;
};

}  // namespace dmb::apps::swap
