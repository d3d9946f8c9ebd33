#include "systems/common/ring_repair.h"

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>

#include "fabric/wqe_layout.h"
#include "systems/common/chain_wr.h"

namespace dmb::systems {

using fabric::Opcode;
using fabric::SendWr;

Task<std::unique_ptr<RingRepair>> RingRepair::Create(RingRef ring) {
  if (ring.ring_bytes < 16 || (ring.ring_bytes & (ring.ring_bytes - 1)) ||
      ring.ring_addr % ring.ring_bytes) {
    throw std::invalid_argument("RingRepair: the ring must be a power of two >= 16 B, aligned");
  }
  std::unique_ptr<RingRepair> r(new RingRepair());
  r->ring_ = ring;
  fabric::Node* mn = ring.node;
  r->cost_post_ = mn->Cost("verbs.post_send");
  r->cost_bookkeeping_ = mn->Cost("mn.bookkeeping");
  r->cq_ = mn->CreateCq(16);
  fabric::QpInitAttr a;
  a.pd = ring.mr->pd();
  a.send_cq = r->cq_;
  a.recv_cq = r->cq_;
  a.max_send_wr = 4;
  a.max_recv_wr = 1;
  r->qp_ = mn->CreateQp(a);
  ring.cluster->Connect(r->qp_, r->qp_);
  r->scratch_ = mn->memory().Alloc(64, 64);
  r->scratch_mr_ = co_await mn->RegMr(ring.mr->pd(), r->scratch_, 64, fabric::kLocalWrite);
  co_return r;
}

Task<fabric::WorkCompletion> RingRepair::Exec(SendWr wr) {
  co_await ring_.node->cpu().Work(cost_post_);
  wr.flags |= fabric::kSignaled;
  if (const int rc = qp_->PostSend(wr); rc != 0) {
    throw fabric::VerbsError(rc, "RingRepair: posting on the MN's repair QP failed");
  }
  co_return co_await cq_->Next();
}

uint64_t RingRepair::LoadElementAt(uint64_t pos) const {
  uint8_t b[8];
  ring_.node->memory().Read(pos, b, 8);
  return fabric::LoadBe64(b);
}

Task<uint64_t> RingRepair::Enqueue(uint64_t element) {
  const fabric::WorkCompletion wc = co_await Exec(
      chain::RingAdvanceWr(ring_.tail_addr, ring_.mr->rkey(),
                           (ring_.ring_bytes >> 1) | (1ull << 63), scratch_, scratch_mr_->lkey()));
  if (wc.status != fabric::WcStatus::kSuccess) {
    throw fabric::VerbsError(EIO, std::string("RingRepair: tail FAA failed: ") +
                                      std::string(fabric::WcStatusName(wc.status)));
  }
  const uint64_t pos = ring_.node->memory().LoadU64(scratch_);
  uint8_t be[8];
  fabric::StoreBe64(be, element);
  ring_.node->memory().Write(pos, be, 8);
  co_return pos;
}

Task<void> RingRepair::Fill(uint64_t pos, uint64_t element) {
  co_await ring_.node->cpu().Work(cost_bookkeeping_);
  uint8_t be[8];
  fabric::StoreBe64(be, element);
  ring_.node->memory().Write(pos, be, 8);
}

Task<uint64_t> RingRepair::Sweep() {
  uint64_t moved = 0;
  // Positions may be added while this runs (Enqueue suspends): re-scan until
  // a pass moves nothing.
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < dead_.size(); ++i) {
      co_await ring_.node->cpu().Work(cost_bookkeeping_);
      const uint64_t p = dead_[i];
      const uint64_t v = LoadElementAt(p);
      if (v == 0) continue;  // no enqueue reached it yet
      dead_.erase(dead_.begin() + static_cast<ptrdiff_t>(i));
      ring_.node->memory().Fill(p, 0, 8);
      co_await Enqueue(v);
      ++moved;
      again = true;
      break;
    }
  }
  co_return moved;
}

bool RingRepair::HeadHasElement() const { return LoadElementAt(head()) != 0; }

}  // namespace dmb::systems
