#include "systems/onesided_mw/alloc_chain.h"

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>

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
  if (cfg.max_instances == 0) {
    throw std::invalid_argument("onesided_mw alloc chain: max_instances must be >= 1");
  }
  if (cfg.recycle && (cfg.max_instances < 4 || !std::has_single_bit(cfg.max_instances))) {
    throw std::invalid_argument(
        "onesided_mw alloc chain: a recycling chain needs a power of two >= 4 instances");
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
  const uint32_t g = md->group_size();
  const uint32_t n = cfg.max_instances;
  const bool rec = cfg.recycle;

  // Counted only (the MN CPU never polls them); C's WAITs read the counts.
  ch->rcq_ = mn->CreateCq(n, /*ignore_overrun=*/true);
  ch->acq_ = mn->CreateCq(n * (g + 1), true);
  ch->lcq_ = mn->CreateCq(n * kWorkerWrs, true);
  ch->ccq_ = mn->CreateCq(n, true);

  fabric::QpInitAttr a;
  a.pd = md->data_pd();
  a.send_cq = ch->acq_;
  a.recv_cq = ch->rcq_;
  a.max_send_wr = n * (rec ? AllocSlotWrs(g) : kAllocWrs(g));
  a.max_recv_wr = n * (rec ? kRecvsPerRequestRecycle : 1);
  a.max_send_sge = g + 1;
  a.max_recv_sge = rec ? fabric::kMaxSge : g;
  a.access = 0;  // the alloc lane carries requests, never one-sided data
  a.cross_channel = true;
  a.manage_send = true;
  ch->a_ = mn->CreateQp(a);

  ch->l_ = chain::LoopbackQp(cluster, mn,
                             {.pd = md->meta_pd(),
                              .cq = ch->lcq_,
                              .max_send_wr = n * kWorkerWrs,
                              .max_send_sge = std::max<uint32_t>(8, g + 4),
                              .managed = true});
  // Recycling: C runs only as far as it enabled itself.
  ch->c_ = chain::LoopbackQp(cluster, mn,
                             {.pd = md->meta_pd(),
                              .cq = ch->ccq_,
                              .max_send_wr = n * (rec ? kControlWrsRecycle : kControlWrs),
                              .managed = rec});
  if (rec) {
    ch->boot_ = chain::LoopbackQp(cluster, mn, {.pd = md->meta_pd(), .cq = ch->ccq_});
    // A's RECVs rewrite C's WAIT counts and ENABLE indices: C's ring again in
    // the data PD, local write only.
    ch->c_ring_data_mr_ = co_await mn->RegMr(
        md->data_pd(), ch->c_->SendWqeAddr(0),
        uint64_t{ch->c_->send_ring_size()} * ch->c_->send_wqe_stride(), fabric::kLocalWrite);
  }

  // L6 scatters into A's bind WQEs: A's SQ ring, registered again in the
  // metadata PD (local write only).
  ch->a_ring_meta_mr_ = co_await mn->RegMr(
      md->meta_pd(), ch->a_->SendWqeAddr(0),
      uint64_t{ch->a_->send_ring_size()} * ch->a_->send_wqe_stride(), fabric::kLocalWrite);
  const uint64_t scratch_bytes = kScratchSlotsOff + kSlotBytes * n;
  ch->scratch_ = mn->memory().Alloc(scratch_bytes, 64);
  mn->memory().Fill(ch->scratch_, 0, scratch_bytes);
  mn->memory().StoreU64(ch->scratch_ + kScratchOwnerOff, cfg.owner_id);
  ch->scratch_meta_mr_ = co_await mn->RegMr(md->meta_pd(), ch->scratch_, scratch_bytes,
                                            fabric::kLocalWrite | fabric::kRemoteRead);
  // A.reply gathers the staged handle: the same bytes, local access in the data PD.
  ch->scratch_data_mr_ =
      co_await mn->RegMr(md->data_pd(), ch->scratch_, scratch_bytes, fabric::kLocalWrite);
  ch->cost_post_ = mn->Cost("verbs.post_send");
  co_return ch;
}

