// finemem: the protocol is described in finemem.h, the bits in finemem_layout.h.
#include "systems/finemem/finemem.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "systems/registry.h"

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

namespace {

// Landing and source slots in a lane's 256 B control area.
constexpr uint64_t kLandBlock = 0;    // 128 B: 16 section hints or 16 span headers
constexpr uint64_t kLandEntry = 128;  // 16 B: capability + redo entry
constexpr uint64_t kLandCas = 144;    // 8 B: CAS result
constexpr uint64_t kLandAux = 152;    // 8 B: a redo entry (eviction check)
constexpr uint64_t kLandAux2 = 160;   // 8 B: a span header
constexpr uint64_t kHintSrc = 192;    // 8 x 8 B: sources of unsignaled hint WRITEs
constexpr uint64_t kHintSlots = 8;
constexpr uint64_t kScratchSlots = 64;  // MN landing words for loopback CAS

constexpr uint32_t kMetaAccess =
    fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;
constexpr uint32_t kDataAccess = fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;
constexpr int kSettleAttempts = 4;
constexpr uint32_t kRpcRefillBackup = kRpcFirstCustom;

Capabilities FineMemCaps(const Knobs& k) {
  Capabilities c;
  c.granularity_bytes = k.Size("granularity");
  c.isolation = Isolation::kChunkRkey;
  c.mn_cpu_on_alloc = false;
  c.fixed_io_bytes = 0;
  return c;
}

Status LaneBroken() {
  return Status(Code::kLaneBroken, "lane QP is in the error state; RecoverLane first");
}

}  // namespace

// ---- AsyncMutex ----------------------------------------------------------------

namespace finemem {

void AsyncMutex::Unlock() {
  if (waiters_.empty()) {
    locked_ = false;
    return;
  }
  const std::coroutine_handle<> next = waiters_.front();
  waiters_.pop_front();
  rt_->Spawn(Resume(next));  // the lock stays taken: it passes to `next`
}

Task<void> AsyncMutex::Resume(std::coroutine_handle<> h) {
  h.resume();
  co_return;
}

}  // namespace finemem

// ---- MN side -------------------------------------------------------------------

FineMemMn::FineMemMn(const Deployment& d, const Knobs& k)
    : MnBase(d, k), maint_(&d.cluster->runtime()) {
  regen_period_ = static_cast<Ps>(k.Int("regen_period_us")) * kPsPerUs;
  cost_scan_ = node_->Cost("finemem.scan_per_chunk");
  cost_recover_ = node_->Cost("finemem.recover_per_entry");
}

Task<void> FineMemMn::Setup() {
  InitLayout();
  // One MR over the pool that grants nothing remotely: only its windows do.
  pool_mr_ =
      co_await node_->RegMr(pd_, pool_addr_, pool_bytes_, fabric::kLocalWrite | fabric::kMwBind);
  meta_mr_ = co_await node_->RegMr(pd_, layout_.meta_addr, layout_.meta_bytes, kMetaAccess);
  layout_.meta_rkey = meta_mr_->rkey();
  scratch_addr_ = node_->memory().Alloc(kScratchSlots * 8, 64);
  scratch_mr_ = co_await node_->RegMr(pd_, scratch_addr_, kScratchSlots * 8, fabric::kLocalWrite);
  InitHeaders();
  co_await BindInitialWindows();
  regen_origin_ = runtime().now();
  runtime().Spawn(RegenLoop());
}

void FineMemMn::InitLayout() {
  const uint64_t g = knobs_.Size("granularity");
  MetaLayout& l = layout_;
  l.pool_addr = pool_addr_;
  l.chunk_bytes = g;
  l.size_log2 = finemem::Log2(g / kUnitBytes);
  l.chunks = pool_bytes_ / g;
  if (l.chunks == 0) {
    throw ConfigError("finemem.granularity: " + FormatSize(g) + " is larger than the " +
                      FormatSize(pool_bytes_) + " MN pool");
  }
  const uint64_t units = l.chunks << l.size_log2;
  l.spans = (units + kUnitsPerSpan - 1) / kUnitsPerSpan;
  l.sections = (l.spans + kSpansPerSection - 1) / kSpansPerSection;
  reserved_units_ = l.span_slots() * kUnitsPerSpan - units;
  l.meta_bytes = MetaLayout::BytesFor(l.sections, l.chunks);
  l.meta_addr = node_->memory().Alloc(l.meta_bytes, 4096);
}

// Units past the last whole chunk are marked used for good; section hints
// start out consistent with the span headers.
void FineMemMn::InitHeaders() {
  auto& mem = node_->memory();
  const MetaLayout& l = layout_;
  mem.Fill(l.meta_addr, 0, l.meta_bytes);
  const uint64_t units = l.chunks << l.size_log2;
  for (uint64_t s = 0; s < l.sections; ++s) {
    uint64_t hint = 0;
    for (uint32_t j = 0; j < kSpansPerSection; ++j) {
      const uint64_t sp = s * kSpansPerSection + j;
      const uint64_t first = sp * kUnitsPerSpan;
      uint32_t bitmap = 0;
      if (first >= units) {
        bitmap = 0xffffffffu;
      } else if (units - first < kUnitsPerSpan) {
        bitmap = ~((1u << (units - first)) - 1);
      }
      mem.StoreU64(l.SpanAddr(sp), bitmap);
      hint = WithHint(hint, j, StateOf(bitmap));
    }
    mem.StoreU64(l.SectionAddr(s), hint);
  }
}

