// Memory regions: bounds, access flags, keys, PDs, deregistration, sizes.
#include "fabric/verbs_diff/scenario.h"

namespace dmb::verbs_diff {
namespace {

using fabric::kLocalWrite;
using fabric::kRemoteAtomic;
using fabric::kRemoteRead;
using fabric::kRemoteWrite;

// A 4 KB MR on B with a registered-nowhere page before and after it, so an
// access just outside the MR still targets real node memory.
struct Island {
  uint64_t addr = 0;  // MR start
  Mr* mr = nullptr;
};
Task<Island> BIsland(Env& env, uint32_t access) {
  const uint64_t base = env.Alloc(env.B, 3 * 4096);
  env.Zero(env.B, base, 3 * 4096);
  Island i;
  i.addr = base + 4096;
  i.mr = co_await env.RegMr(env.B, env.pb, i.addr, 4096, access);
  co_return i;
}

Task<void> WriteReadRoundtrip(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  env.Fill(env.A, env.abuf, 64, 1);
  auto wc = co_await env.Exec(
      a, WriteWr(env.abuf, env.amr->lkey(), 64, env.bbuf + 128, env.bmr->rkey(), 1));
  t.Expect("WRITE status", wc.status, WcStatus::kSuccess);
  t.Expect("WRITE wc opcode", wc.opcode, Opcode::kWrite);
  t.Expect("WRITE wc wr_id", wc.wr_id, 1);
  t.Expect("B bytes after WRITE", env.Bytes(env.B, env.bbuf + 128, 64), ShowPattern(1, 64));
  wc = co_await env.Exec(
      a, ReadWr(env.abuf + 4096, env.amr->lkey(), 64, env.bbuf + 128, env.bmr->rkey(), 2));
  t.Expect("READ status", wc.status, WcStatus::kSuccess);
  t.Expect("READ wc opcode", wc.opcode, Opcode::kRead);
  t.Expect("READ wc wr_id", wc.wr_id, 2);
  t.Expect("A bytes after READ", env.Bytes(env.A, env.abuf + 4096, 64), ShowPattern(1, 64));
}

Task<void> ReadLastBytesOfMr(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  Island is = co_await BIsland(env, kLocalWrite | kRemoteRead);
  env.Fill(env.B, is.addr + 4096 - 8, 8, 2);
  auto wc =
      co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 8, is.addr + 4088, is.mr->rkey()));
  t.Expect("READ last 8 bytes of MR", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes", env.Bytes(env.A, env.abuf, 8), ShowPattern(2, 8));
  wc = co_await env.Exec(a, ReadWr(env.abuf + 64, env.amr->lkey(), 4096, is.addr, is.mr->rkey()));
  t.Expect("READ whole MR", wc.status, WcStatus::kSuccess);
}

Task<void> ReadOneBytePastEnd(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  Island is = co_await BIsland(env, kLocalWrite | kRemoteRead);
  auto wc =
      co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 8, is.addr + 4089, is.mr->rkey()));
  t.Expect("READ ending 1 byte past MR", wc.status, WcStatus::kRemAccessErr);
  t.Expect("requester QP state", a.qp->state(), QpState::kErr);
}

Task<void> WriteOneByteBeforeStart(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  Island is = co_await BIsland(env, kLocalWrite | kRemoteWrite);
  env.Fill(env.B, is.addr - 8, 16, 3);
  env.Fill(env.A, env.abuf, 8, 4);
  auto wc = co_await env.Exec(a, WriteWr(env.abuf, env.amr->lkey(), 8, is.addr - 1, is.mr->rkey()));
  t.Expect("WRITE starting 1 byte before MR", wc.status, WcStatus::kRemAccessErr);
  t.Expect("B bytes around MR start", env.Bytes(env.B, is.addr - 8, 16), ShowPattern(3, 16));
}

