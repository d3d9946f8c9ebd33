// ODRP's chains, the CN side: ChainClient invokes a chain, SwapClient picks
// the kind per swap operation (chains.h).
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
using impl::Post;

// ---- CN side -----------------------------------------------------------------------

ChainClient::ChainClient(fabric::Node* cn, fabric::Pd* pd, fabric::Runtime* rt, ChainGeometry geo,
                         fabric::Mr* hdr_mr, uint64_t hdr_addr)
    : cn_(cn), geo_(geo), hdr_mr_(hdr_mr), hdr_(hdr_addr), deadlines_(rt) {
  // All but Load: the reply word is the last 8 bytes of each header's
  // stride, written by the MN (WRITE_WITH_IMM): the MR must allow it.
  const bool reply_word = geo.kind != ChainKind::kLoad;
  const uint64_t last = reply_word ? kHeaderStride : HeaderBytes(geo.kind);
  if (hdr_addr < hdr_mr->addr() ||
      hdr_addr + (geo.lanes - 1) * kHeaderStride + last > hdr_mr->addr() + hdr_mr->length()) {
    throw std::invalid_argument("odrp ChainClient: header buffers outside their MR");
  }
  if (reply_word && (hdr_mr->access() & fabric::kRemoteWrite) == 0) {
    throw std::invalid_argument(
        "odrp ChainClient: the store and invalidate chains reply into the header MR, "
        "which must allow remote write");
  }
  const uint32_t depth = std::max<uint32_t>(8, 2 * geo.lanes);
  send_cq_ = cn->CreateCq(16, /*ignore_overrun=*/true);  // unsignaled SENDs: errors only
  recv_cq_ = cn->CreateCq(std::max<uint32_t>(16, 2 * depth));
  fabric::QpInitAttr a;
  a.pd = pd;
  a.send_cq = send_cq_;
  a.recv_cq = recv_cq_;
  a.max_send_wr = depth;
  a.max_recv_wr = depth;
  a.max_send_sge = 2;               // header + page
  a.access = fabric::kRemoteWrite;  // the reply
  qp_ = cn->CreateQp(a);
}

ChainClient::~ChainClient() {
  cn_->DestroyQp(qp_);
  cn_->DestroyCq(send_cq_);
  cn_->DestroyCq(recv_cq_);
}

Task<Status> ChainClient::Invoke(uint64_t tt_addr, uint64_t dst_addr, uint32_t dst_rkey,
                                 const Sge* page, uint32_t expect_bytes, Ps timeout) {
  const std::string what = std::string("odrp ") + ChainKindName(geo_.kind);
  // Up to W in flight (any W, 1 too): a further request waits until one of
  // them returned.
  while (in_flight_ >= geo_.lanes) co_await window_.Wait();
  timed_out_ = false;
  last_request_ = Chain::kNoRequest;
  if (qp_->state() == QpState::kErr) {
    co_return Status(Code::kLaneBroken, what + ": the chain QP is in ERR");
  }
  // From here to the CQ wait nothing suspends: requests are numbered, posted
  // and queued on recv_cq_ in one order, and replies come back in it.
  const uint64_t n = next_;
  const uint64_t hdr = hdr_ + (n % geo_.lanes) * kHeaderStride;  // free: reply n - W came
  if (geo_.kind != ChainKind::kLoad) {  // the reply word, in this header's stride
    dst_addr = hdr + kHeaderStride - 8;
    dst_rkey = hdr_mr_->rkey();
  }
  const std::vector<uint8_t> h = Header(tt_addr, dst_addr, dst_rkey);
  cn_->memory().Write(hdr, h.data(), h.size());
  ++next_;
  RecvWr rr;
  rr.wr_id = n;  // no SGEs: the WRITE_WITH_IMM places its data by address
  SendWr s;
  s.wr_id = n;
  s.opcode = Opcode::kSend;
  s.flags = 0;
  s.sg_list = {{hdr, static_cast<uint32_t>(h.size()), hdr_mr_->lkey()}};
  if (page != nullptr) s.sg_list.push_back(*page);
  if (qp_->PostRecv(rr) != 0 || qp_->PostSend(s) != 0) {
    co_return Status(Code::kLaneBroken, what + ": cannot post on the chain QP");
  }
  const chain::ReplyDeadlines::Ticket deadline = deadlines_.Arm(qp_, timeout);
  max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
  const fabric::WorkCompletion wc = co_await recv_cq_->Next();
  --in_flight_;
  window_.NotifyAll();
  timed_out_ = deadlines_.Settle(deadline);
  last_request_ = n;
  co_return ReplyStatus(wc, n, expect_bytes, timeout, timed_out_);
}