// Setup runs before MnBase's admin completion reaper exists, so the initial
// binds go through a private loopback QP: batches of unsignaled binds closed
// by a signaled one (a failed bind completes with an error regardless).
Task<void> FineMemMn::BindInitialWindows() {
  constexpr uint32_t kBatch = 1024;
  fabric::Cq* cq = node_->CreateCq(2 * kBatch);
  fabric::QpInitAttr a;
  a.pd = pd_;
  a.send_cq = cq;
  a.recv_cq = cq;
  a.max_send_wr = 2 * kBatch;
  fabric::Qp* qp = node_->CreateQp(a);
  fabric::QpInitAttr p = a;
  p.send_cq = p.recv_cq = node_->CreateCq(16, /*ignore_overrun=*/true);
  p.max_send_wr = 16;
  deployment_.cluster->Connect(qp, node_->CreateQp(p));
  const uint64_t total = 2 * layout_.chunks;
  std::vector<uint32_t> keys(total);
  windows_.reserve(total);
  for (uint64_t first = 0; first < total; first += kBatch) {
    const uint64_t end = std::min<uint64_t>(total, first + kBatch);
    for (uint64_t w = first; w < end; ++w) {
      fabric::Mw* mw = node_->AllocMw(pd_, fabric::MwType::kType1);
      windows_.push_back(mw);
      keys[w] = NextRkey(mw->rkey());
      const uint8_t flags = w + 1 == end ? fabric::kSignaled : 0;
      if (qp->BindMw(mw, w, pool_mr_, layout_.ChunkAddr(w / 2), layout_.chunk_bytes, kDataAccess,
                     keys[w], flags) != 0) {
        throw std::runtime_error("finemem: cannot post the initial window binds");
      }
      co_await PostCost();
    }
    const fabric::WorkCompletion wc = co_await cq->Next();
    if (wc.status != WcStatus::kSuccess) {
      throw std::runtime_error("finemem: binding the window of chunk " +
                               std::to_string(wc.wr_id / 2) + " failed (" +
                               std::string(fabric::WcStatusName(wc.status)) + ")");
    }
  }
  for (uint64_t c = 0; c < layout_.chunks; ++c) {
    node_->memory().StoreU64(layout_.CapAddr(c), MakeCap(keys[2 * c], keys[2 * c + 1]));
  }
}

// (Re)binds `mw` over chunk `chunk` under the next key; the old key is dead
// once this returns.
Task<uint32_t> FineMemMn::Rotate(uint64_t chunk, fabric::Mw* mw) {
  const uint32_t rkey = NextRkey(mw->rkey());
  const fabric::WorkCompletion wc = co_await AdminBindType1(mw, pool_mr_, layout_.ChunkAddr(chunk),
                                                            layout_.chunk_bytes, kDataAccess, rkey);
  if (wc.status != WcStatus::kSuccess) {
    throw std::runtime_error("finemem: binding a window over chunk " + std::to_string(chunk) +
                             " failed (" + std::string(fabric::WcStatusName(wc.status)) + ")");
  }
  co_return rkey;
}

// A loopback RDMA CAS on a metadata word (CNs CAS the same words).
Task<bool> FineMemMn::AdminCas(uint64_t addr, uint64_t expected, uint64_t desired) {
  const uint64_t land = scratch_addr_ + 8 * (scratch_next_++ % kScratchSlots);
  fabric::SendWr wr;
  wr.opcode = Opcode::kCmpAndSwp;
  wr.sg_list = {{land, 8, scratch_mr_->lkey()}};
  wr.remote_addr = addr;
  wr.rkey = layout_.meta_rkey;
  wr.compare_add = expected;
  wr.swap = desired;
  const fabric::WorkCompletion wc = co_await AdminExec(wr);
  if (wc.status != WcStatus::kSuccess) {
    throw std::runtime_error("finemem: loopback CAS failed (" +
                             std::string(fabric::WcStatusName(wc.status)) + ")");
  }
  co_return node_->memory().LoadU64(land) == expected;
}

fabric::Mw* FineMemMn::WindowWithKey(uint64_t chunk, uint32_t rkey) {
  for (uint64_t k = 0; k < 2; ++k) {
    if (windows_[2 * chunk + k]->rkey() == rkey) return windows_[2 * chunk + k];
  }
  return nullptr;
}

fabric::Mw* FineMemMn::OtherWindow(uint64_t chunk, uint32_t rkey) {
  fabric::Mw* held = WindowWithKey(chunk, rkey);
  if (!held) return nullptr;
  return held == windows_[2 * chunk] ? windows_[2 * chunk + 1] : windows_[2 * chunk];
}

