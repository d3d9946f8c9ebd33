// Two-sided operations: SEND/RECV, SEND gather and RECV scatter, WRITE_WITH_IMM,
// receive-side errors and flushes. (SEND without a posted RECV is not covered:
// with rnr_retry 7 real devices retry forever.)
#include "fabric/verbs_diff/scenario.h"

namespace dmb::verbs_diff {
namespace {

using fabric::kRemoteRead;

Task<void> SendRecvBytesAndLen(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  t.Expect("post RECV", Errno{b.qp->PostRecv(RecvMsg(env.bbuf, 64, env.bmr->lkey(), 42))}, "0");
  env.Fill(env.A, env.abuf, 40, 30);
  auto wc = co_await env.Exec(a, SendMsg(env.abuf, env.amr->lkey(), 40, 7));
  t.Expect("SEND status", wc.status, WcStatus::kSuccess);
  t.Expect("SEND wc opcode", wc.opcode, Opcode::kSend);
  auto rwc = co_await Env::NextRecv(b);
  t.Expect("RECV status", rwc.status, WcStatus::kSuccess);
  t.Expect("RECV opcode", rwc.opcode, Opcode::kRecv);
  t.Expect("RECV wr_id", rwc.wr_id, 42);
  t.Expect("RECV byte_len", rwc.byte_len, 40);
  t.Expect("RECV with_imm", rwc.with_imm, false);
  t.Expect("B bytes", env.Bytes(env.B, env.bbuf, 40), ShowPattern(30, 40));
}

Task<void> SendGatherRecvScatter(Env& env, Transcript& t) {
  const QpInitAttr sge4{.max_send_sge = 4, .max_recv_sge = 4};
  auto [a, b] = env.AB(sge4, sge4);
  RecvWr rr;
  rr.wr_id = 5;
  rr.sg_list = {{env.bbuf, 4, env.bmr->lkey()},
                {env.bbuf + 64, 8, env.bmr->lkey()},
                {env.bbuf + 128, 52, env.bmr->lkey()}};
  t.Expect("post 3-SGE RECV", Errno{b.qp->PostRecv(rr)}, "0");
  env.Fill(env.A, env.abuf, 10, 31);
  env.Fill(env.A, env.abuf + 100, 30, 32);
  SendWr s = SendMsg(0, 0, 0, 6);
  s.sg_list = {{env.abuf, 10, env.amr->lkey()}, {env.abuf + 100, 30, env.amr->lkey()}};
  auto wc = co_await env.Exec(a, s);
  t.Expect("2-SGE SEND status", wc.status, WcStatus::kSuccess);
  auto rwc = co_await Env::NextRecv(b);
  t.Expect("RECV status", rwc.status, WcStatus::kSuccess);
  t.Expect("RECV byte_len", rwc.byte_len, 40);
  std::vector<uint8_t> msg = Pattern(31, 10);
  const auto tail = Pattern(32, 30);
  msg.insert(msg.end(), tail.begin(), tail.end());
  const std::span<const uint8_t> m(msg);
  t.Expect("B SGE 0 bytes", env.Bytes(env.B, env.bbuf, 4), ShowBytes(m.subspan(0, 4)));
  t.Expect("B SGE 1 bytes", env.Bytes(env.B, env.bbuf + 64, 8), ShowBytes(m.subspan(4, 8)));
  t.Expect("B SGE 2 bytes", env.Bytes(env.B, env.bbuf + 128, 28), ShowBytes(m.subspan(12, 28)));
  t.Expect("B SGE 2 rest untouched", env.Bytes(env.B, env.bbuf + 128 + 28, 8),
           ShowBytes(std::vector<uint8_t>(8, 0)));
}

Task<void> SendZeroLength(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  t.Expect("post RECV", Errno{b.qp->PostRecv(RecvMsg(env.bbuf, 64, env.bmr->lkey(), 3))}, "0");
  auto wc = co_await env.Exec(a, SendMsg(0, 0, 0));
  t.Expect("zero-length SEND", wc.status, WcStatus::kSuccess);
  auto rwc = co_await Env::NextRecv(b);
  t.Expect("RECV status", rwc.status, WcStatus::kSuccess);
  t.Expect("RECV byte_len", rwc.byte_len, 0);
}

// Responder length error (class C): NAK invalid request, the requester sees
// REM_INV_REQ_ERR and the RECV completes with LOC_LEN_ERR (ibv_wc_status
// docs). rxe is believed to complete the RECV with REM_INV_REQ_ERR instead
// (do_class_ac_error sets the responder status) -- lead to confirm.
Task<void> SendLargerThanRecv(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  t.Expect("post 16-byte RECV", Errno{b.qp->PostRecv(RecvMsg(env.bbuf, 16, env.bmr->lkey(), 8))},
           "0");
  auto wc = co_await env.Exec(a, SendMsg(env.abuf, env.amr->lkey(), 32));
  t.Expect("32-byte SEND status", wc.status, WcStatus::kRemInvReqErr);
  auto rwc = co_await Env::NextRecv(b);
  t.Expect("RECV status", rwc.status, WcStatus::kLocLenErr);
  t.Expect("RECV wr_id", rwc.wr_id, 8);
  t.Expect("requester QP state", a.qp->state(), QpState::kErr);
  t.Expect("responder QP state", b.qp->QueryState(), QpState::kErr);
}

Task<void> WriteWithImmConsumesRecv(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  t.Expect("post RECV without SGE", Errno{b.qp->PostRecv(RecvMsg(0, 0, 0, 9))}, "0");
  env.Fill(env.A, env.abuf, 16, 33);
  SendWr w = WriteWr(env.abuf, env.amr->lkey(), 16, env.bbuf + 256, env.bmr->rkey(), 4);
  w.opcode = Opcode::kWriteWithImm;
  w.imm_data = 0x12345678;
  auto wc = co_await env.Exec(a, w);
  t.Expect("WRITE_WITH_IMM status", wc.status, WcStatus::kSuccess);
  t.Expect("WRITE_WITH_IMM wc opcode", wc.opcode, Opcode::kWriteWithImm);
  auto rwc = co_await Env::NextRecv(b);
  t.Expect("RECV status", rwc.status, WcStatus::kSuccess);
  t.Expect("RECV opcode", rwc.opcode, Opcode::kRecvRdmaWithImm);
  t.Expect("RECV wr_id", rwc.wr_id, 9);
  t.Expect("RECV with_imm", rwc.with_imm, true);
  t.Expect("RECV imm_data", Hex64(rwc.imm_data), Hex64(0x12345678));
  t.Expect("RECV byte_len", rwc.byte_len, 16);
  t.Expect("B bytes", env.Bytes(env.B, env.bbuf + 256, 16), ShowPattern(33, 16));
}

Task<void> WriteWithImmBadRkeyFlushesRecv(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  t.Expect("post RECV", Errno{b.qp->PostRecv(RecvMsg(0, 0, 0, 9))}, "0");
  SendWr w = WriteWr(env.abuf, env.amr->lkey(), 16, env.bbuf, WrongKey(env.bmr->rkey()));
  w.opcode = Opcode::kWriteWithImm;
  w.imm_data = 1;
  auto wc = co_await env.Exec(a, w);
  t.Expect("WRITE_WITH_IMM with a wrong rkey", wc.status, WcStatus::kRemAccessErr);
  auto rwc = co_await Env::NextRecv(b);
  t.Expect("RECV status (responder in ERR)", rwc.status, WcStatus::kWrFlushErr);
  t.Expect("RECV wr_id", rwc.wr_id, 9);
}

Task<void> RecvCompletionsInPostOrder(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  for (uint64_t i = 0; i < 3; ++i) {
    t.Expect("post RECV " + std::to_string(i),
             Errno{b.qp->PostRecv(RecvMsg(env.bbuf + 64 * i, 64, env.bmr->lkey(), 11 + i))}, "0");
  }
  for (uint64_t i = 0; i < 3; ++i) {
    env.Fill(env.A, env.abuf + 64 * i, 8 * (i + 1), 34 + i);
    t.Expect(
        "post SEND " + std::to_string(i),
        Errno{a.qp->PostSend(SendMsg(env.abuf + 64 * i, env.amr->lkey(), 8 * (i + 1), 21 + i))},
        "0");
  }
  for (uint64_t i = 0; i < 3; ++i) {
    auto wc = co_await Env::NextSend(a);
    t.Expect("SEND completion " + std::to_string(i) + " wr_id", wc.wr_id, 21 + i);
    t.Expect("SEND completion " + std::to_string(i) + " status", wc.status, WcStatus::kSuccess);
  }
  for (uint64_t i = 0; i < 3; ++i) {
    auto rwc = co_await Env::NextRecv(b);
    const std::string n = std::to_string(i);
    t.Expect("RECV " + n + " wr_id", rwc.wr_id, 11 + i);
    t.Expect("RECV " + n + " byte_len", rwc.byte_len, 8 * (i + 1));
    t.Expect("B bytes " + n, env.Bytes(env.B, env.bbuf + 64 * i, 8 * (i + 1)),
             ShowPattern(34 + i, 8 * (i + 1)));
  }
}

// Responder local protection error on the RECV buffer: the RECV completes
// with LOC_PROT_ERR and the requester gets REM_OP_ERR (IBA: remote
// operational error NAK). Unsure for rxe (copy_data failure may surface as
// LOC_QP_OP_ERR on the RECV); follows the sim.
Task<void> RecvIntoMrWithoutLocalWrite(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  const uint64_t buf = env.Alloc(env.B, 4096);
  Mr* ro = co_await env.RegMr(env.B, env.pb, buf, 4096, kRemoteRead);
  t.Expect("post RECV into MR without LOCAL_WRITE",
           Errno{b.qp->PostRecv(RecvMsg(buf, 64, ro->lkey(), 12))}, "0");
  auto wc = co_await env.Exec(a, SendMsg(env.abuf, env.amr->lkey(), 8));
  t.Expect("SEND status", wc.status, WcStatus::kRemOpErr);
  auto rwc = co_await Env::NextRecv(b);
  t.Expect("RECV status", rwc.status, WcStatus::kLocProtErr);
  t.Expect("responder QP state", b.qp->QueryState(), QpState::kErr);
}

Task<void> RecvFlushedByModifyErr(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  for (uint64_t i = 0; i < 2; ++i) {
    t.Expect("post RECV " + std::to_string(i),
             Errno{b.qp->PostRecv(RecvMsg(env.bbuf + 64 * i, 64, env.bmr->lkey(), 50 + i))}, "0");
  }
  t.Expect("Modify(ERR)", ErrnoOf([&] { b.qp->Modify(QpState::kErr); }), "0");
  for (uint64_t i = 0; i < 2; ++i) {
    auto rwc = co_await env.NextRecvWithin(b, 2000000);
    t.Expect("RECV " + std::to_string(i) + " flushed within 2 s", rwc.has_value(), true);
    if (!rwc) break;
    t.Expect("RECV " + std::to_string(i) + " status", rwc->status, WcStatus::kWrFlushErr);
    t.Expect("RECV " + std::to_string(i) + " wr_id", rwc->wr_id, 50 + i);
  }
  t.Expect("post RECV in ERR", Errno{b.qp->PostRecv(RecvMsg(env.bbuf, 64, env.bmr->lkey(), 52))},
           "0");
  auto rwc = co_await env.NextRecvWithin(b, 2000000);
  t.Expect("RECV posted in ERR flushed within 2 s", rwc.has_value(), true);
  if (!rwc) co_return;
  t.Expect("RECV posted in ERR status", rwc->status, WcStatus::kWrFlushErr);
}

Task<void> SendOverLoopback(Env& env, Transcript& t) {
  auto [x, y] = env.Connect(env.A, env.pa, env.A, env.pa);
  t.Expect("post RECV", Errno{y.qp->PostRecv(RecvMsg(env.abuf + 4096, 64, env.amr->lkey(), 1))},
           "0");
  env.Fill(env.A, env.abuf, 24, 35);
  auto wc = co_await env.Exec(x, SendMsg(env.abuf, env.amr->lkey(), 24));
  t.Expect("loopback SEND", wc.status, WcStatus::kSuccess);
  auto rwc = co_await Env::NextRecv(y);
  t.Expect("RECV status", rwc.status, WcStatus::kSuccess);
  t.Expect("RECV byte_len", rwc.byte_len, 24);
  t.Expect("A bytes at RECV buffer", env.Bytes(env.A, env.abuf + 4096, 24), ShowPattern(35, 24));
}

}  // namespace

std::vector<Scenario> SendScenarios() {
  return {
      {"send_recv_bytes_and_len", "SEND lands in the posted RECV with wr_id, byte_len and bytes",
       SendRecvBytesAndLen},
      {"send_gather_recv_scatter", "a 2-SGE SEND scatters into a 3-SGE RECV in order",
       SendGatherRecvScatter},
      {"send_zero_length", "a zero-length SEND consumes a RECV with byte_len 0", SendZeroLength},
      {"send_larger_than_recv",
       "SEND larger than the RECV: requester REM_INV_REQ_ERR, RECV LOC_LEN_ERR, both QPs ERR",
       SendLargerThanRecv,
       {{"rxe", "32-byte SEND status", "REM_OP_ERR", kRxeLengthReason},
        {"rxe", "RECV status", "LOC_QP_OP_ERR", kRxeLengthReason}}},
      {"write_with_imm_consumes_recv",
       "WRITE_WITH_IMM writes the bytes and consumes a RECV carrying imm_data",
       WriteWithImmConsumesRecv},
      {"write_with_imm_bad_rkey_flushes_recv",
       "WRITE_WITH_IMM with a wrong rkey fails; the responder's RECV flushes",
       WriteWithImmBadRkeyFlushesRecv,
       {{"rxe", "RECV status (responder in ERR)", "REM_ACCESS_ERR",
         "rxe completes the RECV the failed WRITE_WITH_IMM would have consumed with the access "
         "error itself; the spec moves the responder to ERR and flushes it"}}},
      {"recv_completions_in_post_order", "RECVs are consumed and completed in posting order",
       RecvCompletionsInPostOrder},
      {"recv_into_mr_without_local_write",
       "a RECV into an MR without LOCAL_WRITE: RECV LOC_PROT_ERR, SEND REM_OP_ERR",
       RecvIntoMrWithoutLocalWrite,
       {{"rxe", "RECV status", "LOC_QP_OP_ERR", kRxeLkeyReason}}},
      {"recv_flushed_by_modify_err",
       "Modify(ERR) flushes posted RECVs; RECVs posted in ERR flush",
       RecvFlushedByModifyErr,
       {{"rxe", "RECV posted in ERR flushed within 2 s", "no",
         "rxe (Linux 6.1) flushes the RECVs queued when the QP enters ERR but never completes a "
         "RECV posted afterwards; the spec flushes it (WR_FLUSH_ERR)"},
        {"rxe", "RECV posted in ERR status", kAbsent, "see the line above"}}},
      {"send_over_loopback", "SEND/RECV between two QPs of one node", SendOverLoopback},
  };
}

}  // namespace dmb::verbs_diff