// IB spec C9-88: a zero-length RDMA READ/WRITE need not carry a valid rkey or
// address; the responder does not check them.
Task<void> ZeroLengthIgnoresRkey(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  const uint32_t bad = WrongKey(env.bmr->rkey());
  auto wc = co_await env.Exec(a, WriteWr(0, 0, 0, env.bbuf, bad, 1));
  t.Expect("zero-length WRITE with a wrong rkey", wc.status, WcStatus::kSuccess);
  wc = co_await env.Exec(a, ReadWr(0, 0, 0, env.bbuf, bad, 2));
  t.Expect("zero-length READ with a wrong rkey", wc.status, WcStatus::kSuccess);
  t.Expect("requester QP state", a.qp->state(), QpState::kRts);
}

Task<void> RemoteReadOnlyRefusesWrite(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  Island is = co_await BIsland(env, kLocalWrite | kRemoteRead);
  env.Fill(env.B, is.addr, 16, 5);
  auto wc = co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 16, is.addr, is.mr->rkey()));
  t.Expect("READ of REMOTE_READ MR", wc.status, WcStatus::kSuccess);
  env.Fill(env.A, env.abuf + 64, 16, 6);
  wc = co_await env.Exec(a, WriteWr(env.abuf + 64, env.amr->lkey(), 16, is.addr, is.mr->rkey()));
  t.Expect("WRITE to REMOTE_READ-only MR", wc.status, WcStatus::kRemAccessErr);
  t.Expect("B bytes unchanged", env.Bytes(env.B, is.addr, 16), ShowPattern(5, 16));
  t.Expect("responder QP state", b.qp->QueryState(), QpState::kErr);
}

Task<void> RemoteWriteOnlyRefusesRead(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  Island is = co_await BIsland(env, kLocalWrite | kRemoteWrite);
  env.Fill(env.A, env.abuf, 16, 7);
  auto wc = co_await env.Exec(a, WriteWr(env.abuf, env.amr->lkey(), 16, is.addr, is.mr->rkey()));
  t.Expect("WRITE to REMOTE_WRITE MR", wc.status, WcStatus::kSuccess);
  t.Expect("B bytes", env.Bytes(env.B, is.addr, 16), ShowPattern(7, 16));
  wc = co_await env.Exec(a, ReadWr(env.abuf + 64, env.amr->lkey(), 16, is.addr, is.mr->rkey()));
  t.Expect("READ of REMOTE_WRITE-only MR", wc.status, WcStatus::kRemAccessErr);
}

// Gathering from an MR needs no access flag; scattering into it (READ
// response) needs LOCAL_WRITE.
Task<void> LocalSgeNeedsLocalWrite(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  const uint64_t buf = env.Alloc(env.A, 4096);
  env.Fill(env.A, buf, 32, 8);
  const std::vector<uint8_t> src = Pattern(8, 32);
  Mr* ro = co_await env.RegMr(env.A, env.pa, buf, 4096, kRemoteRead);
  auto wc = co_await env.Exec(a, WriteWr(buf, ro->lkey(), 16, env.bbuf, env.bmr->rkey()));
  t.Expect("WRITE gathering from MR without LOCAL_WRITE", wc.status, WcStatus::kSuccess);
  t.Expect("B bytes", env.Bytes(env.B, env.bbuf, 16), ShowBytes(std::span(src).first(16)));
  env.Fill(env.B, env.bbuf + 64, 16, 9);
  wc = co_await env.Exec(a, ReadWr(buf + 16, ro->lkey(), 16, env.bbuf + 64, env.bmr->rkey()));
  t.Expect("READ scattering into MR without LOCAL_WRITE", wc.status, WcStatus::kLocProtErr);
  t.Expect("A bytes unchanged", env.Bytes(env.A, buf, 32), ShowPattern(8, 32));
  t.Expect("requester QP state", a.qp->state(), QpState::kErr);
}

