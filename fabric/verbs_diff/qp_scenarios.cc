// QP state machine, posting rules, error propagation and flushing, recovery,
// ordering, signaling, loopback, QP access flags, SGE lists.
#include "fabric/verbs_diff/scenario.h"

namespace dmb::verbs_diff {
namespace {

using fabric::kRemoteRead;
using fabric::kRemoteWrite;

QpAttr PeerOf(const Ep& e) { return {e.node->id(), e.qp->qp_num()}; }

std::string ModifyErrno(Qp* qp, QpState s, const QpAttr& attr = {}) {
  return ErrnoOf([&] { qp->Modify(s, attr); });
}

Task<void> ResetToRtsIllegal(Env& env, Transcript& t) {
  Ep a = env.MakeEp(env.A, env.pa);
  Ep b = env.MakeEp(env.B, env.pb);
  t.Expect("new QP state", a.qp->state(), QpState::kReset);
  t.Expect("Modify RESET->RTS", ModifyErrno(a.qp, QpState::kRts), "EINVAL");
  t.Expect("Modify RESET->RTR", ModifyErrno(a.qp, QpState::kRtr, PeerOf(b)), "EINVAL");
  t.Expect("state after refused transitions", a.qp->state(), QpState::kReset);
  co_return;
}

Task<void> InitToRtsIllegal(Env& env, Transcript& t) {
  Ep a = env.MakeEp(env.A, env.pa);
  t.Expect("Modify RESET->INIT", ModifyErrno(a.qp, QpState::kInit), "0");
  t.Expect("Modify INIT->RTS", ModifyErrno(a.qp, QpState::kRts), "EINVAL");
  t.Expect("state", a.qp->state(), QpState::kInit);
  co_return;
}

Task<void> ErrToRtsIllegal(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  t.Expect("Modify RTS->ERR", ModifyErrno(a.qp, QpState::kErr), "0");
  t.Expect("Modify ERR->RTS", ModifyErrno(a.qp, QpState::kRts), "EINVAL");
  t.Expect("Modify ERR->INIT", ModifyErrno(a.qp, QpState::kInit), "EINVAL");
  t.Expect("state", a.qp->state(), QpState::kErr);
  co_return;
}

// IBA / ib_modify_qp_is_ok: INIT->INIT, RTS->RTS and ERR->ERR are legal
// (attribute changes without a state change).
Task<void> SameStateTransitionsLegal(Env& env, Transcript& t) {
  Ep a = env.MakeEp(env.A, env.pa);
  Ep b = env.MakeEp(env.B, env.pb);
  t.Expect("Modify RESET->INIT", ModifyErrno(a.qp, QpState::kInit), "0");
  t.Expect("Modify INIT->INIT", ModifyErrno(a.qp, QpState::kInit), "0");
  b.qp->Modify(QpState::kInit);
  t.Expect("Modify INIT->RTR", ModifyErrno(a.qp, QpState::kRtr, PeerOf(b)), "0");
  b.qp->Modify(QpState::kRtr, PeerOf(a));
  t.Expect("Modify RTR->RTS", ModifyErrno(a.qp, QpState::kRts), "0");
  b.qp->Modify(QpState::kRts);
  t.Expect("Modify RTS->RTS", ModifyErrno(a.qp, QpState::kRts), "0");
  t.Expect("state", a.qp->state(), QpState::kRts);
  auto wc = co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey()));
  t.Expect("READ after RTS->RTS", wc.status, WcStatus::kSuccess);
  t.Expect("Modify RTS->ERR", ModifyErrno(a.qp, QpState::kErr), "0");
  t.Expect("Modify ERR->ERR", ModifyErrno(a.qp, QpState::kErr), "0");
}

// The IBA state diagram (and ib_modify_qp_is_ok's table) has no RESET->ERR
// transition: real verbs return EINVAL. The contract ("any->ERR") and the sim
// accept it. Recorded without a spec expectation so that the comparison on
// rxe shows the difference while the unit test does not enforce the sim's
// value; see the report to the lead.
Task<void> ResetToErr(Env& env, Transcript& t) {
  Ep a = env.MakeEp(env.A, env.pa);
  t.Expect("Modify RESET->ERR", ModifyErrno(a.qp, QpState::kErr), "EINVAL");
  t.Expect("Modify ->RESET", ModifyErrno(a.qp, QpState::kReset), "0");
  t.Expect("state", a.qp->state(), QpState::kReset);
  co_return;
}

