// Memory windows: type-2 (bound by a BIND_MW work request, usable only
// through the QP that bound it) and type-1 (bound with Qp::BindMw, usable from
// any QP of the PD); bind errors, rebind, invalidation, window bounds.
//
// Layout: B owns the memory. Two connections A.a1-B.b1 and A.a2-B.b2 (B's
// QPs both in PD pb); windows are bound on b1 over [win, win + 4 KB) inside
// B's big MR.
#include "fabric/verbs_diff/scenario.h"

namespace dmb::verbs_diff {
namespace {

using fabric::kLocalWrite;
using fabric::kMwBind;
using fabric::kRemoteAtomic;
using fabric::kRemoteRead;
using fabric::kRemoteWrite;

constexpr uint64_t kWinOff = 64 * 1024;
constexpr uint32_t kWinLen = 4096;

// Deviation labels shared by the scenario and its declaration.
constexpr const char* kType2ReadPastWindow = "READ straddling the window end (inside the MR)";
constexpr const char* kType2WriteBeforeWindow = "WRITE just before the window (inside the MR)";
constexpr const char* kType1ReadPastWindow =
    "READ straddling the type-1 window end (inside the MR)";

struct Two {
  Ep a1, b1, a2, b2;
  uint64_t win;
};
Two TwoConnections(Env& env) {
  auto p1 = env.AB();
  auto p2 = env.AB();
  return {p1.x, p1.y, p2.x, p2.y, env.bbuf + kWinOff};
}

// Type-2 bind posted on `poster`, asking for the next key of the MW.
Task<WorkCompletion> Bind2(Env& env, const Ep& poster, Mw* mw, const Mr* mr, uint64_t addr,
                           uint64_t len, uint32_t access = kWindowRw) {
  co_return co_await env.Exec(poster,
                              BindType2Wr(mw, mr, addr, len, access, NextKey(mw->rkey()), 5));
}

Task<WorkCompletion> Read8(Env& env, const Ep& a, uint64_t raddr, uint32_t rkey,
                           uint64_t loff = 0) {
  co_return co_await env.Exec(a, ReadWr(env.abuf + loff, env.amr->lkey(), 8, raddr, rkey));
}

// ---- Type-2 --------------------------------------------------------------------

Task<void> Mw2BoundQpReadsAndWrites(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  const uint32_t before = mw->rkey();
  const uint32_t want = NextKey(before);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("BIND_MW status", wc.status, WcStatus::kSuccess);
  t.Expect("BIND_MW wc opcode", wc.opcode, Opcode::kBindMw);
  t.Expect("rkey is the requested one", mw->rkey() == want, true);
  t.Expect("rkey index kept", (mw->rkey() >> 8) == (before >> 8), true);
  env.Fill(env.A, env.abuf, 16, 20);
  wc = co_await env.Exec(c.a1, WriteWr(env.abuf, env.amr->lkey(), 16, c.win + 8, mw->rkey()));
  t.Expect("WRITE through window from bound QP", wc.status, WcStatus::kSuccess);
  t.Expect("B bytes", env.Bytes(env.B, c.win + 8, 16), ShowPattern(20, 16));
  wc = co_await env.Exec(c.a1, ReadWr(env.abuf + 64, env.amr->lkey(), 16, c.win + 8, mw->rkey()));
  t.Expect("READ through window from bound QP", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes", env.Bytes(env.A, env.abuf + 64, 16), ShowPattern(20, 16));
}

Task<void> Mw2OtherQpRefused(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("BIND_MW on b1", wc.status, WcStatus::kSuccess);
  wc = co_await Read8(env, c.a2, c.win, mw->rkey());
  t.Expect("READ through window via b2 (same PD, not bound)", wc.status, WcStatus::kRemAccessErr);
  t.Expect("a2 state", c.a2.qp->state(), QpState::kErr);
  t.Expect("b2 state (responder)", c.b2.qp->QueryState(), QpState::kErr);
  wc = co_await Read8(env, c.a1, c.win, mw->rkey());
  t.Expect("READ through window via b1 still works", wc.status, WcStatus::kSuccess);
  t.Expect("b1 state", c.b1.qp->state(), QpState::kRts);
}

Task<void> Mw2ReadPastWindowEnd(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("BIND_MW", wc.status, WcStatus::kSuccess);
  wc = co_await Read8(env, c.a1, c.win + kWinLen - 8, mw->rkey());
  t.Expect("READ last 8 bytes of the window", wc.status, WcStatus::kSuccess);
  wc = co_await Read8(env, c.a1, c.win + kWinLen - 4, mw->rkey());
  t.Expect(kType2ReadPastWindow, wc.status, WcStatus::kRemAccessErr);
}

Task<void> Mw2WriteBeforeWindowStart(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("BIND_MW", wc.status, WcStatus::kSuccess);
  env.Fill(env.A, env.abuf, 8, 21);
  wc = co_await env.Exec(c.a1, WriteWr(env.abuf, env.amr->lkey(), 8, c.win - 8, mw->rkey()));
  t.Expect(kType2WriteBeforeWindow, wc.status, WcStatus::kRemAccessErr);
}

Task<void> Mw2ReadOnlyWindowRefusesWrite(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen, kRemoteRead);
  t.Expect("BIND_MW read-only", wc.status, WcStatus::kSuccess);
  wc = co_await Read8(env, c.a1, c.win, mw->rkey());
  t.Expect("READ through read-only window", wc.status, WcStatus::kSuccess);
  wc = co_await env.Exec(c.a1, WriteWr(env.abuf, env.amr->lkey(), 8, c.win, mw->rkey()));
  t.Expect("WRITE through read-only window", wc.status, WcStatus::kRemAccessErr);
}

// o10-36.2.2: a type-2 MW must be invalidated (FREE) before it is bound again.
Task<void> Mw2RebindWithoutInvalidateFails(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("first BIND_MW", wc.status, WcStatus::kSuccess);
  wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win + kWinLen, kWinLen);
  t.Expect("second BIND_MW without invalidation", wc.status, WcStatus::kMwBindErr);
  t.Expect("b1 state after bind error", c.b1.qp->state(), QpState::kErr);
}

Task<void> Mw2InvalidateThenRebind(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("BIND_MW #1", wc.status, WcStatus::kSuccess);
  const uint32_t old_rkey = mw->rkey();
  wc = co_await Read8(env, c.a1, c.win, old_rkey);
  t.Expect("READ with first rkey", wc.status, WcStatus::kSuccess);
  wc = co_await env.Exec(c.b1, LocalInvWr(old_rkey));
  t.Expect("LOCAL_INV", wc.status, WcStatus::kSuccess);
  t.Expect("LOCAL_INV wc opcode", wc.opcode, Opcode::kLocalInv);
  env.Fill(env.B, c.win + kWinLen, 8, 22);
  wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win + kWinLen, kWinLen);
  t.Expect("BIND_MW #2 (new key, new range)", wc.status, WcStatus::kSuccess);
  t.Expect("rkey changed", mw->rkey() != old_rkey, true);
  t.Expect("rkey index kept", (mw->rkey() >> 8) == (old_rkey >> 8), true);
  wc = co_await Read8(env, c.a1, c.win + kWinLen, mw->rkey());
  t.Expect("READ with new rkey", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes", env.Bytes(env.A, env.abuf, 8), ShowPattern(22, 8));
  wc = co_await Read8(env, c.a1, c.win + kWinLen, old_rkey);
  t.Expect("READ with old rkey", wc.status, WcStatus::kRemAccessErr);
}

Task<void> Mw2LocalInvThenAccessRefused(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("BIND_MW", wc.status, WcStatus::kSuccess);
  const uint32_t rkey = mw->rkey();
  wc = co_await env.Exec(c.b1, LocalInvWr(rkey));
  t.Expect("LOCAL_INV", wc.status, WcStatus::kSuccess);
  wc = co_await Read8(env, c.a1, c.win, rkey);
  t.Expect("READ after LOCAL_INV", wc.status, WcStatus::kRemAccessErr);
}

Task<void> Mw2LocalInvWrongKeyFails(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("BIND_MW", wc.status, WcStatus::kSuccess);
  wc = co_await env.Exec(c.b1, LocalInvWr(WrongKey(mw->rkey())));
  t.Expect("LOCAL_INV with a wrong key byte", wc.status, WcStatus::kLocQpOpErr);
  t.Expect("b1 state", c.b1.qp->state(), QpState::kErr);
}

// Type-2B windows may only be invalidated through their QP (IBA o10-37.2.x).
// rxe's rxe_check_invalidate_mw does not look at the QP: a candidate
// deviation for the lead to confirm on rxe.
Task<void> Mw2LocalInvFromOtherQpFails(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("BIND_MW on b1", wc.status, WcStatus::kSuccess);
  wc = co_await env.Exec(c.b2, LocalInvWr(mw->rkey()));
  t.Expect("LOCAL_INV posted on b2", wc.status, WcStatus::kLocQpOpErr);
  wc = co_await Read8(env, c.a1, c.win, mw->rkey());
  t.Expect("READ via b1 (window still bound)", wc.status, WcStatus::kSuccess);
}

Task<void> Mw2SendWithInvInvalidates(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("BIND_MW", wc.status, WcStatus::kSuccess);
  const uint32_t rkey = mw->rkey();
  wc = co_await Read8(env, c.a1, c.win, rkey);
  t.Expect("READ before SEND_WITH_INV", wc.status, WcStatus::kSuccess);
  t.Expect("post RECV", Errno{c.b1.qp->PostRecv(RecvMsg(env.bbuf + 8192, 64, env.bmr->lkey(), 31))},
           "0");
  env.Fill(env.A, env.abuf + 64, 8, 23);
  SendWr s = SendMsg(env.abuf + 64, env.amr->lkey(), 8, 2);
  s.opcode = Opcode::kSendWithInv;
  s.invalidate_rkey = rkey;
  wc = co_await env.Exec(c.a1, s);
  t.Expect("SEND_WITH_INV status", wc.status, WcStatus::kSuccess);
  auto rwc = co_await Env::NextRecv(c.b1);
  t.Expect("RECV status", rwc.status, WcStatus::kSuccess);
  t.Expect("RECV opcode", rwc.opcode, Opcode::kRecv);
  t.Expect("RECV wr_id", rwc.wr_id, 31);
  t.Expect("RECV byte_len", rwc.byte_len, 8);
  t.Expect("RECV invalidated rkey is the window's", rwc.invalidated_rkey == rkey, true);
  t.Expect("B bytes", env.Bytes(env.B, env.bbuf + 8192, 8), ShowPattern(23, 8));
  wc = co_await Read8(env, c.a1, c.win, rkey);
  t.Expect("READ after SEND_WITH_INV", wc.status, WcStatus::kRemAccessErr);
}

// Unsure what the spec mandates for the RECV completion when the invalidation
// fails (rxe: RESPST_ERR_INVALIDATE_RKEY completes the RECV with
// REM_INV_REQ_ERR); follows the sim: requester REM_INV_REQ_ERR, RECV
// REM_INV_REQ_ERR.
Task<void> Mw2SendWithInvWrongKey(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("BIND_MW", wc.status, WcStatus::kSuccess);
  t.Expect("post RECV", Errno{c.b1.qp->PostRecv(RecvMsg(env.bbuf + 8192, 64, env.bmr->lkey(), 31))},
           "0");
  SendWr s = SendMsg(env.abuf, env.amr->lkey(), 8, 2);
  s.opcode = Opcode::kSendWithInv;
  s.invalidate_rkey = WrongKey(mw->rkey());
  wc = co_await env.Exec(c.a1, s);
  t.Expect("SEND_WITH_INV (wrong key) status", wc.status, WcStatus::kRemInvReqErr);
  auto rwc = co_await Env::NextRecv(c.b1);
  t.Expect("RECV status", rwc.status, WcStatus::kRemInvReqErr);
  t.Expect("b1 state", c.b1.qp->state(), QpState::kErr);
}

Task<void> Mw2BindNeedsMwBindOnMr(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  const uint64_t buf = env.Alloc(env.B, 8192);
  Mr* plain = co_await env.RegMr(env.B, env.pb, buf, 8192, kLocalWrite | kRemoteRead);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, plain, buf, 4096, kRemoteRead);
  t.Expect("BIND_MW to MR without MW_BIND", wc.status, WcStatus::kMwBindErr);
  t.Expect("b1 state", c.b1.qp->state(), QpState::kErr);
}

