#!/bin/bash
# access-vs-perftest.sh BUILD_DIR - inside the vm-run.sh guest, after
# perftest.sh: `dmbench micro access --backend ibv` on the same devices and in
# the same direction as perftest (CN on rxe1 READs 64 B from the MN on rxe0),
# and the ratios to ib_read_lat / ib_read_bw. Under emulation the absolute
# numbers mean nothing; the ratio is dmbench's overhead above raw verbs
# (coroutines, the MemoryManager's checks, the runtime loop).
#
#   latency: one thread, one READ outstanding (as ib_read_lat);
#   rate:    as many READs in flight as ib_read_bw keeps (min of its TX depth
#            and outstanding reads, 128 on rxe), as threads x --depth 16: a
#            lane QP's max_rd_atomic is 16, so each lane has all its READs on
#            the wire, as perftest's one QP has.
#
# Emulation noise is larger than the differences we look for, so the two sides
# run RXE_CMP_RUNS times (default 3) interleaved (perftest, dmbench, perftest,
# ...; round 1 reuses perftest.sh's run just before) and the JSON reports the
# medians and their ratios, with every round's numbers beside them. It also
# reports each round's own ratio and their median: the host's speed can move
# both tools together between rounds (a TCG guest here swings between about
# 31 and 60 us a READ), which a ratio of two medians does not cancel and a
# round's ratio, its two sides run back to back, mostly does. And the ratio
# of each side's best round (lowest p50, highest rate), and of each side's
# fast-mode median (its rounds within 25% of its best p50: a process's p50
# lands in one of two modes about 2x apart, see below).
# Writes BUILD_DIR/rxe/access-vs-perftest.json; each round's files in
# BUILD_DIR/rxe/cmp/ROUND/.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=${1:?usage: access-vs-perftest.sh BUILD_DIR}
OUT=$B/rxe
P=$OUT/perftest.json
RUNS=${RXE_CMP_RUNS:-3}
[ -f "$P" ] || { echo "access-vs-perftest: no $P (run perftest.sh first)" >&2; exit 1; }
# An optimised build when there is one (`make calibrate` makes it): a sanitized
# build's overhead (ASan: about 3.5x perftest's latency here) is not ours.
ROOT=$(cd "$HERE/../.." && pwd)
D=${RXE_DMBENCH:-$B/cli/dmbench}
# Not when any source it builds from is newer: a stale binary measures old code.
R=$ROOT/build/release/cli/dmbench
if [ -z "${RXE_DMBENCH:-}" ] && [ -x "$R" ] &&
   [ -z "$(find "$ROOT/fabric" "$ROOT/systems" "$ROOT/microbench" "$ROOT/cli" \
      \( -name '*.cc' -o -name '*.h' \) -newer "$R" -print -quit)" ]; then
  D=$R
fi
echo "access-vs-perftest: using $D, $RUNS interleaved rounds"
num() { grep -o "\"$1\": [0-9.]*" "$2" | head -1 | awk '{print $2}'; }
fail() { echo "access-vs-perftest: $*" >&2; exit 1; }

# READs ib_read_bw keeps in flight, from its log's header.
hdr() { awk -F: -v k="$1" 'index($0, k) { gsub(/[ \t]/, "", $2); print $2; exit }' "$OUT/perftest-read_bw.log"; }
TXD=$(hdr "TX depth") ORD=$(hdr "Outstand reads")
INFLIGHT=$((TXD < ORD ? TXD : ORD))
DEPTH=16
[ "$INFLIGHT" -ge "$DEPTH" ] 2>/dev/null || fail "cannot read TX depth / outstanding reads from perftest-read_bw.log"
THREADS=$((INFLIGHT / DEPTH))

MICRO=("$D" micro access --backend ibv --devices rxe0,rxe1 --pool 256MB --op read --size 64 --json)
rm -rf "$OUT/cmp"
for k in $(seq "$RUNS"); do
  R=$OUT/cmp/$k
  mkdir -p "$R"
  if [ "$k" = 1 ]; then
    cp "$P" "$R/perftest.json"
  else
    RXE_PERF_PORT=$((18515 + 2 * k)) "$HERE/perftest.sh" "$B" "$R" >/dev/null ||
      fail "round $k: perftest.sh failed (logs in $R)"
  fi
  timeout 300 "${MICRO[@]}" --ops 2000 >"$R/access-lat.json" || fail "round $k: micro access (latency) failed"
  timeout 300 "${MICRO[@]}" --ops $((16000 / THREADS)) --threads "$THREADS" --depth "$DEPTH" \
    >"$R/access-rate.json" || fail "round $k: micro access (rate) failed"
  echo "round $k: p50 perftest $(num read_lat_us_p50 "$R/perftest.json") us, dmbench" \
    "$(num lat_us_p50 "$R/access-lat.json") us; Mops perftest $(num read_mops "$R/perftest.json")," \
    "dmbench $(num mops "$R/access-rate.json")"