Task<void> PostSendBeforeRtsRefused(Env& env, Transcript& t) {
  Ep a = env.MakeEp(env.A, env.pa);
  Ep b = env.MakeEp(env.B, env.pb);
  const SendWr wr = ReadWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey());
  t.Expect("PostSend in RESET", Errno{a.qp->PostSend(wr)}, "EINVAL");
  a.qp->Modify(QpState::kInit);
  t.Expect("PostSend in INIT", Errno{a.qp->PostSend(wr)}, "EINVAL");
  b.qp->Modify(QpState::kInit);
  a.qp->Modify(QpState::kRtr, PeerOf(b));
  t.Expect("PostSend in RTR", Errno{a.qp->PostSend(wr)}, "EINVAL");
  co_return;
}

// IBA: posting to the receive queue of a QP in RESET is an immediate error;
// from INIT on it is allowed. (rxe's user-space provider writes RECV WQEs
// without looking at the state: a candidate deviation.)
Task<void> PostRecvOnResetRefused(Env& env, Transcript& t) {
  Ep b = env.MakeEp(env.B, env.pb);
  t.Expect("PostRecv in RESET", Errno{b.qp->PostRecv(RecvMsg(env.bbuf, 64, env.bmr->lkey()))},
           "EINVAL");
  b.qp->Modify(QpState::kInit);
  t.Expect("PostRecv in INIT", Errno{b.qp->PostRecv(RecvMsg(env.bbuf, 64, env.bmr->lkey()))}, "0");
  co_return;
}

Task<void> ErrorFlushesLaterWrs(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  const uint32_t lk = env.amr->lkey(), rk = env.bmr->rkey();
  t.Expect("post READ 1", Errno{a.qp->PostSend(ReadWr(env.abuf, lk, 8, env.bbuf, rk, 1))}, "0");
  t.Expect("post READ 2 (wrong rkey)",
           Errno{a.qp->PostSend(ReadWr(env.abuf, lk, 8, env.bbuf, WrongKey(rk), 2))}, "0");
  t.Expect("post READ 3", Errno{a.qp->PostSend(ReadWr(env.abuf, lk, 8, env.bbuf, rk, 3))}, "0");
  t.Expect("post READ 4", Errno{a.qp->PostSend(ReadWr(env.abuf, lk, 8, env.bbuf, rk, 4))}, "0");
  const WcStatus want[] = {WcStatus::kSuccess, WcStatus::kRemAccessErr, WcStatus::kWrFlushErr,
                           WcStatus::kWrFlushErr};
  for (int i = 0; i < 4; ++i) {
    auto wc = co_await Env::NextSend(a);
    const std::string n = std::to_string(i + 1);
    t.Expect("completion " + n + " wr_id", wc.wr_id, i + 1);
    t.Expect("completion " + n + " status", wc.status, want[i]);
  }
  t.Expect("requester QP state", a.qp->state(), QpState::kErr);
  t.Expect("post READ 5 in ERR", Errno{a.qp->PostSend(ReadWr(env.abuf, lk, 8, env.bbuf, rk, 5))},
           "0");
  auto wc = co_await Env::NextSend(a);
  t.Expect("completion 5 wr_id", wc.wr_id, 5);
  t.Expect("completion 5 status", wc.status, WcStatus::kWrFlushErr);
}

// A remote access violation moves the responder QP to ERR too (IBA class C
// responder error; rxe raises IB_EVENT_QP_ACCESS_ERR) and flushes its RECVs.
Task<void> ResponderErrsAfterRemoteAccessError(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  t.Expect("post RECV on responder",
           Errno{b.qp->PostRecv(RecvMsg(env.bbuf, 64, env.bmr->lkey(), 77))}, "0");
  auto wc = co_await env.Exec(
      a, WriteWr(env.abuf, env.amr->lkey(), 8, env.bbuf, WrongKey(env.bmr->rkey())));
  t.Expect("WRITE with a wrong rkey", wc.status, WcStatus::kRemAccessErr);
  t.Expect("requester QP state", a.qp->state(), QpState::kErr);
  t.Expect("responder QP state", b.qp->QueryState(), QpState::kErr);
  auto rwc = co_await Env::NextRecv(b);
  t.Expect("responder RECV status", rwc.status, WcStatus::kWrFlushErr);
  t.Expect("responder RECV wr_id", rwc.wr_id, 77);
}