Status ChainClient::ReplyStatus(const fabric::WorkCompletion& wc, uint64_t n, uint32_t expect_bytes,
                                Ps timeout, bool timed_out) const {
  const std::string what = std::string("odrp ") + ChainKindName(geo_.kind);
  if (wc.status != fabric::WcStatus::kSuccess) {
    return Status(
        Code::kLaneBroken,
        timed_out
            ? what + " request " + std::to_string(n) + ": no reply within " +
                  std::to_string(PsToUs(timeout)) +
                  " us (the MN's chain faulted: unmapped TT entry, empty free page queue or a "
                  "bad argument); the chain QP is now in ERR"
            : what + ": the chain QP failed (" + std::string(fabric::WcStatusName(wc.status)) +
                  ")");
  }
  if (!wc.with_imm || wc.imm_data != static_cast<uint32_t>(n) || wc.byte_len != expect_bytes) {
    return Status(Code::kLaneBroken, what + ": reply imm " + std::to_string(wc.imm_data) + " / " +
                                         std::to_string(wc.byte_len) + " B, expected request " +
                                         std::to_string(n) + " / " + std::to_string(expect_bytes) +
                                         " B");
  }
  return Status::Ok();
}

Task<Status> ChainClient::Load(uint64_t tt_addr, uint64_t dst_addr, uint32_t dst_rkey, Ps timeout) {
  if (geo_.kind != ChainKind::kLoad) {
    co_return Status(Code::kUnsupported, "odrp: Load on a non-load chain");
  }
  co_return co_await Invoke(tt_addr, dst_addr, dst_rkey, nullptr, static_cast<uint32_t>(kPageBytes),
                            timeout);
}

std::vector<uint8_t> ChainClient::Header(uint64_t tt_addr, uint64_t dst_addr,
                                         uint32_t dst_rkey) const {
  if (!tamper_) return EncodeHeader(geo_, next_, tt_addr, dst_addr, dst_rkey);
  std::vector<uint64_t> v =
      RearmValues(geo_.kind, next_ + geo_.slots - geo_.rearm_lag(), geo_.lanes);
  tamper_(next_, &v);
  return EncodeHeader(geo_, next_, tt_addr, dst_addr, dst_rkey, &v);
}

Task<Status> ChainClient::SendHeader(ChainKind kind, uint64_t tt_addr, uint64_t src_addr,
                                     uint32_t src_lkey, Ps timeout) {
  if (geo_.kind != kind) {
    co_return Status(Code::kUnsupported, std::string("odrp: ") + ChainKindName(kind) + " on a " +
                                             ChainKindName(geo_.kind) + " chain");
  }
  const Sge page{src_addr, static_cast<uint32_t>(kPageBytes), src_lkey};
  // The reply is 8 bytes (chains.h "Notification").
  co_return co_await Invoke(tt_addr, 0, 0, kind == ChainKind::kInvalidate ? nullptr : &page, 8,
                            timeout);
}

Task<Status> ChainClient::UnmappedStore(uint64_t tt_addr, uint64_t src_addr, uint32_t src_lkey,
                                        Ps timeout) {
  co_return co_await SendHeader(ChainKind::kUnmappedStore, tt_addr, src_addr, src_lkey, timeout);
}