Task<void> WrongKeyByteRefused(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  auto wc = co_await env.Exec(
      a, ReadWr(env.abuf, env.amr->lkey(), 8, env.bbuf, WrongKey(env.bmr->rkey())));
  t.Expect("READ with right index, wrong key byte", wc.status, WcStatus::kRemAccessErr);
  t.Expect("requester QP state", a.qp->state(), QpState::kErr);
}

Task<void> RkeyOfOtherPdRefused(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  Pd* pb2 = env.B->AllocPd();
  const uint64_t buf = env.Alloc(env.B, 4096);
  Mr* other = co_await env.RegMr(env.B, pb2, buf, 4096, kAllAccess);
  auto wc = co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 8, buf, other->rkey()));
  t.Expect("READ with rkey of an MR in another PD", wc.status, WcStatus::kRemAccessErr);
}

Task<void> LkeyOfOtherPdRefused(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  Pd* pa2 = env.A->AllocPd();
  const uint64_t buf = env.Alloc(env.A, 4096);
  Mr* other = co_await env.RegMr(env.A, pa2, buf, 4096, kAllAccess);
  auto wc = co_await env.Exec(a, WriteWr(buf, other->lkey(), 8, env.bbuf, env.bmr->rkey()));
  t.Expect("WRITE with lkey of an MR in another PD", wc.status, WcStatus::kLocProtErr);
  t.Expect("requester QP state", a.qp->state(), QpState::kErr);
}

Task<void> LocalSgePastMrEnd(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  const uint64_t end = env.abuf + Env::kBufBytes;
  auto wc = co_await env.Exec(a, ReadWr(end - 4, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey()));
  t.Expect("READ into local SGE crossing the MR end", wc.status, WcStatus::kLocProtErr);
}

Task<void> DeregisteredRkeyRefused(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  const uint64_t buf = env.Alloc(env.B, 4096);
  Mr* mr = co_await env.RegMr(env.B, env.pb, buf, 4096, kAllAccess);
  const uint32_t rkey = mr->rkey();
  auto wc = co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 8, buf, rkey));
  t.Expect("READ before dereg", wc.status, WcStatus::kSuccess);
  t.Expect("DeregMr", co_await ErrnoOfTask(env.B->DeregMr(mr)), "0");
  wc = co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 8, buf, rkey));
  t.Expect("READ with rkey of deregistered MR", wc.status, WcStatus::kRemAccessErr);
}

Task<void> DeregisteredLkeyRefused(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  const uint64_t buf = env.Alloc(env.A, 4096);
  Mr* mr = co_await env.RegMr(env.A, env.pa, buf, 4096, kAllAccess);
  const uint32_t lkey = mr->lkey();
  t.Expect("DeregMr", co_await ErrnoOfTask(env.A->DeregMr(mr)), "0");
  auto wc = co_await env.Exec(a, WriteWr(buf, lkey, 8, env.bbuf, env.bmr->rkey()));
  t.Expect("WRITE gathering with lkey of deregistered MR", wc.status, WcStatus::kLocProtErr);
}

// IB spec (and ib_check_mr_access): REMOTE_WRITE / REMOTE_ATOMIC require
// LOCAL_WRITE.
Task<void> RegRemoteWriteNeedsLocalWrite(Env& env, Transcript& t) {
  const uint64_t buf = env.Alloc(env.B, 4096);
  t.Expect("RegMr REMOTE_WRITE without LOCAL_WRITE",
           co_await RegMrErrno(env, env.B, env.pb, buf, 4096, kRemoteWrite), "EINVAL");
  t.Expect("RegMr REMOTE_ATOMIC without LOCAL_WRITE",
           co_await RegMrErrno(env, env.B, env.pb, buf, 4096, kRemoteAtomic | kRemoteRead),
           "EINVAL");
  t.Expect("RegMr REMOTE_READ alone",
           co_await RegMrErrno(env, env.B, env.pb, buf, 4096, kRemoteRead), "0");
}