Task<void> Mw2BindOutsideMrFails(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  const uint64_t end = env.bbuf + Env::kBufBytes;
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, end - 100, 4096);
  t.Expect("BIND_MW window past the MR end", wc.status, WcStatus::kMwBindErr);
}

// A window granting REMOTE_WRITE needs LOCAL_WRITE on the parent MR.
Task<void> Mw2WriteWindowNeedsLocalWrite(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  const uint64_t buf = env.Alloc(env.B, 8192);
  Mr* ro = co_await env.RegMr(env.B, env.pb, buf, 8192, kRemoteRead | kMwBind);
  Mw* r = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, r, ro, buf, 4096, kRemoteRead);
  t.Expect("BIND_MW read window on MR without LOCAL_WRITE", wc.status, WcStatus::kSuccess);
  Mw* w = env.B->AllocMw(env.pb, MwType::kType2);
  wc = co_await Bind2(env, c.b1, w, ro, buf + 4096, 4096, kRemoteWrite);
  t.Expect("BIND_MW write window on MR without LOCAL_WRITE", wc.status, WcStatus::kMwBindErr);
}

// IBA 10.6.7.2.6: deregistering an MR with bound windows fails. The contract
// says EBUSY; rxe_dereg_mr is believed to return EINVAL here (lead to
// confirm).
Task<void> Mw2DeregMrWithBoundWindowBusy(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  const uint64_t buf = env.Alloc(env.B, 8192);
  env.Fill(env.B, buf, 8, 24);
  Mr* mr = co_await env.RegMr(env.B, env.pb, buf, 8192, kAllAccess);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, mr, buf, 4096);
  t.Expect("BIND_MW", wc.status, WcStatus::kSuccess);
  t.Expect("DeregMr with a bound window", co_await ErrnoOfTask(env.B->DeregMr(mr)), "EBUSY");
  wc = co_await Read8(env, c.a1, buf, mw->rkey());
  t.Expect("READ through window after failed dereg", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes", env.Bytes(env.A, env.abuf, 8), ShowPattern(24, 8));
  wc = co_await env.Exec(c.b1, LocalInvWr(mw->rkey()));
  t.Expect("LOCAL_INV", wc.status, WcStatus::kSuccess);
  t.Expect("DeregMr after invalidation", co_await ErrnoOfTask(env.B->DeregMr(mr)), "0");
}

