#include "systems/onesided_mw/alloc_chain.h"

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
using fabric::Sge;
using fabric::WqeLayout;

namespace {

void Post(fabric::Qp* qp, const SendWr& wr, const char* what) {
  chain::PostOrThrow(qp, wr, "onesided_mw alloc chain", what);
}

// Scratch area of one chain: constants, then one 16 B slot per instance.
constexpr uint64_t kScratchZeroOff = 0;    // 8 zero bytes (L5's source)
constexpr uint64_t kScratchOwnerOff = 8;   // owner_id, u64 LE (L7's source)
constexpr uint64_t kScratchZerosOff = 64;  // 128 zero bytes (recycling L8's source)
constexpr uint64_t kScratchSlotsOff = 192;
constexpr uint64_t kSlotBytes = 16;  // +0 FAA result (LE), +8 staged handle (BE)

}  // namespace

Task<std::unique_ptr<AllocChain>> AllocChain::Create(fabric::Cluster* cluster, Metadata* md,
                                                     AllocChainConfig cfg) {
  fabric::Node* mn = md->node();
  fabric::RequireCaps(*mn, {"cross_channel", "qpn_in_bind", "mw_type2", "masked_atomics"},
                      "onesided_mw allocation chain");
  if (cfg.max_instances == 0 || cfg.lanes == 0 || cfg.max_instances % cfg.lanes != 0) {
    throw std::invalid_argument(
        "onesided_mw alloc chain: max_instances must be a positive multiple of lanes (got " +
        std::to_string(cfg.max_instances) + " instances, " + std::to_string(cfg.lanes) + " lanes)");
  }
  const uint32_t per_lane = cfg.max_instances / cfg.lanes;
  if (cfg.recycle && (per_lane < 4 || !std::has_single_bit(per_lane))) {
    throw std::invalid_argument(
        "onesided_mw alloc chain: a recycling chain needs a power of two >= 4 instances per "
        "lane (max_instances / lanes)");
  }
  fabric::Qp* free_qp = mn->QpByNum(cfg.free_qpn);
  if (!free_qp || free_qp->pd() != md->data_pd()) {
    throw std::invalid_argument("onesided_mw alloc chain: free_qpn " +
                                std::to_string(cfg.free_qpn) +
                                " is not a QP of the MN's data PD (MW 0 is bound to it)");
  }
  std::unique_ptr<AllocChain> ch(new AllocChain());
  ch->cluster_ = cluster;
  ch->mn_ = mn;
  ch->md_ = md;
  ch->cfg_ = cfg;
  co_await ch->CreateQps();
  co_await ch->CreateScratch();
  co_return ch;
}

Task<void> AllocChain::CreateQps() {
  const uint32_t g = md_->group_size();
  const uint32_t n = cfg_.max_instances;
  const uint32_t per_lane = n / cfg_.lanes;
  const bool rec = cfg_.recycle;
  // Counted only (the MN CPU never polls them); C's WAITs read the counts.
  rcq_ = mn_->CreateCq(n, /*ignore_overrun=*/true);
  acq_ = mn_->CreateCq(n * (g + 1), true);
  gcq_ = mn_->CreateCq(n, true);

  fabric::QpInitAttr a;
  a.pd = md_->data_pd();
  a.send_cq = acq_;
  a.recv_cq = rcq_;
  a.max_send_wr = n * (rec ? AllocSlotWrs(g) : kAllocWrs(g));
  a.max_recv_wr = n * (rec ? kRecvsPerRequestRecycle : 1);
  a.max_send_sge = g + 1;
  a.max_recv_sge = rec ? fabric::kMaxSge : g;
  a.access = 0;  // the alloc lane carries requests, never one-sided data
  a.cross_channel = true;
  a.manage_send = true;
  a_ = mn_->CreateQp(a);

  for (uint32_t w = 0; w < cfg_.lanes; ++w) {
    Lane ln;
    ln.lcq = mn_->CreateCq(per_lane * kWorkerWrs, true);
    ln.l = chain::LoopbackQp(cluster_, mn_,
                             {.pd = md_->meta_pd(),
                              .cq = ln.lcq,
                              .max_send_wr = per_lane * kWorkerWrs,
                              .max_send_sge = std::max<uint32_t>(8, g + 4),
                              .managed = true});
    // Recycling: C runs only as far as it enabled itself.
    ln.c = chain::LoopbackQp(cluster_, mn_,
                             {.pd = md_->meta_pd(),
                              .cq = gcq_,
                              .max_send_wr = per_lane * (rec ? kControlWrsRecycle : kControlWrs),
                              .managed = rec});
    if (rec) {
      // A's RECVs rewrite C's WAIT counts and ENABLE indices: C's ring again
      // in the data PD, local write only.
      ln.c_ring_data_mr = co_await mn_->RegMr(
          md_->data_pd(), ln.c->SendWqeAddr(0),
          uint64_t{ln.c->send_ring_size()} * ln.c->send_wqe_stride(), fabric::kLocalWrite);
    }
    lanes_.push_back(ln);
  }
  if (rec) {
    boot_ = chain::LoopbackQp(cluster_, mn_,
                              {.pd = md_->meta_pd(), .cq = gcq_, .max_send_wr = cfg_.lanes});
  }
  // L6 scatters into A's bind WQEs: A's SQ ring, registered again in the
  // metadata PD (local write only).
  a_ring_meta_mr_ = co_await mn_->RegMr(md_->meta_pd(), a_->SendWqeAddr(0),
                                        uint64_t{a_->send_ring_size()} * a_->send_wqe_stride(),
                                        fabric::kLocalWrite);
}