// The one RPC: a free found the backup not yet regenerated (the chunk was
// freed before and the scan has not run since). The stale window is rotated
// now instead of at the next scan.
Task<void> FineMemMn::Handle(MnLane& lane, const RpcRequest& req, RpcReply& reply) {
  co_await BookkeepingCost();
  const uint64_t c = req.arg[0];
  if (req.op != kRpcRefillBackup || c >= layout_.chunks) {
    reply.code = static_cast<uint32_t>(Code::kInvalidArgument);
    co_return;
  }
  const uint64_t redo = node_->memory().LoadU64(layout_.RedoAddr(c));
  if (KindOf(redo) != kRedoAlloc || UserOf(redo) != finemem::UserOfCn(lane.cn_index)) {
    reply.code = static_cast<uint32_t>(Code::kNotOwner);
    co_return;
  }
  co_await maint_.Lock();
  const bool settled = co_await SettleEntry(c);
  maint_.Unlock();
  ++fm_stats_.backups_refilled;
  reply.code = static_cast<uint32_t>(settled ? Code::kOk : Code::kLaneBroken);
  reply.aux[0] = node_->memory().LoadU64(layout_.CapAddr(c));
}

uint64_t FineMemMn::chunks_in_use() const {
  uint64_t used = 0;
  for (uint64_t sp = 0; sp < layout_.span_slots(); ++sp) {
    used += std::popcount(Bitmap(node_->memory().LoadU64(layout_.SpanAddr(sp))));
  }
  return (used - reserved_units_) >> layout_.size_log2;
}

// ---- MN: rkey regeneration -------------------------------------------------------

// Runs for the MN's lifetime; scans on the grid Start + k * period.
Task<void> FineMemMn::RegenLoop() {
  for (;;) {
    const Ps periods = (runtime().now() - regen_origin_) / regen_period_ + 1;
    co_await runtime().SleepUntil(regen_origin_ + periods * regen_period_);
    ++fm_stats_.scans;
    co_await node_->cpu().Work(cost_scan_, layout_.chunks);
    co_await RegenScan();
  }
}

// Settles every entry whose backup is 0.
Task<void> FineMemMn::RegenScan() {
  auto& mem = node_->memory();
  for (uint64_t c = 0; c < layout_.chunks; ++c) {
    if (BackupKey(mem.LoadU64(layout_.CapAddr(c))) != 0) continue;
    co_await maint_.Lock();
    (void)co_await SettleEntry(c);  // an entry that raced CNs waits for the next scan
    maint_.Unlock();
  }
}

// (M, 0): rebind the window that is not main (the last owner's key) and
// install it as the backup.
Task<bool> FineMemMn::SettleEntry(uint64_t chunk) {
  const uint64_t cap_addr = layout_.CapAddr(chunk);
  for (int attempt = 0; attempt < kSettleAttempts; ++attempt) {
    const uint64_t cap = node_->memory().LoadU64(cap_addr);
    if (BackupKey(cap) != 0) co_return true;
    fabric::Mw* old = OtherWindow(chunk, MainKey(cap));
    if (!old) {
      throw std::logic_error("finemem: chunk " + std::to_string(chunk) +
                             "'s main rkey names none of its windows");
    }
    const uint32_t fresh = co_await Rotate(chunk, old);
    ++fm_stats_.keys_regenerated;
    if (co_await AdminCas(cap_addr, cap, MakeCap(MainKey(cap), fresh))) co_return true;
  }
  co_return false;
}

Task<bool> FineMemMn::RotateBoth(uint64_t chunk, uint64_t cap) {
  const uint32_t a = co_await Rotate(chunk, windows_[2 * chunk]);
  const uint32_t b = co_await Rotate(chunk, windows_[2 * chunk + 1]);
  fm_stats_.keys_regenerated += 2;
  co_return co_await AdminCas(layout_.CapAddr(chunk), cap, MakeCap(a, b));
}

// Clears an allocated chunk's bits (the MN's own commit, temporary log user
// kMnUser), then its redo entry and the section hint.
Task<void> FineMemMn::ReleaseChunk(uint64_t chunk) {
  auto& mem = node_->memory();
  const MetaLayout& l = layout_;
  const uint64_t sp = l.SpanOfChunk(chunk);
  const uint32_t unit = l.UnitOfChunk(chunk);
  const uint32_t mask = RunMask(unit, l.size_log2);
  uint64_t committed = 0;
  uint64_t redo = 0;
  for (;;) {
    const uint64_t h = mem.LoadU64(l.SpanAddr(sp));
    if ((Bitmap(h) & mask) != mask) {
      throw std::logic_error("finemem: releasing chunk " + std::to_string(chunk) +
                             ", which is not allocated");
    }
    co_await FlushLog(sp, h);
    const uint64_t now = mem.LoadU64(l.SpanAddr(sp));
    if (now != h) continue;
    redo = mem.LoadU64(l.RedoAddr(chunk));
    committed = CommitOp(h, unit, l.size_log2, /*alloc=*/false, kMnUser, Contention(h));
    if (co_await AdminCas(l.SpanAddr(sp), h, committed)) break;
  }
  const uint64_t record = RedoForLog(committed);
  if (redo != record) co_await AdminCas(l.RedoAddr(chunk), redo, record);
  NoteHint(sp, committed);
}