Task<void> Mw2AtomicThroughWindow(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen, kWindowRw | kRemoteAtomic);
  t.Expect("BIND_MW with REMOTE_ATOMIC", wc.status, WcStatus::kSuccess);
  env.B->memory().StoreU64(c.win + 16, 40);
  wc = co_await env.Exec(c.a1, FaaWr(env.abuf, env.amr->lkey(), c.win + 16, mw->rkey(), 2));
  t.Expect("FAA through window", wc.status, WcStatus::kSuccess);
  t.Expect("FAA old value", env.A->memory().LoadU64(env.abuf), 40);
  t.Expect("B value", env.B->memory().LoadU64(c.win + 16), 42);
  wc = co_await env.Exec(c.a1, CasWr(env.abuf, env.amr->lkey(), c.win + 16, mw->rkey(), 42, 7));
  t.Expect("CAS through window", wc.status, WcStatus::kSuccess);
  t.Expect("B value after CAS", env.B->memory().LoadU64(c.win + 16), 7);
}

Task<void> Mw2AtomicNeedsWindowAccess(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen, kWindowRw);
  t.Expect("BIND_MW without REMOTE_ATOMIC", wc.status, WcStatus::kSuccess);
  env.B->memory().StoreU64(c.win, 5);
  wc = co_await env.Exec(c.a1, FaaWr(env.abuf, env.amr->lkey(), c.win, mw->rkey(), 1));
  t.Expect("FAA through window without REMOTE_ATOMIC", wc.status, WcStatus::kRemAccessErr);
  t.Expect("B value unchanged", env.B->memory().LoadU64(c.win), 5);
}