std::vector<uint64_t> AllocChain::ControlValues(uint64_t s, uint32_t g, bool recycle) {
  const uint64_t a0 = s * (recycle ? AllocSlotWrs(g) : kAllocWrs(g));
  const uint64_t l0 = s * kWorkerWrs;
  const uint64_t lc = kWorkerWrs * s;
  const uint64_t rq = recycle ? kRecvsPerRequestRecycle : 1;
  std::vector<uint64_t> v = {
      lc,                                           // WAIT lcq: previous ticket
      rq * (s + 1),                                 // WAIT rcq: the request landed
      l0 + 1,                                       // EN L1
      lc + 1,                                       // WAIT L1
      l0 + 3,                                       // EN L2-L3
      lc + 3,                                       // WAIT L3
      l0 + 5,                                       // EN L4-L5
      lc + 4,                                       // WAIT L4
      l0 + 6,                                       // EN L6
      lc + 6,                                       // WAIT L6
      l0 + 7,                                       // EN L7
      a0 + g,                                       // EN binds
      lc + 7,                                       // WAIT L7
      (uint64_t{g} + 1) * s + g,                    // WAIT binds
      recycle ? a0 + AllocSlotWrs(g) : a0 + g + 3,  // EN reply, tail (and padding)
  };
  if (recycle) v.push_back(kControlWrsRecycle * (s + 2));  // EN C through instance s+1
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
  const uint32_t meta_rkey = md_->meta_mr()->rkey();
  const uint32_t smeta = scratch_meta_mr_->lkey();
  const Layout& lay = md_->layout();
  for (uint32_t j = 0; j < n; ++j) {
    const uint64_t s = armed_;
    const uint64_t tag = s << 8;
    const uint64_t slot = scratch_ + kScratchSlotsOff + kSlotBytes * (s % cfg_.max_instances);
    const uint64_t faa_result = slot;         // u64 LE
    const uint64_t staged_handle = slot + 8;  // u64 BE
    const uint64_t a0 = a_->next_send_index();
    const uint64_t l0 = l_->next_send_index();
    const uint64_t c0 = c_->next_send_index();
    if (a0 != a_per * s || l0 != kWorkerWrs * s ||
        c0 != (rec ? kControlWrsRecycle : kControlWrs) * s) {
      throw std::logic_error("onesided_mw alloc chain: the chain QPs hold foreign WQEs");
    }
    auto a_wqe = [&](uint64_t i) { return a_->SendWqeAddr(a0 + i); };
    auto l_wqe = [&](uint64_t i) { return l_->SendWqeAddr(l0 + i); };
    const uint64_t reply = g;  // A's WQE g (after binds 0..g-1)

    // A: bind[0..g-1], then the reply.
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
      b.bind_qpn = k == 0 ? cfg_.free_qpn : l_->qp_num();
      chain::PostOrThrow(a_, b, "onesided_mw alloc chain", "BIND_MW");
    }
    {
      SendWr w;
      w.wr_id = tag | 0x20;
      w.opcode = Opcode::kWriteWithImm;
      w.imm_data = static_cast<uint32_t>(s);  // recycling: <- RECV
      w.remote_addr = 0;                      // <- RECV (CN_buff)
      w.rkey = 0;                             // <- RECV (CN_buff rkey)
      w.sg_list.push_back({staged_handle, 8, scratch_data_mr_->lkey()});
      for (uint32_t k = 0; k < g; ++k) {
        w.sg_list.push_back({a_wqe(k) + WqeLayout::kRemoteAddr,
                             static_cast<uint32_t>(kMwRecordBytes), a_->wq_lkey()});
      }
      chain::PostOrThrow(a_, w, "onesided_mw alloc chain", "reply WRITE_WITH_IMM");
    }
    // A's tail, reached only if every bind and the reply succeeded (a failure
    // moves A to ERR and flushes it): once the reply is acknowledged, release
    // this instance's ticket on L, which the next instance waits for.
    // Recycling: both values <- RECV.
    chain::PostOrThrow(a_, chain::WaitWr(acq_, (uint64_t{g} + 1) * (s + 1)),
                       "onesided_mw alloc chain", "WAIT reply");
    chain::PostOrThrow(a_, chain::EnableWr(l_, l0 + kWorkerWrs), "onesided_mw alloc chain",
                       "ENABLE ticket");
    for (uint32_t k = kAllocWrs(g); k < a_per; ++k) {
      SendWr nop;
      nop.wr_id = tag | 0x30;
      nop.opcode = Opcode::kNop;
      nop.flags = 0;  // padding: no completion, counted by no WAIT
      chain::PostOrThrow(a_, nop, "onesided_mw alloc chain", "NOP padding");
    }

    // L1: claim an element: head += 8 inside the ring; old head -> faa_result.
    chain::PostOrThrow(l_,
                       chain::RingAdvanceWr(md_->head_addr(), meta_rkey, lay.HeadBoundaryMask(),
                                            faa_result, smeta, tag | 1),
                       "onesided_mw alloc chain", "L1 masked FAA");
    // L2, L3: the element's address, byte-swapped into L4's and L5's remote_addr.
    Post(l_,
         chain::SwapReadWr(faa_result, scratch_meta_mr_->rkey(), l_wqe(3) + WqeLayout::kRemoteAddr,
                           l_->wq_lkey(), tag | 2),
         "L2 swap READ");
    Post(l_,
         chain::SwapReadWr(faa_result, scratch_meta_mr_->rkey(), l_wqe(4) + WqeLayout::kRemoteAddr,
                           l_->wq_lkey(), tag | 3),
         "L3 swap READ");
    // L4: READ the element (the entry address, BE) into L6's remote_addr.
    {
      SendWr r;
      r.wr_id = tag | 4;
      r.opcode = Opcode::kRead;
      r.flags = fabric::kSignaled | fabric::kFence;  // after L2 landed, whoever enabled it
      r.remote_addr = 0;                             // <- L2
      r.rkey = meta_rkey;
      r.sg_list = {{l_wqe(5) + WqeLayout::kRemoteAddr, 8, l_->wq_lkey()}};
      chain::PostOrThrow(l_, r, "onesided_mw alloc chain", "L4 READ element");
    }
    // L5: zero the element (FENCE: only after L4 has read it).
    {
      SendWr w;
      w.wr_id = tag | 5;
      w.opcode = Opcode::kWrite;
      w.flags = fabric::kSignaled | fabric::kFence;
      w.remote_addr = 0;  // <- L3
      w.rkey = meta_rkey;
      w.sg_list = {{scratch_ + kScratchZeroOff, 8, smeta}};
      chain::PostOrThrow(l_, w, "onesided_mw alloc chain", "L5 WRITE zero");
    }
    // L6: READ the entry: owner_ptr -> L7, handle -> staging, MW records ->
    // the binds' bytes 16..31.
    {
      SendWr r;
      r.wr_id = tag | 6;
      r.opcode = Opcode::kRead;
      r.flags = fabric::kSignaled | fabric::kFence;  // after L4 landed
      r.remote_addr = 0;                             // <- L4; 0 (an empty element) faults
      r.rkey = meta_rkey;
      r.sg_list.push_back({l_wqe(6) + WqeLayout::kRemoteAddr, 8, l_->wq_lkey()});
      r.sg_list.push_back({staged_handle, 8, smeta});
      for (uint32_t k = 0; k < g; ++k) {
        r.sg_list.push_back({a_wqe(k) + WqeLayout::kRemoteAddr,
                             static_cast<uint32_t>(kMwRecordBytes), a_ring_meta_mr_->lkey()});
      }
      chain::PostOrThrow(l_, r, "onesided_mw alloc chain", "L6 READ entry");
    }
    // L7: record the owner.
    {
      SendWr w;
      w.wr_id = tag | 7;
      w.opcode = Opcode::kWrite;
      w.flags = fabric::kSignaled | fabric::kFence;  // after L6 landed
      w.remote_addr = 0;                             // <- L6
      w.rkey = meta_rkey;
      w.sg_list = {{scratch_ + kScratchOwnerOff, 8, smeta}};
      chain::PostOrThrow(l_, w, "onesided_mw alloc chain", "L7 WRITE owner_id");
    }
    // L8: the ticket that only A's success path enables: a signaled NOP, or
    // (recycling) a READ of zeros into the binds' rkey fields and into the
    // addresses L4..L7 were given, which puts the placeholders back for this
    // instance's next round: a step replayed out of order (a CN's wrong
    // counts) then faults on address or rkey 0 instead of acting on last
    // round's element, entry or windows.
    if (rec) {
      SendWr t;
      t.wr_id = tag | 8;
      t.opcode = Opcode::kRead;
      t.remote_addr = scratch_ + kScratchZerosOff;
      t.rkey = scratch_meta_mr_->rkey();
      for (uint32_t k = 0; k < g; ++k) {
        t.sg_list.push_back({a_wqe(k) + WqeLayout::kRkey, 4, a_ring_meta_mr_->lkey()});
      }
      for (uint32_t i = 3; i <= 6; ++i) {
        t.sg_list.push_back({l_wqe(i) + WqeLayout::kRemoteAddr, 8, l_->wq_lkey()});
      }
      chain::PostOrThrow(l_, t, "onesided_mw alloc chain", "L8 ticket READ zeros");
    } else {
      SendWr t;
      t.wr_id = tag | 8;
      t.opcode = Opcode::kNop;
      chain::PostOrThrow(l_, t, "onesided_mw alloc chain", "L8 ticket NOP");
    }

    // The RECV(s) that take the CN's request and rewrite A's (and, recycling,
    // C's) WQEs.
    auto post_recv = [&](const RecvWr& rr) {
      if (const int rc = a_->PostRecv(rr); rc != 0) {
        throw fabric::VerbsError(rc, "onesided_mw alloc chain: posting the RECV on qp " +
                                         std::to_string(a_->qp_num()) + " failed");
      }
    };
    if (rec) {
      // RECV 2s: the operand0 of every WQE of C's next instance.
      RecvWr rv;
      rv.wr_id = 2 * s;
      const uint64_t c_next = kControlWrsRecycle * ((s + 1) % cfg_.max_instances);
      for (uint32_t i = 0; i < kControlWrsRecycle; ++i) {
        rv.sg_list.push_back(
            {c_->SendWqeAddr(c_next + i) + WqeLayout::kOperand0, 8, c_ring_data_mr_->lkey()});
      }
      post_recv(rv);
    }
    {
      RecvWr rr;
      rr.wr_id = rec ? 2 * s + 1 : s;
      rr.sg_list.push_back({a_wqe(reply) + WqeLayout::kRemoteAddr, 12, a_->wq_lkey()});
      for (uint32_t k = 1; k < g; ++k) {
        rr.sg_list.push_back({a_wqe(k) + WqeLayout::kImmInvQpn, 4, a_->wq_lkey()});
      }
      if (rec) {
        rr.sg_list.push_back({a_wqe(reply) + WqeLayout::kImmInvQpn, 4, a_->wq_lkey()});
        rr.sg_list.push_back({a_wqe(g + 1) + WqeLayout::kOperand0, 8, a_->wq_lkey()});
        rr.sg_list.push_back({a_wqe(g + 2) + WqeLayout::kOperand0, 8, a_->wq_lkey()});
        rr.sg_list.push_back({a_->recv_doorbell_addr(), 4, a_->wq_lkey()});
      }
      post_recv(rr);
    }

    // C: the gates (ControlValues: the WAIT counts and ENABLE indices).
    const std::vector<uint64_t> cv = ControlValues(s, g, rec);
    chain::PostOrThrow(c_, chain::WaitWr(lcq_, cv[0]), "onesided_mw alloc chain",
                       "WAIT previous ticket");
    chain::PostOrThrow(c_, chain::WaitWr(rcq_, cv[1]), "onesided_mw alloc chain", "WAIT request");
    chain::PostOrThrow(c_, chain::EnableWr(l_, cv[2]), "onesided_mw alloc chain", "ENABLE L1");
    chain::PostOrThrow(c_, chain::WaitWr(lcq_, cv[3]), "onesided_mw alloc chain", "WAIT L1");
    chain::PostOrThrow(c_, chain::EnableWr(l_, cv[4]), "onesided_mw alloc chain", "ENABLE L2-L3");
    chain::PostOrThrow(c_, chain::WaitWr(lcq_, cv[5]), "onesided_mw alloc chain", "WAIT L3");
    chain::PostOrThrow(c_, chain::EnableWr(l_, cv[6]), "onesided_mw alloc chain", "ENABLE L4-L5");
    chain::PostOrThrow(c_, chain::WaitWr(lcq_, cv[7]), "onesided_mw alloc chain", "WAIT L4");
    chain::PostOrThrow(c_, chain::EnableWr(l_, cv[8]), "onesided_mw alloc chain", "ENABLE L6");
    chain::PostOrThrow(c_, chain::WaitWr(lcq_, cv[9]), "onesided_mw alloc chain", "WAIT L6");
    chain::PostOrThrow(c_, chain::EnableWr(l_, cv[10]), "onesided_mw alloc chain", "ENABLE L7");
    chain::PostOrThrow(c_, chain::EnableWr(a_, cv[11]), "onesided_mw alloc chain", "ENABLE binds");
    chain::PostOrThrow(c_, chain::WaitWr(lcq_, cv[12]), "onesided_mw alloc chain", "WAIT L7");
    chain::PostOrThrow(c_, chain::WaitWr(acq_, cv[13]), "onesided_mw alloc chain", "WAIT binds");
    chain::PostOrThrow(c_, chain::EnableWr(a_, cv[14]), "onesided_mw alloc chain",
                       "ENABLE reply, ticket");
    if (rec)
      chain::PostOrThrow(c_, chain::EnableWr(c_, cv[15]), "onesided_mw alloc chain",
                         "ENABLE C's next instance");

    ++armed_;
    const uint32_t wrs = (rec ? 2 : 1) + a_per + kWorkerWrs + static_cast<uint32_t>(cv.size());
    co_await mn_->cpu().Work(cost_post_, wrs);
  }
  if (rec) {
    chain::PostOrThrow(boot_, chain::EnableWr(c_, kControlWrsRecycle), "onesided_mw alloc chain",
                       "ENABLE C's first instance");
    co_await mn_->cpu().Work(cost_post_, 1);
  }
}