// Eviction rule on the MN: header `h` was loaded just now (no suspension in
// between), so the redo entry loaded here is not newer than h's log.
Task<void> FineMemMn::FlushLog(uint64_t span, uint64_t h) {
  const finemem::TempLog log = LogOf(h);
  if (log.user == kNoUser) co_return;
  const uint64_t addr = layout_.RedoAddr(layout_.ChunkAt(span, log.unit));
  const uint64_t record = RedoForLog(h);
  const uint64_t redo = node_->memory().LoadU64(addr);
  if (redo == record) co_return;
  ++fm_stats_.logs_flushed;
  co_await AdminCas(addr, redo, record);
}

// Section hints are plain words (CNs WRITE them optimistically): a CPU store.
void FineMemMn::NoteHint(uint64_t span, uint64_t header) {
  auto& mem = node_->memory();
  const uint64_t addr = layout_.SectionAddr(span / kSpansPerSection);
  const uint64_t hint = mem.LoadU64(addr);
  const uint64_t want =
      WithHint(hint, static_cast<uint32_t>(span % kSpansPerSection), StateOf(header));
  if (want != hint) mem.StoreU64(addr, want);
}

// ---- MN: crash recovery --------------------------------------------------------

Task<ReclaimReport> FineMemMn::ReclaimCn(uint32_t cn) {
  co_await maint_.Lock();
  auto& mem = node_->memory();
  const MetaLayout& l = layout_;
  const uint32_t user = finemem::UserOfCn(cn);
  ReclaimReport report;
  // 1. The crashed CN's last ops that only a span header remembers.
  co_await node_->cpu().Work(cost_scan_, l.span_slots());
  for (uint64_t sp = 0; sp < l.spans; ++sp) {
    const uint64_t h = mem.LoadU64(l.SpanAddr(sp));
    if (LogOf(h).user != user) continue;
    co_await FlushLog(sp, h);
    co_await node_->cpu().Work(cost_recover_);
  }
  // 2. Every chunk the redo log gives to that CN.
  co_await node_->cpu().Work(cost_scan_, l.chunks);
  for (uint64_t c = 0; c < l.chunks; ++c) {
    const uint64_t redo = mem.LoadU64(l.RedoAddr(c));
    if (KindOf(redo) != kRedoAlloc || UserOf(redo) != user) continue;
    const uint32_t mask = RunMask(l.UnitOfChunk(c), l.size_log2);
    if ((Bitmap(mem.LoadU64(l.SpanAddr(l.SpanOfChunk(c)))) & mask) != mask) continue;
    co_await node_->cpu().Work(cost_recover_);
    co_await RevokeForReclaim(c);
    co_await ReleaseChunk(c);
    ++report.chunks_reclaimed;
  }
  fm_stats_.chunks_reclaimed += report.chunks_reclaimed;
  maint_.Unlock();
  co_return report;
}

// Kills every key the crashed holder may know: with (M, B) it held M; in any
// other state it may hold either window, so both are rotated.
Task<void> FineMemMn::RevokeForReclaim(uint64_t chunk) {
  const uint64_t cap_addr = layout_.CapAddr(chunk);
  for (int attempt = 0; attempt < kSettleAttempts; ++attempt) {
    const uint64_t cap = node_->memory().LoadU64(cap_addr);
    if (MainKey(cap) != 0 && BackupKey(cap) != 0) {
      fabric::Mw* held = WindowWithKey(chunk, MainKey(cap));
      if (!held) break;
      const uint32_t fresh = co_await Rotate(chunk, held);
      ++fm_stats_.keys_regenerated;
      if (co_await AdminCas(cap_addr, cap, MakeCap(BackupKey(cap), fresh))) co_return;
    } else if (co_await RotateBoth(chunk, cap)) {
      co_return;
    }
  }
  throw std::logic_error("finemem: cannot revoke the keys of chunk " + std::to_string(chunk));
}

// ---- CN side: plumbing ---------------------------------------------------------

FineMemCn::FineMemCn(const Deployment& d, uint32_t cn, MnControl* mn, const Knobs& k)
    : CnBase(d, cn, mn, FineMemCaps(k)), user_(finemem::UserOfCn(cn)) {
  if (user_ >= kMnUser) {
    throw ConfigError("finemem: at most " + std::to_string(kMnUser - 1) +
                      " CNs (14-bit user ids in the logs)");
  }
  cost_ipc_ = node_->Cost("finemem.ipc");
}

const MetaLayout& FineMemCn::Layout() {
  if (layout_.meta_rkey == 0) {
    const std::string pub = mn_->Published();
    if (pub.size() != sizeof(MetaLayout)) {
      throw std::logic_error("finemem: the MN published " + std::to_string(pub.size()) +
                             " bytes of layout, expected " + std::to_string(sizeof(MetaLayout)));
    }
    std::memcpy(&layout_, pub.data(), sizeof layout_);
  }
  const MetaLayout& l = layout_;
  if (l.meta_rkey == 0) throw std::logic_error("finemem: the MN has not been started");
  if (!cache_ready_) {
    hint_.assign(l.sections, 0);
    hint_known_.assign(l.sections, 0);
    span_.assign(l.span_slots(), 0);
    span_known_.assign(l.span_slots(), 0);
    flushed_header_.assign(l.span_slots(), 0);
    cache_ready_ = true;
  }
  return l;
}