// C10-72: the bind is refused when the posting QP's PD is not the MW's.
Task<void> Mw2BindFromQpOfOtherPdFails(Env& env, Transcript& t) {
  Pd* pb2 = env.B->AllocPd();
  auto [a, b] = env.Connect(env.A, env.pa, env.B, pb2);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, b, mw, env.bmr, env.bbuf + kWinOff, kWinLen);
  t.Expect("BIND_MW posted on a QP of another PD", wc.status, WcStatus::kMwBindErr);
}

// o10-37.2.40: a type-2 bind must name an MR and a non-zero length (a type-2
// window is released by invalidation, not by a zero-length bind).
Task<void> Mw2BindZeroLengthFails(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, 0);
  t.Expect("type-2 BIND_MW of length 0", wc.status, WcStatus::kMwBindErr);
}

Task<void> Mw2DeallocThenAccessRefused(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType2);
  auto wc = co_await Bind2(env, c.b1, mw, env.bmr, c.win, kWinLen);
  t.Expect("BIND_MW", wc.status, WcStatus::kSuccess);
  const uint32_t rkey = mw->rkey();
  wc = co_await Read8(env, c.a1, c.win, rkey);
  t.Expect("READ while bound", wc.status, WcStatus::kSuccess);
  t.Expect("DeallocMw", ErrnoOf([&] { env.B->DeallocMw(mw); }), "0");
  wc = co_await Read8(env, c.a1, c.win, rkey);
  t.Expect("READ after DeallocMw", wc.status, WcStatus::kRemAccessErr);
}

