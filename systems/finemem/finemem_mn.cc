// finemem, the MN side: setup, the MN-side RPC, rkey regeneration and crash
// recovery (finemem.h "MN"; the bits in finemem_layout.h).
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "systems/finemem/finemem.h"
#include "systems/finemem/finemem_impl.h"

namespace dmb::systems {

// ---- MN side -------------------------------------------------------------------

FineMemMn::FineMemMn(const Deployment& d, const Knobs& k) : MnBase(d, k) {
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
  l.chunks = pool_bytes_ / g;  // at least 1: SystemInfo::check_pool
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

}  // namespace dmb::systems