void FineMemCn::InvalidateCache() {
  std::fill(hint_known_.begin(), hint_known_.end(), 0);
  std::fill(span_known_.begin(), span_known_.end(), 0);
}

Task<Status> FineMemCn::ReadMeta(Lane& lane, uint64_t remote, uint32_t len, uint64_t land_off) {
  fabric::SendWr wr;
  wr.opcode = Opcode::kRead;
  wr.sg_list = {{lane.ctrl_addr + land_off, len, lane.group->lkey()}};
  wr.remote_addr = remote;
  wr.rkey = Layout().meta_rkey;
  co_return FromWc(co_await Exec(lane, wr), "metadata READ");
}

Task<Status> FineMemCn::CasMeta(Lane& lane, uint64_t remote, uint64_t expected, uint64_t desired,
                                uint64_t* seen) {
  fabric::SendWr wr;
  wr.opcode = Opcode::kCmpAndSwp;
  wr.sg_list = {{lane.ctrl_addr + kLandCas, 8, lane.group->lkey()}};
  wr.remote_addr = remote;
  wr.rkey = Layout().meta_rkey;
  wr.compare_add = expected;
  wr.swap = desired;
  Status st = FromWc(co_await Exec(lane, wr), "metadata CAS");
  if (st.ok()) *seen = node_->memory().LoadU64(lane.ctrl_addr + kLandCas);
  co_return st;
}

// Optimistic, unsignaled: a later awaited WR on the lane orders after it.
void FineMemCn::PostHintWrite(Lane& lane, uint64_t section) {
  const uint64_t src = lane.ctrl_addr + kHintSrc + 8 * (hint_slot_++ % kHintSlots);
  node_->memory().StoreU64(src, hint_[section]);
  fabric::SendWr wr;
  wr.opcode = Opcode::kWrite;
  wr.flags = 0;
  wr.sg_list = {{src, 8, lane.group->lkey()}};
  wr.remote_addr = Layout().SectionAddr(section);
  wr.rkey = Layout().meta_rkey;
  (void)lane.qp->PostSend(wr);  // a broken lane shows on the next awaited WR
}

// ---- CN side: search -----------------------------------------------------------

// One READ loads the hints of the 16 sections around `section`.
Task<Status> FineMemCn::LoadHints(Lane& lane, uint64_t section) {
  const MetaLayout& l = Layout();
  const uint64_t first = section - section % kSpansPerSection;
  const uint64_t n = std::min<uint64_t>(kSpansPerSection, l.sections - first);
  Status st =
      co_await ReadMeta(lane, l.SectionAddr(first), static_cast<uint32_t>(n * 8), kLandBlock);
  if (!st.ok()) co_return st;
  ++stats_.header_reads;
  for (uint64_t i = 0; i < n; ++i) {
    hint_[first + i] = node_->memory().LoadU64(lane.ctrl_addr + kLandBlock + 8 * i);
    hint_known_[first + i] = 1;
  }
  co_return Status::Ok();
}

// One READ loads a section's 16 span headers; a stale section hint is repaired.
Task<Status> FineMemCn::LoadSpans(Lane& lane, uint64_t section) {
  const MetaLayout& l = Layout();
  const uint64_t first = section * kSpansPerSection;
  Status st = co_await ReadMeta(lane, l.SpanAddr(first), kSpansPerSection * 8, kLandBlock);
  if (!st.ok()) co_return st;
  ++stats_.header_reads;
  uint64_t derived = 0;
  for (uint32_t j = 0; j < kSpansPerSection; ++j) {
    span_[first + j] = node_->memory().LoadU64(lane.ctrl_addr + kLandBlock + 8 * j);
    span_known_[first + j] = 1;
    derived = WithHint(derived, j, StateOf(span_[first + j]));
  }
  if (hint_known_[section] && hint_[section] != derived) {
    hint_[section] = derived;
    PostHintWrite(lane, section);
    ++stats_.hint_repairs;
  }
  hint_[section] = derived;
  hint_known_[section] = 1;
  co_return Status::Ok();
}

SpanState FineMemCn::Effective(uint64_t span) const {
  if (span_known_[span]) return StateOf(span_[span]);
  return HintOf(hint_[span / kSpansPerSection], span % kSpansPerSection);
}

bool FineMemCn::MayFit(uint64_t span) const {
  const uint32_t size_log2 = layout_.size_log2;
  if (span_known_[span]) return FindRun(Bitmap(span_[span]), size_log2).has_value();
  const SpanState s = Effective(span);
  return s != kSpanFull && (size_log2 < 5 || s == kSpanFree);
}