// ---- Type-1 --------------------------------------------------------------------

Task<void> Mw1AnyQpOfPd(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType1);
  const uint32_t before = mw->rkey();
  const uint32_t want = NextKey(before);
  env.Fill(env.B, c.win, 16, 25);
  auto wc = co_await env.BindType1(c.b1, mw, env.bmr, c.win, kWinLen, kWindowRw, want);
  t.Expect("BindMw status", wc.status, WcStatus::kSuccess);
  t.Expect("BindMw wc wr_id", wc.wr_id, 77);
  t.Expect("rkey is the requested one", mw->rkey() == want, true);
  t.Expect("rkey index kept", (mw->rkey() >> 8) == (before >> 8), true);
  wc = co_await Read8(env, c.a1, c.win, mw->rkey());
  t.Expect("READ via b1 (the binding QP)", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes via b1", env.Bytes(env.A, env.abuf, 8), ShowPattern(25, 8));
  wc = co_await env.Exec(c.a2, ReadWr(env.abuf + 64, env.amr->lkey(), 16, c.win, mw->rkey()));
  t.Expect("READ via b2 (another QP of the PD)", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes via b2", env.Bytes(env.A, env.abuf + 64, 16), ShowPattern(25, 16));
}

Task<void> Mw1UnboundRefused(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType1);
  auto wc = co_await Read8(env, c.a1, c.win, mw->rkey());
  t.Expect("READ through a never-bound type-1 MW", wc.status, WcStatus::kRemAccessErr);
}

Task<void> Mw1RebindChangesKey(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType1);
  auto wc =
      co_await env.BindType1(c.b1, mw, env.bmr, c.win, kWinLen, kRemoteRead, NextKey(mw->rkey()));
  t.Expect("BindMw #1", wc.status, WcStatus::kSuccess);
  const uint32_t old_rkey = mw->rkey();
  wc = co_await Read8(env, c.a1, c.win, old_rkey);
  t.Expect("READ with first rkey", wc.status, WcStatus::kSuccess);
  // A type-1 MW is rebound directly, without invalidation.
  wc = co_await env.BindType1(c.b1, mw, env.bmr, c.win + kWinLen, kWinLen, kRemoteRead,
                              NextKey(old_rkey));
  t.Expect("BindMw #2 (new key, new range)", wc.status, WcStatus::kSuccess);
  t.Expect("rkey changed", mw->rkey() != old_rkey, true);
  t.Expect("rkey index kept", (mw->rkey() >> 8) == (old_rkey >> 8), true);
  wc = co_await Read8(env, c.a2, c.win + kWinLen, mw->rkey());
  t.Expect("READ with new rkey", wc.status, WcStatus::kSuccess);
  wc = co_await Read8(env, c.a1, c.win, old_rkey);
  t.Expect("READ with old rkey", wc.status, WcStatus::kRemAccessErr);
}

