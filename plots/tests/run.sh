#!/usr/bin/env bash
# Tests the plot scripts on synthetic results (plots/tests/make_fixtures.py) in a
# temporary directory, never in results/. Usable as a ctest:
#   bash plots/tests/run.sh            (from the repository root or anywhere)
# Needs Debian's python3-matplotlib and python3-pandas. Exit status 0 = all passed.
# KEEP=1 keeps the temporary directory and prints its path.
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
plots="$(dirname "$here")"
py=/usr/bin/python3
[ -x "$py" ] || py="$(command -v python3)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/dmb-plots-test.XXXXXX")"
if [ "${KEEP:-0}" = 1 ]; then
  echo "keeping $tmp"
else
  trap 'rm -rf "$tmp"' EXIT
fi
export MPLCONFIGDIR="$tmp/mplconfig" PYTHONDONTWRITEBYTECODE=1 MPLBACKEND=Agg

fails=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# run NAME CMD...: the command must exit 0
run() {
  local name=$1; shift
  if "$@" >"$tmp/out.log" 2>"$tmp/err.log"; then
    pass "$name"
  else
    fail "$name (exit $?)"; sed 's/^/     | /' "$tmp/err.log" | tail -20
  fi
}

# nonempty FILE...: every file exists and is not empty
nonempty() {
  local f
  for f in "$@"; do
    if [ -s "$f" ]; then pass "non-empty ${f#"$tmp"/}"; else fail "missing or empty: ${f#"$tmp"/}"; fi
  done
}

# expect_error NAME PATTERN CMD...: the command exits non-zero and says PATTERN on stderr
expect_error() {
  local name=$1 pattern=$2; shift 2
  if "$@" >"$tmp/out.log" 2>"$tmp/err.log"; then
    fail "$name: exited 0, expected an error"
  elif grep -qF -- "$pattern" "$tmp/err.log"; then
    pass "$name"
  else
    fail "$name: stderr lacks '$pattern'"; sed 's/^/     | /' "$tmp/err.log" | tail -5
  fi
  if grep -q "Traceback" "$tmp/err.log"; then fail "$name: a Python traceback"; fi
}

python_deps_ok() {
  "$py" -c 'import matplotlib, pandas' 2>/dev/null
}
if ! python_deps_ok; then
  echo "FAIL python3-matplotlib / python3-pandas missing: apt-get install -y python3-matplotlib python3-pandas"
  exit 1
fi

# Every script below runs in a child of plots/tests/zygote.py, which imported
# pandas and matplotlib once (about a second a run otherwise, half of this
# test's time): from here on "$py" is `pyz`. NO_ZYGOTE=1 runs a fresh python3
# each time.
py_bin=$py
pyz() { "$py_bin" "$here/zygote.py" run "$tmp/zygote.sock" "$@"; }
if [ "${NO_ZYGOTE:-0}" != 1 ]; then
  "$py_bin" "$here/zygote.py" serve "$tmp/zygote.sock" 2>"$tmp/zygote.err" &
  zpid=$!
  trap 'kill $zpid 2>/dev/null; [ "${KEEP:-0}" = 1 ] || rm -rf "$tmp"' EXIT
  for _ in $(seq 100); do [ -S "$tmp/zygote.sock" ] && break; sleep 0.1; done
  if [ -S "$tmp/zygote.sock" ] && pyz - <<<'import sys; sys.exit(7)'; [ $? = 7 ]; then
    py=pyz
  else
    echo "note: zygote.py did not start; every script runs in a fresh python3"
    sed 's/^/     | /' "$tmp/zygote.err" | tail -5
  fi
fi

res="$tmp/results"
run "make_fixtures.py" "$py" "$here/make_fixtures.py" "$res"

# --help of every script
for s in figure-10.py offload-qps.py primitives.py figure-6.py figure-7.py results_readme.py; do
  run "$s --help" "$py" "$plots/$s" --help
  grep -q -- "--results" "$tmp/out.log" || fail "$s --help does not mention --results"
done

