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
  if (cfg.max_instances == 0) {
    throw std::invalid_argument("onesided_mw free chain: max_instances must be >= 1");
  }
  if (cfg.recycle && (cfg.max_instances < 4 || !std::has_single_bit(cfg.max_instances))) {
    throw std::invalid_argument(
        "onesided_mw free chain: a recycling chain needs a power of two >= 4 instances");
  }
  const uint32_t g = md->group_size();
  if (g > kMaxGroupSize) {
    throw std::invalid_argument("onesided_mw free chain: group size " + std::to_string(g) + " > " +
                                std::to_string(kMaxGroupSize) +
                                " (the entry READ scatters 2 + 2G SGEs)");
  }
  std::unique_ptr<FreeChain> ch(new FreeChain());
  ch->cluster_ = cluster;
  ch->mn_ = mn;
  ch->md_ = md;
  ch->cfg_ = cfg;
  const uint32_t n = cfg.max_instances;
  const bool rec = cfg.recycle;

  // Counted only (the MN CPU never polls them); WAITs read the counts.
  ch->frcq_ = mn->CreateCq(n, /*ignore_overrun=*/true);
  ch->fscq_ = mn->CreateCq(n * 2, true);
  ch->ucq_ = mn->CreateCq(n * kUnbindSignaled(g), true);
  ch->lcq_ = mn->CreateCq(n * kWorkerSignaled, true);
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

  // MN-only: MW k is bound to a CN's access QP, so U may invalidate any QP's.
  ch->u_ = chain::LoopbackQp(cluster, mn,
                             {.pd = md->data_pd(),
                              .cq = ch->ucq_,
                              .max_send_wr = n * (rec ? UnbindSlotWrs(g) : kUnbindWrs(g)),
                              .max_send_sge = 2,
                              .managed = true,
                              // U's copy READ is served by U itself (loopback).
                              .access = fabric::kRemoteRead,
                              .invalidate_any_qp = true});
  ch->l_ = chain::LoopbackQp(cluster, mn,
                             {.pd = md->meta_pd(),
                              .cq = ch->lcq_,
                              .max_send_wr = n * (rec ? kWorkerSlotWrs : kWorkerWrs),
                              .max_send_sge = std::max<uint32_t>(g + 6, 2 * g + 4),
                              .managed = true});
  // Recycling: C runs only as far as it enabled itself.
  ch->c_ = chain::LoopbackQp(cluster, mn,
                             {.pd = md->meta_pd(),
                              .cq = ch->ccq_,
                              .max_send_wr = n * (rec ? kControlSlotWrs : kControlWrs),
                              .managed = rec});

  auto ring_mr = [&](fabric::Qp* qp, fabric::Pd* pd) -> Task<fabric::Mr*> {
    co_return co_await mn->RegMr(pd, qp->SendWqeAddr(0),
                                 uint64_t{qp->send_ring_size()} * qp->send_wqe_stride(),
                                 fabric::kLocalWrite);
  };
  ch->l_ring_data_mr_ = co_await ring_mr(ch->l_, md->data_pd());
  ch->f_ring_meta_mr_ = co_await ring_mr(ch->f_, md->meta_pd());
  ch->u_ring_meta_mr_ = co_await ring_mr(ch->u_, md->meta_pd());
  if (rec) {
    ch->boot_ = chain::LoopbackQp(cluster, mn, {.pd = md->meta_pd(), .cq = ch->ccq_});
    ch->c_ring_data_mr_ = co_await ring_mr(ch->c_, md->data_pd());
  }

  const uint64_t scratch_bytes = kScratchSlotsOff + kSlotBytes * n;
  ch->scratch_ = mn->memory().Alloc(scratch_bytes, 64);
  mn->memory().Fill(ch->scratch_, 0, scratch_bytes);
  ch->scratch_meta_mr_ = co_await mn->RegMr(md->meta_pd(), ch->scratch_, scratch_bytes,
                                            fabric::kLocalWrite | fabric::kRemoteRead);
  ch->scratch_data_mr_ = co_await mn->RegMr(md->data_pd(), ch->scratch_, scratch_bytes,
                                            fabric::kLocalWrite | fabric::kRemoteRead);
  ch->cost_post_ = mn->Cost("verbs.post_send");
  co_return ch;
}