Task<void> RecoveryResetToRts(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  auto wc = co_await env.Exec(
      a, ReadWr(env.abuf, env.amr->lkey(), 8, env.bbuf, WrongKey(env.bmr->rkey())));
  t.Expect("READ with a wrong rkey", wc.status, WcStatus::kRemAccessErr);
  t.Expect("requester QP state", a.qp->state(), QpState::kErr);
  t.Expect("A ERR->RESET", ModifyErrno(a.qp, QpState::kReset), "0");
  t.Expect("B ->RESET", ModifyErrno(b.qp, QpState::kReset), "0");
  t.Expect("A state", a.qp->state(), QpState::kReset);
  t.Expect("A RESET->INIT", ModifyErrno(a.qp, QpState::kInit), "0");
  t.Expect("B RESET->INIT", ModifyErrno(b.qp, QpState::kInit), "0");
  t.Expect("A INIT->RTR", ModifyErrno(a.qp, QpState::kRtr, PeerOf(b)), "0");
  t.Expect("B INIT->RTR", ModifyErrno(b.qp, QpState::kRtr, PeerOf(a)), "0");
  t.Expect("A RTR->RTS", ModifyErrno(a.qp, QpState::kRts), "0");
  t.Expect("B RTR->RTS", ModifyErrno(b.qp, QpState::kRts), "0");
  t.Expect("A state", a.qp->state(), QpState::kRts);
  t.Expect("B state", b.qp->state(), QpState::kRts);
  env.Fill(env.A, env.abuf, 16, 40);
  wc = co_await env.Exec(a, WriteWr(env.abuf, env.amr->lkey(), 16, env.bbuf, env.bmr->rkey()));
  t.Expect("WRITE after recovery", wc.status, WcStatus::kSuccess);
  wc = co_await env.Exec(a, ReadWr(env.abuf + 64, env.amr->lkey(), 16, env.bbuf, env.bmr->rkey()));
  t.Expect("READ after recovery", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes", env.Bytes(env.A, env.abuf + 64, 16), ShowPattern(40, 16));
}

Task<void> PostAfterModifyErrFlushes(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  t.Expect("Modify RTS->ERR", ModifyErrno(a.qp, QpState::kErr), "0");
  auto wc =
      co_await env.Exec(a, WriteWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey(), 9));
  t.Expect("WRITE posted in ERR", wc.status, WcStatus::kWrFlushErr);
  t.Expect("wr_id", wc.wr_id, 9);
}

Task<void> WriteThenReadOrdered(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  env.Fill(env.A, env.abuf, 32, 41);
  env.Fill(env.B, env.bbuf, 32, 42);
  t.Expect(
      "post WRITE",
      Errno{a.qp->PostSend(WriteWr(env.abuf, env.amr->lkey(), 32, env.bbuf, env.bmr->rkey(), 1))},
      "0");
  t.Expect("post READ of the same bytes",
           Errno{a.qp->PostSend(
               ReadWr(env.abuf + 64, env.amr->lkey(), 32, env.bbuf, env.bmr->rkey(), 2))},
           "0");
  auto w1 = co_await Env::NextSend(a);
  auto w2 = co_await Env::NextSend(a);
  t.Expect("first completion", w1.wr_id, 1);
  t.Expect("second completion", w2.wr_id, 2);
  t.Expect("statuses", w1.status == WcStatus::kSuccess && w2.status == WcStatus::kSuccess, true);
  t.Expect("READ sees the WRITE", env.Bytes(env.A, env.abuf + 64, 32), ShowPattern(41, 32));
}

Task<void> UnsignaledSuccessNoCqe(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  SendWr w = WriteWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey(), 1);
  w.flags = 0;
  t.Expect("post unsignaled WRITE", Errno{a.qp->PostSend(w)}, "0");
  auto wc =
      co_await env.Exec(a, ReadWr(env.abuf + 64, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey(), 2));
  t.Expect("first completion wr_id", wc.wr_id, 2);
  t.Expect("first completion status", wc.status, WcStatus::kSuccess);
  WorkCompletion more[4];
  t.Expect("further completions", a.scq->Poll(more), 0);
}

Task<void> UnsignaledErrorCompletes(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  SendWr w = WriteWr(env.abuf, env.amr->lkey(), 8, env.bbuf, WrongKey(env.bmr->rkey()), 3);
  w.flags = 0;
  auto wc = co_await env.Exec(a, w);
  t.Expect("unsignaled failing WRITE still completes: wr_id", wc.wr_id, 3);
  t.Expect("status", wc.status, WcStatus::kRemAccessErr);
}