Task<void> AllocChain::CreateScratch() {
  const uint64_t scratch_bytes = kScratchSlotsOff + kSlotBytes * cfg_.max_instances;
  scratch_ = mn_->memory().Alloc(scratch_bytes, 64);
  mn_->memory().Fill(scratch_, 0, scratch_bytes);
  mn_->memory().StoreU64(scratch_ + kScratchOwnerOff, cfg_.owner_id);
  scratch_meta_mr_ = co_await mn_->RegMr(md_->meta_pd(), scratch_, scratch_bytes,
                                         fabric::kLocalWrite | fabric::kRemoteRead);
  // A.reply gathers the staged handle: the same bytes, local access in the data PD.
  scratch_data_mr_ =
      co_await mn_->RegMr(md_->data_pd(), scratch_, scratch_bytes, fabric::kLocalWrite);
  cost_post_ = mn_->Cost("verbs.post_send");
}

std::vector<uint64_t> AllocChain::ControlValues(uint64_t s, uint32_t g, bool recycle,
                                                uint32_t lanes) {
  const uint64_t a_per = recycle ? AllocSlotWrs(g) : kAllocWrs(g);
  const uint64_t a0 = s * a_per;
  const uint64_t j = s / lanes;  // the lane's j-th instance
  const uint64_t l0 = j * kWorkerWrs;
  const uint64_t rq = recycle ? kRecvsPerRequestRecycle : 1;
  std::vector<uint64_t> v = {
      l0,            // WAIT lcq: the lane's previous ticket
      rq * (s + 1),  // WAIT rcq: the request landed
      l0 + 1,        // EN L1
      l0 + 1,        // WAIT L1
      l0 + 3,        // EN L2-L3
      l0 + 3,        // WAIT L3
      l0 + 5,        // EN L4-L5
      l0 + 4,        // WAIT L4
      l0 + 6,        // EN L6
      l0 + 6,        // WAIT L6
      l0 + 7,        // EN L7
      s,             // WAIT gcq: instances before s enabled their part of A
      a0 + a_per,    // EN binds, reply, ticket ENABLE (and padding)
  };
  if (recycle) v.push_back(kControlWrsRecycle * (j + 2));  // EN C through its next instance
  return v;
}

