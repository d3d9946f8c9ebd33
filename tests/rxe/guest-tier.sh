#!/bin/bash
# guest-tier.sh BUILD_DIR - the Soft-RoCE test tier, run inside the vm-run.sh guest:
#
#   tests/rxe/vm-run.sh -s BUILD_DIR/rxe -- tests/rxe/guest-tier.sh BUILD_DIR   (= make test-rxe)
#
# 1. guest-up.sh: rxe0 and rxe1 over a veth pair;
# 2. ctest -L rxe in BUILD_DIR (the build tree is the host's, read-only with a
#    throw-away overlay); finding no rxe-labelled test is a failure unless
#    RXE_ALLOW_EMPTY=1; DMB_RXE_REQUIRED=1, so need-devices.sh fails a test
#    whose device is missing here instead of skipping it as on a host;
# 3. perftest.sh: reference READ latency / message rate -> BUILD_DIR/rxe/perftest.json,
#    then access-vs-perftest.sh: `dmbench micro access --backend ibv` beside it,
#    RXE_CMP_RUNS rounds interleaved with perftest (medians reported).
# Results in BUILD_DIR/rxe/: ctest.log, perftest.json, perftest-*.log,
# access-vs-perftest.json, cmp/ROUND/.
# Exit status: ctest's (a perftest failure is reported but does not change it).
# Env: RXE_ALLOW_EMPTY=1, RXE_TEST_TIMEOUT (per test, default 300 s), RXE_CMP_RUNS (3),
#      RXE_CTEST_JOBS (tests at once, default: the guest's vCPUs),
#      RXE_CTEST_ARGS (extra ctest arguments, e.g. "-R ibv_").
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: guest-tier.sh BUILD_DIR}" && pwd) || exit 2
[ -f "$B/CTestTestfile.cmake" ] || { echo "guest-tier: $B is not a configured build tree" >&2; exit 2; }
if [ "${VM_SHARE:-}" != "$B/rxe" ]; then
  echo "guest-tier: note: results in $B/rxe reach the host only if it is vm-run.sh's share dir (-s $B/rxe)"
fi

mkdir -p "$B/rxe" && rm -f "$B/rxe/ctest.log" "$B/rxe/perftest.json" "$B/rxe/access-vs-perftest.json"   # no stale results

echo "=== guest-tier: bringing up rxe0/rxe1"
"$HERE/guest-up.sh" || { echo "guest-tier: FAILED: Soft-RoCE devices did not come up" >&2; exit 1; }

echo "=== guest-tier: ctest -L rxe"
export DMB_RXE_REQUIRED=1   # here the devices must exist: a skip would hide a broken tier
n=$(ctest --test-dir "$B" -L rxe -N ${RXE_CTEST_ARGS:-} | awk '/^Total Tests:/ { print $3 }')
if [ "${n:-0}" -gt 0 ]; then
  # --timeout only covers tests without their own TIMEOUT property.
  # Side by side, one per vCPU: each test starts its own daemons on ports the
  # kernel picks, and the conformance suite (two thirds of the time) waits
  # on round trips more than it computes.
  ctest --test-dir "$B" -L rxe --output-on-failure --timeout "${RXE_TEST_TIMEOUT:-300}" \
    -j "${RXE_CTEST_JOBS:-$(nproc)}" --output-log "$B/rxe/ctest.log" ${RXE_CTEST_ARGS:-}
  rc=$?
elif [ "${RXE_ALLOW_EMPTY:-0}" = 1 ]; then
  echo "guest-tier: no tests labelled 'rxe'${RXE_CTEST_ARGS:+ matching $RXE_CTEST_ARGS} in $B (allowed: RXE_ALLOW_EMPTY=1)"
  rc=0
else
  echo "guest-tier: FAILED: no tests labelled 'rxe'${RXE_CTEST_ARGS:+ matching $RXE_CTEST_ARGS} in $B (add LABELS rxe to a test, or set RXE_ALLOW_EMPTY=1)" >&2
  rc=1
fi

echo "=== guest-tier: perftest reference"
if "$HERE/perftest.sh" "$B"; then
  echo "=== guest-tier: dmbench micro access next to perftest"
  "$HERE/access-vs-perftest.sh" "$B" ||
    echo "guest-tier: WARNING: micro access comparison failed (ctest status unaffected)" >&2
else
  echo "guest-tier: WARNING: perftest reference run failed (ctest status unaffected)" >&2
fi

echo "=== guest-tier: done, ctest status $rc"
exit $rc
