// finemem, the CN side: the one-sided bitmap search, allocation and free
// (finemem.h "CN"; the bits in finemem_layout.h).
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "systems/finemem/finemem.h"
#include "systems/finemem/finemem_impl.h"

namespace dmb::systems {

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

}  // namespace dmb::systems