Task<void> AllocChain::Arm(uint32_t n) {
  if (a_->state() != QpState::kRts) {
    throw fabric::VerbsError(EINVAL, "onesided_mw alloc chain: Arm needs the Alloc QP connected");
  }
  const bool rec = cfg_.recycle;
  if (rec && (armed_ != 0 || n != cfg_.max_instances)) {
    throw fabric::VerbsError(EINVAL,
                             "onesided_mw alloc chain: a recycling chain is armed once, with "
                             "all max_instances instances");
  }
  const uint32_t g = md_->group_size();
  const uint32_t a_per = rec ? AllocSlotWrs(g) : kAllocWrs(g);
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t s = armed_;
    const Lane& ln = LaneOf(s);
    const uint64_t j = LaneIndex(s);
    if (a_->next_send_index() != a_per * s || ln.l->next_send_index() != kWorkerWrs * j ||
        ln.c->next_send_index() != (rec ? kControlWrsRecycle : kControlWrs) * j) {
      throw std::logic_error("onesided_mw alloc chain: the chain QPs hold foreign WQEs");
    }
    const uint64_t slot = scratch_ + kScratchSlotsOff + kSlotBytes * (s % cfg_.max_instances);
    PostAllocPart(s, /*staged_handle=*/slot + 8);
    PostWorkerPart(s, /*faa_result=*/slot, /*staged_handle=*/slot + 8);
    PostRecvs(s);
    PostControlPart(s);
    ++armed_;
    const uint32_t wrs =
        (rec ? 2 : 1) + a_per + kWorkerWrs + (rec ? kControlWrsRecycle : kControlWrs);
    co_await mn_->cpu().Work(cost_post_, wrs);
  }
  if (rec) {
    for (const Lane& ln : lanes_) {
      chain::PostOrThrow(boot_, chain::EnableWr(ln.c, kControlWrsRecycle),
                         "onesided_mw alloc chain", "ENABLE C's first instance");
    }
    co_await mn_->cpu().Work(cost_post_, cfg_.lanes);
  }
}

// A's part of instance s: the binds, the reply and the ticket ENABLE (then
// NOP padding when recycling).
void AllocChain::PostAllocPart(uint64_t s, uint64_t staged_handle) {
  const uint32_t g = md_->group_size();
  const uint64_t tag = s << 8;
  const uint64_t a0 = AllocIndex(s);
  const Lane& ln = LaneOf(s);
  for (uint32_t k = 0; k < g; ++k) {
    SendWr b;
    b.wr_id = tag | (0x10 + k);
    b.opcode = Opcode::kBindMw;
    b.bind_mw_rkey = 0;   // <- L6 (rkey 0 never binds)
    b.bind_new_rkey = 0;  // <- L6
    b.bind_addr = 0;      // <- L6
    b.bind_length = md_->config().chunk_bytes;
    b.bind_mr_lkey = md_->pool_mr()->lkey();
    b.bind_access = md_->config().mw_access;
    // MW 0: the CN's Free QP. MW k: <- RECV; until then a QP outside the
    // data PD, which makes the bind fail.
    b.bind_qpn = k == 0 ? cfg_.free_qpn : lanes_[0].l->qp_num();
    // Unsignaled: nothing waits on a bind's completion (the reply behind it
    // on A runs only after it, and a failed bind still completes, with an
    // error, moving A to ERR), and a successful unsignaled WR writes no CQE.
    b.flags = 0;
    Post(a_, b, "BIND_MW");
  }
  SendWr w;
  w.wr_id = tag | 0x20;
  w.opcode = Opcode::kWriteWithImm;
  w.imm_data = static_cast<uint32_t>(s);  // recycling: <- RECV
  w.remote_addr = 0;                      // <- RECV (CN_buff)
  w.rkey = 0;                             // <- RECV (CN_buff rkey)
  w.sg_list.push_back({staged_handle, 8, scratch_data_mr_->lkey()});
  for (uint32_t k = 0; k < g; ++k) {
    w.sg_list.push_back({a_->SendWqeAddr(a0 + k) + WqeLayout::kRemoteAddr,
                         static_cast<uint32_t>(kMwRecordBytes), a_->wq_lkey()});
  }
  Post(a_, w, "reply WRITE_WITH_IMM");
  // Reached only if every bind succeeded and the reply was posted (a failure
  // moves A to ERR and flushes this): release the lane's ticket. Recycling:
  // the index <- RECV.
  Post(a_, chain::EnableWr(ln.l, kWorkerWrs * (LaneIndex(s) + 1)), "ENABLE ticket");
  const uint32_t a_per = cfg_.recycle ? AllocSlotWrs(g) : kAllocWrs(g);
  for (uint32_t k = kAllocWrs(g); k < a_per; ++k) {
    SendWr nop;
    nop.wr_id = tag | 0x30;
    nop.opcode = Opcode::kNop;
    nop.flags = 0;  // padding: no completion, counted by no WAIT
    Post(a_, nop, "NOP padding");
  }
}