Task<Status> ChainClient::MappedStore(uint64_t tt_addr, uint64_t src_addr, uint32_t src_lkey,
                                      Ps timeout) {
  co_return co_await SendHeader(ChainKind::kMappedStore, tt_addr, src_addr, src_lkey, timeout);
}

Task<Status> ChainClient::Invalidate(uint64_t tt_addr, Ps timeout) {
  co_return co_await SendHeader(ChainKind::kInvalidate, tt_addr, 0, 0, timeout);
}

// ---- SwapClient --------------------------------------------------------------------

SwapClient::SwapClient(ChainClient* load, ChainClient* unmapped_store, uint64_t tt_base,
                       uint64_t swap_pages, ChainClient* mapped_store, ChainClient* invalidate)
    : load_(load),
      ustore_(unmapped_store),
      mstore_(mapped_store),
      inval_(invalidate),
      tt_base_(tt_base),
      mapped_(swap_pages, false) {}

bool SwapClient::mapped(uint64_t swap_addr) const {
  const uint64_t i = swap_addr / kPageBytes;
  return i < mapped_.size() && mapped_[i];
}

Status SwapClient::CheckAddr(uint64_t swap_addr) const {
  if (swap_addr % kPageBytes != 0 || swap_addr / kPageBytes >= mapped_.size()) {
    return Status(Code::kInvalidArgument, "odrp: swap address " + std::to_string(swap_addr) +
                                              " is not a page of this CN's swap space (" +
                                              std::to_string(mapped_.size()) + " pages)");
  }
  return Status::Ok();
}

Task<Status> SwapClient::Store(uint64_t swap_addr, uint64_t src_addr, uint32_t src_lkey,
                               Ps timeout) {
  if (Status st = CheckAddr(swap_addr); !st.ok()) co_return st;
  const uint64_t tt = TtEntryAddr(tt_base_, swap_addr);
  if (mapped(swap_addr)) {
    if (mstore_ == nullptr) {
      co_return Status(Code::kUnsupported, "odrp: no Mapped Store chain (swap page " +
                                               std::to_string(swap_addr / kPageBytes) +
                                               " is mapped)");
    }
    co_return co_await mstore_->MappedStore(tt, src_addr, src_lkey, timeout);
  }
  Status st = co_await ustore_->UnmappedStore(tt, src_addr, src_lkey, timeout);
  if (st.ok()) mapped_[swap_addr / kPageBytes] = true;
  co_return st;
}

Task<Status> SwapClient::Load(uint64_t swap_addr, uint64_t dst_addr, uint32_t dst_rkey,
                              Ps timeout) {
  if (Status st = CheckAddr(swap_addr); !st.ok()) co_return st;
  if (!mapped(swap_addr)) {
    co_return Status(
        Code::kInvalidArgument,
        "odrp: swap page " + std::to_string(swap_addr / kPageBytes) + " was never stored");
  }
  co_return co_await load_->Load(TtEntryAddr(tt_base_, swap_addr), dst_addr, dst_rkey, timeout);
}

Task<Status> SwapClient::Invalidate(uint64_t swap_addr, Ps timeout) {
  if (Status st = CheckAddr(swap_addr); !st.ok()) co_return st;
  if (inval_ == nullptr) co_return Status(Code::kUnsupported, "odrp: no Invalidate chain");
  if (!mapped(swap_addr)) {
    co_return Status(Code::kInvalidArgument, "odrp: swap page " +
                                                 std::to_string(swap_addr / kPageBytes) +
                                                 " is not mapped (nothing to invalidate)");
  }
  Status st = co_await inval_->Invalidate(TtEntryAddr(tt_base_, swap_addr), timeout);
  if (st.ok()) mapped_[swap_addr / kPageBytes] = false;
  co_return st;
}

}  // namespace dmb::systems::odrp
