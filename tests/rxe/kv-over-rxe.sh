#!/bin/bash
# kv-over-rxe.sh BUILD_DIR - inside the rxe guest: the key-value store
# workloads of Figures 6-7 (`dmb_micro --bench kv --backend ibv`) over real
# verbs, as ansible/figure.yml backend=ibv runs a point: the CN clients in the
# dmb_micro process on rxe1, the MN a `dmbench mn` daemon on rxe0.
#
#   static_mr  fillsync, daemon spawned by dmb_micro (--mn spawn)
#   rpc_mw     type-2 ycsbd, daemon started here and given (--mn HOST:PORT)
#   rpc_mw     type-1 insert, --mn spawn
#   onesided_mw  runs if the device offers what it needs; rxe lacks
#              cross-channel QPs (and qpn_in_bind, masked_atomics), so there
#              it must exit 77 naming them
#
# A run passes when count = the keys asked for, failures = 0 (the workload's
# own checks: every put went in, every ycsbd read found its key with its
# value, every delete found its key), the phases took time, and the report
# leaves out the MN CPU (the simulator's figure; see `dmb_micro kv --help`).
# Exit 0 ok, 1 a failure (named).
set -u
B=${1:?usage: kv-over-rxe.sh BUILD_DIR}
M=$B/cli/dmb_micro
D=$B/cli/dmbench
dir=$(mktemp -d)
mn=
fail() {
  echo "kv-over-rxe: FAILED: $*" >&2
  [ -n "$mn" ] && kill "$mn" 2>/dev/null
  exit 1
}
KV=(--bench kv --backend ibv --threads 2 --keys 300 --value 256B --pool 256MB
    --benchmark_format=json)

# check NAME JSON_FILE KEYS WORKLOAD: the run's own numbers.
check() {
  python3 - "$@" <<'PY' || fail "$1: see above"
import json, sys
name, path, keys, workload = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
b = json.load(open(path))["benchmarks"]
assert len(b) == 1, f"{name}: {len(b)} benchmark entries"
e = b[0]
print(f"{name}: count {e['count']:.0f} failures {e['failures']:.0f} "
      f"tput_mops {e['tput_mops']:.4f} lat_us_p50 {e['lat_us_p50']:.1f} "
      f"dealloc_rate {e['dealloc_rate']:.3f} wall {e['real_time'] / 1e6:.2f} s")
assert f"workload={workload}" in e["label"], f"{name}: label {e['label']}"
assert e["count"] == keys, f"{name}: count {e['count']}, expected {keys}"
assert e["failures"] == 0, f"{name}: {e['failures']} failed ops"
assert e["real_time"] > 0 and e["tput_mops"] > 0, f"{name}: no time measured"
assert e["lat_us_p99"] >= e["lat_us_p50"] > 0, f"{name}: latencies {e}"
assert "mn_cpu_peak" not in e and "mn_cpu_mean" not in e, f"{name}: an MN CPU figure on ibv"
if workload == "ycsbd":
    assert e["get_lat_us_p99"] > 0, f"{name}: no read measured"
if workload != "insert":
    assert e["delete_tput_mops"] > 0, f"{name}: no delete measured"
PY
}

# run NAME WORKLOAD ARGS...: one point, its JSON in $dir/NAME.json.
run() {
  local name=$1 workload=$2
  shift 2
  echo "=== kv-over-rxe: $name: dmb_micro ${KV[*]} --workload $workload $*"
  timeout 300 "$M" "${KV[@]}" --workload "$workload" "$@" >"$dir/$name.json" 2>"$dir/$name.err"
  local rc=$?
  cat "$dir/$name.err" >&2
  [ $rc = 0 ] || fail "$name: dmb_micro exited $rc"
  check "$name" "$dir/$name.json" 300 "$workload"
}

run static_mr fillsync --system static_mr --mn spawn --devices rxe1

# A daemon started by hand, as ansible/tasks/ibv-point.yml starts one.
RPC=(--system rpc_mw --set mw_type=2 --set granularity=2KB)
timeout 400 "$D" mn "${RPC[@]}" --device rxe0 --port 0 --port-file "$dir/port" --pool 256MB \
  >"$dir/mn.log" 2>&1 &
mn=$!
for _ in $(seq 300); do [ -s "$dir/port" ] && break; sleep 0.1; done
[ -s "$dir/port" ] || { cat "$dir/mn.log" >&2; fail "the MN daemon did not start listening"; }
run rpc_mw_type2 ycsbd "${RPC[@]}" --mn "127.0.0.1:$(cat "$dir/port")" --devices rxe1
kill "$mn" 2>/dev/null
wait "$mn" 2>/dev/null
mn=

run rpc_mw_type1 insert --system rpc_mw --set mw_type=1 --mn spawn --devices rxe1

echo "=== kv-over-rxe: onesided_mw (skipped by capability where the device lacks it)"
timeout 300 "$M" "${KV[@]}" --workload fillsync --system onesided_mw --mn spawn --devices rxe1 \
  >"$dir/onesided.json" 2>"$dir/onesided.err"
rc=$?
cat "$dir/onesided.err" >&2
if [ $rc = 77 ]; then
  grep -q "^skipped: needs .*cross_channel.* (onesided_mw on device rxe1)" "$dir/onesided.err" ||
    fail "onesided_mw: exit 77 without naming the missing capability"
  [ -s "$dir/onesided.json" ] && fail "onesided_mw: skipped, yet a report was written"
elif [ $rc = 0 ]; then
  check onesided_mw "$dir/onesided.json" 300 fillsync
else
  fail "onesided_mw: dmb_micro exited $rc (expected 0, or 77 naming a capability)"
fi
rm -rf "$dir"
echo "kv-over-rxe: ok"