std::vector<uint64_t> FreeChain::ControlValues(uint64_t s, uint32_t g, bool recycle) {
  (void)g;
  const uint64_t f0 = kFreeWrs * s;
  const uint64_t l0 = (recycle ? kWorkerSlotWrs : kWorkerWrs) * s;
  const uint64_t lc = kWorkerSignaled * s;
  const uint64_t rq = recycle ? kRecvsPerRequestRecycle : 1;
  std::vector<uint64_t> v = {lc,     rq * (s + 1), l0 + 1, lc + 1, f0 + 3,
                             lc + 3, l0 + 4,       lc + 4, l0 + 7};
  if (recycle) v.push_back(kControlSlotWrs * (s + 2));
  return v;
}

std::vector<uint64_t> FreeChain::TailValues(uint64_t s, uint32_t g) {
  const uint64_t u0 = UnbindSlotWrs(g) * s;
  const uint64_t l0 = kWorkerSlotWrs * s;
  return {2 * s + 1, u0 + kUnbindWrs(g),        uint64_t{kUnbindSignaled(g)} * (s + 1),
          l0 + 3,    kWorkerSignaled * (s + 1), kFreeWrs * (s + 1)};
}

// U's part of instance s: the owner check by data, then the unbinds, then
// the copy that gives L2..L5 their operands (header: "The owner check").
void FreeChain::PostUnbindPart(uint64_t s, uint64_t slot, uint64_t l0) {
  const uint32_t g = md_->group_size();
  const uint64_t tag = s << 8;
  const uint64_t u0 = u_->next_send_index();
  SendWr b;
  b.wr_id = tag | 0x2f;
  b.opcode = Opcode::kBindMw;
  b.bind_mw_rkey = 0;   // <- L1 (MW 0's rkey); 0 never binds
  b.bind_new_rkey = 0;  // <- L1
  b.bind_addr = 0;      // <- L1 (the chunk)
  b.bind_length = md_->config().chunk_bytes;
  b.bind_mr_lkey = md_->pool_mr()->lkey();
  b.bind_access = 0;  // nothing through it: it only proves MW 0 was free
  b.bind_qpn = 0;     // U itself, which no CN reaches
  Post(u_, b, "U BIND_MW MW 0 (owner check)");
  Post(u_, LocalInv(tag | 0x30), "U LOCAL_INV MW 0");
  for (uint32_t k = 1; k < g; ++k) Post(u_, LocalInv(tag | (0x30 + k)), "U LOCAL_INV MW k");
  SendWr c;
  c.wr_id = tag | 0x3f;
  c.opcode = Opcode::kRead;
  c.remote_addr = slot + 16;  // owner_ptr, handle as L1 read them
  c.rkey = scratch_data_mr_->rkey();
  c.sg_list = {{l_->SendWqeAddr(l0 + 1) + WqeLayout::kRemoteAddr, 8, l_ring_data_mr_->lkey()},
               {slot + 8, 8, scratch_data_mr_->lkey()}};
  Post(u_, c, "U copy READ");
  Post(u_, chain::WaitWr(ucq_, uint64_t{kUnbindSignaled(g)} * (s + 1)), "U WAIT");
  Post(u_, chain::EnableWr(l_, l0 + 3), "U ENABLE L2-L3");
  const uint32_t u_per = cfg_.recycle ? UnbindSlotWrs(g) : kUnbindWrs(g);
  for (uint64_t i = u_->next_send_index() - u0; i < u_per; ++i) Post(u_, chain::NopWr(), "U NOP");
}