Task<void> Mw1UnbindWithLengthZero(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  const uint64_t buf = env.Alloc(env.B, 8192);
  Mr* mr = co_await env.RegMr(env.B, env.pb, buf, 8192, kAllAccess);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType1);
  auto wc = co_await env.BindType1(c.b1, mw, mr, buf, 4096, kRemoteRead, NextKey(mw->rkey()));
  t.Expect("BindMw", wc.status, WcStatus::kSuccess);
  wc = co_await Read8(env, c.a1, buf, mw->rkey());
  t.Expect("READ while bound", wc.status, WcStatus::kSuccess);
  t.Expect("DeregMr while bound", co_await ErrnoOfTask(env.B->DeregMr(mr)), "EBUSY");
  wc = co_await env.BindType1(c.b1, mw, nullptr, 0, 0, 0, NextKey(mw->rkey()));
  t.Expect("BindMw length 0 (unbind)", wc.status, WcStatus::kSuccess);
  t.Expect("DeregMr after unbind", co_await ErrnoOfTask(env.B->DeregMr(mr)), "0");
  wc = co_await Read8(env, c.a1, buf, mw->rkey());
  t.Expect("READ after unbind", wc.status, WcStatus::kRemAccessErr);
}

Task<void> Mw1ReadPastWindowEnd(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType1);
  auto wc =
      co_await env.BindType1(c.b1, mw, env.bmr, c.win, kWinLen, kRemoteRead, NextKey(mw->rkey()));
  t.Expect("BindMw", wc.status, WcStatus::kSuccess);
  wc = co_await Read8(env, c.a1, c.win + kWinLen - 8, mw->rkey());
  t.Expect("READ last 8 bytes of the window", wc.status, WcStatus::kSuccess);
  wc = co_await Read8(env, c.a1, c.win + kWinLen - 4, mw->rkey());
  t.Expect(kType1ReadPastWindow, wc.status, WcStatus::kRemAccessErr);
}

// o10-37.2.26: a type-1 MW cannot be invalidated.
Task<void> Mw1LocalInvRefused(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType1);
  auto wc =
      co_await env.BindType1(c.b1, mw, env.bmr, c.win, kWinLen, kRemoteRead, NextKey(mw->rkey()));
  t.Expect("BindMw", wc.status, WcStatus::kSuccess);
  wc = co_await env.Exec(c.b1, LocalInvWr(mw->rkey()));
  t.Expect("LOCAL_INV of a type-1 MW", wc.status, WcStatus::kLocQpOpErr);
  wc = co_await Read8(env, c.a2, c.win, mw->rkey());
  t.Expect("READ via b2 (window still bound)", wc.status, WcStatus::kSuccess);
}

Task<void> Mw1ReadOnlyRefusesWrite(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType1);
  auto wc =
      co_await env.BindType1(c.b1, mw, env.bmr, c.win, kWinLen, kRemoteRead, NextKey(mw->rkey()));
  t.Expect("BindMw read-only", wc.status, WcStatus::kSuccess);
  env.Fill(env.B, c.win, 8, 26);
  wc = co_await env.Exec(c.a2, WriteWr(env.abuf, env.amr->lkey(), 8, c.win, mw->rkey()));
  t.Expect("WRITE through read-only type-1 window", wc.status, WcStatus::kRemAccessErr);
  t.Expect("B bytes unchanged", env.Bytes(env.B, c.win, 8), ShowPattern(26, 8));
}

Task<void> Mw1DeallocThenAccessRefused(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType1);
  auto wc =
      co_await env.BindType1(c.b1, mw, env.bmr, c.win, kWinLen, kRemoteRead, NextKey(mw->rkey()));
  t.Expect("BindMw", wc.status, WcStatus::kSuccess);
  const uint32_t rkey = mw->rkey();
  t.Expect("DeallocMw", ErrnoOf([&] { env.B->DeallocMw(mw); }), "0");
  wc = co_await Read8(env, c.a1, c.win, rkey);
  t.Expect("READ after DeallocMw", wc.status, WcStatus::kRemAccessErr);
}

// A type-1 window belongs to its PD: a QP of another PD (on the same node)
// cannot use it.
Task<void> Mw1OtherPdQpRefused(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Pd* pb2 = env.B->AllocPd();
  auto [x, y] = env.Connect(env.A, env.pa, env.B, pb2);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType1);
  auto wc =
      co_await env.BindType1(c.b1, mw, env.bmr, c.win, kWinLen, kRemoteRead, NextKey(mw->rkey()));
  t.Expect("BindMw", wc.status, WcStatus::kSuccess);
  wc = co_await Read8(env, c.a2, c.win, mw->rkey());
  t.Expect("READ via a QP of the MW's PD", wc.status, WcStatus::kSuccess);
  wc = co_await Read8(env, x, c.win, mw->rkey());
  t.Expect("READ via a QP of another PD", wc.status, WcStatus::kRemAccessErr);
}