done

# all KEY FILE: KEY from every round's FILE, one a line; median of stdin.
all() { for k in $(seq "$RUNS"); do num "$1" "$OUT/cmp/$k/$2"; done; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
list() { all "$1" "$2" | paste -sd, | sed 's/,/, /g'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "null" }'; }
LP50=$(all lat_us_p50 access-lat.json | median) LAVG=$(all lat_us_mean access-lat.json | median)
MOPS=$(all mops access-rate.json | median)
PP50=$(all read_lat_us_p50 perftest.json | median) PAVG=$(all read_lat_us_avg perftest.json | median)
PMOPS=$(all read_mops perftest.json | median)
# Each round's dmbench/perftest ratio of KEY_A in FILE_A and KEY_B in FILE_B, one a line.
per_round() {
  for k in $(seq "$RUNS"); do
    ratio "$(num "$1" "$OUT/cmp/$k/$2")" "$(num "$3" "$OUT/cmp/$k/$4")"
    echo
  done
}
LRATIOS=$(per_round lat_us_p50 access-lat.json read_lat_us_p50 perftest.json | grep -v null)
MRATIOS=$(per_round mops access-rate.json read_mops perftest.json | grep -v null)
csv() { paste -sd, | sed 's/,/, /g'; }
# Best of the rounds, each side's own: the emulator's noise only ever adds
# time, so the fastest round is the least disturbed estimate of each tool.
BEST_LAT=$(ratio "$(all lat_us_p50 access-lat.json | sort -g | head -1)" \
  "$(all read_lat_us_p50 perftest.json | sort -g | head -1)")
BEST_MOPS=$(ratio "$(all mops access-rate.json | sort -g | tail -1)" \
  "$(all read_mops perftest.json | sort -g | tail -1)")
# Each side's fast-mode median: a process's p50 lands in one of two modes
# about 2x apart under TCG (both tools show both, and the two started side by
# side, each on its own vCPU, can land in different ones), so a round's ratio
# does not cancel the mode. A side's rounds within 25% of its best are its
# undisturbed ones; the ratio of their medians compares like with like, and
# the counts say how many rounds each side had there.
fast() { sort -g | awk 'NR == 1 { b = $1 } $1 <= 1.25 * b { print }'; }
LFAST_D=$(all lat_us_p50 access-lat.json | fast)
LFAST_P=$(all read_lat_us_p50 perftest.json | fast)
FAST_LAT=$(ratio "$(echo "$LFAST_D" | median)" "$(echo "$LFAST_P" | median)")
cat >"$OUT/access-vs-perftest.json" <<JSON
{
  "msg_bytes": 64,
  "dmbench_binary": "$D",
  "rounds": $RUNS,
  "statistic": "median over interleaved rounds",
  "dmbench_read_lat_us_p50": $LP50,
  "dmbench_read_lat_us_mean": $LAVG,
  "perftest_read_lat_us_p50": $PP50,
  "perftest_read_lat_us_avg": $PAVG,
  "lat_p50_ratio": $(ratio "$LP50" "$PP50"),
  "reads_in_flight": $INFLIGHT,
  "dmbench_rate_threads": $THREADS,
  "dmbench_rate_depth": $DEPTH,
  "dmbench_read_mops": $MOPS,
  "perftest_read_mops": $PMOPS,
  "mops_ratio": $(ratio "$MOPS" "$PMOPS"),
  "lat_p50_ratio_median_of_rounds": $(echo "$LRATIOS" | median | grep . || echo null),
  "mops_ratio_median_of_rounds": $(echo "$MRATIOS" | median | grep . || echo null),
  "lat_p50_ratio_of_best_rounds": $BEST_LAT,
  "lat_p50_ratio_of_fast_modes": $FAST_LAT,
  "fast_mode_rounds_dmbench": $(echo "$LFAST_D" | grep -c .),
  "fast_mode_rounds_perftest": $(echo "$LFAST_P" | grep -c .),
  "mops_ratio_of_best_rounds": $BEST_MOPS,
  "rounds_lat_p50_ratio": [$(echo "$LRATIOS" | csv)],
  "rounds_mops_ratio": [$(echo "$MRATIOS" | csv)],
  "rounds_dmbench_read_lat_us_p50": [$(list lat_us_p50 access-lat.json)],
  "rounds_perftest_read_lat_us_p50": [$(list read_lat_us_p50 perftest.json)],
  "rounds_dmbench_read_mops": [$(list mops access-rate.json)],
  "rounds_perftest_read_mops": [$(list read_mops perftest.json)]
}
JSON
cat "$OUT/access-vs-perftest.json"
