// ODRP's chains on the MN: metadata, building and arming every instance,
// stopping and inspecting a chain for repair (chains.h).
#include <algorithm>
#include <bit>
#include <cerrno>
#include <stdexcept>
#include <string>

#include "fabric/wqe_layout.h"
#include "systems/common/chain_wr.h"
#include "systems/odrp/chains.h"
#include "systems/odrp/chains_impl.h"

namespace dmb::systems::odrp {

using fabric::Opcode;
using fabric::QpState;
using fabric::RecvWr;
using fabric::SendWr;
using fabric::Sge;
using fabric::WqeLayout;
using impl::AtomicRead;
using impl::Post;
using impl::RearmTargets;
using impl::Stages;
using impl::StagesOf;
using impl::Target;

namespace {

constexpr uint32_t kMetaAccess =
    fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;
constexpr uint32_t kRwAccess = fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite;

}  // namespace

// ---- MN state ------------------------------------------------------------------

Task<std::unique_ptr<OdrpMetadata>> OdrpMetadata::Create(fabric::Cluster* cluster, fabric::Node* mn,
                                                         MnConfig cfg) {
  fabric::RequireCaps(*mn, {"cross_channel", "masked_atomics"}, "odrp");
  std::unique_ptr<OdrpMetadata> m(new OdrpMetadata());
  m->cluster_ = cluster;
  m->mn_ = mn;
  m->layout_ = MnLayout::ForPages(cfg.pages);
  const MnLayout& lay = m->layout_;
  fabric::Memory& mem = mn->memory();
  m->pd_ = mn->AllocPd();
  m->pool_ = mem.Alloc(lay.pages * kPageBytes, kPageBytes);
  m->meta_ = mem.Alloc(lay.meta_bytes(), lay.meta_align());
  if (m->pool_ == 0) throw std::logic_error("odrp: the page pool sits at address 0");
  mem.Fill(m->meta_, 0, lay.meta_bytes());
  // Every page in the queue, in order: element i = page i (BE).
  for (uint64_t i = 0; i < lay.pages; ++i) {
    uint8_t be[8];
    fabric::StoreBe64(be, m->page_addr(i));
    mem.Write(m->element_addr(i), be, 8);
  }
  mem.StoreU64(m->head_addr(), m->ring_addr());
  mem.StoreU64(m->tail_addr(), lay.Advance(m->ring_addr(), lay.pages));
  m->pool_mr_ = co_await mn->RegMr(m->pd_, m->pool_, lay.pages * kPageBytes, kRwAccess);
  m->meta_mr_ = co_await mn->RegMr(m->pd_, m->meta_, lay.meta_bytes(), kMetaAccess);
  m->boot_cq_ = mn->CreateCq(4, /*ignore_overrun=*/true);
  m->boot_ = chain::LoopbackQp(cluster, mn, {.pd = m->pd_, .cq = m->boot_cq_, .max_send_wr = 64});
  co_return m;
}

Task<const CnTable*> OdrpMetadata::AddCn(uint64_t swap_pages) {
  if (swap_pages == 0) throw std::invalid_argument("odrp: a CN needs at least one swap page");
  auto t = std::make_unique<CnTable>();
  t->cn = static_cast<uint32_t>(cns_.size());
  t->entries = swap_pages;
  t->tt_base = mn_->memory().Alloc(swap_pages * kTtEntryBytes, 64);
  mn_->memory().Fill(t->tt_base, 0, swap_pages * kTtEntryBytes);  // all unmapped
  // Remote atomic too: every chain first touches the entry with a FETCH_ADD
  // of 0, whose 8-byte alignment rule rejects a misaligned tt_addr.
  t->mr = co_await mn_->RegMr(pd_, t->tt_base, swap_pages * kTtEntryBytes,
                              kRwAccess | fabric::kRemoteAtomic);
  cns_.push_back(std::move(t));
  co_return cns_.back().get();
}

uint64_t OdrpMetadata::LoadElement(uint64_t slot) const {
  uint8_t be[8];
  mn_->memory().Read(element_addr(slot), be, 8);
  return fabric::LoadBe64(be);
}

uint64_t OdrpMetadata::LoadTtEntry(uint32_t cn, uint64_t swap_addr) const {
  uint8_t be[8];
  mn_->memory().Read(TtEntryAddr(cns_.at(cn)->tt_base, swap_addr), be, 8);
  return fabric::LoadBe64(be);
}

// ---- Chain (MN) -------------------------------------------------------------------

Task<std::unique_ptr<Chain>> Chain::Create(OdrpMetadata* mn, const CnTable* cn, ChainKind kind,
                                           uint32_t slots, uint32_t lanes) {
  std::unique_ptr<Chain> c(new Chain());
  c->mn_ = mn;
  c->cn_ = cn;
  c->geo_ = ChainGeometry::For(kind, slots, lanes);
  fabric::Node* n = mn->node();
  const ChainGeometry& g = c->geo_;
  c->rcq_ = n->CreateCq(16, true);
  c->rscq_ = n->CreateCq(16, true);
  c->lcq_ = n->CreateCq(16, true);
  // 3 argument SGEs, the re-arm values, the doorbell and (stores) the page.
  const bool page = kind == ChainKind::kUnmappedStore || kind == ChainKind::kMappedStore;
  const uint32_t recv_sges = static_cast<uint32_t>(3 + RearmTargets(kind).size() + 1 + page);
  fabric::QpInitAttr r;
  r.pd = mn->pd();
  r.send_cq = c->rscq_;
  r.recv_cq = c->rcq_;
  r.max_send_wr = g.slots * g.r_wrs;
  r.max_recv_wr = g.slots;
  r.max_send_sge = 1;
  r.max_recv_sge = recv_sges;
  r.access = 0;  // SEND only: no READ/WRITE/atomic from the CN through R
  r.cross_channel = true;
  r.manage_send = true;
  c->r_ = n->CreateQp(r);
  c->CreateLanes();
  if (c->r_->recv_ring_size() != g.slots) {
    throw std::logic_error("odrp chain: RQ ring size != slots");
  }
  if (kind != ChainKind::kLoad) {
    fabric::Memory& mem = n->memory();
    // faa[], ta[], chk[], snap[], then 16 zero bytes (Mapped Store's T) and
    // the word M3 copies into R0: the address of those zeros (BE).
    const uint64_t bytes = 32ull * g.slots + 24;
    c->scratch_ = mem.Alloc(bytes, 64);
    mem.Fill(c->scratch_, 0, bytes);
    uint8_t be[8];
    fabric::StoreBe64(be, c->zeros_addr());
    mem.Write(c->notify_src_addr(), be, 8);
    c->scratch_mr_ =
        co_await n->RegMr(mn->pd(), c->scratch_, bytes, fabric::kLocalWrite | fabric::kRemoteRead);
  }
  if (kind == ChainKind::kUnmappedStore || kind == ChainKind::kMappedStore) {
    c->staging_ = n->memory().Alloc(kPageBytes * g.slots, kPageBytes);
    c->staging_mr_ = co_await n->RegMr(mn->pd(), c->staging_, kPageBytes * g.slots,
                                       fabric::kLocalWrite | fabric::kRemoteRead);
  }
  co_return c;
}

// L_w and C_w (W lanes, each with its own lcq_w; every C_w signals into the
// shared gcq), and the ring checks.
void Chain::CreateLanes() {
  const ChainGeometry& g = geo_;
  fabric::Node* n = mn_->node();
  const bool swaps = g.kind == ChainKind::kUnmappedStore || g.kind == ChainKind::kInvalidate;
  // EndianSwap: 8 x 1 B; T zeroes two fields with one READ (not Load's).
  const uint32_t l_sges = swaps ? 8u : g.kind == ChainKind::kMappedStore ? 2u : 1u;
  const uint32_t per_lane = g.slots / g.lanes;
  gcq_ = n->CreateCq(16, true);
  for (uint32_t w = 0; w < g.lanes; ++w) {
    fabric::Cq* lcq = w == 0 ? lcq_ : n->CreateCq(16, true);
    lane_lcq_.push_back(lcq);
    lane_l_.push_back(chain::LoopbackQp(mn_->cluster(), n,
                                        {.pd = mn_->pd(),
                                         .cq = lcq,
                                         .max_send_wr = per_lane * g.l_wrs,
                                         .max_send_sge = l_sges,
                                         .managed = true}));
    lane_c_.push_back(chain::LoopbackQp(
        mn_->cluster(), n,
        {.pd = mn_->pd(), .cq = gcq_, .max_send_wr = per_lane * g.c_wrs, .managed = true}));
  }
  l_ = lane_l_[0];
  c_ = lane_c_[0];
  for (fabric::Qp* q : qps()) {
    const bool is_l = std::find(lane_l_.begin(), lane_l_.end(), q) != lane_l_.end();
    const uint64_t need =
        q == r_ ? uint64_t{g.slots} * g.r_wrs : uint64_t{per_lane} * (is_l ? g.l_wrs : g.c_wrs);
    if (q->send_ring_size() != need) {
      throw std::logic_error("odrp chain: SQ ring of qp " + std::to_string(q->qp_num()) +
                             " holds " + std::to_string(q->send_ring_size()) + " WQEs, need " +
                             std::to_string(need));
    }
  }
}

std::vector<fabric::Qp*> Chain::qps() const {
  std::vector<fabric::Qp*> v{r_};
  v.insert(v.end(), lane_l_.begin(), lane_l_.end());
  v.insert(v.end(), lane_c_.begin(), lane_c_.end());
  return v;
}

chain::ChainParts Chain::Parts() const {
  chain::ChainParts p;
  p.mrs = {scratch_mr_, staging_mr_};
  p.qps = qps();
  p.cqs = {rcq_, rscq_, gcq_};
  p.cqs.insert(p.cqs.end(), lane_lcq_.begin(), lane_lcq_.end());  // lcq_ is lane 0's
  if (scratch_mr_) p.memory.push_back({scratch_, scratch_mr_->length()});
  if (staging_mr_) p.memory.push_back({staging_, staging_mr_->length()});
  return p;
}

uint32_t Chain::PrevSlot(uint32_t s) const {
  const uint32_t lanes = geo_.lanes, per_lane = geo_.slots / lanes;
  return ((s / lanes + per_lane - 1) % per_lane) * lanes + s % lanes;
}

// T, the lane's ticket: zeroes the reply source R0 of the lane's previous
// instance sent (C_w's instance is enabled only from that R0's tail, R1),
// so that no R0 ever runs on an address a finished request left, and
// (`second`, all but Load) the previous instance's copy of the CN's
// tt_addr, so that an instance run again without a request is refused.
SendWr Chain::TicketWr(uint32_t s, const Sge* second) const {
  SendWr t;
  t.wr_id = uint64_t{s} << 8 | 0x11;
  t.opcode = Opcode::kRead;
  t.sg_list = {{InstWqe(kR, PrevSlot(s), 0) + WqeLayout::SegAddr(0), 8, r_->wq_lkey()}};
  if (second == nullptr) {  // Load: no chain scratch, the MN's zero word
    t.remote_addr = mn_->zero_addr();
    t.rkey = mn_->meta_mr()->rkey();
  } else {
    t.remote_addr = zeros_addr();
    t.rkey = scratch_mr_->rkey();
    t.sg_list.push_back(*second);
  }
  t.flags = 0;  // C_w's WAITs count the data steps only
  return t;
}

// N (M3): R0's source, the address of the chain's zero bytes, only once
// every earlier step of the instance completed (FENCE).
SendWr Chain::NotifySourceWr(uint32_t s) const {
  SendWr n;
  n.wr_id = uint64_t{s} << 8 | 0x1f;
  n.opcode = Opcode::kRead;
  n.remote_addr = notify_src_addr();
  n.rkey = scratch_mr_->rkey();
  n.sg_list = {{InstWqe(kR, s, 0) + WqeLayout::SegAddr(0), 8, r_->wq_lkey()}};
  n.flags = fabric::kSignaled | fabric::kFence;
  return n;
}

// R0: the 8-byte notification (zeros, from N's source) to the CN's reply
// word, imm = seq; R1: C_w's next instance.
void Chain::BuildReply(uint32_t s, std::vector<SendWr>* r) const {
  SendWr n;
  n.wr_id = uint64_t{s} << 8 | 0x20;
  n.opcode = Opcode::kWriteWithImm;
  n.sg_list = {{0 /* <- N */, 8, scratch_mr_->lkey()}};
  n.remote_addr = 0;  // <- RECV
  n.rkey = 0;         // <- RECV
  n.imm_data = 0;     // <- RECV (seq)
  r->push_back(n);
  r->push_back(chain::EnableWr(lane_c_[s % geo_.lanes]));
}

// The RECV's arguments: the tt_addr into `tt`, R0's remote address, rkey
// and imm.
void Chain::SetArgs(uint32_t s, Sge tt, RecvWr* rr) const {
  const uint32_t rwq = r_->wq_lkey();
  rr->sg_list = {tt,
                 {InstWqe(kR, s, 0) + WqeLayout::kRemoteAddr, 12, rwq},
                 {InstWqe(kR, s, 0) + WqeLayout::kImmInvQpn, 4, rwq}};
}

// C_w: WAIT rcq; per stage ENABLE L_w, WAIT lcq_w; WAIT gcq; ENABLE R
// (signaled: gcq); NOP padding.
void Chain::BuildGate(uint32_t s, std::vector<SendWr>* c) const {
  const uint32_t w = s % geo_.lanes;
  c->push_back(chain::WaitWr(rcq_));
  for (size_t i = 0; i < StagesOf(geo_.kind).ends.size(); ++i) {
    c->push_back(chain::EnableWr(lane_l_[w]));
    c->push_back(chain::WaitWr(lane_lcq_[w]));
  }
  c->push_back(chain::WaitWr(gcq_));
  SendWr gate = chain::EnableWr(r_);
  gate.flags = fabric::kSignaled;  // -> gcq
  gate.wr_id = uint64_t{s} << 8 | 0x30;
  c->push_back(gate);
  while (c->size() < geo_.c_wrs) c->push_back(chain::NopWr());
}

void Chain::BuildLoad(uint32_t s, std::vector<SendWr>* l, std::vector<SendWr>* r,
                      std::vector<SendWr>* c, RecvWr* rr) const {
  const uint32_t w = s % geo_.lanes;
  l->push_back(TicketWr(s, nullptr));  // T
  // L1: the TT entry into R0's local address. FETCH_ADD 0: a misaligned
  // tt_addr is refused (an 8-byte READ would take half of two entries).
  SendWr rd = AtomicRead(0 /* <- RECV: tt_addr */, cn_->mr->rkey(),
                         InstWqe(kR, s, 0) + WqeLayout::SegAddr(0), r_->wq_lkey());
  rd.wr_id = uint64_t{s} << 8 | 0x10;
  l->push_back(rd);
  // R0: the page to the CN, with the notification (signaled: Idle counts it).
  SendWr wr;
  wr.wr_id = uint64_t{s} << 8 | 0x20;
  wr.opcode = Opcode::kWriteWithImm;
  wr.sg_list = {{0 /* <- L1 */, static_cast<uint32_t>(kPageBytes), mn_->pool_mr()->lkey()}};
  wr.remote_addr = 0;  // <- RECV
  wr.rkey = 0;         // <- RECV
  wr.imm_data = 0;     // <- RECV (seq)
  r->push_back(wr);
  r->push_back(chain::EnableWr(lane_c_[w]));  // R1: C_w's next instance
  BuildGate(s, c);
  SetArgs(s, {InstWqe(kL, s, 1) + WqeLayout::kRemoteAddr, 8, lane_l_[w]->wq_lkey()}, rr);
}

// One L step: opcode, remote address and key, one SGE, flags.
SendWr Chain::Step(uint32_t s, uint32_t id, Opcode op, uint64_t remote, uint32_t rkey, Sge sge,
                   uint8_t flags) const {
  SendWr w;
  w.wr_id = uint64_t{s} << 8 | id;
  w.opcode = op;
  w.remote_addr = remote;
  w.rkey = rkey;
  w.sg_list = {sge};
  w.flags = flags;
  return w;
}

void Chain::BuildStore(uint32_t s, std::vector<SendWr>* l, std::vector<SendWr>* r,
                       std::vector<SendWr>* c, RecvWr* rr) const {
  const uint32_t lwq = lane_l_[s % geo_.lanes]->wq_lkey(), skey = scratch_mr_->lkey();
  const uint32_t srkey = scratch_mr_->rkey(), meta_key = mn_->meta_mr()->rkey();
  const uint32_t tt_key = cn_->mr->rkey();
  const uint64_t faa = faa_addr(s), tag = uint64_t{s} << 8;
  auto field = [&](uint32_t k, uint64_t off) { return InstWqe(kL, s, k) + off; };
  constexpr uint8_t kSig = fabric::kSignaled, kSigFence = fabric::kSignaled | fabric::kFence;
  const Sge ta_prev{ta_addr(PrevSlot(s)), 8, skey};
  l->push_back(TicketWr(s, &ta_prev));  // T
  // S: the one read of the CN's tt_addr (ta[s]) into snap[s].
  l->push_back(Step(s, 0x10, Opcode::kRead, ta_addr(s), srkey, {snap_addr(s), 8, skey}, 0));
  // U1: claim an element.
  l->push_back(chain::RingAdvanceWr(mn_->head_addr(), meta_key, mn_->layout().BoundaryMask(), faa,
                                    skey, tag | 1));
  // U2, U3: EndianSwap the element address into U4 and U6 (U2 fenced: after
  // U1's result, and S, landed; U3 follows U2).
  SendWr u2 = chain::SwapReadWr(faa, srkey, field(kStoreU4, WqeLayout::kRemoteAddr), lwq, tag | 2);
  u2.flags = kSigFence;
  l->push_back(u2);
  l->push_back(
      chain::SwapReadWr(faa, srkey, field(kStoreU6, WqeLayout::kRemoteAddr), lwq, tag | 3));
  // A1, A2: the snapshot into CHK and U5 (after S: they follow U2's FENCE).
  l->push_back(Step(s, 0x11, Opcode::kRead, snap_addr(s), srkey,
                    {field(kStoreChk, WqeLayout::kRemoteAddr), 8, lwq}, kSig));
  l->push_back(Step(s, 0x12, Opcode::kRead, snap_addr(s), srkey,
                    {field(kStoreU5, WqeLayout::kRemoteAddr), 8, lwq}, kSig));
  // U4: the free page's address -> U7's local address (fenced: after U2).
  l->push_back(Step(s, 4, Opcode::kRead, 0 /* <- U2 */, meta_key,
                    {field(kStoreU7, WqeLayout::SegAddr(0)), 8, lwq}, kSigFence));
  // CHK: FETCH_ADD 0 on the TT entry: refuses a misaligned or out-of-table
  // tt_addr before anything is written (fenced: after U4 landed, so a
  // refusal leaves the repair U4's element).
  SendWr chk = AtomicRead(0 /* <- A1 */, tt_key, chk_addr(s), skey);
  chk.wr_id = tag | 0x13;
  chk.flags = kSigFence;
  l->push_back(chk);
  // U7: store the page (staging -> page) BEFORE it is mapped (fenced: after
  // CHK passed and U4 landed in its local address). A null page (empty
  // queue) faults here, before U5 maps anything.
  l->push_back(Step(s, 7, Opcode::kRead, staging_addr(s), staging_mr_->rkey(),
                    {0 /* <- U4 */, static_cast<uint32_t>(kPageBytes), mn_->pool_mr()->lkey()},
                    kSigFence));
  // U5: map it: U7's local address field -> the TT entry (after U7's FENCE).
  l->push_back(Step(s, 5, Opcode::kWrite, 0 /* <- A2 */, tt_key,
                    {field(kStoreU7, WqeLayout::SegAddr(0)), 8, lwq}, kSig));
  // U6: zero the element.
  l->push_back(Step(s, 6, Opcode::kWrite, 0 /* <- U3 */, meta_key,
                    {mn_->zero_addr(), 8, mn_->meta_mr()->lkey()}, kSig));
  l->push_back(NotifySourceWr(s));  // N: after U7 completed (U5, U6 executed before its READ)
  while (l->size() < geo_.l_wrs) l->push_back(chain::NopWr());
  BuildReply(s, r);
  BuildGate(s, c);
  SetArgs(s, {ta_addr(s), 8, skey}, rr);
}

void Chain::BuildMappedStore(uint32_t s, std::vector<SendWr>* l, std::vector<SendWr>* r,
                             std::vector<SendWr>* c, RecvWr* rr) const {
  const uint32_t lwq = lane_l_[s % geo_.lanes]->wq_lkey();
  const uint64_t tag = uint64_t{s} << 8;
  const Sge m1_prev{InstWqe(kL, PrevSlot(s), 1) + WqeLayout::kRemoteAddr, 8, lwq};
  l->push_back(TicketWr(s, &m1_prev));  // T
  // M1: the TT entry (the mapped page's address, BE) -> M2's local address.
  SendWr m1 = AtomicRead(0 /* <- RECV: tt_addr */, cn_->mr->rkey(),
                         InstWqe(kL, s, 2) + WqeLayout::SegAddr(0), lwq);
  m1.wr_id = tag | 1;
  l->push_back(m1);
  // M2: store the page in place (staging -> page). Fenced: its local
  // address is M1's result.
  l->push_back(Step(s, 2, Opcode::kRead, staging_addr(s), staging_mr_->rkey(),
                    {0 /* <- M1 */, static_cast<uint32_t>(kPageBytes), mn_->pool_mr()->lkey()},
                    fabric::kSignaled | fabric::kFence));
  l->push_back(NotifySourceWr(s));  // M3: R0's source, once M2 completed: the store is done
  BuildReply(s, r);
  BuildGate(s, c);
  SetArgs(s, {InstWqe(kL, s, 1) + WqeLayout::kRemoteAddr, 8, lwq}, rr);
}

void Chain::BuildInvalidate(uint32_t s, std::vector<SendWr>* l, std::vector<SendWr>* r,
                            std::vector<SendWr>* c, RecvWr* rr) const {
  const uint32_t lwq = lane_l_[s % geo_.lanes]->wq_lkey(), skey = scratch_mr_->lkey();
  const uint32_t srkey = scratch_mr_->rkey(), meta_key = mn_->meta_mr()->rkey();
  const uint32_t tt_key = cn_->mr->rkey();
  auto field = [&](uint32_t k) { return InstWqe(kL, s, k) + WqeLayout::kRemoteAddr; };
  constexpr uint8_t kSig = fabric::kSignaled, kSigFence = fabric::kSignaled | fabric::kFence;
  const Sge ta_prev{ta_addr(PrevSlot(s)), 8, skey};
  l->push_back(TicketWr(s, &ta_prev));  // T
  // S: the one read of the CN's tt_addr (ta[s]) into snap[s] (unsignaled).
  l->push_back(Step(s, 0x10, Opcode::kRead, ta_addr(s), srkey, {snap_addr(s), 8, skey}, 0));
  // V1, V2: the snapshot into V3 and V7 (V1 fenced: after S landed).
  l->push_back(Step(s, 1, Opcode::kRead, snap_addr(s), srkey, {field(kInvV3), 8, lwq}, kSigFence));
  l->push_back(Step(s, 2, Opcode::kRead, snap_addr(s), srkey, {field(kInvV7), 8, lwq}, kSig));
  // V3: the TT entry (the page address, BE) -> V4's remote address.
  SendWr v3 = AtomicRead(0 /* <- V1 */, tt_key, field(kInvV4), lwq);
  v3.wr_id = uint64_t{s} << 8 | 3;
  v3.flags = kSigFence;  // after V1 landed in it
  l->push_back(v3);
  // V4: the check: the entry must name a pool page (0 fails the bounds check).
  l->push_back(Step(s, 4, Opcode::kRead, 0 /* <- V3 */, mn_->pool_mr()->rkey(),
                    {chk_addr(s), 8, skey}, kSigFence));
  // V7: unmap (zero the TT entry), only once V4 completed (the check passed).
  l->push_back(Step(s, 7, Opcode::kWrite, 0 /* <- V2 */, tt_key,
                    {mn_->zero_addr(), 8, mn_->meta_mr()->lkey()}, kSigFence));
  // V5: claim the tail element (after the unmap: it follows V7).
  l->push_back(chain::RingAdvanceWr(mn_->tail_addr(), meta_key, mn_->layout().BoundaryMask(),
                                    faa_addr(s), skey, uint64_t{s} << 8 | 5));
  // V6: EndianSwap the old tail into V8's remote address (after V5's result).
  SendWr v6 = chain::SwapReadWr(faa_addr(s), srkey, field(kInvV8), lwq, uint64_t{s} << 8 | 6);
  v6.flags = kSigFence;
  l->push_back(v6);
  // V8: enqueue: *old_tail = page address (V4's remote address field, BE)
  // (fenced: after V6 landed in its remote address).
  l->push_back(
      Step(s, 8, Opcode::kWrite, 0 /* <- V6 */, meta_key, {field(kInvV4), 8, lwq}, kSigFence));
  l->push_back(NotifySourceWr(s));  // N: its READ response follows V7, V8
  while (l->size() < geo_.l_wrs) l->push_back(chain::NopWr());
  BuildReply(s, r);
  BuildGate(s, c);
  SetArgs(s, {ta_addr(s), 8, skey}, rr);
}

void Chain::BuildInstance(uint32_t s, std::vector<SendWr> (&wr)[3], RecvWr* rr) const {
  rr->wr_id = s;
  switch (geo_.kind) {
    case ChainKind::kLoad:
      BuildLoad(s, &wr[kL], &wr[kR], &wr[kC], rr);
      break;
    case ChainKind::kUnmappedStore:
      BuildStore(s, &wr[kL], &wr[kR], &wr[kC], rr);
      break;
    case ChainKind::kMappedStore:
      BuildMappedStore(s, &wr[kL], &wr[kR], &wr[kC], rr);
      break;
    case ChainKind::kInvalidate:
      BuildInvalidate(s, &wr[kL], &wr[kR], &wr[kC], rr);
      break;
  }
  // Lap-0 values of this instance, from the same function the CN uses.
  const std::vector<Target> targets = RearmTargets(geo_.kind);
  const std::vector<uint64_t> v = RearmValues(geo_.kind, s, geo_.lanes);
  for (size_t i = 0; i < targets.size(); ++i) {
    SendWr& w = wr[targets[i].role].at(targets[i].wqe);
    if (w.opcode == Opcode::kWait) {
      w.wait_count = v[i];
    } else if (w.opcode == Opcode::kSendEnable) {
      w.enable_index = v[i];
    } else {
      throw std::logic_error("odrp chain: re-arm target is neither WAIT nor ENABLE");
    }
  }
}

Task<void> Chain::Arm() {
  if (armed_) throw std::logic_error("odrp chain: armed twice");
  if (r_->state() != QpState::kRts) {
    throw fabric::VerbsError(EINVAL, "odrp chain: connect cn_qp() to the CN before Arm");
  }
  const std::vector<Target> targets = RearmTargets(geo_.kind);
  uint64_t posted = 0;
  for (uint32_t s = 0; s < geo_.slots; ++s) {
    std::vector<SendWr> wr[3];
    RecvWr rr;
    BuildInstance(s, wr, &rr);
    if (s == 0) {  // which L WQEs of an instance complete into lcq_w (WorkersSettled)
      l_signaled_before_.assign(1, 0);
      for (const SendWr& w : wr[kL]) {
        l_signaled_before_.push_back(l_signaled_before_.back() +
                                     ((w.flags & fabric::kSignaled) != 0));
      }
    }
    // The RECV of slot s: arguments for instance s, then the re-arm values
    // for instance s - lag, the doorbell record, and (stores) the page.
    const uint32_t p = static_cast<uint32_t>((s + geo_.slots - geo_.rearm_lag()) % geo_.slots);
    for (const Target& t : targets) {
      const Role role = static_cast<Role>(t.role);
      rr.sg_list.push_back(
          {InstWqe(role, p, t.wqe) + WqeLayout::kOperand0, 8, qp(role, p)->wq_lkey()});
    }
    rr.sg_list.push_back({r_->recv_doorbell_addr(), 4, r_->wq_lkey()});
    if (staging_mr_ != nullptr) {
      rr.sg_list.push_back(
          {staging_addr(s), static_cast<uint32_t>(kPageBytes), staging_mr_->lkey()});
    }
    for (Role role : {kL, kR, kC}) {
      if (wr[role].size() != wrs(role)) throw std::logic_error("odrp chain: instance size");
      for (const SendWr& w : wr[role]) Post(qp(role, s), w, ChainKindName(geo_.kind));
      posted += wr[role].size();
    }
    if (const int rc = r_->PostRecv(rr); rc != 0) {
      throw fabric::VerbsError(
          rc, "odrp chain: posting the RECV of slot " + std::to_string(s) + " failed");
    }
    ++posted;
  }
  // Start every C (C_w)'s first instance; from then on R's tail of each
  // instance enables the lane's next.
  for (fabric::Qp* cq : lane_c_) {
    SendWr boot = chain::EnableWr(cq);
    boot.enable_index = geo_.c_wrs;
    chain::PostOrThrow(mn_->boot_qp(), boot, "odrp chain", "boot ENABLE");
    ++posted;
  }
  armed_ = true;
  co_await mn_->node()->cpu().Work(mn_->node()->Cost("verbs.post_send"), posted);
}

bool Chain::Faulted() const {
  const std::vector<fabric::Qp*> all = qps();
  return std::any_of(all.begin(), all.end(),
                     [](fabric::Qp* q) { return q->QueryState() == QpState::kErr; });
}

bool Chain::Idle() const { return rscq_->total_completions() >= requests_taken(); }

void Chain::Stop() {
  for (fabric::Qp* q : qps()) {
    const QpState st = q->QueryState();
    if (st != QpState::kErr && st != QpState::kReset) q->Modify(QpState::kErr);
  }
}

void Chain::StopControl() {
  for (fabric::Qp* q : lane_c_) {
    if (q->QueryState() != QpState::kErr) q->Modify(QpState::kErr);
  }
}

bool Chain::WorkersSettled() const {
  for (uint32_t w = 0; w < geo_.lanes; ++w) {
    fabric::Qp* q = lane_l_[w];
    if (q->QueryState() == QpState::kErr) continue;
    const uint64_t e = q->counters().send_wrs_executed;
    const uint64_t expect =
        e / geo_.l_wrs * geo_.l_signaled() + l_signaled_before_.at(e % geo_.l_wrs);
    if (lane_lcq_[w]->total_completions() < expect) return false;
  }
  return true;
}

Chain::LaneProgress Chain::LastInstance(uint32_t w) const {
  const uint64_t e = lane_l_.at(w)->counters().send_wrs_executed;
  if (e == 0) return {};
  const uint64_t j = (e - 1) / geo_.l_wrs;  // the lane's instance
  LaneProgress p;
  p.steps = static_cast<uint32_t>(e - j * geo_.l_wrs);
  p.slot = static_cast<uint32_t>((j % (geo_.slots / geo_.lanes)) * geo_.lanes + w);
  return p;
}

uint64_t Chain::ClaimedPosition(uint32_t slot) const {
  if (geo_.kind != ChainKind::kUnmappedStore && geo_.kind != ChainKind::kInvalidate) {
    throw std::logic_error("odrp chain: ClaimedPosition of a chain that claims no position");
  }
  return mn_->node()->memory().LoadU64(faa_addr(slot % geo_.slots));
}

uint64_t Chain::LoadWqeField(uint32_t slot, uint32_t step, uint64_t off) const {
  uint8_t be[8];
  mn_->node()->memory().Read(InstWqe(kL, slot % geo_.slots, step) + off, be, 8);
  return fabric::LoadBe64(be);
}

uint64_t Chain::DequeuedElement(uint32_t slot) const {
  if (geo_.kind != ChainKind::kUnmappedStore) {
    throw std::logic_error("odrp chain: DequeuedElement of a non-dequeuing chain");
  }
  return LoadWqeField(slot, kStoreU7, WqeLayout::SegAddr(0));
}

uint64_t Chain::InvalidatedPage(uint32_t slot) const {
  if (geo_.kind != ChainKind::kInvalidate) {
    throw std::logic_error("odrp chain: InvalidatedPage of a non-invalidating chain");
  }
  return LoadWqeField(slot, kInvV4, WqeLayout::kRemoteAddr);
}

uint64_t Chain::RefusedRequest() const {
  if (geo_.kind != ChainKind::kLoad && geo_.kind != ChainKind::kMappedStore) {
    throw std::logic_error("odrp chain: RefusedRequest of a chain whose refusals the MN repairs");
  }
  if (geo_.kind == ChainKind::kMappedStore && r_->QueryState() != QpState::kErr) {
    // A refused M1 or M2 after the first lap: C_w's WAIT for M3 is never
    // met (the sim flushes no ring WQE past the MN CPU's post), so the gate
    // holds R before the refused request's R0: the next request gcq has
    // not released, if its lane's worker is in ERR.
    const uint64_t m = gcq_->total_completions();
    const bool lane_err = lane_l_[m % geo_.lanes]->QueryState() == QpState::kErr;
    return lane_err && m < requests_taken() ? m : kNoRequest;
  }
  // R stops at the WQE that failed: the last one it started. A refusal is
  // always an R0 (L faults leave R0 the 0 its ticket wrote).
  const uint64_t started = r_->counters().send_wrs_executed;
  if (r_->QueryState() != QpState::kErr || started == 0 || (started - 1) % geo_.r_wrs != 0) {
    return kNoRequest;
  }
  const uint64_t m = (started - 1) / geo_.r_wrs;
  const uint32_t w = static_cast<uint32_t>(m % geo_.lanes);
  const uint64_t done = lane_lcq_[w]->successful_completions();
  if (geo_.kind == ChainKind::kMappedStore) {
    // M1..M3 of every earlier instance of the lane succeeded; fewer than 3
    // of m's: M1 refused the tt_addr or M2 found the entry unmapped.
    return done < geo_.l_signaled() * (m / geo_.lanes + 1) ? m : kNoRequest;
  }
  if (done <= m / geo_.lanes) return m;  // L1 refused / not run
  uint8_t be[8];
  const fabric::Memory& mem = mn_->node()->memory();
  mem.Read(InstWqe(kL, static_cast<uint32_t>(m % geo_.slots), 1) + WqeLayout::kRemoteAddr, be, 8);
  const uint64_t tt = fabric::LoadBe64(be);  // the request's tt_addr
  if (tt < cn_->tt_base || tt >= cn_->tt_base + cn_->entries * kTtEntryBytes || tt % 8 != 0 ||
      mem.LoadU64(tt) == 0) {
    return m;  // an unmapped entry
  }
  return kNoRequest;  // R0 ran on a page: the CN's end failed (e.g. its buffer's rkey)
}

}  // namespace dmb::systems::odrp