// Unsure for real devices: libibverbs passes length 0 to the kernel; the sim
// refuses an empty range (EINVAL). Follows the sim.
Task<void> RegZeroLengthRefused(Env& env, Transcript& t) {
  const uint64_t buf = env.Alloc(env.B, 4096);
  t.Expect("RegMr length 0", co_await RegMrErrno(env, env.B, env.pb, buf, 0, kAllAccess), "EINVAL");
}

Task<void> OverlappingMrsKeepOwnAccess(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  const uint64_t buf = env.Alloc(env.B, 4096);
  Mr* ro = co_await env.RegMr(env.B, env.pb, buf, 4096, kLocalWrite | kRemoteRead);
  Mr* rw = co_await env.RegMr(env.B, env.pb, buf, 4096, kLocalWrite | kRemoteRead | kRemoteWrite);
  t.Expect("the two MRs have different rkeys", ro->rkey() != rw->rkey(), true);
  env.Fill(env.A, env.abuf, 8, 10);
  auto wc = co_await env.Exec(a, WriteWr(env.abuf, env.amr->lkey(), 8, buf, rw->rkey()));
  t.Expect("WRITE through the read-write MR", wc.status, WcStatus::kSuccess);
  t.Expect("B bytes", env.Bytes(env.B, buf, 8), ShowPattern(10, 8));
  wc = co_await env.Exec(a, WriteWr(env.abuf, env.amr->lkey(), 8, buf, ro->rkey()));
  t.Expect("WRITE through the read-only MR of the same range", wc.status, WcStatus::kRemAccessErr);
}

// The rkey's own MR bounds the access, even where another MR covers the
// memory: a 4 KB MR inside the big B buffer.
Task<void> BoundsArePerKey(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  const uint64_t inner = env.bbuf + 64 * 1024;
  Mr* small = co_await env.RegMr(env.B, env.pb, inner, 4096, kAllAccess);
  auto wc = co_await env.Exec(
      a, ReadWr(env.abuf, env.amr->lkey(), 16, inner + 4096 - 8, env.bmr->rkey()));
  t.Expect("READ across the small MR's end with the big MR's rkey", wc.status, WcStatus::kSuccess);
  wc = co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 16, inner + 4096 - 8, small->rkey()));
  t.Expect("READ across the small MR's end with its own rkey", wc.status, WcStatus::kRemAccessErr);
}

// LOCAL_INV applies to memory windows and fast-registered MRs, not to an MR
// from RegMr (rxe_invalidate_mr refuses non-MEM_REG MRs): LOC_QP_OP_ERR, and
// the MR stays usable.
Task<void> LocalInvOfPlainMrFails(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  auto [a2, b2] = env.AB();
  auto wc = co_await env.Exec(b, LocalInvWr(env.bmr->rkey()));
  t.Expect("LOCAL_INV of a registered MR's rkey", wc.status, WcStatus::kLocQpOpErr);
  t.Expect("QP state", b.qp->state(), QpState::kErr);
  env.Fill(env.B, env.bbuf, 8, 13);
  wc = co_await env.Exec(a2, ReadWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey()));
  t.Expect("READ with the MR's rkey on another connection", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes", env.Bytes(env.A, env.abuf, 8), ShowPattern(13, 8));
}

Task<void> Read1Mb(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  constexpr uint32_t kLen = 1 << 20;
  env.Fill(env.B, env.bbuf, kLen, 11);
  auto wc =
      co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), kLen, env.bbuf, env.bmr->rkey()));
  t.Expect("1 MB READ", wc.status, WcStatus::kSuccess);
  t.Expect("A bytes", env.Bytes(env.A, env.abuf, kLen), ShowPattern(11, kLen));
}