Task<void> Mw1BindOutsideMrFails(Env& env, Transcript& t) {
  Two c = TwoConnections(env);
  Mw* mw = env.B->AllocMw(env.pb, MwType::kType1);
  const uint64_t end = env.bbuf + Env::kBufBytes;
  auto wc =
      co_await env.BindType1(c.b1, mw, env.bmr, end - 100, 4096, kRemoteRead, NextKey(mw->rkey()));
  t.Expect("BindMw window past the MR end", wc.status, WcStatus::kMwBindErr);
  t.Expect("b1 state", c.b1.qp->state(), QpState::kErr);
}

// Type 2: what a bound window lets through, rebinding, LOCAL_INV.
std::vector<Scenario> Mw2BindAndAccessScenarios() {
  return {
      {"mw2_bound_qp_reads_and_writes",
       "type-2 bind gives the requested rkey; the bound QP can READ and WRITE",
       Mw2BoundQpReadsAndWrites},
      {"mw2_other_qp_of_pd_refused",
       "a type-2 window refuses access through another QP of the same PD; only that pair errs",
       Mw2OtherQpRefused},
      {"mw2_read_past_window_end",
       "a READ straddling the type-2 window end (inside the MR) is REM_ACCESS_ERR",
       Mw2ReadPastWindowEnd,
       {{"rxe", kType2ReadPastWindow, "SUCCESS", kRxeMwBoundsReason}}},
      {"mw2_write_before_window_start",
       "a WRITE just before the type-2 window (inside the MR) is REM_ACCESS_ERR",
       Mw2WriteBeforeWindowStart,
       {{"rxe", kType2WriteBeforeWindow, "SUCCESS", kRxeMwBoundsReason}}},
      {"mw2_read_only_window_refuses_write", "a read-only type-2 window refuses WRITE",
       Mw2ReadOnlyWindowRefusesWrite},
      {"mw2_rebind_without_invalidate_fails",
       "a bound type-2 MW cannot be bound again before invalidation",
       Mw2RebindWithoutInvalidateFails},
      {"mw2_invalidate_then_rebind",
       "LOCAL_INV then rebind: same index, new key; new rkey works, old refused",
       Mw2InvalidateThenRebind},
      {"mw2_local_inv_then_access_refused", "after LOCAL_INV the window's rkey is refused",
       Mw2LocalInvThenAccessRefused},
      {"mw2_local_inv_wrong_key_fails", "LOCAL_INV with a wrong key byte is LOC_QP_OP_ERR",
       Mw2LocalInvWrongKeyFails},
      {"mw2_local_inv_from_other_qp_fails",
       "a type-2 window cannot be invalidated from another QP of the PD",
       Mw2LocalInvFromOtherQpFails,
       {{"rxe", "LOCAL_INV posted on b2", "SUCCESS",
         "rxe lets any QP of the PD invalidate a type-2 window (rxe_check_invalidate_mw checks "
         "only the type); the sim ties a type-2B window to its QP unless the QP is created with "
         "invalidate_any_qp (MN admin QPs); ConnectX behaviour to be confirmed on hardware"},
        {"rxe", "READ via b1 (window still bound)", "REM_ACCESS_ERR",
         "consequence of the line above: the window was invalidated"}}},
  };
}