// L_w's part of instance s: L1..L8 (the header's table).
void AllocChain::PostWorkerPart(uint64_t s, uint64_t faa_result, uint64_t staged_handle) {
  const uint32_t g = md_->group_size();
  const uint64_t tag = s << 8;
  fabric::Qp* l = LaneOf(s).l;
  const uint64_t l0 = l->next_send_index();
  const uint64_t a0 = AllocIndex(s);
  const uint32_t meta_rkey = md_->meta_mr()->rkey();
  const uint32_t smeta = scratch_meta_mr_->lkey();
  auto l_field = [&](uint64_t i) { return l->SendWqeAddr(l0 + i) + WqeLayout::kRemoteAddr; };
  auto meta_op = [&](Opcode op, uint64_t step, uint32_t flags) {
    SendWr r;
    r.wr_id = tag | step;
    r.opcode = op;
    r.flags = fabric::kSignaled | flags;
    r.remote_addr = 0;  // <- the step before (0 faults)
    r.rkey = meta_rkey;
    return r;
  };
  // L1: claim an element: head += 8 inside the ring; old head -> faa_result.
  Post(l,
       chain::RingAdvanceWr(md_->head_addr(), meta_rkey, md_->layout().HeadBoundaryMask(),
                            faa_result, smeta, tag | 1),
       "L1 masked FAA");
  // L2 (FENCE: after L1's result landed), L3: the element's address,
  // byte-swapped into L4's and L5's remote_addr.
  SendWr l2 =
      chain::SwapReadWr(faa_result, scratch_meta_mr_->rkey(), l_field(3), l->wq_lkey(), tag | 2);
  l2.flags |= fabric::kFence;
  Post(l, l2, "L2 swap READ");
  Post(l,
       chain::SwapReadWr(faa_result, scratch_meta_mr_->rkey(), l_field(4), l->wq_lkey(), tag | 3),
       "L3 swap READ");
  SendWr l4 = meta_op(Opcode::kRead, 4, fabric::kFence);  // READ the element -> L6
  l4.sg_list = {{l_field(5), 8, l->wq_lkey()}};
  Post(l, l4, "L4 READ element");
  SendWr l5 = meta_op(Opcode::kWrite, 5, fabric::kFence);  // zero it, after L4 read it
  l5.sg_list = {{scratch_ + kScratchZeroOff, 8, smeta}};
  Post(l, l5, "L5 WRITE zero");
  // L6: READ the entry: owner_ptr -> L7, handle -> staging, MW records ->
  // the binds' bytes 16..31. An empty element (0) faults here.
  SendWr l6 = meta_op(Opcode::kRead, 6, fabric::kFence);
  l6.sg_list.push_back({l_field(6), 8, l->wq_lkey()});
  l6.sg_list.push_back({staged_handle, 8, smeta});
  for (uint32_t k = 0; k < g; ++k) {
    l6.sg_list.push_back({a_->SendWqeAddr(a0 + k) + WqeLayout::kRemoteAddr,
                          static_cast<uint32_t>(kMwRecordBytes), a_ring_meta_mr_->lkey()});
  }
  Post(l, l6, "L6 READ entry");
  SendWr l7 = meta_op(Opcode::kWrite, 7, fabric::kFence);  // record the owner
  l7.sg_list = {{scratch_ + kScratchOwnerOff, 8, smeta}};
  Post(l, l7, "L7 WRITE owner_id");
  Post(l, TicketWr(s, a0, l0), "L8 ticket");
}

// L8: the ticket that only A's success path enables: a signaled NOP, or
// (recycling) a READ of zeros into the binds' rkey fields and into the
// addresses L4..L7 were given, which puts the placeholders back for this
// instance's next round.
SendWr AllocChain::TicketWr(uint64_t s, uint64_t a0, uint64_t l0) const {
  SendWr t;
  t.wr_id = (s << 8) | 8;
  if (!cfg_.recycle) {
    t.opcode = Opcode::kNop;
    return t;
  }
  fabric::Qp* l = LaneOf(s).l;
  t.opcode = Opcode::kRead;
  t.remote_addr = scratch_ + kScratchZerosOff;
  t.rkey = scratch_meta_mr_->rkey();
  for (uint32_t k = 0; k < md_->group_size(); ++k) {
    t.sg_list.push_back({a_->SendWqeAddr(a0 + k) + WqeLayout::kRkey, 4, a_ring_meta_mr_->lkey()});
  }
  for (uint32_t i = 3; i <= 6; ++i) {
    t.sg_list.push_back({l->SendWqeAddr(l0 + i) + WqeLayout::kRemoteAddr, 8, l->wq_lkey()});
  }
  return t;
}

