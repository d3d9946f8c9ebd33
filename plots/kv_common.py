"""Shared by the key-value store figures (figure-6, figure-7): reading a
store run's CSV (op=kv rows) into normalised key columns and float metrics,
one row per point with the seeds' spread, approach keys without the
allocation size, and the seeds' error bars.

A store row is a common.KEY_COLS point plus KV_KEYS (workload, value and
allocation sizes, total CN threads); its metrics are common.METRICS plus
KV_METRICS (see `dmb_micro --help`, bench kv).
"""

import math
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pandas as pd  # noqa: E402

import common as C  # noqa: E402
import style as S  # noqa: E402

# Extra point keys of the key-value store rows (besides common.KEY_COLS).
KV_KEYS = ["workload", "value_bytes", "kv_size", "alloc_bytes", "threads_total"]
KV_METRICS = ["tput_mops", "lat_us_p99", "lat_us_p50", "lat_us_mean", "dealloc_rate",
              "mn_cpu_peak", "mn_cpu_mean"]

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)i?B$", re.IGNORECASE)


def parse_size(s):
    """'2KB' -> 2048.0, '512B' -> 512.0, '4096' -> 4096.0; NaN if not a size."""
    s = str(s).strip()
    m = _SIZE.match(s)
    if m:
        return float(m.group(1)) * 1024 ** " KMGT".index((m.group(2) or " ").upper())
    return C.to_float(s)


def snap_pow2(v):
    """The runner prints metrics with 6 significant digits (16 MB = 1.67772e+07):
    a value within 0.01% of a power of two is that power of two."""
    if not (v == v) or v <= 0:
        return v
    p = 2.0 ** round(math.log2(v))
    return p if abs(v - p) / p < 1e-4 else v


def knob(knobs, name):
    for kv in re.split(r"[;,]", knobs or ""):
        k, _, v = kv.partition("=")
        if k.strip() == name:
            return v.strip()
    return ""


def load_kv(results_dir, name, required=("system", "tput_mops")):
    """NAME.csv's op=kv rows: key columns as normalised strings (alloc_bytes
    and threads_total too, so they can group points), metrics as floats.
    Missing optional columns give a warning and are filled with ''/NaN."""
    path = os.path.join(results_dir, f"{name}.csv")
    if not os.path.isfile(path):
        raise C.PlotError(f"{C.display_path(path)} not found: run `make {name}` first")
    try:
        df = C.read_text_csv(path)
    except pd.errors.EmptyDataError:
        raise C.PlotError(f"{C.display_path(path)} is empty: run `make {name}` again")
    except Exception as e:  # a torn or foreign file
        raise C.PlotError(f"{C.display_path(path)}: cannot read it as CSV ({e})")
    df.columns = [c.strip() for c in df.columns]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise C.PlotError(f"{C.display_path(path)}: missing column(s) {', '.join(missing)} "
                          f"(has: {', '.join(df.columns)})")
    if df.empty:
        raise C.PlotError(f"{C.display_path(path)} has no rows: no point finished; "
                          f"see results/{name}/logs/ and run `make {name}` again")
    optional = ["variant", "op", "workload", "value_bytes", "alloc_bytes", "threads", "cns",
                "threads_total", "mn_cores", "seed", "lat_us_p99", "dealloc_rate",
                "mn_cpu_peak"]
    absent = [c for c in optional if c not in df.columns]
    if absent:
        C.warn(f"{name}: {C.display_path(path)} lacks column(s) {', '.join(absent)}")
    for c in C.KEY_COLS + ["seed", "workload", "value_bytes", "kv_size"]:
        if c not in df.columns:
            df[c] = ""
        df[c] = df[c].astype(str).str.strip()
    for c in C.NUMERIC_KEYS + ["value_bytes"]:
        df[c] = df[c].map(C.norm_num)
    for c in ("system", "op", "io", "workload", "mn_cores", "kv_size"):
        df[c] = df[c].str.lower()
    # kv_size says what value_bytes sizes: the whole KV block (the paper's
    # panels) or the value alone. The panels draw one reading, the block's;
    # the other's points are in the CSV and compare.csv.
    if (df["kv_size"] == "block").any() and (df["kv_size"] != "block").any():
        other = sorted(set(df["kv_size"]) - {"block"})
        print(f"{name}: the panels draw kv_size=block; {int((df['kv_size'] != 'block').sum())} "
              f"row(s) with kv_size={', '.join(other) or '(empty)'} are left to the CSV")
        df = df[df["kv_size"] == "block"].copy()
    for c in C.METRICS + KV_METRICS + ["alloc_bytes", "threads_total"]:
        if c not in df.columns:
            df[c] = math.nan
        df[c] = pd.to_numeric(df[c].replace("", math.nan), errors="coerce")
    ops = set(df["op"]) - {""}
    if ops - {"kv"}:
        if "kv" not in ops:
            raise C.PlotError(f"{C.display_path(path)} has no op=kv rows (op: "
                              f"{', '.join(sorted(ops))}): nothing to draw")
        C.warn(f"{name}: leaving out rows with op {', '.join(sorted(ops - {'kv'}))}")
        df = df[df["op"].isin(["kv", ""])].copy()
    df["op"] = "kv"
    # Allocation granularity: the column, else the knob or the variant's size.
    alloc = df["alloc_bytes"].map(snap_pow2)
    lack = alloc.isna()
    if lack.any():
        guess = [parse_size(knob(k, "granularity")) for k in df.loc[lack, "knobs"]]
        guess = [g if g == g else next((parse_size(t) for t in re.split(r"[-_,;\s/]+", v)
                                        if parse_size(t) == parse_size(t)), math.nan)
                 for g, v in zip(guess, df.loc[lack, "variant"])]
        alloc.loc[lack] = guess
        C.warn(f"{name}: alloc_bytes empty in {int(lack.sum())} row(s); taken from the "
               f"granularity knob or the variant's size where there is one")
    df["alloc_bytes"] = alloc.map(C.norm_num)
    tt = df["threads_total"]
    lack = tt.isna()
    if lack.any():
        th = df["threads"].map(C.to_float)
        cn = df["cns"].map(C.to_float).fillna(1.0)
        tt = tt.where(~lack, th * cn)
        C.warn(f"{name}: threads_total empty in {int(lack.sum())} row(s); using threads x cns")
    df["threads_total"] = tt.map(C.norm_num)
    df.attrs["path"] = path
    return df