# Every figure from the fixtures, into its results directory (the default --out).
run "figure-10.py" "$py" "$plots/figure-10.py" --results "$res/figure-10"
# A cluster run's CSV: ODRP skipped by capability (`skipped` column, no metrics)
# gets no bar and is named under the panels, never silently dropped.
mkdir -p "$tmp/skipped/figure-10"
cp "$res/figure-10/compare.csv" "$res/figure-10/meta.json" "$tmp/skipped/figure-10/"
"$py" - "$res/figure-10/figure-10.csv" "$tmp/skipped/figure-10/figure-10.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cols = list(rows[0].keys()) + ["skipped"]
metrics = [c for c in cols if c.startswith(("lat_us", "kops", "mops", "count"))]
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, cols)
    w.writeheader()
    for r in rows:
        r["skipped"] = ""
        if r["system"] == "odrp":
            r["skipped"] = "needs cross_channel (odrp on device rxe0)"
            for m in metrics:
                r[m] = ""
        w.writerow(r)
PY
run "figure-10.py, ODRP skipped" "$py" "$plots/figure-10.py" --results "$tmp/skipped/figure-10"
if grep -q "Not run on this backend: odrp access: needs cross_channel" "$tmp/err.log"; then
  pass "figure-10.py names the skipped approach"
else
  fail "figure-10.py does not name the skipped ODRP rows"; sed 's/^/     | /' "$tmp/err.log" | head -5
fi
nonempty "$tmp/skipped/figure-10/figure-10.png"
run "offload-qps.py" "$py" "$plots/offload-qps.py" --results "$res/offload-qps"
run "primitives.py" "$py" "$plots/primitives.py" --results "$res/primitives"
run "figure-6.py" "$py" "$plots/figure-6.py" --results "$res/figure-6"
if grep -q "warning" "$tmp/err.log"; then
  fail "figure-6.py warns on complete input"; sed 's/^/     | /' "$tmp/err.log" | head -5
fi
run "figure-7.py" "$py" "$plots/figure-7.py" --results "$res/figure-7"
if grep -q "warning" "$tmp/err.log"; then
  fail "figure-7.py warns on complete input"; sed 's/^/     | /' "$tmp/err.log" | head -5