// The RECV(s) that take request s and rewrite A's (and, recycling, C_w's)
// WQEs.
void AllocChain::PostRecvs(uint64_t s) {
  const uint32_t g = md_->group_size();
  const bool rec = cfg_.recycle;
  const uint64_t a0 = AllocIndex(s);
  auto a_wqe = [&](uint64_t i) { return a_->SendWqeAddr(a0 + i); };
  auto post_recv = [&](const RecvWr& rr) {
    if (const int rc = a_->PostRecv(rr); rc != 0) {
      throw fabric::VerbsError(rc, "onesided_mw alloc chain: posting the RECV on qp " +
                                       std::to_string(a_->qp_num()) + " failed");
    }
  };
  if (rec) {
    // RECV 2s: the operand0 of every WQE of C_w's next instance (s + W).
    const Lane& ln = LaneOf(s);
    const uint64_t c_next = kControlWrsRecycle * ((LaneIndex(s) + 1) % LaneInstances());
    RecvWr rv;
    rv.wr_id = 2 * s;
    for (uint32_t i = 0; i < kControlWrs + 1; ++i) {
      rv.sg_list.push_back(
          {ln.c->SendWqeAddr(c_next + i) + WqeLayout::kOperand0, 8, ln.c_ring_data_mr->lkey()});
    }
    post_recv(rv);
  }
  const uint64_t reply = g;  // A's WQE g (after binds 0..g-1)
  RecvWr rr;
  rr.wr_id = rec ? 2 * s + 1 : s;
  rr.sg_list.push_back({a_wqe(reply) + WqeLayout::kRemoteAddr, 12, a_->wq_lkey()});
  for (uint32_t k = 1; k < g; ++k) {
    rr.sg_list.push_back({a_wqe(k) + WqeLayout::kImmInvQpn, 4, a_->wq_lkey()});
  }
  if (rec) {
    rr.sg_list.push_back({a_wqe(reply) + WqeLayout::kImmInvQpn, 4, a_->wq_lkey()});
    rr.sg_list.push_back({a_wqe(g + 1) + WqeLayout::kOperand0, 8, a_->wq_lkey()});
    rr.sg_list.push_back({a_->recv_doorbell_addr(), 4, a_->wq_lkey()});
  }
  post_recv(rr);
}

// C_w's part of instance s: the gates (ControlValues).
void AllocChain::PostControlPart(uint64_t s) {
  const uint32_t g = md_->group_size();
  const Lane& ln = LaneOf(s);
  fabric::Qp* c = ln.c;
  const std::vector<uint64_t> cv = ControlValues(s, g, cfg_.recycle, cfg_.lanes);
  Post(c, chain::WaitWr(ln.lcq, cv[0]), "WAIT previous ticket");
  Post(c, chain::WaitWr(rcq_, cv[1]), "WAIT request");
  Post(c, chain::EnableWr(ln.l, cv[2]), "ENABLE L1");
  Post(c, chain::WaitWr(ln.lcq, cv[3]), "WAIT L1");
  Post(c, chain::EnableWr(ln.l, cv[4]), "ENABLE L2-L3");
  Post(c, chain::WaitWr(ln.lcq, cv[5]), "WAIT L3");
  Post(c, chain::EnableWr(ln.l, cv[6]), "ENABLE L4-L5");
  Post(c, chain::WaitWr(ln.lcq, cv[7]), "WAIT L4");
  Post(c, chain::EnableWr(ln.l, cv[8]), "ENABLE L6");
  Post(c, chain::WaitWr(ln.lcq, cv[9]), "WAIT L6");
  Post(c, chain::EnableWr(ln.l, cv[10]), "ENABLE L7");
  Post(c, chain::WaitWr(gcq_, cv[11]), "WAIT previous instance's A part");
  SendWr done = chain::EnableWr(a_, cv[12]);
  done.flags |= fabric::kSignaled;  // counted by gcq: the next instance may enable its part
  Post(c, done, "ENABLE binds, reply, ticket");
  if (!cfg_.recycle) return;
  Post(c, chain::EnableWr(c, cv[13]), "ENABLE C's next instance");
  for (uint32_t k = kControlWrs + 1; k < kControlWrsRecycle; ++k) {
    Post(c, chain::NopWr(), "NOP padding");  // no completion, counted by no WAIT
  }
}