Task<void> FreeChain::Arm(uint32_t n) {
  if (f_->state() != QpState::kRts) {
    throw fabric::VerbsError(EINVAL, "onesided_mw free chain: Arm needs the Free QP connected");
  }
  const bool rec = cfg_.recycle;
  if (rec && (armed_ != 0 || n != cfg_.max_instances)) {
    throw fabric::VerbsError(EINVAL,
                             "onesided_mw free chain: a recycling chain is armed once, with "
                             "all max_instances instances");
  }
  const uint32_t g = md_->group_size();
  for (uint32_t j = 0; j < n; ++j) {
    const Bases b{armed_, f_->next_send_index(), u_->next_send_index(), l_->next_send_index(),
                  scratch_ + kScratchSlotsOff + kSlotBytes * (armed_ % cfg_.max_instances)};
    PostFreePart(b);
    PostUnbindPart(b.s, b.slot, b.l0);
    PostEntryRead(b);
    PostWorkerSteps(b);
    if (rec) PostRestore(b);
    PostRecvs(b);
    PostControlPart(b);
    ++armed_;
    const uint32_t wrs = rec ? 2 + kFreeWrs + UnbindSlotWrs(g) + kWorkerSlotWrs + kControlSlotWrs
                             : 1 + kFreeWrs + kUnbindWrs(g) + kWorkerWrs + kControlWrs;
    co_await mn_->cpu().Work(cost_post_, wrs);
  }
  if (rec) {
    chain::PostOrThrow(boot_, chain::EnableWr(c_, kControlSlotWrs), "onesided_mw free chain",
                       "ENABLE C's first instance");
    co_await mn_->cpu().Work(cost_post_, 1);
  }
}

// F's part of instance s: inv0 (the owner check), WAIT, ENABLE U, reply.
void FreeChain::PostFreePart(const Bases& b) {
  const uint32_t g = md_->group_size();
  const uint64_t tag = b.s << 8;
  const uint64_t s = b.s;
  const uint64_t u0 = b.u0;
  // F: inv0, WAIT, ENABLE U, reply.
  chain::PostOrThrow(f_, LocalInv(tag | 0x10), "onesided_mw free chain", "F LOCAL_INV MW 0");
  chain::PostOrThrow(f_, chain::WaitWr(fscq_, 2 * s + 1), "onesided_mw free chain", "F WAIT inv0");
  chain::PostOrThrow(f_, chain::EnableWr(u_, u0 + kUnbindWrs(g)), "onesided_mw free chain",
                     "F ENABLE U");
  {
    SendWr r;
    r.wr_id = tag | 0x20;
    r.opcode = Opcode::kSend;  // zero bytes: the RECV CQE is the answer
    chain::PostOrThrow(f_, r, "onesided_mw free chain", "F reply SEND");
  }
}

// L1: READ the entry named by the request, scattered as the header says.
void FreeChain::PostEntryRead(const Bases& b) {
  const uint32_t g = md_->group_size();
  const uint64_t tag = b.s << 8;
  const uint64_t f0 = b.f0, u0 = b.u0;
  auto f_wqe = [&](uint64_t i) { return f_->SendWqeAddr(f0 + i); };
  auto u_wqe = [&](uint64_t i) { return u_->SendWqeAddr(u0 + i); };
  const uint64_t slot = b.slot;
  const uint32_t meta_rkey = md_->meta_mr()->rkey();
  const uint32_t smeta = scratch_meta_mr_->lkey();
  // L1: READ the entry named by the request.
  {
    SendWr r;
    r.wr_id = tag | 1;
    r.opcode = Opcode::kRead;
    r.remote_addr = 0;  // <- RECV (X); 0 faults
    r.rkey = meta_rkey;
    // owner_ptr and handle to the slot U's copy reads; MW 0's record
    // (base, rkey, new rkey) into U.bind0; MW k's rkey into U.inv[k];
    // the two copies of MW 0's rkey into F.inv0 and U.inv0.
    const uint32_t ul = u_ring_meta_mr_->lkey();
    r.sg_list.push_back({slot + 16, 16, smeta});
    r.sg_list.push_back({u_wqe(0) + WqeLayout::kRemoteAddr, 16, ul});
    for (uint32_t k = 1; k < g; ++k) {
      r.sg_list.push_back({scratch_ + kScratchSinkOff, 12, smeta});  // base, rkey
      r.sg_list.push_back({u_wqe(1 + k) + WqeLayout::kImmInvQpn, 4, ul});
    }
    r.sg_list.push_back({scratch_ + kScratchSinkOff, 8, smeta});  // owner_id
    r.sg_list.push_back({f_wqe(0) + WqeLayout::kImmInvQpn, 4, f_ring_meta_mr_->lkey()});
    r.sg_list.push_back({u_wqe(1) + WqeLayout::kImmInvQpn, 4, ul});
    chain::PostOrThrow(l_, r, "onesided_mw free chain", "L1 READ entry");
  }
}