bool AllocChain::Faulted() const {
  return a_->QueryState() == QpState::kErr || l_->QueryState() == QpState::kErr ||
         c_->QueryState() == QpState::kErr;
}

Task<void> AllocChain::Quiesce(fabric::Runtime* rt) {
  if (c_->state() != QpState::kErr) c_->Modify(QpState::kErr);
  if (boot_ && boot_->state() != QpState::kErr) boot_->Modify(QpState::kErr);
  // Every L WR is signaled: L is idle once every started step completed.
  // A control-path poll of the QP's progress, never on an allocation.
  while (l_->state() != QpState::kErr &&
         lcq_->total_completions() < l_->counters().send_wrs_executed) {
    co_await rt->SleepFor(kPsPerUs);
  }
  if (l_->state() != QpState::kErr) l_->Modify(QpState::kErr);
  if (a_->state() != QpState::kErr) a_->Modify(QpState::kErr);
}

AllocChain::Progress AllocChain::Inspect(uint64_t m) const {
  Progress p;
  const uint64_t run = l_->counters().send_wrs_executed;
  const uint64_t first = uint64_t{kWorkerWrs} * m;
  p.steps = run <= first ? 0 : static_cast<uint32_t>(std::min<uint64_t>(run - first, kWorkerWrs));
  const uint64_t slot = scratch_ + kScratchSlotsOff + kSlotBytes * (m % cfg_.max_instances);
  if (p.steps >= 1) p.element = mn_->memory().LoadU64(slot);
  if (p.steps >= 4) {
    uint8_t b[8];
    mn_->memory().Read(l_->SendWqeAddr(first + 5) + WqeLayout::kRemoteAddr, b, 8);
    p.entry = fabric::LoadBe64(b);
  }
  return p;
}