// Type 2: SEND_WITH_INV, the bind's rules on the MR, atomics, deallocation.
std::vector<Scenario> Mw2InvalidateAndBindRuleScenarios() {
  return {
      {"mw2_send_with_inv_invalidates",
       "SEND_WITH_INV invalidates the window; the RECV reports the invalidated rkey",
       Mw2SendWithInvInvalidates,
       {{"rxe", "RECV invalidated rkey is the window's", "no",
         "rxe invalidates the window but its RECV completion lacks IBV_WC_WITH_INV (it sets the "
         "kernel's IB_WC_WITH_INVALIDATE bit, which user space reads as another flag), so the rkey "
         "is not reported"}}},
      {"mw2_send_with_inv_wrong_key",
       "SEND_WITH_INV naming a wrong rkey fails on both sides",
       Mw2SendWithInvWrongKey,
       {{"rxe", "SEND_WITH_INV (wrong key) status", "SUCCESS",
         "rxe does not fail a SEND_WITH_INV whose rkey names no valid window or MR; the spec NAKs "
         "it (REM_INV_REQ_ERR)"}}},
      {"mw2_bind_needs_mw_bind_on_mr", "binding to an MR without MW_BIND is MW_BIND_ERR",
       Mw2BindNeedsMwBindOnMr},
      {"mw2_bind_outside_mr_fails", "a window reaching past the MR is MW_BIND_ERR",
       Mw2BindOutsideMrFails},
      {"mw2_write_window_needs_local_write",
       "a REMOTE_WRITE window needs LOCAL_WRITE on the MR; a read window does not",
       Mw2WriteWindowNeedsLocalWrite},
      {"mw2_dereg_mr_with_bound_window_busy",
       "DeregMr fails while a window is bound, succeeds after LOCAL_INV",
       Mw2DeregMrWithBoundWindowBusy,
       {{"rxe", "DeregMr with a bound window", "EINVAL", kRxeDeregBusyReason}}},
      {"mw2_atomic_through_window", "FAA and CAS work through a window with REMOTE_ATOMIC",
       Mw2AtomicThroughWindow},
      {"mw2_atomic_needs_window_access", "FAA through a window without REMOTE_ATOMIC is refused",
       Mw2AtomicNeedsWindowAccess},
      {"mw2_bind_from_qp_of_other_pd_fails",
       "a type-2 bind posted on a QP of another PD is MW_BIND_ERR", Mw2BindFromQpOfOtherPdFails},
      {"mw2_bind_zero_length_fails", "a type-2 bind of length 0 is MW_BIND_ERR",
       Mw2BindZeroLengthFails},
      {"mw2_dealloc_then_access_refused", "a deallocated window's rkey is refused",
       Mw2DeallocThenAccessRefused},
  };
}

// Type 1: any QP of the PD, rebinding, unbinding, bounds.
std::vector<Scenario> Mw1Scenarios() {
  return {
      {"mw1_any_qp_of_pd", "a type-1 window is usable from every QP of its PD", Mw1AnyQpOfPd},
      {"mw1_unbound_refused", "a never-bound type-1 MW's rkey is refused", Mw1UnboundRefused},
      {"mw1_rebind_changes_key",
       "rebinding a type-1 MW keeps the index, changes the key; the old rkey is refused",
       Mw1RebindChangesKey},
      {"mw1_unbind_length_zero",
       "BindMw with length 0 unbinds: the MR can be deregistered, the rkey is refused",
       Mw1UnbindWithLengthZero,
       {{"rxe", "DeregMr while bound", "EINVAL", kRxeDeregBusyReason}}},
      {"mw1_read_past_window_end",
       "a READ straddling the type-1 window end (inside the MR) is REM_ACCESS_ERR",
       Mw1ReadPastWindowEnd,
       {{"rxe", kType1ReadPastWindow, "SUCCESS", kRxeMwBoundsReason}}},
      {"mw1_local_inv_refused", "LOCAL_INV of a type-1 MW is LOC_QP_OP_ERR", Mw1LocalInvRefused},
      {"mw1_read_only_refuses_write", "a read-only type-1 window refuses WRITE",
       Mw1ReadOnlyRefusesWrite},
      {"mw1_dealloc_then_access_refused", "a deallocated type-1 MW's rkey is refused",
       Mw1DeallocThenAccessRefused},
      {"mw1_other_pd_qp_refused", "a type-1 window refuses a QP of another PD",
       Mw1OtherPdQpRefused},
      {"mw1_bind_outside_mr_fails", "a type-1 window reaching past the MR is MW_BIND_ERR",
       Mw1BindOutsideMrFails},
  };
}

}  // namespace

std::vector<Scenario> MwScenarios() {
  std::vector<Scenario> all = Mw2BindAndAccessScenarios();
  for (const auto& part : {Mw2InvalidateAndBindRuleScenarios(), Mw1Scenarios()}) {
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

}  // namespace dmb::verbs_diff