// L2..L7: clear the owner, claim the tail, insert the entry, release the reply.
void FreeChain::PostWorkerSteps(const Bases& b) {
  const uint64_t tag = b.s << 8;
  const uint64_t s = b.s;
  const uint64_t f0 = b.f0, l0 = b.l0;
  auto l_wqe = [&](uint64_t i) { return l_->SendWqeAddr(l0 + i); };
  const uint64_t faa_result = b.slot;         // u64 LE
  const uint64_t staged_handle = b.slot + 8;  // u64 BE
  const uint32_t meta_rkey = md_->meta_mr()->rkey();
  const uint32_t smeta = scratch_meta_mr_->lkey();
  const Layout& lay = md_->layout();
  // L2: owner_id := 0.
  {
    SendWr w;
    w.wr_id = tag | 2;
    w.opcode = Opcode::kWrite;
    w.flags = fabric::kSignaled | fabric::kFence;  // after L1 landed, whoever enabled it
    w.remote_addr = 0;                             // <- L1 (owner_ptr)
    w.rkey = meta_rkey;
    w.sg_list = {{scratch_ + kScratchZeroOff, 8, smeta}};
    chain::PostOrThrow(l_, w, "onesided_mw free chain", "L2 WRITE owner_id");
  }
  // L3: claim the tail element: tail += 8 inside the ring.
  chain::PostOrThrow(l_,
                     chain::RingAdvanceWr(md_->tail_addr(), meta_rkey, lay.HeadBoundaryMask(),
                                          faa_result, smeta, tag | 3),
                     "onesided_mw free chain", "L3 masked FAA tail");
  // L4: the element's address, byte-swapped into L5's remote_addr.
  {
    SendWr r;
    r.wr_id = tag | 4;
    r.opcode = Opcode::kRead;
    r.flags = fabric::kSignaled | fabric::kFence;  // after L3's result landed
    r.remote_addr = faa_result;
    r.rkey = scratch_meta_mr_->rkey();
    for (int b = 0; b < 8; ++b) {
      r.sg_list.push_back({l_wqe(4) + WqeLayout::kRemoteAddr + 7 - b, 1, l_->wq_lkey()});
    }
    chain::PostOrThrow(l_, r, "onesided_mw free chain", "L4 swap READ");
  }
  // L5: re-insert the entry (its own handle) at the claimed tail element.
  {
    SendWr w;
    w.wr_id = tag | 5;
    w.opcode = Opcode::kWrite;
    w.flags = fabric::kSignaled | fabric::kFence;  // after L4 landed
    w.remote_addr = 0;                             // <- L4
    w.rkey = meta_rkey;
    w.sg_list = {{staged_handle, 8, smeta}};
    chain::PostOrThrow(l_, w, "onesided_mw free chain", "L5 WRITE element");
  }
  // L6, L7: once L5 is acknowledged, release the reply.
  chain::PostOrThrow(l_, chain::WaitWr(lcq_, kWorkerSignaled * (s + 1)), "onesided_mw free chain",
                     "L6 WAIT element");
  chain::PostOrThrow(l_, chain::EnableWr(f_, f0 + kFreeWrs), "onesided_mw free chain",
                     "L7 ENABLE reply");
}