// ---- CN side ------------------------------------------------------------------------

AllocClient::AllocClient(fabric::Node* cn, fabric::Pd* pd, fabric::Runtime* rt, fabric::Mr* mr,
                         uint64_t buf_addr, uint32_t group_size, uint32_t recycle_instances)
    : cn_(cn), rt_(rt), mr_(mr), buf_(buf_addr), g_(group_size), recycle_(recycle_instances) {
  const uint64_t bytes = recycle_ ? RecycleBufferBytes(group_size) : BufferBytes(group_size);
  if (buf_addr < mr->addr() || buf_addr + bytes > mr->addr() + mr->length()) {
    throw std::invalid_argument("onesided_mw AllocClient: buffer outside its MR");
  }
  send_cq_ = cn->CreateCq(16, /*ignore_overrun=*/true);  // unsignaled SENDs: errors only
  recv_cq_ = cn->CreateCq(16);
  fabric::QpInitAttr a;
  a.pd = pd;
  a.send_cq = send_cq_;
  a.recv_cq = recv_cq_;
  a.max_send_wr = 4;
  a.max_recv_wr = 4;
  a.access = fabric::kRemoteWrite;  // the reply
  qp_ = cn->CreateQp(a);
}

Task<Result<AllocGrant>> AllocClient::Allocate(std::vector<uint32_t> access_qpns, Ps timeout) {
  Result<AllocGrant> r;
  if (access_qpns.size() + 1 != g_) {
    r.status = Status(Code::kInvalidArgument,
                      "onesided_mw alloc: a group of " + std::to_string(g_) + " MWs needs " +
                          std::to_string(g_ - 1) + " access QP numbers, got " +
                          std::to_string(access_qpns.size()));
    co_return r;
  }
  if (qp_->state() == QpState::kErr) {
    r.status = Status(Code::kLaneBroken, "onesided_mw alloc: the alloc QP is in ERR");
    co_return r;
  }
  const uint32_t seq = next_seq_++;
  cn_->memory().Fill(reply_addr(), 0, ReplyBytes(g_));
  std::vector<uint8_t> req = EncodeRequest(reply_addr(), mr_->rkey(), access_qpns);
  uint64_t req_addr = buf_;
  std::vector<SendWr> sends;
  if (recycle_) {
    // The recycling chain's arguments (AllocChain's header): first C's next
    // instance's WAIT counts and ENABLE indices, then the request followed
    // by this instance's reply imm, A's tail values and the RQ doorbell.
    const uint64_t area = buf_ + 64 + (ReplyBytes(g_) + 63) / 64 * 64;
    const std::vector<uint64_t> cv = AllocChain::ControlValues(seq + 1, g_, true);
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
    req.resize(off + 4 + 8 + 8 + 4);
    fabric::StoreBe32(req.data() + off, seq);
    fabric::StoreBe64(req.data() + off + 4, (uint64_t{g_} + 1) * (seq + 1));
    fabric::StoreBe64(req.data() + off + 12, uint64_t{AllocChain::kWorkerWrs} * (seq + 1));
    fabric::StoreBe32(req.data() + off + 20,
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
  if (!posted) {
    r.status = Status(Code::kLaneBroken, "onesided_mw alloc: cannot post on the alloc QP");
    co_return r;
  }
  auto pending = std::make_shared<chain::ReplyDeadline>();
  rt_->Spawn(chain::ArmDeadline(rt_, qp_, pending, timeout));
  const fabric::WorkCompletion wc = co_await recv_cq_->Next();
  pending->done = true;
  if (wc.status != fabric::WcStatus::kSuccess) {
    r.status =
        Status(Code::kLaneBroken,
               pending->timed_out
                   ? "onesided_mw alloc: no reply within " + std::to_string(PsToUs(timeout)) +
                         " us (the MN's chain faulted: free-MW queue empty or a bad request); the "
                         "alloc QP is now in ERR"
                   : "onesided_mw alloc: the alloc QP failed (" +
                         std::string(fabric::WcStatusName(wc.status)) + ")");
    co_return r;
  }
  if (!wc.with_imm || wc.imm_data != seq) {
    r.status = Status(Code::kLaneBroken, "onesided_mw alloc: reply for instance " +
                                             std::to_string(wc.imm_data) + ", expected " +
                                             std::to_string(seq));
    co_return r;
  }
  std::vector<uint8_t> bytes(ReplyBytes(g_));
  cn_->memory().Read(reply_addr(), bytes.data(), bytes.size());
  const ReplyImage img = DecodeReply(g_, bytes.data());
  if (!img.same_base || img.handle == 0) {
    r.status = Status(Code::kLaneBroken, "onesided_mw alloc: malformed reply");
    co_return r;
  }
  r.value.seq = seq;
  r.value.handle = img.handle;
  r.value.base = img.base;
  r.value.rkeys = img.rkeys;
  co_return r;
}

}  // namespace dmb::systems::onesided_mw