bool AllocChain::Faulted() const {
  if (a_->QueryState() == QpState::kErr) return true;
  for (const Lane& ln : lanes_) {
    if (ln.l->QueryState() == QpState::kErr || ln.c->QueryState() == QpState::kErr) return true;
  }
  return false;
}

uint64_t AllocChain::claims_started() const {
  uint64_t n = 0;
  for (const Lane& ln : lanes_) {
    n += (ln.l->counters().send_wrs_executed + kWorkerWrs - 1) / kWorkerWrs;
  }
  return n;
}

Task<void> AllocChain::Quiesce(fabric::Runtime* rt) {
  for (const Lane& ln : lanes_) {
    if (ln.c->state() != QpState::kErr) ln.c->Modify(QpState::kErr);
  }
  if (boot_ && boot_->state() != QpState::kErr) boot_->Modify(QpState::kErr);
  // Every L WR is signaled: L is idle once every started step completed.
  // A control-path poll of the QPs' progress, never on an allocation.
  for (const Lane& ln : lanes_) {
    while (ln.l->state() != QpState::kErr &&
           ln.lcq->total_completions() < ln.l->counters().send_wrs_executed) {
      co_await rt->SleepFor(kPsPerUs);
    }
    if (ln.l->state() != QpState::kErr) ln.l->Modify(QpState::kErr);
  }
  if (a_->state() != QpState::kErr) a_->Modify(QpState::kErr);
}

Task<void> AllocChain::Destroy() {
  co_await Quiesce(&cluster_->runtime());  // L idle: nothing in flight touches the rings
  chain::ChainParts parts;
  parts.mrs = {a_ring_meta_mr_, scratch_meta_mr_, scratch_data_mr_};
  parts.qps = {a_, boot_};
  parts.cqs = {rcq_, acq_, gcq_};
  for (const Lane& ln : lanes_) {
    parts.mrs.push_back(ln.c_ring_data_mr);
    parts.qps.push_back(ln.l);
    parts.qps.push_back(ln.c);
    parts.cqs.push_back(ln.lcq);
  }
  parts.memory = {{scratch_, scratch_meta_mr_->length()}};
  lanes_.clear();
  a_ = boot_ = nullptr;
  co_await chain::Teardown(mn_, std::move(parts));
}

int64_t AllocChain::LastStarted(uint32_t w) const {
  const uint64_t run = lanes_.at(w).l->counters().send_wrs_executed;
  if (run == 0) return -1;
  return static_cast<int64_t>((run - 1) / kWorkerWrs * lanes_.size() + w);
}

AllocChain::Progress AllocChain::Inspect(uint64_t m) const {
  Progress p;
  const Lane& ln = LaneOf(m);
  const uint64_t run = ln.l->counters().send_wrs_executed;
  const uint64_t first = uint64_t{kWorkerWrs} * LaneIndex(m);
  p.steps = run <= first ? 0 : static_cast<uint32_t>(std::min<uint64_t>(run - first, kWorkerWrs));
  const uint64_t slot = scratch_ + kScratchSlotsOff + kSlotBytes * (m % cfg_.max_instances);
  if (p.steps >= 1) p.element = mn_->memory().LoadU64(slot);
  if (p.steps >= 4) {
    // The ticket (recycling) puts 0 back into L6's address; L6 staged the
    // entry's handle (its own address) by then.
    const uint64_t at =
        p.steps >= kWorkerWrs ? slot + 8 : ln.l->SendWqeAddr(first + 5) + WqeLayout::kRemoteAddr;
    uint8_t b[8];
    mn_->memory().Read(at, b, 8);
    p.entry = fabric::LoadBe64(b);
  }
  // A's reply WQE of m is its (g+1)-th; WQEs are counted when started.
  p.replied = a_->counters().send_wrs_executed > AllocIndex(m) + md_->group_size();
  return p;
}

// ---- CN side ------------------------------------------------------------------------