Task<void> SelfLoopback(Env& env, Transcript& t) {
  Ep s = env.SelfLoop();
  t.Expect("self-connected QP state", s.qp->state(), QpState::kRts);
  env.Fill(env.A, env.abuf, 16, 43);
  auto wc = co_await env.Exec(
      s, WriteWr(env.abuf, env.amr->lkey(), 16, env.abuf + 8192, env.amr->rkey()));
  t.Expect("WRITE to itself", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes", env.Bytes(env.A, env.abuf + 8192, 16), ShowPattern(43, 16));
  wc = co_await env.Exec(
      s, ReadWr(env.abuf + 4096, env.amr->lkey(), 16, env.abuf + 8192, env.amr->rkey()));
  t.Expect("READ from itself", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes read back", env.Bytes(env.A, env.abuf + 4096, 16), ShowPattern(43, 16));
}

Task<void> LoopbackPairOnOneNode(Env& env, Transcript& t) {
  auto [x, y] = env.Connect(env.A, env.pa, env.A, env.pa);
  env.Fill(env.A, env.abuf + 8192, 16, 44);
  auto wc =
      co_await env.Exec(x, ReadWr(env.abuf, env.amr->lkey(), 16, env.abuf + 8192, env.amr->rkey()));
  t.Expect("READ over A-A pair", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes", env.Bytes(env.A, env.abuf, 16), ShowPattern(44, 16));
  wc = co_await env.Exec(
      y, ReadWr(env.abuf + 64, env.amr->lkey(), 16, env.abuf + 8192, env.amr->rkey()));
  t.Expect("READ the other way", wc.status, WcStatus::kSuccess);
}

// The responder QP's qp_access_flags gate remote operation classes: a
// refused class is an invalid request (rxe: check_op_valid).
Task<void> QpAccessRefusesWrite(Env& env, Transcript& t) {
  auto [a, b] = env.AB({}, {.access = kRemoteRead});
  auto wc = co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey()));
  t.Expect("READ to REMOTE_READ-only QP", wc.status, WcStatus::kSuccess);
  env.Fill(env.B, env.bbuf, 8, 45);
  wc = co_await env.Exec(a, WriteWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey()));
  t.Expect("WRITE to REMOTE_READ-only QP", wc.status, WcStatus::kRemInvReqErr);
  t.Expect("B bytes unchanged", env.Bytes(env.B, env.bbuf, 8), ShowPattern(45, 8));
}

Task<void> QpAccessRefusesRead(Env& env, Transcript& t) {
  auto [a, b] = env.AB({}, {.access = kRemoteWrite});
  auto wc = co_await env.Exec(a, WriteWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey()));
  t.Expect("WRITE to REMOTE_WRITE-only QP", wc.status, WcStatus::kSuccess);
  wc = co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey()));
  t.Expect("READ to REMOTE_WRITE-only QP", wc.status, WcStatus::kRemInvReqErr);
}

// Unsure for real devices: they may round max_send_sge up (then the 2-SGE WR
// is accepted); follows the contract/sim.
Task<void> TooManySgeRefused(Env& env, Transcript& t) {
  auto [a, b] = env.AB({.max_send_sge = 1, .max_recv_sge = 1});
  SendWr w = WriteWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey());
  w.sg_list.push_back({env.abuf + 64, 8, env.amr->lkey()});
  t.Expect("PostSend with 2 SGEs on max_send_sge=1", Errno{a.qp->PostSend(w)}, "EINVAL");
  RecvWr r = RecvMsg(env.abuf, 8, env.amr->lkey());
  r.sg_list.push_back({env.abuf + 64, 8, env.amr->lkey()});
  t.Expect("PostRecv with 2 SGEs on max_recv_sge=1", Errno{a.qp->PostRecv(r)}, "EINVAL");
  t.Expect("state", a.qp->state(), QpState::kRts);
  auto wc = co_await env.Exec(a, WriteWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey()));
  t.Expect("a valid WRITE afterwards", wc.status, WcStatus::kSuccess);
}

// Nobody answers (the peer QP went back to RESET): the requester retries
// until the retry count is exhausted. Slow on real devices (timeout x
// retry_cnt).
Task<void> PeerInResetRetryExceeded(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  t.Expect("peer Modify(RESET)", ModifyErrno(b.qp, QpState::kReset), "0");
  auto wc = co_await env.Exec(a, WriteWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey()));
  t.Expect("WRITE to a peer in RESET", wc.status, WcStatus::kRetryExcErr);
  t.Expect("requester QP state", a.qp->state(), QpState::kErr);
}