// L8 (recycling; unsignaled): a READ of zeros that puts the placeholders
// back for this instance's next round: the LOCAL_INVs' and U.bind0's rkeys,
// the addresses L1, L2 and L5 were given and the staged handle. A step a
// CN's wrong counts replay out of order then faults on rkey or address 0 (or
// inserts nothing) instead of unbinding last round's windows or
// re-inserting last round's entry, which may be someone else's by now.
void FreeChain::PostRestore(const Bases& b) {
  const uint32_t g = md_->group_size();
  auto f_wqe = [&](uint64_t i) { return f_->SendWqeAddr(b.f0 + i); };
  auto u_wqe = [&](uint64_t i) { return u_->SendWqeAddr(b.u0 + i); };
  auto l_wqe = [&](uint64_t i) { return l_->SendWqeAddr(b.l0 + i); };
  SendWr z;
  z.wr_id = (b.s << 8) | 8;
  z.opcode = Opcode::kRead;
  z.flags = 0;
  z.remote_addr = scratch_ + kScratchZerosOff;
  z.rkey = scratch_meta_mr_->rkey();
  z.sg_list.push_back({f_wqe(0) + WqeLayout::kImmInvQpn, 4, f_ring_meta_mr_->lkey()});
  z.sg_list.push_back({u_wqe(0) + WqeLayout::kRkey, 8, u_ring_meta_mr_->lkey()});  // bind0
  for (uint32_t k = 0; k < g; ++k) {                                               // inv0, inv[k]
    z.sg_list.push_back({u_wqe(1 + k) + WqeLayout::kImmInvQpn, 4, u_ring_meta_mr_->lkey()});
  }
  for (uint32_t i : {0u, 1u, 4u}) {
    z.sg_list.push_back({l_wqe(i) + WqeLayout::kRemoteAddr, 8, l_->wq_lkey()});
  }
  z.sg_list.push_back({b.slot + 8, 8, scratch_meta_mr_->lkey()});  // the staged handle
  Post(l_, z, "L8 READ zeros");
}

// The RECV(s) that take the CN's request (and, recycling, re-arm C's next
// instance and this instance's tail).
void FreeChain::PostRecvs(const Bases& b) {
  const uint32_t g = md_->group_size();
  const uint64_t s = b.s;
  auto f_wqe = [&](uint64_t i) { return f_->SendWqeAddr(b.f0 + i); };
  auto u_wqe = [&](uint64_t i) { return u_->SendWqeAddr(b.u0 + i); };
  auto l_wqe = [&](uint64_t i) { return l_->SendWqeAddr(b.l0 + i); };
  const bool rec = cfg_.recycle;
  auto post_recv = [&](const RecvWr& rr) {
    if (const int rc = f_->PostRecv(rr); rc != 0) {
      throw fabric::VerbsError(rc, "onesided_mw free chain: posting the RECV on qp " +
                                       std::to_string(f_->qp_num()) + " failed");
    }
  };
  if (rec) {
    RecvWr rv;  // C's next instance: every gate's count or index
    rv.wr_id = 2 * s;
    const uint64_t c_next = kControlSlotWrs * ((s + 1) % cfg_.max_instances);
    for (uint32_t i = 0; i < kControlWrs + 1; ++i) {
      rv.sg_list.push_back(
          {c_->SendWqeAddr(c_next + i) + WqeLayout::kOperand0, 8, c_ring_data_mr_->lkey()});
    }
    post_recv(rv);
  }
  {
    RecvWr rr;
    rr.wr_id = rec ? 2 * s + 1 : s;
    rr.sg_list.push_back({l_wqe(0) + WqeLayout::kRemoteAddr, 8, l_ring_data_mr_->lkey()});
    if (rec) {
      const uint32_t fl = f_->wq_lkey(), ul = u_->wq_lkey(), ll = l_ring_data_mr_->lkey();
      rr.sg_list.push_back({f_wqe(1) + WqeLayout::kOperand0, 8, fl});      // F.wait
      rr.sg_list.push_back({f_wqe(2) + WqeLayout::kOperand0, 8, fl});      // F.enable
      rr.sg_list.push_back({u_wqe(g + 2) + WqeLayout::kOperand0, 8, ul});  // U.wait
      rr.sg_list.push_back({u_wqe(g + 3) + WqeLayout::kOperand0, 8, ul});  // U.enable
      rr.sg_list.push_back({l_wqe(5) + WqeLayout::kOperand0, 8, ll});      // L6
      rr.sg_list.push_back({l_wqe(6) + WqeLayout::kOperand0, 8, ll});      // L7
      rr.sg_list.push_back({f_->recv_doorbell_addr(), 4, fl});
    }
    post_recv(rr);
  }
}