fi
for n in figure-10 offload-qps primitives figure-6 figure-7; do
  nonempty "$res/$n/$n.png" "$res/$n/$n.pdf"
  if [ -s "$res/$n/$n.png" ] && [ "$(head -c 8 "$res/$n/$n.png" | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]; then
    fail "$n.png is not a PNG"
  fi
  if [ -s "$res/$n/$n.pdf" ] && [ "$(head -c 5 "$res/$n/$n.pdf")" != "%PDF-" ]; then
    fail "$n.pdf is not a PDF"
  fi
done

# The swap figures on their own fixtures (kept apart: results_readme's counts
# above are for the other figures). Each draws, and refuses corrupted runs.
sw="$tmp/swap"
run "make_swap_fixtures.py" "$py" "$here/make_swap_fixtures.py" "$sw"
for n in figure-2 figure-9 ablation figure-8 scale-invariance pager-lanes; do
  run "$n.py --help" "$py" "$plots/$n.py" --help
  run "$n.py" "$py" "$plots/$n.py" --results "$sw/$n"
  if grep -q "warning" "$tmp/err.log"; then
    fail "$n.py warns on complete input"; sed 's/^/     | /' "$tmp/err.log" | head -5
  fi
  nonempty "$sw/$n/$n.png" "$sw/$n/$n.pdf"
done
sed -i 's/,0,\([^,]*\)$/,3,\1/' "$sw/figure-2/figure-2.csv"
expect_error "figure-2.py with stamp mismatches" "swapped in corrupted pages" \
  "$py" "$plots/figure-2.py" --results "$sw/figure-2"

# figure-6 --value: one value size into figure-6-SIZE.{png,pdf}; an absent one is an error.
run "figure-6.py --value 256B" "$py" "$plots/figure-6.py" --results "$res/figure-6" --value 256B
nonempty "$res/figure-6/figure-6-256B.png" "$res/figure-6/figure-6-256B.pdf"
expect_error "figure-6.py --value 4KB (not run)" "no rows with value_bytes=4096" \
  "$py" "$plots/figure-6.py" --results "$res/figure-6" --value 4KB

# The key-value helpers of figure-6 and figure-7 (kv_common.py): approach keys, sizes.
run "kv_common.py helpers" "$py" - <<PYEOF
import sys
sys.path.insert(0, "$plots")
import kv_common as kv
k = kv.approach_key
assert k("rpc_mw", "type1-2KB") == "rpc_mw/type1", k("rpc_mw", "type1-2KB")
assert k("rpc_mw", "4KB", "mw_type=2;granularity=4KB") == "rpc_mw/type2"
assert k("onesided_mw", "4KB") == "onesided_mw"
assert k("onesided_mw", "4KB-aq4") == "onesided_mw/aq4"
assert k("static_mr", "16MB") == "static_mr"
assert kv.snap_pow2(1.67772e+07) == 16 << 20 and kv.snap_pow2(3000.0) == 3000.0
assert kv.parse_size("512B") == 512 and kv.parse_size("32KB") == 32768
PYEOF

# --out elsewhere; the same figure twice gives the same bytes (no timestamps).
run "figure-10.py --out" "$py" "$plots/figure-10.py" --results "$res/figure-10" --out "$tmp/out"
nonempty "$tmp/out/figure-10.png" "$tmp/out/figure-10.pdf"
if cmp -s "$tmp/out/figure-10.pdf" "$res/figure-10/figure-10.pdf" &&
   cmp -s "$tmp/out/figure-10.png" "$res/figure-10/figure-10.png"; then
  pass "figures are byte-for-byte reproducible"
else
  fail "figure-10 differs between two runs on the same input"
fi
run "figure-6.py --out" "$py" "$plots/figure-6.py" --results "$res/figure-6" --out "$tmp/out"
if cmp -s "$tmp/out/figure-6.pdf" "$res/figure-6/figure-6.pdf" &&
   cmp -s "$tmp/out/figure-6.png" "$res/figure-6/figure-6.png"; then
  pass "figure-6 is byte-for-byte reproducible"
else
  fail "figure-6 differs between two runs on the same input"
fi

# alloc-rate (its own directory: the README counts below are the five above).
ar="$tmp/ar/alloc-rate"
mkdir -p "$ar"
"$py" - "$ar" <<'EOF'
import csv, sys
d = sys.argv[1]
cols = ["figure", "system", "variant", "op", "threads", "cns", "mn_cores", "seed", "knobs",
        "lat_us_p50", "lat_us_p99", "lat_us_mean", "kops"]
rows = []
for v, sat in (("sep", 275.0), ("nosep", 390.0)):
    for t in (1, 2, 4, 8, 16, 24, 48):
        kops = min(72.0 * t, sat)
        lat = t / kops * 1e3
        rows.append(dict(figure="alloc-rate", system="onesided_mw", variant=v, op="alloc",
                         threads=t, cns=1, mn_cores=1, seed=1, knobs=f"sep={v == 'sep'}",
                         lat_us_p50=lat, lat_us_p99=lat * 1.1, lat_us_mean=lat, kops=kops))
with open(f"{d}/alloc-rate.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
with open(f"{d}/compare.csv", "w", newline="") as f:
    f.write("figure,label,system,variant,op,threads,param,param_value,metric,paper,ours,ratio,"
            "verdict,where,note\n"
            "alloc-rate,rate 24,onesided_mw,sep,alloc,24,,,kops,1067,275,0.258,miss,x,\n")
EOF
run "alloc-rate.py --help" "$py" "$plots/alloc-rate.py" --help
grep -q -- "--results" "$tmp/out.log" || fail "alloc-rate.py --help does not mention --results"
run "alloc-rate.py" "$py" "$plots/alloc-rate.py" --results "$ar"
nonempty "$ar/alloc-rate.png" "$ar/alloc-rate.pdf"
run "alloc-rate.py --out" "$py" "$plots/alloc-rate.py" --results "$ar" --out "$tmp/ar-out"
if cmp -s "$tmp/ar-out/alloc-rate.png" "$ar/alloc-rate.png"; then
  pass "alloc-rate is byte-for-byte reproducible"
else
  fail "alloc-rate differs between two runs on the same input"
fi
cut -d, -f1-12 "$ar/alloc-rate.csv" >"$tmp/ar.csv" && mv "$tmp/ar.csv" "$ar/alloc-rate.csv"
run "alloc-rate.py without kops" "$py" "$plots/alloc-rate.py" --results "$ar"
grep -q "warning" "$tmp/err.log" || fail "alloc-rate.py: no warning without a kops column"

# offload-model: one bar per profile; an unknown profile is named, not drawn.
om="$tmp/om/offload-model"
mkdir -p "$om"
"$py" - "$om" <<'EOF'
import csv, sys
d = sys.argv[1]
cols = ["figure", "system", "variant", "op", "io", "threads", "cns", "mn_cores", "seed",
        "profile", "knobs", "lat_us_p99", "lat_us_mean", "tput_mops"]
profiles = ["cx5+all_cross_channel", "cx5", "cx5+all_cross_channel+latency_only",
            "cx5+latency_only", "cx6"]
rows = []
for i, p in enumerate(profiles):
    for t in (1, 24):
        for s, v in (("static_mr", ""), ("onesided_mw", "sep"), ("onesided_mw", "nosep")):
            rows.append(dict(figure="offload-model", system=s, variant=v, op="access", io="read",
                             threads=t, cns=1, mn_cores=1, seed=1, profile=p, knobs="",
                             lat_us_mean=3 + t * (1 + i), lat_us_p99=4 + t * (1 + i)))
        rows.append(dict(figure="offload-model", system="onesided_mw", variant="sep", op="alloc",
                         threads=t, cns=1, mn_cores=1, seed=1, profile=p, knobs="",
                         lat_us_mean=14 + t * (2 - i / 4), lat_us_p99=20 + t))
with open(f"{d}/offload-model.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
with open(f"{d}/compare.csv", "w", newline="") as f:
    f.write("figure,label,system,variant,op,threads,param,param_value,metric,paper,ours,ratio,"
            "verdict,where,note\n"
            "offload-model,alloc 24,onesided_mw,sep,alloc,24,profile,cx5,lat_us_mean,22.5,62,"
            "2.76,miss,x,\n")
EOF
run "offload-model.py --help" "$py" "$plots/offload-model.py" --help
run "offload-model.py" "$py" "$plots/offload-model.py" --results "$om"
nonempty "$om/offload-model.png" "$om/offload-model.pdf"
grep -q "cx6" "$tmp/err.log" || fail "offload-model.py: the unknown profile cx6 is not named"

# simulator-speed (`make bench`): Google Benchmark's JSON of sim_speed_bench and
# bench_meta.py's meta.json, in a results root of their own; the README section.
ss="$tmp/ss"
mkdir -p "$ss/simulator-speed"
"$py" - "$ss/simulator-speed" <<'EOF'
import json, sys
d = sys.argv[1]
cases = [("BM_ReadPingPong", 2.1e6, 3.6e7, 4.0), ("BM_Read288QpsDepth24", 1.4e6, 6.4e6, 4.92),
         ("BM_Read6912QpsDepth4", 4.1e5, 4.9e6, 4.05),
         ("BM_OneSidedMwAllocStorm", 1.5e6, 1.4e7, 2.71)]
benches = [dict(name=f"{n}/min_time:1.000", run_name=f"{n}/min_time:1.000", run_type="iteration",
                iterations=3, real_time=600.0, cpu_time=600.0, time_unit="ms", sim_wr_per_s=m,
                bare_wr_per_s=b, model_over_bare=m / b, events_per_wr=e)
           for n, m, b, e in cases]
ctx = dict(date="2026-11-26T06:00:00+00:00", host_name="fixture", num_cpus=2, mhz_per_cpu=2600,
           load_avg=[0.1, 0.1, 0.1], library_build_type="debug")
with open(f"{d}/simulator-speed.json", "w") as f:
    json.dump(dict(context=ctx, benchmarks=benches), f, indent=2)
with open(f"{d}/meta.json", "w") as f:
    json.dump(dict(name="simulator-speed", title="Simulator speed", source="issue 18",
                   git_sha="0123456789abcdef", dirty=False, host="fixture", cores=2,
                   load_avg=[0.1, 0.1, 0.1], build_type="Release", wall_s=12.5,
                   generated_at="2026-11-26T06:00:12Z"), f, indent=2)
EOF
for s in simulator_speed.py bench_meta.py; do
  run "$s --help" "$py" "$plots/$s" --help
done
run "simulator_speed.py" "$py" "$plots/simulator_speed.py" --results "$ss/simulator-speed"
nonempty "$ss/simulator-speed/simulator-speed.png" "$ss/simulator-speed/simulator-speed.pdf"
run "simulator_speed.py --out" "$py" "$plots/simulator_speed.py" \
  --results "$ss/simulator-speed" --out "$tmp/ss-out"
if cmp -s "$tmp/ss-out/simulator-speed.png" "$ss/simulator-speed/simulator-speed.png"; then
  pass "simulator-speed is byte-for-byte reproducible"
else
  fail "simulator-speed differs between two runs on the same input"
fi
run "bench_meta.py" "$py" "$plots/bench_meta.py" --bench "$ss/simulator-speed/simulator-speed.json" \
  --build "$tmp/no-build" --start 0 --out "$tmp/ss-meta.json"
for want in '"git_sha"' '"dirty"' '"host": "fixture"' '"cores": 2' '"build_type"' '"wall_s"'; do
  grep -qF -- "$want" "$tmp/ss-meta.json" || fail "bench_meta.py: meta.json lacks $want"
done
run "results_readme.py, simulator-speed" "$py" "$plots/results_readme.py" --results "$ss"
for want in "## simulator-speed: Simulator speed" "(simulator-speed/simulator-speed.png)" \
            "| 288 QPs × 24 | 1,400,000 | 6,400,000 | 0.22 | 4.92 | met |" \
            "| 0.06 | 4.00 | **short** |" "model / bare ≥ 0.2 in 1 of 4 case(s)" \
            "Overall: 0 hit, 0 miss." "build Release"; do
  grep -qF -- "$want" "$ss/README.md" || fail "README.md (simulator-speed) lacks '$want'"
done
"$py" - "$ss/simulator-speed/simulator-speed.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["benchmarks"][3].update(error_occurred=True, error_message="allocations failed")
del d["benchmarks"][1]["bare_wr_per_s"]
json.dump(d, open(sys.argv[1], "w"))
EOF
run "simulator_speed.py, a failed and an incomplete case" "$py" "$plots/simulator_speed.py" \
  --results "$ss/simulator-speed"
grep -qF "BM_OneSidedMwAllocStorm/min_time:1.000 failed (allocations failed)" "$tmp/err.log" ||
  fail "simulator_speed.py does not name the failed case"
grep -qF "BM_Read288QpsDepth24/min_time:1.000 lacks bare_wr_per_s" "$tmp/err.log" ||
  fail "simulator_speed.py does not name the incomplete case"
expect_error "simulator_speed.py, no JSON" \
  "simulator-speed.json not found: run \`make bench\` first" \
  "$py" "$plots/simulator_speed.py" --results "$tmp/nowhere/simulator-speed"

# README from every compare.csv and meta.json.
run "results_readme.py" "$py" "$plots/results_readme.py" --results "$res"
nonempty "$res/README.md"
for want in "make figures" "## figure-10" "## offload-qps" "## primitives" "## figure-6" "## figure-7" \
            "6 hit, 2 miss, 1 no data" "2 hit, 0 miss" "Overall: 24 hit, 5 miss, 3 no data." "(figure-10/figure-10.png)" \
            "(figure-6/figure-6.png)" "(figure-7/figure-7.png)" \
            "| 0.99 | hit |" "**miss**" "no data" "Findings (from the spec):" \
            "- One Alloc QP is bound by A's in-order SQ \\| 3.4 us per allocation."; do
  grep -qF -- "$want" "$res/README.md" || fail "README.md lacks '$want'"
done
cp "$res/README.md" "$tmp/README.first"
run "results_readme.py again" "$py" "$plots/results_readme.py" --results "$res"
cmp -s "$res/README.md" "$tmp/README.first" && pass "README.md is deterministic" ||
  fail "README.md differs between two runs"

# Degraded inputs: no compare.csv / meta.json, optional columns gone, an empty
# panel. Every script must still draw (warnings only).
deg="$tmp/degraded"
mkdir -p "$deg/figure-10" "$deg/offload-qps" "$deg/primitives" "$deg/figure-6" "$deg/figure-7"
cp "$res/figure-10/figure-10.csv" "$deg/figure-10/"
"$py" - "$res" "$deg" <<'EOF'
import csv, sys
res, deg = sys.argv[1], sys.argv[2]
def rewrite(src, dst, drop=(), keep=lambda r: True):
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    cols = [c for c in rows[0] if c not in drop]
    with open(dst, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(r for r in rows if keep(r))
# figure-10: only alloc rows, and no p99/io/knobs/free columns
rewrite(f"{res}/figure-10/figure-10.csv", f"{deg}/figure-10/figure-10.csv",
        drop=("lat_us_p99", "io", "knobs", "free_lat_us_mean", "variant"),
        keep=lambda r: r["op"] == "alloc")
# offload-qps: one size, no p99, no seed column
rewrite(f"{res}/offload-qps/offload-qps.csv", f"{deg}/offload-qps/offload-qps.csv",
        drop=("lat_us_p99", "seed", "threads"), keep=lambda r: r["size_bytes"] == "4096")
# primitives: mr_reg only, no free_lat columns
rewrite(f"{res}/primitives/primitives.csv", f"{deg}/primitives/primitives.csv",
        drop=("free_lat_us_mean", "free_lat_us_p99", "lat_us_p99"),
        keep=lambda r: r["op"] == "mr_reg")
# figure-6: one workload, 1 KB only, no dealloc_rate/mn_cpu_peak/alloc_bytes/seed
# columns (granularity from the knobs), no RPC-MW(type-1) series, no compare.csv
rewrite(f"{res}/figure-6/figure-6.csv", f"{deg}/figure-6/figure-6.csv",
        drop=("dealloc_rate", "mn_cpu_peak", "alloc_bytes", "seed"),
        keep=lambda r: r["workload"] == "fillsync" and r["value_bytes"] == "1024"
        and r["seed"] == "1" and not r["variant"].startswith("type1"))
# figure-7: no threads_total (threads x cns), no p99, no variant column, no
# unlimited series
rewrite(f"{res}/figure-7/figure-7.csv", f"{deg}/figure-7/figure-7.csv",
        drop=("threads_total", "lat_us_p99", "variant"),
        keep=lambda r: r["mn_cores"] != "unlimited")
EOF
cp "$res/figure-7/compare.csv" "$deg/figure-7/"
cp "$res/offload-qps/compare.csv" "$deg/offload-qps/"   # compare but no meta.json
printf 'figure,label\n' >"$deg/primitives/compare.csv"  # a compare.csv with no rows
for n in figure-10 offload-qps primitives figure-6 figure-7; do
  run "$n.py on degraded input" "$py" "$plots/$n.py" --results "$deg/$n"
  grep -q "warning" "$tmp/err.log" || fail "$n.py: no warning on degraded input"
  grep -q "Traceback" "$tmp/err.log" && fail "$n.py: a Python traceback on degraded input"
  nonempty "$deg/$n/$n.png" "$deg/$n/$n.pdf"
done
mkdir -p "$deg/empty-experiment"                        # ignored by the README
run "results_readme.py on degraded input" "$py" "$plots/results_readme.py" --results "$deg"
nonempty "$deg/README.md"
grep -qF "No compare.csv" "$deg/README.md" || fail "README.md: missing compare.csv not reported"
grep -qF "meta.json: missing" "$deg/README.md" || fail "README.md: missing meta.json not reported"

# Errors: clear message, non-zero exit, no traceback.
expect_error "figure-10.py, no CSV" \
  "figure-10.csv not found: run \`make figure-10\` first" \
  "$py" "$plots/figure-10.py" --results "$tmp/nowhere/figure-10"
expect_error "offload-qps.py, no CSV" \
  "offload-qps.csv not found: run \`make offload-qps\` first" \
  "$py" "$plots/offload-qps.py" --results "$tmp/nowhere/offload-qps"
expect_error "primitives.py, no CSV" \
  "primitives.csv not found: run \`make primitives\` first" \
  "$py" "$plots/primitives.py" --results "$tmp/nowhere/primitives"
expect_error "figure-6.py, no CSV" \
  "figure-6.csv not found: run \`make figure-6\` first" \
  "$py" "$plots/figure-6.py" --results "$tmp/nowhere/figure-6"
expect_error "figure-7.py, no CSV" \
  "figure-7.csv not found: run \`make figure-7\` first" \
  "$py" "$plots/figure-7.py" --results "$tmp/nowhere/figure-7"
mkdir -p "$tmp/bad/figure-6" "$tmp/bad/figure-7"
printf 'system,op,lat_us_mean\nstatic_mr,kv,3\n' >"$tmp/bad/figure-6/figure-6.csv"
expect_error "figure-6.py, no tput_mops column" "missing column(s) tput_mops" \
  "$py" "$plots/figure-6.py" --results "$tmp/bad/figure-6"
printf 'system,op,tput_mops\n' >"$tmp/bad/figure-7/figure-7.csv"
expect_error "figure-7.py, header only" "has no rows" \
  "$py" "$plots/figure-7.py" --results "$tmp/bad/figure-7"
expect_error "results_readme.py, no results" "not found" \
  "$py" "$plots/results_readme.py" --results "$tmp/nowhere"
mkdir -p "$tmp/bad/figure-10"
printf 'figure,system,op\n' >"$tmp/bad/figure-10/figure-10.csv"
expect_error "figure-10.py, no lat_us_mean column" "missing column(s) lat_us_mean" \
  "$py" "$plots/figure-10.py" --results "$tmp/bad/figure-10"
printf 'figure,system,op,lat_us_mean\n' >"$tmp/bad/figure-10/figure-10.csv"
expect_error "figure-10.py, header only" "has no rows" \
  "$py" "$plots/figure-10.py" --results "$tmp/bad/figure-10"
mkdir -p "$tmp/bad/offload-qps"
printf 'op,lat_us_mean\naccess,3\n' >"$tmp/bad/offload-qps/offload-qps.csv"
expect_error "offload-qps.py, no offload_read rows" "no offload_read rows" \
  "$py" "$plots/offload-qps.py" --results "$tmp/bad/offload-qps"
expect_error "figure-10.py, bad option" "usage" \
  "$py" "$plots/figure-10.py" --no-such-option

# style.py: stable keys, labels, colours, fallbacks.
run "style.py contract" "$py" - <<EOF
import sys
sys.path.insert(0, "$plots")
import style as S
k = S.series_key("onesided_mw", "sep")
assert k == "onesided_mw/sep", k
assert S.series_key("static_mr", "") == "static_mr"
assert S.series_key("static_mr", float("nan")) == "static_mr"
want = {("static_mr", ""): "Static-MR", ("fine_mr", ""): "Fine-MR",
        ("fine_mr", "1MB"): "Fine-MR(1 MB)", ("rpc_mw", "type1"): "RPC-MW(type-1)",
        ("rpc_mw", "type-2"): "RPC-MW(type-2)", ("finemem", ""): "FineMem",
        ("odrp", ""): "ODRP", ("onesided_mw", "nosep"): "OneSidedMW",
        ("onesided_mw", "sep"): "OneSidedMW(+Sep)"}
for (s, v), lab in want.items():
    assert S.label(S.series_key(s, v)) == lab, (s, v, S.label(S.series_key(s, v)))
keys = [S.series_key(s, v) for s, v in want]
assert len({S.color(k) for k in keys if k != "rpc_mw/type-2"}) >= 8, "colours not distinct"
assert S.color("rpc_mw/type2") == S.color("rpc_mw/type-2") == S.color("rpc_mw/TYPE_2")
for k in ("newsys", "newsys/v1", "odrp/weird"):
    assert S.color(k) == S.color(k) and S.marker(k) == S.marker(k) and S.label(k)
assert S.color("odrp/weird") != S.color("odrp")
assert S.sort_keys(["onesided_mw/sep", "zzz", "static_mr", "onesided_mw/nosep",
                    "rpc_mw/type2", "rpc_mw/type1"]) == \
    ["static_mr", "rpc_mw/type1", "rpc_mw/type2", "onesided_mw/nosep", "onesided_mw/sep", "zzz"]
EOF

if [ "$fails" -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all plot checks passed"
