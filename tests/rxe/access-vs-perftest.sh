#!/bin/bash
# access-vs-perftest.sh BUILD_DIR - inside the vm-run.sh guest, after
# perftest.sh: `dmbench micro access --backend ibv` on the same devices and in
# the same direction as perftest (CN on rxe1 READs 64 B from the MN on rxe0),
# and the ratios to ib_read_lat / ib_read_bw. Under emulation the absolute
# numbers mean nothing; the ratio is dmbench's overhead above raw verbs
# (coroutines, the MemoryManager's checks, one READ outstanding per thread).
# Writes BUILD_DIR/rxe/access-vs-perftest.json.
set -u
B=${1:?usage: access-vs-perftest.sh BUILD_DIR}
OUT=$B/rxe
P=$OUT/perftest.json
[ -f "$P" ] || { echo "access-vs-perftest: no $P (run perftest.sh first)" >&2; exit 1; }
# An optimised build when there is one (`make calibrate` makes it): a sanitized
# build's overhead (ASan: about 3.5x perftest's latency here) is not ours.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=${RXE_DMBENCH:-$B/cli/dmbench}
if [ -z "${RXE_DMBENCH:-}" ] && [ -x "$ROOT/build/release/cli/dmbench" ] &&
   [ "$ROOT/build/release/cli/dmbench" -nt "$ROOT/fabric/ibv/ibv_runtime.cc" ]; then
  D=$ROOT/build/release/cli/dmbench
fi
echo "access-vs-perftest: using $D"
num() { grep -o "\"$1\": [0-9.]*" "$2" | head -1 | awk '{print $2}'; }

# Latency: one thread, one READ outstanding (ib_read_lat does the same).
timeout 300 "$D" micro access --backend ibv --devices rxe0,rxe1 --pool 256MB --op read --size 64 --ops 2000 --json \
  >"$OUT/access-lat.json" || { echo "access-vs-perftest: micro access (latency) failed" >&2; exit 1; }
# Rate: 16 threads with one READ outstanding each (ib_read_bw keeps 128 in flight on one QP).
timeout 300 "$D" micro access --backend ibv --devices rxe0,rxe1 --pool 256MB --op read --size 64 --ops 500 --threads 16 \
  --json >"$OUT/access-rate.json" || { echo "access-vs-perftest: micro access (rate) failed" >&2; exit 1; }

LP50=$(num lat_us_p50 "$OUT/access-lat.json") LAVG=$(num lat_us_mean "$OUT/access-lat.json")
MOPS=$(num mops "$OUT/access-rate.json")
PP50=$(num read_lat_us_p50 "$P") PAVG=$(num read_lat_us_avg "$P") PMOPS=$(num read_mops "$P")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "null" }'; }
cat >"$OUT/access-vs-perftest.json" <<JSON
{
  "msg_bytes": 64,
  "dmbench_binary": "$D",
  "dmbench_read_lat_us_p50": $LP50,
  "dmbench_read_lat_us_mean": $LAVG,
  "perftest_read_lat_us_p50": $PP50,
  "perftest_read_lat_us_avg": $PAVG,
  "lat_p50_ratio": $(ratio "$LP50" "$PP50"),
  "dmbench_read_mops_16_threads": $MOPS,
  "perftest_read_mops": $PMOPS,
  "mops_ratio": $(ratio "$MOPS" "$PMOPS")
}
JSON
cat "$OUT/access-vs-perftest.json"