// First fit from the cursor section: a partial span, else an empty one, in the
// first section that has either; a contended span only when nothing else fits.
// Section hints are optimistic (a CN's WRITE of a whole hint word can carry
// its stale view of the other spans), so a hint may call a span full that is
// not. An `exhaustive` search therefore reads each section's span headers
// instead of its hint: out of memory is reported only when the headers, the
// commit points, say every chunk is taken.
Task<Status> FineMemCn::PickSpan(Lane& lane, bool exhaustive, std::optional<uint64_t>* out) {
  const uint64_t sections = Layout().sections;
  std::optional<uint64_t> contended;
  for (uint64_t k = 0; k < sections; ++k) {
    const uint64_t s = (cursor_ + k) % sections;
    if (exhaustive && !span_known_[s * kSpansPerSection]) {
      Status st = co_await LoadSpans(lane, s);
      if (!st.ok()) co_return st;
    } else if (!hint_known_[s]) {
      Status st = co_await LoadHints(lane, s);
      if (!st.ok()) co_return st;
    }
    for (SpanState want : {kSpanPartial, kSpanFree}) {
      for (uint64_t sp = s * kSpansPerSection; sp < (s + 1) * kSpansPerSection; ++sp) {
        if (Effective(sp) == want && MayFit(sp)) {
          cursor_ = s;
          *out = sp;
          co_return Status::Ok();
        }
      }
    }
    for (uint64_t sp = s * kSpansPerSection; sp < (s + 1) * kSpansPerSection && !contended; ++sp) {
      if (Effective(sp) == kSpanContended && MayFit(sp)) contended = sp;
    }
  }
  *out = contended;
  co_return Status::Ok();
}

// CASes the span header until this allocation commits or the span is full.
Task<Status> FineMemCn::ClaimInSpan(Lane& lane, uint64_t span, uint32_t* failures, Claim* claim) {
  const MetaLayout& l = Layout();
  if (!span_known_[span]) {
    Status st = co_await LoadSpans(lane, span / kSpansPerSection);
    if (!st.ok()) co_return st;
  }
  uint32_t here = 0;  // failed CAS on this span
  for (;;) {
    const uint64_t h = span_[span];
    const std::optional<uint32_t> unit = FindRun(Bitmap(h), l.size_log2);
    if (!unit) {
      NoteSpan(lane, span, h);
      claim->done = false;
      co_return Status::Ok();
    }
    bool changed = false;
    Status st = co_await EnsureLogFlushed(lane, span, h, &changed);
    if (!st.ok()) co_return st;
    if (changed) continue;
    const uint32_t level = NextContention(Contention(h), here);
    const uint64_t next = CommitOp(h, *unit, l.size_log2, /*alloc=*/true, user_, level);
    uint64_t seen = 0;
    st = co_await CasMeta(lane, l.SpanAddr(span), h, next, &seen);
    if (!st.ok()) co_return st;
    if (seen == h) {
      span_[span] = next;
      if (level == 2 && Contention(h) != 2) ++stats_.contended_marks;
      *claim = Claim{true, span, *unit, next};
      co_return Status::Ok();
    }
    span_[span] = seen;  // the CAS returned the current header: the cache is fresh
    ++here;
    ++*failures;
  }
}

// Eviction rule: the temporary log in `h` must be in the redo log before a
// CAS replaces it. The redo entry and the header are READ in one pipelined
// batch (in this order); if the header is still `h`, the entry is not newer
// than h's log and CASing it to the log's record is safe.
Task<Status> FineMemCn::EnsureLogFlushed(Lane& lane, uint64_t span, uint64_t h, bool* changed) {
  *changed = false;
  const finemem::TempLog log = LogOf(h);
  if (log.user == kNoUser || flushed_header_[span] == h) co_return Status::Ok();
  const MetaLayout& l = Layout();
  const uint64_t redo_addr = l.RedoAddr(l.ChunkAt(span, log.unit));
  fabric::SendWr first;
  first.opcode = Opcode::kRead;
  first.flags = 0;
  first.sg_list = {{lane.ctrl_addr + kLandAux, 8, lane.group->lkey()}};
  first.remote_addr = redo_addr;
  first.rkey = l.meta_rkey;
  if (lane.qp->PostSend(first) != 0) co_return LaneBroken();
  Status st = co_await ReadMeta(lane, l.SpanAddr(span), 8, kLandAux2);
  if (!st.ok()) co_return st;
  const uint64_t redo = node_->memory().LoadU64(lane.ctrl_addr + kLandAux);
  const uint64_t now = node_->memory().LoadU64(lane.ctrl_addr + kLandAux2);
  if (now != h) {
    span_[span] = now;
    *changed = true;
    co_return Status::Ok();
  }
  const uint64_t record = RedoForLog(h);
  if (redo != record) {
    uint64_t seen = 0;
    st = co_await CasMeta(lane, redo_addr, redo, record, &seen);
    if (!st.ok()) co_return st;
    if (seen == redo) ++stats_.helped_flushes;  // else another helper or the owner won
  }
  flushed_header_[span] = h;
  co_return Status::Ok();
}