AllocClient::AllocClient(fabric::Node* cn, fabric::Pd* pd, fabric::Runtime* rt, fabric::Mr* mr,
                         uint64_t buf_addr, uint32_t group_size, uint32_t recycle_instances,
                         uint32_t lanes)
    : cn_(cn),
      mr_(mr),
      buf_(buf_addr),
      g_(group_size),
      recycle_(recycle_instances),
      lanes_(lanes),
      deadlines_(rt) {
  if (lanes == 0) throw std::invalid_argument("onesided_mw AllocClient: lanes must be >= 1");
  const uint64_t bytes = BufferBytes(group_size, lanes);
  if (buf_addr < mr->addr() || buf_addr + bytes > mr->addr() + mr->length()) {
    throw std::invalid_argument("onesided_mw AllocClient: buffer outside its MR");
  }
  send_cq_ = cn->CreateCq(16, /*ignore_overrun=*/true);  // unsignaled SENDs: errors only
  recv_cq_ = cn->CreateCq(std::max<uint32_t>(16, 2 * lanes));
  fabric::QpInitAttr a;
  a.pd = pd;
  a.send_cq = send_cq_;
  a.recv_cq = recv_cq_;
  a.max_send_wr = std::max<uint32_t>(4, 2 * lanes);
  a.max_recv_wr = std::max<uint32_t>(4, lanes);
  a.access = fabric::kRemoteWrite;  // the reply
  qp_ = cn->CreateQp(a);
}

AllocClient::~AllocClient() {
  cn_->DestroyQp(qp_);
  cn_->DestroyCq(send_cq_);
  cn_->DestroyCq(recv_cq_);
}

// Writes request `seq` into its slot and posts its RECV and SEND(s).
bool AllocClient::PostRequest(uint32_t seq, const std::vector<uint32_t>& access_qpns) {
  const uint64_t slot = SlotAddr(seq);
  cn_->memory().Fill(reply_addr(seq), 0, ReplyBytes(g_));
  std::vector<uint8_t> req = EncodeRequest(reply_addr(seq), mr_->rkey(), access_qpns);
  uint64_t req_addr = slot;
  std::vector<SendWr> sends;
  if (recycle_) {
    // The recycling chain's arguments (AllocChain's header): first the WAIT
    // counts and ENABLE indices of the lane's next instance, then the
    // request followed by this instance's reply imm, ticket index and the RQ
    // doorbell.
    const uint64_t area = slot + 64 + (ReplyBytes(g_) + 63) / 64 * 64;
    std::vector<uint64_t> cv = AllocChain::ControlValues(seq + lanes_, g_, true, lanes_);
    if (tamper_) tamper_(seq, &cv);
    std::vector<uint8_t> vals(8 * cv.size());
    for (size_t i = 0; i < cv.size(); ++i) fabric::StoreBe64(vals.data() + 8 * i, cv[i]);
    cn_->memory().Write(area, vals.data(), vals.size());
    SendWr v;
    v.wr_id = seq;
    v.opcode = Opcode::kSend;
    v.flags = 0;
    v.sg_list = {{area, static_cast<uint32_t>(vals.size()), mr_->lkey()}};
    sends.push_back(v);
    const size_t off = req.size();
    req.resize(off + 4 + 8 + 4);
    fabric::StoreBe32(req.data() + off, seq);
    fabric::StoreBe64(req.data() + off + 4, uint64_t{AllocChain::kWorkerWrs} * (seq / lanes_ + 1));
    fabric::StoreBe32(req.data() + off + 12,
                      static_cast<uint32_t>(AllocChain::kRecvsPerRequestRecycle *
                                            (uint64_t{seq} + 1 + recycle_)));
    req_addr = area + 128;
  }
  cn_->memory().Write(req_addr, req.data(), req.size());
  RecvWr rr;
  rr.wr_id = seq;  // no SGEs: the WRITE_WITH_IMM places its data by address
  SendWr s;
  s.wr_id = seq;
  s.opcode = Opcode::kSend;
  s.flags = 0;
  s.sg_list = {{req_addr, static_cast<uint32_t>(req.size()), mr_->lkey()}};
  sends.push_back(s);
  bool posted = qp_->PostRecv(rr) == 0;
  for (const SendWr& w : sends) posted = posted && qp_->PostSend(w) == 0;
  return posted;
}

