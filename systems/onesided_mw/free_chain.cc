#include "systems/onesided_mw/free_chain.h"

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>

#include "systems/common/chain_teardown.h"
#include "systems/common/chain_wr.h"

namespace dmb::systems::onesided_mw {

using fabric::Opcode;
using fabric::QpState;
using fabric::RecvWr;
using fabric::SendWr;
using fabric::WqeLayout;

namespace {

// Scratch area of one chain: constants, then one 16 B slot per instance.
constexpr uint64_t kScratchZeroOff = 0;    // 8 zero bytes (L2's source)
constexpr uint64_t kScratchSinkOff = 8;    // 16 B where L1 drops what it does not need
constexpr uint64_t kScratchZerosOff = 64;  // 128 zero bytes (recycling L8's source)
constexpr uint64_t kScratchSlotsOff = 192;
// Per instance: +0 FAA result (LE), +8 staged handle (BE, L5's source, by
// U's copy), +16 owner_ptr and +24 handle as L1 read them (the copy's source).
constexpr uint64_t kSlotBytes = 32;

void Post(fabric::Qp* qp, const SendWr& wr, const char* what) {
  chain::PostOrThrow(qp, wr, "onesided_mw free chain", what);
}

SendWr LocalInv(uint64_t wr_id) {
  SendWr w;
  w.wr_id = wr_id;
  w.opcode = Opcode::kLocalInv;
  w.invalidate_rkey = 0;  // <- L1 (rkey 0 names no MW)
  return w;
}

}  // namespace

Task<std::unique_ptr<FreeChain>> FreeChain::Create(fabric::Cluster* cluster, Metadata* md,
                                                   FreeChainConfig cfg) {
  fabric::Node* mn = md->node();
  fabric::RequireCaps(*mn, {"cross_channel", "mw_type2", "masked_atomics"},
                      "onesided_mw free chain");
  const uint32_t n = cfg.max_instances;
  if (n == 0 || cfg.lanes == 0 || n % cfg.lanes != 0) {
    throw std::invalid_argument(
        "onesided_mw free chain: max_instances must be a positive multiple of lanes, got " +
        std::to_string(n) + " / " + std::to_string(cfg.lanes));
  }
  const uint32_t per_lane = n / cfg.lanes;
  if (cfg.recycle && (per_lane < 4 || !std::has_single_bit(per_lane))) {
    throw std::invalid_argument(
        "onesided_mw free chain: a recycling chain needs a power of two >= 4 instances per "
        "lane, got " +
        std::to_string(n) + " / " + std::to_string(cfg.lanes));
  }
  const uint32_t g = md->group_size();
  if (g > kMaxGroupSize) {
    throw std::invalid_argument("onesided_mw free chain: group size " + std::to_string(g) + " > " +
                                std::to_string(kMaxGroupSize) +
                                " (the entry READ scatters 2G + 3 SGEs)");
  }
  std::unique_ptr<FreeChain> ch(new FreeChain());
  ch->cluster_ = cluster;
  ch->mn_ = mn;
  ch->md_ = md;
  ch->cfg_ = cfg;
  const bool rec = cfg.recycle;

  // Counted only (the MN CPU never polls them); WAITs read the counts.
  ch->frcq_ = mn->CreateCq(n, /*ignore_overrun=*/true);
  ch->fscq_ = mn->CreateCq(n, true);
  ch->rscq_ = mn->CreateCq(n, true);
  ch->ccq_ = mn->CreateCq(n, true);

  fabric::QpInitAttr f;
  f.pd = md->data_pd();
  f.send_cq = ch->fscq_;
  f.recv_cq = ch->frcq_;
  f.max_send_wr = n * kFreeWrs;
  f.max_recv_wr = n * (rec ? kRecvsPerRequestRecycle : 1);
  f.max_send_sge = 1;
  f.max_recv_sge = rec ? fabric::kMaxSge : 1;
  f.access = fabric::kRemoteRead | fabric::kRemoteWrite;  // data through MW 0
  f.cross_channel = true;
  f.manage_send = true;
  f.invalidate_any_qp = false;  // the owner check (header comment)
  ch->f_ = mn->CreateQp(f);

  fabric::QpInitAttr r;  // the replies: nothing comes in, nothing one-sided
  r.pd = md->data_pd();
  r.send_cq = ch->rscq_;
  r.recv_cq = ch->rscq_;
  r.max_send_wr = n * kReplyWrs;
  r.max_recv_wr = 1;
  r.max_send_sge = 1;
  r.access = 0;
  r.cross_channel = true;
  r.manage_send = true;
  ch->r_ = mn->CreateQp(r);

  co_await ch->CreateLanes();
  co_await ch->CreateScratch();
  ch->cost_post_ = mn->Cost("verbs.post_send");
  co_return ch;
}

Task<void> FreeChain::CreateLanes() {
  const uint32_t g = md_->group_size();
  const uint32_t per_lane = cfg_.max_instances / cfg_.lanes;
  const bool rec = cfg_.recycle;
  auto ring_mr = [&](fabric::Qp* qp, fabric::Pd* pd) -> Task<fabric::Mr*> {
    co_return co_await mn_->RegMr(pd, qp->SendWqeAddr(0),
                                  uint64_t{qp->send_ring_size()} * qp->send_wqe_stride(),
                                  fabric::kLocalWrite);
  };
  for (uint32_t w = 0; w < cfg_.lanes; ++w) {
    Lane ln;
    ln.ucq = mn_->CreateCq(per_lane * kUnbindSignaled(g), true);
    ln.lcq = mn_->CreateCq(per_lane * kWorkerSignaled, true);
    // MN-only: MW k is bound to a CN's access QP, so U may invalidate any QP's.
    ln.u = chain::LoopbackQp(cluster_, mn_,
                             {.pd = md_->data_pd(),
                              .cq = ln.ucq,
                              .max_send_wr = per_lane * static_cast<uint32_t>(UnbindStride()),
                              .max_send_sge = 2,
                              .managed = true,
                              // U's copy READ is served by U itself (loopback).
                              .access = fabric::kRemoteRead,
                              .invalidate_any_qp = true});
    ln.l = chain::LoopbackQp(cluster_, mn_,
                             {.pd = md_->meta_pd(),
                              .cq = ln.lcq,
                              .max_send_wr = per_lane * static_cast<uint32_t>(WorkerStride()),
                              .max_send_sge = std::max<uint32_t>(g + 6, 2 * g + 4),
                              .managed = true});
    // Recycling: C runs only as far as it enabled itself.
    ln.c = chain::LoopbackQp(cluster_, mn_,
                             {.pd = md_->meta_pd(),
                              .cq = ccq_,
                              .max_send_wr = per_lane * (rec ? kControlSlotWrs : kControlWrs),
                              .managed = rec});
    ln.l_ring_data_mr = co_await ring_mr(ln.l, md_->data_pd());
    ln.u_ring_meta_mr = co_await ring_mr(ln.u, md_->meta_pd());
    if (rec) ln.c_ring_data_mr = co_await ring_mr(ln.c, md_->data_pd());
    lanes_.push_back(ln);
  }
  f_ring_meta_mr_ = co_await ring_mr(f_, md_->meta_pd());
  if (rec) {
    boot_ = chain::LoopbackQp(cluster_, mn_,
                              {.pd = md_->meta_pd(), .cq = ccq_, .max_send_wr = cfg_.lanes});
  }
}

Task<void> FreeChain::CreateScratch() {
  const uint64_t scratch_bytes = kScratchSlotsOff + kSlotBytes * cfg_.max_instances;
  scratch_ = mn_->memory().Alloc(scratch_bytes, 64);
  mn_->memory().Fill(scratch_, 0, scratch_bytes);
  scratch_meta_mr_ = co_await mn_->RegMr(md_->meta_pd(), scratch_, scratch_bytes,
                                         fabric::kLocalWrite | fabric::kRemoteRead);
  scratch_data_mr_ = co_await mn_->RegMr(md_->data_pd(), scratch_, scratch_bytes,
                                         fabric::kLocalWrite | fabric::kRemoteRead);
}

uint64_t FreeChain::UnbindStride() const {
  const uint32_t g = md_->group_size();
  return cfg_.recycle ? UnbindSlotWrs(g) : kUnbindWrs(g);
}

FreeChain::Bases FreeChain::BasesOf(uint64_t s) const {
  Bases b;
  b.s = s;
  b.w = s % cfg_.lanes;
  b.j = s / cfg_.lanes;
  b.f0 = kFreeWrs * s;
  b.r0 = kReplyWrs * s;
  b.u0 = UnbindStride() * b.j;
  b.l0 = WorkerStride() * b.j;
  b.slot = scratch_ + kScratchSlotsOff + kSlotBytes * (s % cfg_.max_instances);
  return b;
}

namespace {
// Instance s's values for strides u (U) and l (L): the order of TailValues.
std::vector<uint64_t> TailFor(uint64_t s, uint32_t g, uint32_t lanes, uint64_t u, uint64_t l) {
  const uint64_t j = s / lanes;
  const uint64_t lc = FreeChain::kWorkerSignaled * j;
  return {lc + 1,
          s + 1,
          u * j + FreeChain::kUnbindWrs(g),
          uint64_t{FreeChain::kUnbindSignaled(g)} * (j + 1),
          l * j + 4,
          lc + FreeChain::kWorkerSignaled,
          FreeChain::kReplyWrs * (s + 1),
          lc + FreeChain::kWorkerSignaled};
}
}  // namespace

std::vector<uint64_t> FreeChain::TailValues(uint64_t s, uint32_t g, uint32_t lanes) {
  return TailFor(s, g, lanes, UnbindSlotWrs(g), kWorkerSlotWrs);
}

std::vector<uint64_t> FreeChain::Tail(uint64_t s) const {
  return TailFor(s, md_->group_size(), cfg_.lanes, UnbindStride(), WorkerStride());
}

std::vector<uint64_t> FreeChain::ControlValues(uint64_t s, uint32_t g, bool recycle,
                                               uint32_t lanes) {
  (void)g;
  const uint64_t j = s / lanes;
  const uint64_t l0 = (recycle ? kWorkerSlotWrs : kWorkerWrs) * j;
  const uint64_t lc = kWorkerSignaled * j;
  const uint64_t rq = recycle ? kRecvsPerRequestRecycle : 1;
  std::vector<uint64_t> v = {lc, rq * (s + 1), l0 + 1, kFreeWrs * (s + 1), lc + 4, l0 + 7};
  if (recycle) v.push_back(kControlSlotWrs * (j + 2));
  return v;
}

// U_w's part of instance s: the owner check by data, then the unbinds, then
// the copy that gives L2..L5 their operands (header: "The owner check").
void FreeChain::PostUnbindPart(const Bases& b) {
  const uint32_t g = md_->group_size();
  const Lane& ln = LaneOf(b);
  const std::vector<uint64_t> t = Tail(b.s);
  const uint64_t tag = b.s << 8;
  SendWr bind;
  bind.wr_id = tag | 0x2f;
  bind.opcode = Opcode::kBindMw;
  bind.bind_mw_rkey = 0;   // <- L1 (MW 0's rkey); 0 never binds
  bind.bind_new_rkey = 0;  // <- L1
  bind.bind_addr = 0;      // <- L1 (the chunk)
  bind.bind_length = md_->config().chunk_bytes;
  bind.bind_mr_lkey = md_->pool_mr()->lkey();
  bind.bind_access = 0;  // nothing through it: it only proves MW 0 was free
  bind.bind_qpn = 0;     // U itself, which no CN reaches
  Post(ln.u, bind, "U BIND_MW MW 0 (owner check)");
  Post(ln.u, LocalInv(tag | 0x30), "U LOCAL_INV MW 0");
  for (uint32_t k = 1; k < g; ++k) Post(ln.u, LocalInv(tag | (0x30 + k)), "U LOCAL_INV MW k");
  SendWr c;
  c.wr_id = tag | 0x3f;
  c.opcode = Opcode::kRead;
  c.remote_addr = b.slot + 16;  // owner_ptr, handle as L1 read them
  c.rkey = scratch_data_mr_->rkey();
  c.sg_list = {{ln.l->SendWqeAddr(b.l0 + 1) + WqeLayout::kRemoteAddr, 8, ln.l_ring_data_mr->lkey()},
               {b.slot + 8, 8, scratch_data_mr_->lkey()}};
  Post(ln.u, c, "U copy READ");
  Post(ln.u, chain::WaitWr(ln.ucq, t[3]), "U WAIT");
  Post(ln.u, chain::EnableWr(ln.l, t[4]), "U ENABLE L2-L4");
  for (uint64_t i = kUnbindWrs(g); i < UnbindStride(); ++i) Post(ln.u, chain::NopWr(), "U NOP");
}

Task<void> FreeChain::Arm(uint32_t n) {
  if (f_->state() != QpState::kRts || r_->state() != QpState::kRts) {
    throw fabric::VerbsError(EINVAL,
                             "onesided_mw free chain: Arm needs the Free and reply QPs connected");
  }
  const bool rec = cfg_.recycle;
  if (rec && (armed_ != 0 || n != cfg_.max_instances)) {
    throw fabric::VerbsError(EINVAL,
                             "onesided_mw free chain: a recycling chain is armed once, with "
                             "all max_instances instances");
  }
  for (uint32_t i = 0; i < n; ++i) {
    const Bases b = BasesOf(armed_);
    PostFreePart(b);
    PostReplyPart(b);
    PostUnbindPart(b);
    PostEntryRead(b);
    PostWorkerSteps(b);
    if (rec) PostRestore(b);
    PostRecvs(b);
    PostControlPart(b);
    ++armed_;
    const uint64_t wrs = (rec ? 2 : 1) + kFreeWrs + kReplyWrs + UnbindStride() + WorkerStride() +
                         (rec ? kControlSlotWrs : kControlWrs);
    co_await mn_->cpu().Work(cost_post_, static_cast<uint32_t>(wrs));
  }
  if (rec) {
    for (const Lane& ln : lanes_) {
      chain::PostOrThrow(boot_, chain::EnableWr(ln.c, kControlSlotWrs), "onesided_mw free chain",
                         "ENABLE C's first instance");
    }
    co_await mn_->cpu().Work(cost_post_, cfg_.lanes);
  }
}

// F's part of instance s: wait for the lane's L1, inv0 (the owner check),
// WAIT for it, ENABLE U_w.
void FreeChain::PostFreePart(const Bases& b) {
  const Lane& ln = LaneOf(b);
  const std::vector<uint64_t> t = Tail(b.s);
  Post(f_, chain::WaitWr(ln.lcq, t[0]), "F WAIT L1");
  Post(f_, LocalInv((b.s << 8) | 0x10), "F LOCAL_INV MW 0");
  Post(f_, chain::WaitWr(fscq_, t[1]), "F WAIT inv0");
  Post(f_, chain::EnableWr(ln.u, t[2]), "F ENABLE U");
}

// R's part of instance s: wait for the lane's L5, then the reply.
void FreeChain::PostReplyPart(const Bases& b) {
  const std::vector<uint64_t> t = Tail(b.s);
  Post(r_, chain::WaitWr(LaneOf(b).lcq, t[7]), "R WAIT L5");
  SendWr r;
  r.wr_id = (b.s << 8) | 0x20;
  r.opcode = Opcode::kSend;  // zero bytes: the RECV CQE is the answer
  r.flags = 0;
  Post(r_, r, "R reply SEND");
}

// L1: READ the entry named by the request, scattered as the header says.
void FreeChain::PostEntryRead(const Bases& b) {
  const uint32_t g = md_->group_size();
  const Lane& ln = LaneOf(b);
  auto u_wqe = [&](uint64_t i) { return ln.u->SendWqeAddr(b.u0 + i); };
  const uint32_t smeta = scratch_meta_mr_->lkey();
  SendWr r;
  r.wr_id = (b.s << 8) | 1;
  r.opcode = Opcode::kRead;
  r.remote_addr = 0;  // <- RECV (X); 0 faults
  r.rkey = md_->meta_mr()->rkey();
  // owner_ptr and handle to the slot U's copy reads; MW 0's record
  // (base, rkey, new rkey) into U.bind0; MW k's rkey into U.inv[k];
  // the two copies of MW 0's rkey into F.inv0 and U.inv0.
  const uint32_t ul = ln.u_ring_meta_mr->lkey();
  r.sg_list.push_back({b.slot + 16, 16, smeta});
  r.sg_list.push_back({u_wqe(0) + WqeLayout::kRemoteAddr, 16, ul});
  for (uint32_t k = 1; k < g; ++k) {
    r.sg_list.push_back({scratch_ + kScratchSinkOff, 12, smeta});  // base, rkey
    r.sg_list.push_back({u_wqe(1 + k) + WqeLayout::kImmInvQpn, 4, ul});
  }
  r.sg_list.push_back({scratch_ + kScratchSinkOff, 8, smeta});  // owner_id
  r.sg_list.push_back(
      {f_->SendWqeAddr(b.f0 + 1) + WqeLayout::kImmInvQpn, 4, f_ring_meta_mr_->lkey()});
  r.sg_list.push_back({u_wqe(1) + WqeLayout::kImmInvQpn, 4, ul});
  Post(ln.l, r, "L1 READ entry");
}

// L2..L7: clear the owner, claim the tail, insert the entry, release the reply.
void FreeChain::PostWorkerSteps(const Bases& b) {
  const Lane& ln = LaneOf(b);
  const std::vector<uint64_t> t = Tail(b.s);
  const uint64_t tag = b.s << 8;
  const uint64_t faa_result = b.slot;         // u64 LE
  const uint64_t staged_handle = b.slot + 8;  // u64 BE
  const uint32_t meta_rkey = md_->meta_mr()->rkey();
  const uint32_t smeta = scratch_meta_mr_->lkey();
  SendWr w;  // L2: owner_id := 0
  w.wr_id = tag | 2;
  w.opcode = Opcode::kWrite;
  w.flags = fabric::kSignaled | fabric::kFence;  // after L1 landed, whoever enabled it
  w.remote_addr = 0;                             // <- U.copy (owner_ptr)
  w.rkey = meta_rkey;
  w.sg_list = {{scratch_ + kScratchZeroOff, 8, smeta}};
  Post(ln.l, w, "L2 WRITE owner_id");
  // L3: claim the tail element: tail += 8 inside the ring.
  Post(ln.l,
       chain::RingAdvanceWr(md_->tail_addr(), meta_rkey, md_->layout().HeadBoundaryMask(),
                            faa_result, smeta, tag | 3),
       "L3 masked FAA tail");
  SendWr r;  // L4: the element's address, byte-swapped into L5's remote_addr
  r.wr_id = tag | 4;
  r.opcode = Opcode::kRead;
  r.flags = fabric::kSignaled | fabric::kFence;  // after L3's result landed
  r.remote_addr = faa_result;
  r.rkey = scratch_meta_mr_->rkey();
  for (int i = 0; i < 8; ++i) {
    r.sg_list.push_back(
        {ln.l->SendWqeAddr(b.l0 + 4) + WqeLayout::kRemoteAddr + 7 - i, 1, ln.l->wq_lkey()});
  }
  Post(ln.l, r, "L4 swap READ");
  SendWr e;  // L5: re-insert the entry (its own handle) at the claimed tail element
  e.wr_id = tag | 5;
  e.opcode = Opcode::kWrite;
  e.flags = fabric::kSignaled | fabric::kFence;  // after L4 landed
  e.remote_addr = 0;                             // <- L4
  e.rkey = meta_rkey;
  e.sg_list = {{staged_handle, 8, smeta}};
  Post(ln.l, e, "L5 WRITE element");
  // L6, L7: once L5 is acknowledged, release the reply.
  Post(ln.l, chain::WaitWr(ln.lcq, t[5]), "L6 WAIT element");
  Post(ln.l, chain::EnableWr(r_, t[6]), "L7 ENABLE reply");
}

// L8 (recycling; unsignaled): a READ of zeros that puts the placeholders
// back for this instance's next round: the LOCAL_INVs' and U.bind0's rkeys,
// the addresses L1, L2 and L5 were given and the staged handle. A step a
// CN's wrong counts replay out of order then faults on rkey or address 0 (or
// inserts nothing) instead of unbinding last round's windows or
// re-inserting last round's entry, which may be someone else's by now.
void FreeChain::PostRestore(const Bases& b) {
  const uint32_t g = md_->group_size();
  const Lane& ln = LaneOf(b);
  auto u_wqe = [&](uint64_t i) { return ln.u->SendWqeAddr(b.u0 + i); };
  auto l_wqe = [&](uint64_t i) { return ln.l->SendWqeAddr(b.l0 + i); };
  const uint32_t ul = ln.u_ring_meta_mr->lkey();
  SendWr z;
  z.wr_id = (b.s << 8) | 8;
  z.opcode = Opcode::kRead;
  z.flags = 0;
  z.remote_addr = scratch_ + kScratchZerosOff;
  z.rkey = scratch_meta_mr_->rkey();
  z.sg_list.push_back(
      {f_->SendWqeAddr(b.f0 + 1) + WqeLayout::kImmInvQpn, 4, f_ring_meta_mr_->lkey()});
  z.sg_list.push_back({u_wqe(0) + WqeLayout::kRkey, 8, ul});  // bind0
  for (uint32_t k = 0; k < g; ++k) {                          // inv0, inv[k]
    z.sg_list.push_back({u_wqe(1 + k) + WqeLayout::kImmInvQpn, 4, ul});
  }
  for (uint32_t i : {0u, 1u, 4u}) {
    z.sg_list.push_back({l_wqe(i) + WqeLayout::kRemoteAddr, 8, ln.l->wq_lkey()});
  }
  z.sg_list.push_back({b.slot + 8, 8, scratch_meta_mr_->lkey()});  // the staged handle
  Post(ln.l, z, "L8 READ zeros");
}

// The RECV(s) that take the CN's request (and, recycling, re-arm C_w's next
// instance and this instance's tail).
void FreeChain::PostRecvs(const Bases& b) {
  const uint32_t g = md_->group_size();
  const Lane& ln = LaneOf(b);
  const bool rec = cfg_.recycle;
  auto post_recv = [&](const RecvWr& rr) {
    if (const int rc = f_->PostRecv(rr); rc != 0) {
      throw fabric::VerbsError(rc, "onesided_mw free chain: posting the RECV on qp " +
                                       std::to_string(f_->qp_num()) + " failed");
    }
  };
  if (rec) {
    RecvWr rv;  // C_w's next instance: every gate's count or index
    rv.wr_id = 2 * b.s;
    const uint64_t per_lane = cfg_.max_instances / cfg_.lanes;
    const uint64_t c_next = kControlSlotWrs * ((b.j + 1) % per_lane);
    for (uint32_t i = 0; i < kControlWrs + 1; ++i) {
      rv.sg_list.push_back(
          {ln.c->SendWqeAddr(c_next + i) + WqeLayout::kOperand0, 8, ln.c_ring_data_mr->lkey()});
    }
    post_recv(rv);
  }
  RecvWr rr;
  rr.wr_id = rec ? 2 * b.s + 1 : b.s;
  rr.sg_list.push_back(
      {ln.l->SendWqeAddr(b.l0) + WqeLayout::kRemoteAddr, 8, ln.l_ring_data_mr->lkey()});
  if (rec) {
    auto field = [&](fabric::Qp* qp, uint64_t i, uint32_t lkey) {
      rr.sg_list.push_back({qp->SendWqeAddr(i) + WqeLayout::kOperand0, 8, lkey});
    };
    const uint32_t fl = f_->wq_lkey(), ul = ln.u->wq_lkey(), ll = ln.l_ring_data_mr->lkey();
    field(f_, b.f0 + 0, fl);         // F.wait1
    field(f_, b.f0 + 2, fl);         // F.wait2
    field(f_, b.f0 + 3, fl);         // F.enable
    field(ln.u, b.u0 + g + 2, ul);   // U.wait
    field(ln.u, b.u0 + g + 3, ul);   // U.enable
    field(ln.l, b.l0 + 5, ll);       // L6
    field(ln.l, b.l0 + 6, ll);       // L7
    field(r_, b.r0, r_->wq_lkey());  // R.wait
    rr.sg_list.push_back({f_->recv_doorbell_addr(), 4, fl});
  }
  post_recv(rr);
}

// C_w: the gates, all on L_w's CQ (L_w does not fault while healthy).
void FreeChain::PostControlPart(const Bases& b) {
  const Lane& ln = LaneOf(b);
  const bool rec = cfg_.recycle;
  const std::vector<uint64_t> cv = ControlValues(b.s, md_->group_size(), rec, cfg_.lanes);
  Post(ln.c, chain::WaitWr(ln.lcq, cv[0]), "C WAIT the lane's previous instance");
  Post(ln.c, chain::WaitWr(frcq_, cv[1]), "C WAIT request");
  Post(ln.c, chain::EnableWr(ln.l, cv[2]), "C ENABLE L1");
  Post(ln.c, chain::EnableWr(f_, cv[3]), "C ENABLE F");
  Post(ln.c, chain::WaitWr(ln.lcq, cv[4]), "C WAIT L4");
  Post(ln.c, chain::EnableWr(ln.l, cv[5]), "C ENABLE L5-L7");
  if (rec) {
    Post(ln.c, chain::EnableWr(ln.c, cv[6]), "C ENABLE its next instance");
    for (uint32_t k = kControlWrs + 1; k < kControlSlotWrs; ++k) {
      Post(ln.c, chain::NopWr(), "C NOP padding");
    }
  }
}

uint64_t FreeChain::frees_done() const {
  const uint32_t g = md_->group_size();
  const uint64_t per = UnbindStride();
  uint64_t done = 0;
  for (const Lane& ln : lanes_) {
    const uint64_t e = ln.u->counters().send_wrs_executed;
    done += e / per + (e % per >= kUnbindWrs(g) ? 1 : 0);
  }
  return done;
}

bool FreeChain::Faulted() const {
  if (f_->QueryState() == QpState::kErr || r_->QueryState() == QpState::kErr) return true;
  for (const Lane& ln : lanes_) {
    for (fabric::Qp* q : {ln.u, ln.l, ln.c}) {
      if (q->QueryState() == QpState::kErr) return true;
    }
  }
  return false;
}

Task<void> FreeChain::Quiesce(fabric::Runtime* rt) {
  auto stop = [](fabric::Qp* q) {
    if (q && q->state() != QpState::kErr) q->Modify(QpState::kErr);
  };
  for (fabric::Qp* q : {r_, f_, boot_}) stop(q);
  for (const Lane& ln : lanes_) {
    stop(ln.c);
    stop(ln.u);
  }
  // L1..L5 of every instance are signaled: L is idle once every one of them
  // it started has completed (its unsignaled WAIT/ENABLE/READ tail holds
  // nothing the repair reads).
  const uint64_t per = WorkerStride();
  for (const Lane& ln : lanes_) {
    auto signaled_started = [&] {
      const uint64_t e = ln.l->counters().send_wrs_executed;
      return e / per * kWorkerSignaled + std::min<uint64_t>(e % per, kWorkerSignaled);
    };
    while (ln.l->state() != QpState::kErr && ln.lcq->total_completions() < signaled_started()) {
      co_await rt->SleepFor(kPsPerUs);
    }
    stop(ln.l);
  }
}

Task<void> FreeChain::Destroy(fabric::Runtime* rt) {
  co_await Quiesce(rt);  // every L idle: nothing in flight touches the rings
  chain::ChainParts parts;
  parts.mrs = {f_ring_meta_mr_, scratch_meta_mr_, scratch_data_mr_};
  parts.qps = {boot_, f_, r_};
  parts.cqs = {frcq_, fscq_, rscq_, ccq_};
  for (const Lane& ln : lanes_) {
    parts.mrs.insert(parts.mrs.end(), {ln.c_ring_data_mr, ln.l_ring_data_mr, ln.u_ring_meta_mr});
    parts.qps.insert(parts.qps.end(), {ln.c, ln.u, ln.l});
    parts.cqs.insert(parts.cqs.end(), {ln.ucq, ln.lcq});
  }
  parts.memory = {{scratch_, scratch_meta_mr_->length()}};
  f_ = r_ = boot_ = nullptr;
  lanes_.clear();
  co_await chain::Teardown(mn_, std::move(parts));
}

FreeChain::Progress FreeChain::Inspect(uint32_t w) const {
  const int64_t m = LastStarted(w);
  return m < 0 ? Progress{} : InspectRequest(static_cast<uint64_t>(m));
}

int64_t FreeChain::LastStarted(uint32_t w) const {
  const uint64_t e = lanes_.at(w).l->counters().send_wrs_executed;
  if (e == 0) return -1;
  return static_cast<int64_t>((e - 1) / WorkerStride() * cfg_.lanes + w);
}

FreeChain::Progress FreeChain::InspectRequest(uint64_t m) const {
  Progress p;
  const Bases b = BasesOf(m);
  const uint64_t e = lanes_.at(b.w).l->counters().send_wrs_executed;
  p.steps = e <= b.l0 ? 0 : static_cast<uint32_t>(std::min<uint64_t>(e - b.l0, WorkerStride()));
  p.element = mn_->memory().LoadU64(b.slot);
  uint8_t x[8];
  mn_->memory().Read(b.slot + 8, x, 8);
  p.handle = fabric::LoadBe64(x);
  mn_->memory().Read(b.slot + 24, x, 8);
  p.named = fabric::LoadBe64(x);
  p.owner_checked = f_->counters().send_wrs_executed > b.f0 + 3;  // F.enable, after F.inv0
  return p;
}

// ---- CN side ------------------------------------------------------------------------

FreeClient::FreeClient(fabric::Node* cn, fabric::Pd* pd, fabric::Runtime* rt, fabric::Mr* mr,
                       uint64_t buf_addr, fabric::Cq* send_cq, uint32_t recycle_instances,
                       uint32_t group_size, uint32_t lanes)
    : cn_(cn),
      mr_(mr),
      buf_(buf_addr),
      send_cq_(send_cq),
      recycle_(recycle_instances),
      g_(group_size),
      lanes_(lanes),
      deadlines_(rt) {
  if (lanes == 0 || (recycle_ && (recycle_ % lanes != 0 || recycle_ / lanes < 4))) {
    throw std::invalid_argument(
        "onesided_mw FreeClient: lanes must divide the chain's instances, 4 or more each; got " +
        std::to_string(lanes) + " lanes for " + std::to_string(recycle_) + " instances");
  }
  const uint64_t bytes = recycle_ ? BufferBytes(lanes) : 8 * lanes;
  if (recycle_ && g_ == 0) {
    throw std::invalid_argument("onesided_mw FreeClient: a recycling client needs the group size");
  }
  if (buf_addr < mr->addr() || buf_addr + bytes > mr->addr() + mr->length()) {
    throw std::invalid_argument("onesided_mw FreeClient: buffer outside its MR");
  }
  if (!send_cq_) {
    send_cq_ = cn->CreateCq(64, /*ignore_overrun=*/true);
    owns_send_cq_ = true;
  }
  recv_cq_ = cn->CreateCq(std::max<uint32_t>(16, 2 * lanes));
  fabric::QpInitAttr a;
  a.pd = pd;
  a.send_cq = send_cq_;
  a.recv_cq = recv_cq_;
  a.max_send_wr = std::max<uint32_t>(16, 4 * lanes);
  a.max_recv_wr = std::max<uint32_t>(4, lanes);
  a.access = 0;  // the chain's reply is a SEND; nothing one-sided comes in
  qp_ = cn->CreateQp(a);
  a.max_send_wr = 1;  // the reply QP only receives
  reply_qp_ = cn->CreateQp(a);
}

FreeClient::~FreeClient() {
  cn_->DestroyQp(reply_qp_);
  cn_->DestroyQp(qp_);
  cn_->DestroyCq(recv_cq_);
  if (owns_send_cq_) cn_->DestroyCq(send_cq_);
}

bool FreeClient::PostRequest(uint64_t seq, uint64_t handle) {
  const uint64_t slot = buf_ + (seq % lanes_) * (recycle_ ? kRecycleBufferBytes : 8);
  std::vector<uint8_t> req(8);
  fabric::StoreBe64(req.data(), handle);
  std::vector<SendWr> sends;
  uint64_t req_addr = slot;
  if (recycle_) {
    // The recycling chain's arguments (FreeChain's header).
    // C's gates of this lane's next instance.
    const std::vector<uint64_t> cv = FreeChain::ControlValues(seq + lanes_, g_, true, lanes_);
    std::vector<uint8_t> vals(8 * cv.size());
    for (size_t i = 0; i < cv.size(); ++i) fabric::StoreBe64(vals.data() + 8 * i, cv[i]);
    cn_->memory().Write(slot, vals.data(), vals.size());
    SendWr v;
    v.opcode = Opcode::kSend;
    v.flags = 0;
    v.sg_list = {{slot, static_cast<uint32_t>(vals.size()), mr_->lkey()}};
    sends.push_back(v);
    std::vector<uint64_t> tail = FreeChain::TailValues(seq, g_, lanes_);
    if (tamper_) tamper_(seq, &tail);
    for (const uint64_t t : tail) {
      req.resize(req.size() + 8);
      fabric::StoreBe64(req.data() + req.size() - 8, t);
    }
    req.resize(req.size() + 4);
    fabric::StoreBe32(
        req.data() + req.size() - 4,
        static_cast<uint32_t>(FreeChain::kRecvsPerRequestRecycle * (seq + 1 + recycle_)));
    req_addr = slot + 128;
  }
  cn_->memory().Write(req_addr, req.data(), req.size());
  SendWr s;
  s.opcode = Opcode::kSend;
  s.flags = 0;
  s.sg_list = {{req_addr, static_cast<uint32_t>(req.size()), mr_->lkey()}};
  sends.push_back(s);
  bool posted = reply_qp_->PostRecv(RecvWr{}) == 0;  // no SGEs: the reply carries no data
  for (const SendWr& w : sends) posted = posted && qp_->PostSend(w) == 0;
  return posted;
}

Task<Status> FreeClient::Free(uint64_t handle, Ps timeout, uint64_t* seq_out) {
  if (seq_out) *seq_out = kNoSeq;
  while (in_flight_ >= lanes_) co_await slot_free_.Wait();
  if (broken_ || qp_->state() != QpState::kRts || reply_qp_->state() != QpState::kRts) {
    co_return Status(Code::kLaneBroken, "onesided_mw free: the Free QP is stopped or in ERR");
  }
  const uint64_t seq = next_seq_++;  // only for a request that goes out
  if (seq_out) *seq_out = seq;
  if (!PostRequest(seq, handle)) {
    co_return Status(Code::kLaneBroken, "onesided_mw free: cannot post on the Free QP");
  }
  ++in_flight_;
  // No suspension since the request was posted: turns are taken in request order.
  co_await reply_turn_.Lock();
  const chain::ReplyDeadlines::Ticket deadline = deadlines_.Arm(reply_qp_, timeout);
  const fabric::WorkCompletion wc = co_await recv_cq_->Next();
  const bool timed_out = deadlines_.Settle(deadline);
  // A refused free kills both QPs: nothing more goes out on this pair.
  if (timed_out && qp_->state() != QpState::kErr) qp_->Modify(QpState::kErr);
  const bool freed = wc.status == fabric::WcStatus::kSuccess && wc.byte_len == 0;
  if (freed && !broken_) ++confirmed_;
  if (!freed) broken_ = true;
  reply_turn_.Unlock();
  --in_flight_;
  slot_free_.NotifyAll();
  if (wc.status == fabric::WcStatus::kSuccess) {
    co_return freed ? Status() : Status(Code::kLaneBroken, "onesided_mw free: malformed reply");
  }
  if (timed_out) {
    co_return Status(Code::kNotOwner,
                     "onesided_mw free: no reply within " + std::to_string(PsToUs(timeout)) +
                         " us and the MN's chain faulted (it refused: not the owner, a double "
                         "free or a forged handle; or it is dead); the Free QP is now in ERR");
  }
  co_return Status(Code::kLaneBroken, "onesided_mw free: the Free QP failed (" +
                                          std::string(fabric::WcStatusName(wc.status)) +
                                          "): an earlier free on it was refused");
}

Task<uint64_t> FreeClient::Stop() {
  broken_ = true;
  for (fabric::Qp* q : {qp_, reply_qp_}) {
    if (q->state() != QpState::kErr) q->Modify(QpState::kErr);
  }
  while (in_flight_ > 0) co_await slot_free_.Wait();
  slot_free_.NotifyAll();
  co_return confirmed_;
}

}  // namespace dmb::systems::onesided_mw