// Writes the section hint when span `span`'s state changed (optimistic).
void FineMemCn::NoteSpan(Lane& lane, uint64_t span, uint64_t header) {
  const uint64_t s = span / kSpansPerSection;
  if (!hint_known_[s]) return;
  const uint64_t want =
      WithHint(hint_[s], static_cast<uint32_t>(span % kSpansPerSection), StateOf(header));
  if (want == hint_[s]) return;
  hint_[s] = want;
  PostHintWrite(lane, s);
}

// ---- CN side: allocation -------------------------------------------------------

Task<Result<Chunk>> FineMemCn::Alloc(AccessGroup& g) {
  co_await node_->cpu().Work(cost_ipc_);  // application -> allocation service
  Result<Chunk> out;
  Lane& lane = g.lane(0);
  if (lane.broken()) {
    out.status = LaneBroken();
    co_return out;
  }
  const MetaLayout& l = Layout();
  uint32_t failures = 0;
  bool refreshed = false;
  for (;;) {
    std::optional<uint64_t> span;
    Status st = co_await PickSpan(lane, /*exhaustive=*/refreshed, &span);
    if (!st.ok()) {
      out.status = st;
      co_return out;
    }
    if (!span) {
      if (!refreshed) {  // the cache or the hints may only think everything is full
        InvalidateCache();
        refreshed = true;
        continue;
      }
      ++stats_.out_of_memory;
      out.status = Status(Code::kOutOfMemory, "every " + FormatSize(l.chunk_bytes) +
                                                  " chunk of the MN pool is allocated");
      co_return out;
    }
    Claim claim;
    st = co_await ClaimInSpan(lane, *span, &failures, &claim);
    if (!st.ok()) {
      out.status = st;
      co_return out;
    }
    if (!claim.done) continue;
    stats_.cas_retries += failures;
    stats_.max_retries = std::max<uint64_t>(stats_.max_retries, failures);
    if (failures > 0) ++stats_.allocs_retried;
    co_return co_await FinishAlloc(lane, claim);
  }
}

// After the commit: section hint, capability READ (main rkey), redo flush.
Task<Result<Chunk>> FineMemCn::FinishAlloc(Lane& lane, const Claim& claim) {
  const MetaLayout& l = Layout();
  Result<Chunk> out;
  const uint64_t c = l.ChunkAt(claim.span, claim.unit);
  NoteSpan(lane, claim.span, claim.header);
  if (after_commit_hook_ && after_commit_hook_(c)) {
    out.status = Status(Code::kLaneBroken, "allocation service stopped after the span CAS");
    co_return out;
  }
  out.status = co_await ReadMeta(lane, l.EntryAddr(c), 16, kLandEntry);
  if (!out.ok()) co_return out;
  const uint64_t cap = node_->memory().LoadU64(lane.ctrl_addr + kLandEntry);
  const uint64_t redo = node_->memory().LoadU64(lane.ctrl_addr + kLandEntry + 8);
  if (MainKey(cap) == 0) {
    throw std::logic_error("finemem: chunk " + std::to_string(c) + " committed without a key");
  }
  const uint64_t record = RedoForLog(claim.header);
  if (redo != record) {
    uint64_t seen = 0;
    out.status = co_await CasMeta(lane, l.RedoAddr(c), redo, record, &seen);
    if (!out.ok()) co_return out;
  }
  flushed_header_[claim.span] = claim.header;
  ++stats_.allocs;
  out.value.addr = l.ChunkAddr(c);
  out.value.bytes = l.chunk_bytes;
  out.value.id = c;
  out.value.rkeys = {MainKey(cap)};
  co_return out;
}

// ---- CN side: free ---------------------------------------------------------------

Task<Status> FineMemCn::Free(AccessGroup& g, const Chunk& c) {
  co_await node_->cpu().Work(cost_ipc_);
  Lane& lane = g.lane(0);
  if (lane.broken()) co_return LaneBroken();
  const MetaLayout& l = Layout();
  if (c.id >= l.chunks || c.addr != l.ChunkAddr(c.id) || c.bytes != l.chunk_bytes ||
      c.rkeys.empty() || c.rkeys[0] == 0) {
    co_return Status(Code::kInvalidArgument, "not a chunk of this FineMem pool");
  }
  Status st = co_await ReadMeta(lane, l.EntryAddr(c.id), 16, kLandEntry);
  if (!st.ok()) co_return st;
  uint64_t cap = node_->memory().LoadU64(lane.ctrl_addr + kLandEntry);
  const uint64_t redo = node_->memory().LoadU64(lane.ctrl_addr + kLandEntry + 8);
  if (KindOf(redo) != kRedoAlloc || UserOf(redo) != user_) {
    co_return Status(Code::kNotOwner, "chunk " + std::to_string(c.id) + " is not allocated to CN " +
                                          std::to_string(cn_index_) + " (redo log)");
  }
  if (MainKey(cap) != c.rkeys[0]) {
    co_return Status(Code::kInvalidArgument,
                     "chunk " + std::to_string(c.id) + "'s rkey is not current (freed already?)");
  }
  if (BackupKey(cap) == 0) {
    st = co_await RefillBackup(g, c.id, &cap);
    if (!st.ok()) co_return st;
  }
  st = co_await SwapKeys(lane, c, cap);
  if (!st.ok()) co_return st;
  uint64_t committed = 0;
  st = co_await ClearBits(lane, c.id, &committed);
  if (!st.ok()) co_return st;
  const uint64_t span = l.SpanOfChunk(c.id);
  NoteSpan(lane, span, committed);
  uint64_t seen = 0;
  st = co_await CasMeta(lane, l.RedoAddr(c.id), redo, RedoForLog(committed), &seen);
  if (!st.ok()) co_return st;
  flushed_header_[span] = committed;
  cursor_ = std::min(cursor_, span / kSpansPerSection);  // reuse freed space first
  ++stats_.frees;
  co_return Status::Ok();
}