Task<void> Write1Mb(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  constexpr uint32_t kLen = 1 << 20;
  env.Fill(env.A, env.abuf + kLen, kLen, 12);
  auto wc = co_await env.Exec(
      a, WriteWr(env.abuf + kLen, env.amr->lkey(), kLen, env.bbuf + 4096, env.bmr->rkey()));
  t.Expect("1 MB WRITE", wc.status, WcStatus::kSuccess);
  t.Expect("B bytes", env.Bytes(env.B, env.bbuf + 4096, kLen), ShowPattern(12, kLen));
}

}  // namespace

std::vector<Scenario> MrScenarios() {
  return {
      {"mr_write_read_roundtrip", "WRITE then READ through an MR move the bytes both ways",
       WriteReadRoundtrip},
      {"mr_read_last_bytes", "the last bytes of an MR (and the whole MR) are readable",
       ReadLastBytesOfMr},
      {"mr_read_one_byte_past_end", "a READ ending 1 byte past the MR is REM_ACCESS_ERR",
       ReadOneBytePastEnd},
      {"mr_write_one_byte_before_start",
       "a WRITE starting 1 byte before the MR fails and writes nothing", WriteOneByteBeforeStart},
      {"mr_zero_length_ignores_rkey", "zero-length READ/WRITE need no valid rkey (C9-88)",
       ZeroLengthIgnoresRkey},
      {"mr_remote_read_only_refuses_write", "a REMOTE_READ-only MR refuses WRITE",
       RemoteReadOnlyRefusesWrite},
      {"mr_remote_write_only_refuses_read", "a REMOTE_WRITE-only MR refuses READ",
       RemoteWriteOnlyRefusesRead},
      {"mr_local_sge_needs_local_write",
       "gathering needs no flag, scattering a READ response needs LOCAL_WRITE",
       LocalSgeNeedsLocalWrite},
      {"mr_wrong_key_byte_refused", "right index with a wrong key byte is refused",
       WrongKeyByteRefused},
      {"mr_rkey_of_other_pd_refused", "an rkey from another PD than the responder QP's is refused",
       RkeyOfOtherPdRefused},
      {"mr_lkey_of_other_pd_refused",
       "an lkey from another PD than the QP's is LOC_PROT_ERR",
       LkeyOfOtherPdRefused,
       {{"rxe", "WRITE with lkey of an MR in another PD", "LOC_QP_OP_ERR", kRxeLkeyReason}}},
      {"mr_local_sge_past_mr_end", "a local SGE crossing its MR's end is LOC_PROT_ERR",
       LocalSgePastMrEnd},
      {"mr_deregistered_rkey_refused", "a deregistered MR's rkey is refused",
       DeregisteredRkeyRefused},
      {"mr_deregistered_lkey_refused",
       "a deregistered MR's lkey is LOC_PROT_ERR",
       DeregisteredLkeyRefused,
       {{"rxe", "WRITE gathering with lkey of deregistered MR", "LOC_QP_OP_ERR", kRxeLkeyReason}}},
      {"mr_reg_remote_write_needs_local_write",
       "RegMr with REMOTE_WRITE/ATOMIC but no LOCAL_WRITE is EINVAL",
       RegRemoteWriteNeedsLocalWrite},
      {"mr_reg_zero_length_refused", "RegMr of length 0 is EINVAL", RegZeroLengthRefused},
      {"mr_overlapping_mrs_keep_own_access", "two MRs over one range each keep their own access",
       OverlappingMrsKeepOwnAccess},
      {"mr_bounds_are_per_key", "the rkey's MR bounds the access, not other MRs over the memory",
       BoundsArePerKey},
      {"mr_local_inv_of_plain_mr_fails",
       "LOCAL_INV of a RegMr MR is LOC_QP_OP_ERR and the MR keeps working", LocalInvOfPlainMrFails},
      {"mr_read_1mb", "a 1 MB READ moves every byte", Read1Mb},
      {"mr_write_1mb", "a 1 MB WRITE moves every byte", Write1Mb},
  };
}

}  // namespace dmb::verbs_diff