def aggregate_kv(df):
    """One row per point (seeds averaged): every metric M as M, M_min, M_max;
    n_seeds. Keeps every key column (common.paper_points matches on them)."""
    keys = C.KEY_COLS + KV_KEYS
    metrics = list(dict.fromkeys(C.METRICS + KV_METRICS))
    g = df.groupby(keys, sort=False, dropna=False)
    mean = g[metrics].mean()
    mn = g[metrics].min().add_suffix("_min")
    mx = g[metrics].max().add_suffix("_max")
    n = g["seed"].nunique().clip(lower=1).rename("n_seeds")
    return pd.concat([mean, mn, mx, n], axis=1).reset_index()


def approach_key(system, variant, knobs="", mw_type=""):
    """The series key of an approach with the allocation size taken out of the
    variant: rpc_mw 'type1-2KB' -> 'rpc_mw/type1', onesided_mw '4KB' ->
    'onesided_mw', onesided_mw '4KB-aq4' -> 'onesided_mw/aq4'. An rpc_mw
    variant without its MW type gets it from mw_type or the mw_type knob."""
    toks = [t for t in re.split(r"[-_,;\s/]+", variant or "") if t]
    rest = [t for t in toks if parse_size(t) != parse_size(t)]
    if system == "rpc_mw" and not any(re.fullmatch(r"type-?\d", t, re.I) for t in rest):
        t = mw_type or knob(knobs, "mw_type")
        if t:
            rest = [f"type{t}"] + rest
    return S.series_key(system, "-".join(rest))


def seed_bars(ax, xs, ys, lo, hi, col, scale):
    lo, hi = [v * scale for v in lo], [v * scale for v in hi]
    pts = [(x, y, a, b) for x, y, a, b in zip(xs, ys, lo, hi)
           if y == y and a == a and b == b and b > a]
    if pts:
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts],
                    yerr=[[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]],
                    fmt="none", ecolor=col, elinewidth=0.7, capsize=1.5, zorder=4)