// Rare path: the chunk was freed before and the MN has not regenerated its
// backup yet, so there is no second key to swap in. One RPC makes the MN
// rotate the stale window now; the reply carries the new capability entry.
Task<Status> FineMemCn::RefillBackup(AccessGroup& g, uint64_t chunk, uint64_t* cap) {
  RpcRequest req = GroupRequest(g, kRpcRefillBackup);
  req.arg[0] = chunk;
  const Result<RpcReply> r = co_await Call(g.lane(0), req);
  Status st = StatusFromReply(r, "backup rkey refill");
  if (!st.ok()) co_return st;
  ++stats_.backup_refills;
  *cap = r.value.aux[0];
  co_return Status::Ok();
}

// (M, B) -> (B, 0): the next owner gets B; M stays valid until the MN
// regenerates it (the stale window).
Task<Status> FineMemCn::SwapKeys(Lane& lane, const Chunk& c, uint64_t cap) {
  const MetaLayout& l = Layout();
  for (;;) {
    uint64_t seen = 0;
    Status st = co_await CasMeta(lane, l.CapAddr(c.id), cap, MakeCap(BackupKey(cap), 0), &seen);
    if (!st.ok()) co_return st;
    if (seen == cap) co_return Status::Ok();
    if (MainKey(seen) != c.rkeys[0] || BackupKey(seen) == 0) {
      co_return Status(Code::kInvalidArgument,
                       "chunk " + std::to_string(c.id) + " was freed concurrently");
    }
    cap = seen;
  }
}

// CASes the span header until the chunk's bits are clear (the free's commit).
Task<Status> FineMemCn::ClearBits(Lane& lane, uint64_t chunk, uint64_t* committed) {
  const MetaLayout& l = Layout();
  const uint64_t span = l.SpanOfChunk(chunk);
  const uint32_t unit = l.UnitOfChunk(chunk);
  const uint32_t mask = RunMask(unit, l.size_log2);
  if (!span_known_[span] || (Bitmap(span_[span]) & mask) != mask) {
    Status st = co_await ReadMeta(lane, l.SpanAddr(span), 8, kLandAux2);
    if (!st.ok()) co_return st;
    ++stats_.header_reads;
    span_[span] = node_->memory().LoadU64(lane.ctrl_addr + kLandAux2);
    span_known_[span] = 1;
  }
  for (;;) {
    const uint64_t h = span_[span];
    if ((Bitmap(h) & mask) != mask) {
      throw std::logic_error("finemem: chunk " + std::to_string(chunk) +
                             " is owned but its bits are clear");
    }
    bool changed = false;
    Status st = co_await EnsureLogFlushed(lane, span, h, &changed);
    if (!st.ok()) co_return st;
    if (changed) continue;
    const uint64_t next = CommitOp(h, unit, l.size_log2, /*alloc=*/false, user_, Contention(h));
    uint64_t seen = 0;
    st = co_await CasMeta(lane, l.SpanAddr(span), h, next, &seen);
    if (!st.ok()) co_return st;
    span_[span] = seen == h ? next : seen;
    if (seen == h) {
      *committed = next;
      co_return Status::Ok();
    }
    ++stats_.free_cas_retries;
  }
}

// ---- Registration --------------------------------------------------------------

extern const SystemInfo kFineMem;
const SystemInfo kFineMem{
    "finemem",
    "one-sided CAS bitmap allocation, pre-bound type-1 MWs, redo log, per-CN service (FineMem)",
    {{"granularity", KnobKind::kSize, "4KB", "chunk size: a power of two, 4KB..128KB", 4096,
      131072},
     {"regen_period_us", KnobKind::kInt, "100000",
      "rkey regeneration scan period (FineMem: 100 ms)", 1, 100000000}},
    [](const Deployment& d, const Knobs& k) -> std::unique_ptr<MemoryManager> {
      const uint64_t g = k.Size("granularity");
      if (!std::has_single_bit(g)) {
        throw ConfigError("finemem.granularity: expected a power of two (4KB..128KB), got " +
                          std::to_string(g) + " B");
      }
      return std::make_unique<BasicManager<FineMemMn, FineMemCn>>("finemem", d, k);
    },
    {},
    {{"granularity", "64KB"}},
    [](const Knobs&) { return finemem::kNeeds; }};

}  // namespace dmb::systems
