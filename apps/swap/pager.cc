#include "apps/swap/pager.h"

#include <algorithm>
#include <cstring>

#include "apps/swap/trace.h"
#include "systems/common/wait_list.h"

namespace dmb::apps::swap {
namespace {

constexpr uint64_t kStampMagic = 0x53574150'53544d50ull;  // "SWAPSTMP"

struct Stamp {
  uint64_t magic = kStampMagic;
  uint32_t cn = 0;
  uint32_t cgroup = 0;
  uint64_t page = 0;
  uint64_t version = 0;
  bool operator==(const Stamp&) const = default;
};
static_assert(sizeof(Stamp) == 32);

using systems::Code;
using systems::Status;

void RecordMismatch(PagerStats* stats, const SwapIo& io, const Stamp& got, const Stamp& want) {
  if (stats->stamp_mismatches++ > 0) return;
  stats->first_mismatch = "slot " + std::to_string(io.slot) + " should hold cn " +
                          std::to_string(want.cn) + " cgroup " + std::to_string(want.cgroup) +
                          " page " + std::to_string(want.page) + " v" +
                          std::to_string(want.version) + ", holds cn " + std::to_string(got.cn) +
                          " cgroup " + std::to_string(got.cgroup) + " page " +
                          std::to_string(got.page) + " v" + std::to_string(got.version);
}

}  // namespace

struct Pager::Group {
  systems::AccessGroup* group = nullptr;
  std::vector<std::unique_ptr<LaneSlots>> slots;              // per lane
  std::vector<std::unique_ptr<systems::CoMutex>> recovering;  // per lane: one RecoverLane at a time
  size_t LaneIndex(IoRole role) const { return static_cast<size_t>(role) % group->size(); }
  systems::Lane& LaneFor(IoRole role) { return group->lane(LaneIndex(role)); }
  LaneSlots& SlotsFor(IoRole role) { return *slots[LaneIndex(role)]; }
};

Pager::Pager(systems::CnSide& cn, fabric::Runtime& rt, const SwapMap& map, const PagerSpec& spec)
    : cn_(cn),
      rt_(rt),
      map_(map),
      spec_(spec),
      table_(spec.area_slots, spec.segment_bytes / kPageBytes, spec.policy),
      stamp_version_(spec.area_slots, 0),
      write_active_(spec.area_slots, 0),
      deferred_release_(spec.area_slots, 0),
      landed_version_(spec.area_slots, 0),
      reading_(spec.area_slots, 0) {
  segments_.reserve(table_.segments());
  for (uint64_t i = 0; i < table_.segments(); ++i) segments_.push_back(std::make_unique<Segment>());
}

Pager::~Pager() = default;

Task<Status> Pager::Open() {
  const int lanes = std::min(3, cn_.caps().max_group_lanes);
  const uint32_t depth = lane_depth();
  const uint64_t lane_bytes = depth * kPageBytes;
  for (uint32_t c = 0; c < spec_.cores; ++c) {
    auto g = std::make_unique<Group>();
    g->group = co_await cn_.OpenGroup(lanes, lanes * lane_bytes);
    for (int i = 0; i < lanes; ++i) {
      g->slots.push_back(
          std::make_unique<LaneSlots>(g->group->buffer_addr() + i * lane_bytes, depth));
      g->recovering.push_back(std::make_unique<systems::CoMutex>());
    }
    groups_.push_back(std::move(g));
  }
  co_return Status();
}

Task<Status> Pager::MapWhole() {
  for (uint64_t seg = 0; seg < table_.segments(); ++seg) {
    if (!co_await EnsureMapped(seg)) co_return Status(Code::kOutOfMemory, stats_.first_failure);
  }
  co_return Status();
}

Pager::Group& Pager::GroupFor(uint32_t core, uint64_t seg) {
  if (cn_.caps().isolation == systems::Isolation::kChunkQp) return *groups_[seg % groups_.size()];
  return *groups_[core % groups_.size()];
}

void Pager::Fail(const std::string& what) {
  if (stats_.failures++ == 0) stats_.first_failure = what;
}

// Maps `seg` unless it is; false when the allocation failed.
Task<bool> Pager::EnsureMapped(uint64_t seg) {
  Segment& s = *segments_[seg];
  for (;;) {
    if (s.state == SegState::kReady) co_return true;
    if (s.state == SegState::kNone) break;
    co_await s.changed.Wait();
  }
  s.state = SegState::kAllocating;
  Group& g = *groups_[seg % groups_.size()];
  const bool lock = cn_.caps().control_on_lane0;
  if (lock) co_await g.slots[0]->LockExclusive();
  const Ps t0 = rt_.now();
  systems::Result<systems::Chunk> r = co_await cn_.Alloc(*g.group);
  if (lock) g.slots[0]->UnlockExclusive();
  const bool ok = r.ok();
  if (ok) {
    stats_.alloc_lat.Record(rt_.now() - t0);
    ++stats_.allocs;
    s.chunk = std::move(r.value);
    s.state = SegState::kReady;
    Account();
    table_.MarkMapped(seg, true);
    peak_mapped_segments_ = std::max(peak_mapped_segments_, table_.mapped_segments());
  } else {
    Fail("alloc of segment " + std::to_string(seg) + ": " + r.status.ToString());
    s.state = SegState::kNone;
  }
  s.changed.NotifyAll();
  co_return ok;
}

Task<void> Pager::FreeSegment(uint64_t seg) {
  Segment& s = *segments_[seg];
  while (s.state == SegState::kAllocating || s.inflight > 0) co_await s.changed.Wait();
  if (s.state != SegState::kReady || table_.stored(seg) > 0 || !table_.mapped(seg) ||
      SlotsInUse(seg)) {
    co_return;  // reused, or freed by another release meanwhile
  }
  s.state = SegState::kFreeing;
  Group& owner = *groups_[seg % groups_.size()];
  const bool lock = cn_.caps().control_on_lane0;
  if (lock) co_await owner.slots[0]->LockExclusive();
  const Status st = co_await cn_.Free(*owner.group, s.chunk);
  if (lock) owner.slots[0]->UnlockExclusive();
  if (st.ok()) ++stats_.frees;
  if (!st.ok()) Fail("free of segment " + std::to_string(seg) + ": " + st.ToString());
  Account();
  table_.MarkMapped(seg, false);
  s.state = SegState::kNone;
  s.changed.NotifyAll();
}

// One 4 KB READ or WRITE of io.slot through the lane `role` picks, in one
// of the lane's page buffers (other I/Os may be in flight on the lane); the
// stamp of copy `version` is written into, or checked in, that buffer.
Task<void> Pager::Io(uint32_t core, uint64_t seg, SwapIo io, IoRole role, uint64_t version,
                     bool write) {
  Segment& s = *segments_[seg];
  Group& g = GroupFor(core, seg);
  LaneSlots& slots = g.SlotsFor(role);
  const uint64_t buf = co_await slots.Acquire();
  systems::Lane& lane = g.LaneFor(role);
  fabric::Memory& mem = cn_.node()->memory();
  const Stamp want{kStampMagic, cn_.cn_index(), io.cgroup, io.page, version};
  Status st = co_await Recover(g, role);
  if (st.ok() && write) {
    mem.Write(buf, &want, sizeof(want));
    st = co_await cn_.Write(lane, s.chunk, table_.OffsetBytes(io.slot), kPageBytes, buf);
  } else if (st.ok()) {
    mem.Write(buf, "\0", 1);  // a READ that lands nothing cannot pass the check
    st = co_await cn_.Read(lane, s.chunk, table_.OffsetBytes(io.slot), kPageBytes, buf);
    Stamp got;
    mem.Read(buf, &got, sizeof(got));
    if (st.ok() && !(got == want)) RecordMismatch(&stats_, io, got, want);
  }
  slots.Release(buf);
  if (!st.ok()) {
    Fail(std::string(write ? "WRITE" : "READ") + " of slot " + std::to_string(io.slot) + ": " +
         st.ToString());
  }
}

// A broken lane (its QP in ERR) is recovered once, by the first I/O that
// finds it so; the others on the lane wait for that.
Task<Status> Pager::Recover(Group& g, IoRole role) {
  systems::Lane& lane = g.LaneFor(role);
  if (!lane.broken()) co_return Status();
  systems::CoMutex& m = *g.recovering[g.LaneIndex(role)];
  co_await m.Lock();
  Status st;
  if (lane.broken()) st = co_await cn_.RecoverLane(lane);
  m.Unlock();
  co_return st;
}

uint32_t Pager::lane_depth() const {
  return std::max<uint32_t>(1, std::min(spec_.lane_depth, cn_.caps().lane_depth));
}

uint64_t Pager::Pin(uint64_t slot) {
  ++reading_[slot];
  pinned_[slot].push_back(stamp_version_[slot]);
  return stamp_version_[slot];
}

bool Pager::OlderReadPending(uint64_t slot, uint64_t version) const {
  const auto it = pinned_.find(slot);
  if (it == pinned_.end()) return false;
  for (uint64_t v : it->second) {
    if (v < version) return true;
  }
  return false;
}

Pager::WriteTicket Pager::QueueWrite(const SwapIo& io) {
  if (deferred_release_[io.slot] != 0) {
    // The allocator handed out again a slot whose old copy is still being
    // read: that copy is dead now; the WRITE waits for the READs.
    deferred_release_[io.slot] = 0;
    ReleaseOne(io.slot);
  }
  Account();
  table_.Store(io.slot);
  const uint64_t prev = stamp_version_[io.slot];
  stamp_version_[io.slot] = ++version_;
  return {version_, prev};
}

Task<void> Pager::SwapOut(uint32_t core, SwapIo io, WriteTicket ticket) {
  const uint64_t seg = table_.SegmentOf(io.slot);
  Segment& s = *segments_[seg];
  while (write_active_[io.slot] != 0 || landed_version_[io.slot] < ticket.prev ||
         OlderReadPending(io.slot, ticket.version)) {
    co_await s.changed.Wait();
  }
  write_active_[io.slot] = 1;
  if (co_await EnsureMapped(seg)) {
    ++s.inflight;
    co_await Io(core, seg, io, IoRole::kWrite, ticket.version, true);
    --s.inflight;
    ++stats_.writes;
  }
  write_active_[io.slot] = 0;
  landed_version_[io.slot] = std::max(landed_version_[io.slot], ticket.version);
  s.changed.NotifyAll();
}

Task<void> Pager::SwapIn(uint32_t core, SwapIo io, IoRole role, uint64_t version) {
  const uint64_t seg = table_.SegmentOf(io.slot);
  Segment& s = *segments_[seg];
  while (landed_version_[io.slot] < version) co_await s.changed.Wait();
  if (!table_.holds(io.slot) || s.state != SegState::kReady) {
    Fail("swap-in of slot " + std::to_string(io.slot) + " which holds no copy");
  } else {
    ++s.inflight;
    co_await Io(core, seg, io, role, version, false);
    --s.inflight;
    ++stats_.reads;
  }
  auto& pinned = pinned_[io.slot];
  pinned.erase(std::find(pinned.begin(), pinned.end(), version));
  if (pinned.empty()) pinned_.erase(io.slot);
  if (--reading_[io.slot] == 0 && deferred_release_[io.slot] != 0) {
    deferred_release_[io.slot] = 0;
    ReleaseOne(io.slot);
  }
  s.changed.NotifyAll();
}

Task<void> Pager::AwaitRead(uint64_t slot) {
  Segment& s = *segments_[table_.SegmentOf(slot)];
  while (reading_[slot] != 0) co_await s.changed.Wait();
}

void Pager::Release(const std::vector<uint64_t>& slots) {
  for (uint64_t slot : slots) {
    if (reading_[slot] > 0) {
      deferred_release_[slot] = 1;
    } else {
      ReleaseOne(slot);
    }
  }
}

void Pager::ReleaseOne(uint64_t slot) {
  Account();
  const uint64_t seg = table_.SegmentOf(slot);
  if (table_.Release(slot) && !SlotsInUse(seg)) Background(FreeSegment(seg));
}

bool Pager::SlotsInUse(uint64_t seg) const {
  const uint64_t first = seg * table_.segment_slots();
  const uint64_t end = std::min(first + table_.segment_slots(), map_.max_pages());
  for (uint64_t s = first; s < end; ++s) {
    if (map_.InUse(s)) return true;
  }
  return false;
}

void Pager::Prefetch(uint32_t core, const SwapIo& io) {
  Background(SwapIn(core, io, IoRole::kPrefetch, Pin(io.slot)));
}

void Pager::Background(Task<void> t) {
  ++background_;
  rt_.Spawn(Tracked(std::move(t)));
}

Task<void> Pager::Tracked(Task<void> t) {
  co_await std::move(t);
  --background_;
  idle_.NotifyAll();
}

Task<void> Pager::Quiesce() {
  while (background_ > 0) co_await idle_.Wait();
}

void Pager::Begin() {
  running_ = true;
  begin_ps_ = last_ps_ = rt_.now();
}

void Pager::End() {
  Account();
  running_ = false;
}

// Integrates stored/mapped up to now (call before either changes).
void Pager::Account() {
  if (!running_) return;
  const Ps now = rt_.now();
  const Ps dt = now - last_ps_;
  last_ps_ = now;
  const uint64_t mapped = table_.mapped_segments() * table_.segment_slots();
  if (mapped == 0 || dt == 0) return;
  mapped_ps_ += dt;
  ratio_ps_ += static_cast<long double>(dt) * table_.stored_mapped_slots() / mapped;
}

double Pager::Utilization() const {
  return mapped_ps_ > 0 ? static_cast<double>(ratio_ps_ / mapped_ps_) : 1.0;
}

}  // namespace dmb::apps::swap