// C: the gates, all on L's CQ (L does not fault while healthy).
void FreeChain::PostControlPart(const Bases& b) {
  const uint32_t g = md_->group_size();
  const bool rec = cfg_.recycle;
  const uint64_t s = b.s;
  const std::vector<uint64_t> cv = ControlValues(s, g, rec);
  chain::PostOrThrow(c_, chain::WaitWr(lcq_, cv[0]), "onesided_mw free chain",
                     "WAIT previous instance");
  chain::PostOrThrow(c_, chain::WaitWr(frcq_, cv[1]), "onesided_mw free chain", "WAIT request");
  chain::PostOrThrow(c_, chain::EnableWr(l_, cv[2]), "onesided_mw free chain", "ENABLE L1");
  chain::PostOrThrow(c_, chain::WaitWr(lcq_, cv[3]), "onesided_mw free chain", "WAIT L1");
  chain::PostOrThrow(c_, chain::EnableWr(f_, cv[4]), "onesided_mw free chain", "ENABLE F inv0");
  chain::PostOrThrow(c_, chain::WaitWr(lcq_, cv[5]), "onesided_mw free chain", "WAIT L3");
  chain::PostOrThrow(c_, chain::EnableWr(l_, cv[6]), "onesided_mw free chain", "ENABLE L4");
  chain::PostOrThrow(c_, chain::WaitWr(lcq_, cv[7]), "onesided_mw free chain", "WAIT L4");
  chain::PostOrThrow(c_, chain::EnableWr(l_, cv[8]), "onesided_mw free chain", "ENABLE L5-L7");
  if (rec) {
    chain::PostOrThrow(c_, chain::EnableWr(c_, cv[9]), "onesided_mw free chain",
                       "ENABLE C's next instance");
    for (uint32_t k = kControlWrs + 1; k < kControlSlotWrs; ++k)
      chain::PostOrThrow(c_, chain::NopWr(), "onesided_mw free chain", "C NOP padding");
  }
}

uint64_t FreeChain::frees_done() const {
  const uint32_t g = md_->group_size();
  const uint64_t per = cfg_.recycle ? UnbindSlotWrs(g) : kUnbindWrs(g);
  const uint64_t e = u_->counters().send_wrs_executed;
  return e / per + (e % per >= kUnbindWrs(g) ? 1 : 0);
}

bool FreeChain::Faulted() const {
  return f_->QueryState() == QpState::kErr || u_->QueryState() == QpState::kErr ||
         l_->QueryState() == QpState::kErr || c_->QueryState() == QpState::kErr;
}

Task<void> FreeChain::Quiesce(fabric::Runtime* rt) {
  for (fabric::Qp* q : {c_, boot_, f_, u_}) {
    if (q && q->state() != QpState::kErr) q->Modify(QpState::kErr);
  }
  // L1..L5 of every instance are signaled: L is idle once every one of them
  // it started has completed (its unsignaled WAIT/ENABLE/READ tail holds
  // nothing the repair reads).
  const uint64_t per = cfg_.recycle ? kWorkerSlotWrs : kWorkerWrs;
  auto signaled_started = [&] {
    const uint64_t e = l_->counters().send_wrs_executed;
    return e / per * kWorkerSignaled + std::min<uint64_t>(e % per, kWorkerSignaled);
  };
  while (l_->state() != QpState::kErr && lcq_->total_completions() < signaled_started()) {
    co_await rt->SleepFor(kPsPerUs);
  }
  if (l_->state() != QpState::kErr) l_->Modify(QpState::kErr);
}

Task<void> FreeChain::Destroy(fabric::Runtime* rt) {
  co_await Quiesce(rt);  // L idle: nothing in flight touches the rings
  chain::ChainParts parts;
  parts.mrs = {c_ring_data_mr_, l_ring_data_mr_,  f_ring_meta_mr_,
               u_ring_meta_mr_, scratch_meta_mr_, scratch_data_mr_};
  parts.qps = {c_, boot_, f_, u_, l_};
  parts.cqs = {frcq_, fscq_, ucq_, lcq_, ccq_};
  parts.scratch = scratch_;
  parts.scratch_bytes = scratch_meta_mr_->length();
  f_ = u_ = l_ = c_ = boot_ = nullptr;
  co_await chain::Teardown(mn_, std::move(parts));
}

