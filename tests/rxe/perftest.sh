#!/bin/bash
# perftest.sh BUILD_DIR [OUT_DIR] - inside the vm-run.sh guest, after guest-up.sh: the
# perftest reference numbers for RDMA READ between the two rxe devices.
#
#   ib_read_lat  64 B, 2000 iterations   -> median/avg/p99 latency
#   ib_read_bw   64 B, 20000 iterations  -> message rate
#
# Server on rxe0, client on rxe1; they swap QP numbers over TCP to 10.77.0.1
# and then talk RoCEv2 over the veth pair using the IPv4-mapped GID. Writes
# OUT_DIR/perftest.json (and perftest-*.log beside it; OUT_DIR defaults to
# BUILD_DIR/rxe). Under TCG these
# are emulation numbers: good for comparing our harness against perftest in the
# same guest, meaningless as absolute hardware figures.
set -u
B=${1:?usage: perftest.sh BUILD_DIR [OUT_DIR]}
OUT=${2:-$B/rxe}
mkdir -p "$OUT" || exit 1
SIZE=${RXE_PERF_SIZE:-64} LAT_N=${RXE_PERF_LAT_N:-2000} BW_N=${RXE_PERF_BW_N:-20000}
PORT=${RXE_PERF_PORT:-18515}   # ib_read_lat's; ib_read_bw uses the next one
SERVER_IP=10.77.0.1

fail() { echo "perftest: FAILED: $*" >&2; exit 1; }

# Index of the device's IPv4-mapped GID (::ffff:a.b.c.d); rxe only has RoCE v2 GIDs.
gid_index() {
  local f
  f=$(grep -ls '^0000:0000:0000:0000:0000:ffff:' /sys/class/infiniband/"$1"/ports/1/gids/* | head -1)
  [ -n "$f" ] || fail "$1 has no IPv4-mapped GID (run guest-up.sh first)"
  echo "${f##*/}"
}
G0=$(gid_index rxe0) G1=$(gid_index rxe1)

# run_pair NAME PORT ARGS...: server on rxe0 in the background, client on rxe1;
# each side has a hard time limit. Client output -> $OUT/perftest-NAME.log
run_pair() {
  local name=$1 port=$2 spid crc src
  shift 2
  timeout 120 "$@" -d rxe0 -x "$G0" -p "$port" -F >"$OUT/perftest-$name-server.log" 2>&1 &
  spid=$!
  for _ in $(seq 100); do   # wait until the server listens for the TCP exchange
    ss -ltn 2>/dev/null | grep -q ":$port " && break
    sleep 0.2
  done
  timeout 120 "$@" -d rxe1 -x "$G1" -p "$port" -F "$SERVER_IP" >"$OUT/perftest-$name.log" 2>&1
  crc=$?
  wait "$spid"
  src=$?
  [ $crc = 0 ] && [ $src = 0 ] ||
    { tail -5 "$OUT/perftest-$name.log" >&2; fail "$name: client exited $crc, server $src (logs in $OUT)"; }
}
# row HEADER_WORD FILE: the numbers line under perftest's result header.
row() { awk -v h="$1" 'f && $1 ~ /^[0-9]/ { print; exit } index($0, h) { f = 1 }' "$2"; }

run_pair read_lat "$PORT" ib_read_lat -s "$SIZE" -n "$LAT_N"
# #bytes #iterations t_min t_max t_typical t_avg t_stdev p99 p99.9
read -r _ _ LMIN LMAX LP50 LAVG _ LP99 _ <<<"$(row t_typical "$OUT/perftest-read_lat.log")"
run_pair read_bw $((PORT + 1)) ib_read_bw -s "$SIZE" -n "$BW_N"
# #bytes #iterations BW_peak BW_avg MsgRate[Mpps]
read -r _ _ _ BWAVG MPPS <<<"$(row MsgRate "$OUT/perftest-read_bw.log")"
[ -n "${LP50:-}" ] && [ -n "${MPPS:-}" ] || fail "could not parse perftest output in $OUT"

cat >"$OUT/perftest.json" <<EOF
{
  "tool": "perftest $(dpkg-query -W -f='${Version}' perftest 2>/dev/null)",
  "kernel": "$(uname -r)",
  "accel": "${VM_ACCEL:-unknown}",
  "devices": "rxe1 -> rxe0 over veth, gid index $G1 -> $G0",
  "msg_bytes": $SIZE,
  "read_lat_iters": $LAT_N,
  "read_lat_us_min": $LMIN,
  "read_lat_us_p50": $LP50,
  "read_lat_us_avg": $LAVG,
  "read_lat_us_p99": $LP99,
  "read_lat_us_max": $LMAX,
  "read_bw_iters": $BW_N,
  "read_mops": $MPPS,
  "read_bw_MBps": $BWAVG
}
EOF
cat "$OUT/perftest.json"