Task<Result<AllocGrant>> AllocClient::Allocate(std::vector<uint32_t> access_qpns, Ps timeout,
                                               uint32_t* seq_out) {
  Result<AllocGrant> r;
  if (seq_out) *seq_out = kNoSeq;
  if (access_qpns.size() + 1 != g_) {
    r.status = Status(Code::kInvalidArgument,
                      "onesided_mw alloc: a group of " + std::to_string(g_) + " MWs needs " +
                          std::to_string(g_ - 1) + " access QP numbers, got " +
                          std::to_string(access_qpns.size()));
    co_return r;
  }
  while (in_flight_ >= lanes_) co_await slot_free_.Wait();
  // A request number is taken only for a request that goes out: the MN's
  // chain numbers its instances by the requests it takes.
  if (broken_ || qp_->state() != QpState::kRts) {
    r.status = Status(Code::kLaneBroken, "onesided_mw alloc: the alloc QP is stopped or in ERR");
    co_return r;
  }
  const uint32_t seq = next_seq_++;
  if (seq_out) *seq_out = seq;
  if (!PostRequest(seq, access_qpns)) {
    r.status = Status(Code::kLaneBroken, "onesided_mw alloc: cannot post on the alloc QP");
    co_return r;
  }
  ++in_flight_;
  // No suspension since seq was taken: turns are taken in request order.
  co_await reply_turn_.Lock();
  const chain::ReplyDeadlines::Ticket deadline = deadlines_.Arm(qp_, timeout);
  const fabric::WorkCompletion wc = co_await recv_cq_->Next();
  r = ReadReply(seq, wc, deadlines_.Settle(deadline), timeout);
  if (r.ok() && broken_) {
    r.status = Status(Code::kLaneBroken,
                      "onesided_mw alloc: an earlier reply on this alloc QP "
                      "failed; the renewal settles this request");
  }
  if (r.ok()) {
    ++accepted_;
  } else if (!broken_) {
    // The first failed reply: whatever arrives after it is not taken (the
    // MN's renewal reports it instead), so what was taken stays a prefix.
    broken_ = true;
    if (qp_->state() != QpState::kErr) qp_->Modify(QpState::kErr);
  }
  reply_turn_.Unlock();
  --in_flight_;
  slot_free_.NotifyAll();
  co_return r;
}

Task<uint64_t> AllocClient::Stop() {
  broken_ = true;
  if (qp_->state() != QpState::kErr) qp_->Modify(QpState::kErr);
  // ERR flushes every pending RECV: the allocations in flight return at once.
  while (in_flight_ > 0) co_await slot_free_.Wait();
  slot_free_.NotifyAll();  // those waiting for a slot see the QP stopped
  co_return accepted_;
}

void AllocClient::Salvage(std::vector<AllocGrant> grants) {
  for (AllocGrant& g : grants) salvaged_[g.seq] = std::move(g);
}

std::optional<AllocGrant> AllocClient::TakeSalvaged(uint32_t seq) {
  const auto it = salvaged_.find(seq);
  if (it == salvaged_.end()) return std::nullopt;
  AllocGrant g = std::move(it->second);
  salvaged_.erase(it);
  return g;
}

Result<AllocGrant> AllocClient::ReadReply(uint32_t seq, const fabric::WorkCompletion& wc,
                                          bool timed_out, Ps timeout) const {
  Result<AllocGrant> r;
  if (wc.status != fabric::WcStatus::kSuccess) {
    r.status = Status(
        Code::kLaneBroken,
        timed_out ? "onesided_mw alloc: no reply within " + std::to_string(PsToUs(timeout)) +
                        " us (the MN's chain faulted: free-MW queue empty or a bad request); the "
                        "alloc QP is now in ERR"
                  : "onesided_mw alloc: the alloc QP failed (" +
                        std::string(fabric::WcStatusName(wc.status)) + ")");
    return r;
  }
  if (!wc.with_imm || wc.imm_data != seq) {
    r.status = Status(Code::kLaneBroken, "onesided_mw alloc: reply for instance " +
                                             std::to_string(wc.imm_data) + ", expected " +
                                             std::to_string(seq));
    return r;
  }
  std::vector<uint8_t> bytes(ReplyBytes(g_));
  cn_->memory().Read(reply_addr(seq), bytes.data(), bytes.size());
  const ReplyImage img = DecodeReply(g_, bytes.data());
  if (!img.same_base || img.handle == 0) {
    r.status = Status(Code::kLaneBroken, "onesided_mw alloc: malformed reply");
    return r;
  }
  r.value.seq = seq;
  r.value.handle = img.handle;
  r.value.base = img.base;
  r.value.rkeys = img.rkeys;
  return r;
}

}  // namespace dmb::systems::onesided_mw