FreeChain::Progress FreeChain::Inspect() const {
  Progress p;
  const uint64_t e = l_->counters().send_wrs_executed;
  if (e == 0) return p;
  const uint64_t per = cfg_.recycle ? kWorkerSlotWrs : kWorkerWrs;
  const uint64_t m = (e - 1) / per;
  p.steps = static_cast<uint32_t>(e - m * per);
  const uint64_t slot = scratch_ + kScratchSlotsOff + kSlotBytes * (m % cfg_.max_instances);
  p.element = mn_->memory().LoadU64(slot);
  uint8_t b[8];
  mn_->memory().Read(slot + 8, b, 8);
  p.handle = fabric::LoadBe64(b);
  return p;
}

// ---- CN side ------------------------------------------------------------------------

FreeClient::FreeClient(fabric::Node* cn, fabric::Pd* pd, fabric::Runtime* rt, fabric::Mr* mr,
                       uint64_t buf_addr, fabric::Cq* send_cq, uint32_t recycle_instances,
                       uint32_t group_size, uint32_t lanes)
    : cn_(cn),
      rt_(rt),
      mr_(mr),
      buf_(buf_addr),
      send_cq_(send_cq),
      recycle_(recycle_instances),
      g_(group_size),
      lanes_(lanes) {
  if (lanes == 0 || (recycle_ && 2 * lanes > recycle_)) {
    throw std::invalid_argument(
        "onesided_mw FreeClient: lanes must be in [1, instances / 2], got " +
        std::to_string(lanes));
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
}

FreeClient::~FreeClient() {
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
    const std::vector<uint64_t> cv = FreeChain::ControlValues(seq + 1, g_, true);
    std::vector<uint8_t> vals(8 * cv.size());
    for (size_t i = 0; i < cv.size(); ++i) fabric::StoreBe64(vals.data() + 8 * i, cv[i]);
    cn_->memory().Write(slot, vals.data(), vals.size());
    SendWr v;
    v.opcode = Opcode::kSend;
    v.flags = 0;
    v.sg_list = {{slot, static_cast<uint32_t>(vals.size()), mr_->lkey()}};
    sends.push_back(v);
    std::vector<uint64_t> tail = FreeChain::TailValues(seq, g_);
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
  bool posted = qp_->PostRecv(RecvWr{}) == 0;  // no SGEs: the reply carries no data
  for (const SendWr& w : sends) posted = posted && qp_->PostSend(w) == 0;
  return posted;
}

Task<Status> FreeClient::Free(uint64_t handle, Ps timeout) {
  while (in_flight_ >= lanes_) co_await slot_free_.Wait();
  if (qp_->state() == QpState::kErr) {
    co_return Status(Code::kLaneBroken, "onesided_mw free: the Free QP is in ERR");
  }
  if (!PostRequest(next_seq_++, handle)) {
    co_return Status(Code::kLaneBroken, "onesided_mw free: cannot post on the Free QP");
  }
  ++in_flight_;
  // No suspension since the request was posted: turns are taken in request order.
  co_await reply_turn_.Lock();
  auto pending = std::make_shared<chain::ReplyDeadline>();
  rt_->Spawn(chain::ArmDeadline(rt_, qp_, pending, timeout));
  const fabric::WorkCompletion wc = co_await recv_cq_->Next();
  pending->done = true;
  reply_turn_.Unlock();
  --in_flight_;
  slot_free_.NotifyAll();
  if (wc.status == fabric::WcStatus::kSuccess) {
    co_return wc.byte_len == 0 ? Status()
                               : Status(Code::kLaneBroken, "onesided_mw free: malformed reply");
  }
  if (pending->timed_out) {
    co_return Status(Code::kNotOwner,
                     "onesided_mw free: no reply within " + std::to_string(PsToUs(timeout)) +
                         " us (the MN's chain refused: not the owner, a double free or a "
                         "forged handle; or it is dead); the Free QP is now in ERR");
  }
  co_return Status(Code::kLaneBroken, "onesided_mw free: the Free QP failed (" +
                                          std::string(fabric::WcStatusName(wc.status)) +
                                          "): an earlier free on it was refused");
}

}  // namespace dmb::systems::onesided_mw