Task<void> ReadScatterWriteGather(Env& env, Transcript& t) {
  const QpInitAttr sge4{.max_send_sge = 4, .max_recv_sge = 4};
  auto [a, b] = env.AB(sge4, sge4);
  env.Fill(env.B, env.bbuf, 24, 46);
  SendWr r = ReadWr(0, 0, 0, env.bbuf, env.bmr->rkey());
  r.sg_list = {{env.abuf + 200, 8, env.amr->lkey()},
               {env.abuf + 100, 8, env.amr->lkey()},
               {env.abuf, 8, env.amr->lkey()}};
  auto wc = co_await env.Exec(a, r);
  t.Expect("3-SGE READ", wc.status, WcStatus::kSuccess);
  const auto p = Pattern(46, 24);
  const std::span<const uint8_t> ps(p);
  t.Expect("SGE 0 got bytes 0..7", env.Bytes(env.A, env.abuf + 200, 8),
           ShowBytes(ps.subspan(0, 8)));
  t.Expect("SGE 1 got bytes 8..15", env.Bytes(env.A, env.abuf + 100, 8),
           ShowBytes(ps.subspan(8, 8)));
  t.Expect("SGE 2 got bytes 16..23", env.Bytes(env.A, env.abuf, 8), ShowBytes(ps.subspan(16, 8)));
  // Gather the three pieces back in the original order to a new place.
  SendWr w = WriteWr(0, 0, 0, env.bbuf + 4096, env.bmr->rkey());
  w.sg_list = {{env.abuf + 200, 8, env.amr->lkey()},
               {env.abuf + 100, 8, env.amr->lkey()},
               {env.abuf, 8, env.amr->lkey()}};
  wc = co_await env.Exec(a, w);
  t.Expect("3-SGE WRITE", wc.status, WcStatus::kSuccess);
  t.Expect("B bytes", env.Bytes(env.B, env.bbuf + 4096, 24), ShowPattern(46, 24));
}

}  // namespace

std::vector<Scenario> QpScenarios() {
  return {
      {"qp_reset_to_rts_illegal", "RESET->RTS and RESET->RTR are EINVAL; the QP stays RESET",
       ResetToRtsIllegal},
      {"qp_init_to_rts_illegal", "INIT->RTS is EINVAL", InitToRtsIllegal},
      {"qp_err_to_rts_illegal", "ERR->RTS and ERR->INIT are EINVAL", ErrToRtsIllegal},
      {"qp_same_state_transitions_legal", "INIT->INIT, RTS->RTS and ERR->ERR are legal",
       SameStateTransitionsLegal},
      {"qp_reset_to_err", "RESET->ERR is refused (mlx4/mlx5 and ib_modify_qp_is_ok); ->RESET works",
       ResetToErr},
      {"qp_post_send_before_rts_refused", "PostSend in RESET, INIT, RTR returns EINVAL",
       PostSendBeforeRtsRefused},
      {"qp_post_recv_on_reset_refused", "PostRecv in RESET is EINVAL, in INIT accepted",
       PostRecvOnResetRefused},
      {"qp_error_flushes_later_wrs", "after an error, later WRs flush in order and new posts flush",
       ErrorFlushesLaterWrs},
      {"qp_responder_errs_after_remote_access_error",
       "a remote access violation moves the responder to ERR and flushes its RECVs",
       ResponderErrsAfterRemoteAccessError},
      {"qp_recovery_reset_to_rts", "ERR->RESET->INIT->RTR->RTS recovers; data flows again",
       RecoveryResetToRts},
      {"qp_post_after_modify_err_flushes", "a WR posted after Modify(ERR) flushes",
       PostAfterModifyErrFlushes},
      {"qp_write_then_read_ordered", "a READ posted after a WRITE on one QP sees the WRITE",
       WriteThenReadOrdered},
      {"qp_unsignaled_success_no_cqe", "an unsignaled successful WR produces no completion",
       UnsignaledSuccessNoCqe},
      {"qp_unsignaled_error_completes", "an unsignaled failing WR still completes with its error",
       UnsignaledErrorCompletes},
      {"qp_self_loopback", "a QP connected to itself can WRITE and READ its node", SelfLoopback},
      {"qp_loopback_pair_on_one_node", "two QPs of one node connected to each other",
       LoopbackPairOnOneNode},
      {"qp_access_refuses_write", "WRITE to a QP without REMOTE_WRITE is REM_INV_REQ_ERR",
       QpAccessRefusesWrite},
      {"qp_access_refuses_read", "READ from a QP without REMOTE_READ is REM_INV_REQ_ERR",
       QpAccessRefusesRead},
      {"qp_too_many_sge_refused", "posting more SGEs than the QP's max is EINVAL",
       TooManySgeRefused},
      {"qp_peer_in_reset_retry_exceeded", "a peer in RESET never answers: RETRY_EXC_ERR",
       PeerInResetRetryExceeded},
      {"qp_read_scatter_write_gather", "3-SGE READ scatters and 3-SGE WRITE gathers in order",
       ReadScatterWriteGather},
  };
}

}  // namespace dmb::verbs_diff
