"""Reading what `dmbench run` leaves in results/NAME/ (shared by the plot scripts).

    NAME.csv     one row per point (and seed): the contract's columns, read by name
    compare.csv  the paper's stated values beside ours (optional for plots)
    meta.json    provenance (optional for plots)

Everything is read as text first so that a missing or empty optional column
never breaks a figure: key columns are normalised strings ("24", "4096", ""),
metric columns floats (NaN when empty). Seeds are averaged by aggregate(),
which also keeps their min and max.
"""

import argparse
import json
import math
import os
import re
import sys

import pandas as pd

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Columns that identify a point (all but `seed`), and the metrics.
KEY_COLS = ["figure", "system", "variant", "op", "io", "threads", "cns", "mn_cores",
            "size_bytes", "offload_qps", "mw_type", "page_bytes", "profile", "knobs"]
NUMERIC_KEYS = ["threads", "cns", "mn_cores", "seed", "size_bytes", "offload_qps", "mw_type",
                "page_bytes"]
METRICS = ["lat_us_p50", "lat_us_p99", "lat_us_mean", "free_lat_us_p50", "free_lat_us_p99",
           "free_lat_us_mean", "rebind_lat_us_mean", "mops", "kops", "free_kops",
           "mn_cpu_busy_frac", "count",
           "failures", "virtual_s", "tput_mops",
           # Not in the contract yet; used when present (the micro program reports
           # them for mr_reg and mw_bind): MR deregistration, type-2 MW LOCAL_INV.
           "dereg_lat_us_mean", "invalidate_lat_us_mean"]
# Without these a results CSV cannot be plotted at all.
REQUIRED_COLS = ["op", "lat_us_mean"]

COMPARE_COLS = ["figure", "label", "system", "variant", "op", "threads", "param", "param_value",
                "metric", "paper", "ours", "ratio", "verdict", "where", "note"]


class PlotError(Exception):
    """A problem the user must fix; main() prints it and exits 1."""


def warn(msg):
    print(f"warning: {msg}", file=sys.stderr)


def display_path(p):
    """p relative to the working directory when below it (for messages)."""
    p = os.path.abspath(p)
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return p
    return p if rel.startswith("..") else rel


def write_text(path, text):
    """Writes text to path through a temporary file renamed into place (a
    reader never sees half a file), and says so."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    print(f"wrote {display_path(path)}")


def norm_num(v):
    """'24.0' -> '24', '4096' -> '4096', '' -> '', 'unlimited' -> 'unlimited'."""
    s = "" if v is None else str(v).strip()
    if s.lower() == "nan":
        return ""
    try:
        f = float(s)
    except ValueError:
        return s
    if math.isfinite(f) and f == int(f):
        return str(int(f))
    return repr(f)


def to_float(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


def num_sort_key(v):
    """Sorts '1' < '24' < '' < 'unlimited' (numbers first, numerically)."""
    f = to_float(v)
    return (0, f, "") if f == f else (1, 0.0, str(v))


def fmt_size(b):
    """4096 -> '4 KB', 1073741824 -> '1 GB' (binary units, as the papers write)."""
    b = to_float(b)
    if b != b:
        return "?"
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if b >= scale:
            v = b / scale
            return f"{v:g} {unit}" if v == int(v) or v >= 10 else f"{v:.1f} {unit}"
    return f"{b:g} B"


def parser(name, description, default_subdir=None):
    """argparse with --results DIR and --out DIR (defaults: results/NAME)."""
    sub = default_subdir or name
    p = argparse.ArgumentParser(
        prog=f"{name}.py" if not name.endswith(".py") else name,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", metavar="DIR", default=os.path.join("results", sub),
                   help=f"directory holding {sub}.csv, compare.csv and meta.json "
                        f"(default: results/{sub}, from the repository root)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where to write the PNG and PDF (default: the --results directory)")
    return p


def resolve_dirs(args, name):
    """--results default is relative to the repository root when the working
    directory does not hold it (so the scripts run from anywhere)."""
    res = args.results
    if not os.path.isabs(res) and not os.path.exists(res) and \
            res == os.path.join("results", name):
        alt = os.path.join(REPO_ROOT, res)
        if os.path.exists(alt):
            res = alt
    out = args.out or res
    return res, out


def read_text_csv(path):
    return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[],
                       skipinitialspace=True)


def load_results(results_dir, name):
    """The experiment's NAME.csv as a DataFrame with every contract column
    present: keys as normalised strings, metrics as floats."""
    path = os.path.join(results_dir, f"{name}.csv")
    if not os.path.isfile(path):
        raise PlotError(f"{display_path(path)} not found: run `make {name}` first")
    try:
        df = read_text_csv(path)
    except pd.errors.EmptyDataError:
        raise PlotError(f"{display_path(path)} is empty: run `make {name}` again")
    except Exception as e:  # a torn or foreign file
        raise PlotError(f"{display_path(path)}: cannot read it as CSV ({e})")
    df.columns = [c.strip() for c in df.columns]
    missing = [c for c in REQUIRED_COLS if c not in df.columns]
    if missing:
        raise PlotError(f"{display_path(path)}: missing column(s) {', '.join(missing)} "
                        f"(has: {', '.join(df.columns)})")
    if df.empty:
        raise PlotError(f"{display_path(path)} has no rows: no point finished; "
                        f"see results/{name}/logs/ and run `make {name}` again")
    for c in KEY_COLS + ["seed"]:
        if c not in df.columns:
            df[c] = ""
        df[c] = df[c].astype(str).str.strip()
    for c in NUMERIC_KEYS:
        df[c] = df[c].map(norm_num)
    for c in ("system", "op", "io"):
        df[c] = df[c].str.lower()
    for c in METRICS:
        if c not in df.columns:
            df[c] = math.nan
        df[c] = pd.to_numeric(df[c].replace("", math.nan), errors="coerce")
    df.attrs["path"] = path
    return df


def split_skipped(df):
    """(rows that ran, notes for the rows a device could not run). A cluster
    run (ansible/figure.yml backend=ibv) records an approach the RDMA device
    cannot run as a row whose `skipped` column names what it lacks; the plots
    draw no bar for it and say so under the figure (note_skipped)."""
    if "skipped" not in df.columns:
        return df, []
    gone = df[df["skipped"].astype(str).str.strip() != ""]
    notes = []
    for _, r in gone.iterrows():
        who = r["system"] + (f" {r['variant']}" if r.get("variant", "") else "")
        note = f"{who} {r['op']}: {r['skipped'].strip()}"
        if note not in notes:
            notes.append(note)
    kept = df[df["skipped"].astype(str).str.strip() == ""].copy()
    kept.attrs = df.attrs
    return kept, notes


def note_skipped(fig, notes):
    """Names the skipped approaches at the bottom of `fig` (and on stderr)."""
    if not notes:
        return
    text = "Not run on this backend: " + "; ".join(notes)
    warn(text)
    fig.text(0.01, 0.005, text, fontsize=5.5, ha="left", va="bottom", wrap=True)


def load_compare(results_dir):
    """compare.csv (optional): DataFrame with every column; paper/ours/ratio as
    floats. Empty DataFrame (and a warning) when absent."""
    path = os.path.join(results_dir, "compare.csv")
    if not os.path.isfile(path):
        warn(f"{display_path(path)} not found: the paper's values are not marked")
        return pd.DataFrame(columns=COMPARE_COLS)
    try:
        df = read_text_csv(path)
    except pd.errors.EmptyDataError:
        warn(f"{display_path(path)} is empty")
        return pd.DataFrame(columns=COMPARE_COLS)
    except Exception as e:
        warn(f"{display_path(path)}: cannot read it ({e}); the paper's values are not marked")
        return pd.DataFrame(columns=COMPARE_COLS)
    df.columns = [c.strip() for c in df.columns]
    for c in COMPARE_COLS:
        if c not in df.columns:
            df[c] = ""
        df[c] = df[c].astype(str).str.strip()
    df["threads"] = df["threads"].map(norm_num)
    df["param_value"] = df["param_value"].map(
        lambda v: ";".join(norm_num(x) for x in v.split(";")))
    for c in ("system", "op", "param", "metric", "verdict"):
        df[c] = df[c].str.lower()
    for c in ("paper", "ours", "ratio"):
        df[c] = pd.to_numeric(df[c].replace("", math.nan), errors="coerce")
    df.attrs["path"] = path
    return df


def load_meta(results_dir):
    path = os.path.join(results_dir, "meta.json")
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
        return m if isinstance(m, dict) else None
    except (OSError, ValueError) as e:
        warn(f"{display_path(path)}: cannot read it ({e})")
        return None


def aggregate(df):
    """One row per point (seeds averaged). For every metric M: M (mean over
    seeds), M_min, M_max; n_seeds = number of seed rows averaged."""
    if df.empty:
        out = df[KEY_COLS].copy()
        for m in METRICS:
            out[m] = out[m + "_min"] = out[m + "_max"] = []
        out["n_seeds"] = []
        return out
    g = df.groupby(KEY_COLS, sort=False, dropna=False)
    mean = g[METRICS].mean()
    mn = g[METRICS].min().add_suffix("_min")
    mx = g[METRICS].max().add_suffix("_max")
    rows = g.size()
    seeds = g["seed"].nunique()
    dup = rows[rows > seeds.clip(lower=1)]
    if len(dup):
        first = dict(zip(KEY_COLS, dup.index[0]))
        what = ", ".join(f"{k}={v}" for k, v in first.items() if v != "")
        warn(f"{len(dup)} point(s) have several rows for one seed (e.g. {what}); averaged "
             f"(do the rows differ in a column the CSV lacks, e.g. variant or knobs?)")
    n = seeds.clip(lower=1).rename("n_seeds")
    out = pd.concat([mean, mn, mx, n], axis=1).reset_index()
    return out


def varying(df, cols):
    """The columns of cols whose values differ between rows of df."""
    return [c for c in cols if c in df.columns and df[c].nunique(dropna=False) > 1]


def pick_one(df, col, prefer, what):
    """Restricts df to one value of col (prefer if present, else the smallest
    numerically) and warns when several were present."""
    vals = sorted(df[col].unique(), key=num_sort_key)
    if len(vals) <= 1:
        return df
    chosen = prefer if prefer in vals else vals[0]
    warn(f"{what}: several {col} values ({', '.join(vals)}); plotting {col}={chosen}")
    return df[df[col] == chosen]


# ---------------------------------------------------------------- paper values

_REL = re.compile(r"relative to\s+(.*)$", re.IGNORECASE)


def relative_to(note):
    """'relative to system=static_mr' -> {'system': 'static_mr'}; {} if absolute."""
    m = _REL.search(note or "")
    if not m:
        return {}
    out = {}
    for tok in m.group(1).replace(",", " ").split():
        k, eq, v = tok.partition("=")
        if eq:
            out[k.strip().lower()] = norm_num(v.strip()) if k in NUMERIC_KEYS else v.strip()
    return out


def _row_matches(row, crow):
    for k in ("system", "variant", "op", "threads"):
        want = crow.get(k, "")
        if want and str(row.get(k, "")) != want:
            return False
    for param, pv in params_of(crow):
        if param == "size":
            param = "size_bytes"
        if param not in row.index:
            return False
        have = row[param]
        if param in NUMERIC_KEYS:
            have, pv = norm_num(have), norm_num(pv)
        if str(have) != str(pv):
            return False
    return True


def params_of(crow):
    """[(param, value)] of a compare row. One pair per the contract; several
    when the runner writes them ';'-separated ("offload_qps;size_bytes",
    "96;4096")."""
    ps = [p.strip() for p in str(crow.get("param", "")).split(";")]
    vs = [v.strip() for v in str(crow.get("param_value", "")).split(";")]
    if len(vs) != len(ps):
        vs = [str(crow.get("param_value", "")).strip()] + [""] * (len(ps) - 1)
    return [(p, v) for p, v in zip(ps, vs) if p]


def _base_value(agg, target, rel, metric, named=()):
    """Our value of metric at the point target with rel's keys changed.
    named: the keys the compare row matches on besides system and variant."""
    want = {c: target[c] for c in ["system", "variant", "op", "io", "threads", "cns",
                                   "mn_cores", "size_bytes", "offload_qps", "mw_type",
                                   "page_bytes", "knobs"] if c in target}
    if "system" in rel:
        # another approach: its own variant (unless named), knobs and MN cores
        # (figure 7's RPC-MW with unlimited MN cores against OneSidedMW on one)
        if "variant" not in rel:
            want.pop("variant", None)
        want.pop("knobs", None)
        want.pop("mw_type", None)
        if "mn_cores" not in named:
            want.pop("mn_cores", None)
    if "variant" in rel:
        want.pop("knobs", None)
    for k, v in rel.items():
        if k == "size":
            k = "size_bytes"
        want[k] = v
    sel = agg
    for k, v in want.items():
        if k not in sel.columns:
            return math.nan
        sel = sel[sel[k].astype(str) == str(v)]
    vals = sel[metric].dropna() if metric in sel.columns else []
    return float(vals.mean()) if len(vals) else math.nan


def paper_points(compare, agg, ops=None):
    """The paper's values to mark, one per (compare row, our matching point):
    dicts with `crow` (the compare row, a dict), `cidx` (its index in compare),
    `idx` (index into agg), `value`
    (what to draw: the paper's value, or for a relative one the paper's ratio
    times our baseline), `relative` (bool), `metric`.
    A row matching none of our points is skipped (it says "no data" in the
    README anyway)."""
    out = []
    if compare is None or compare.empty or agg.empty:
        return out
    for cidx, c in compare.iterrows():
        crow = {k: ("" if pd.isna(v) else v) for k, v in c.items()}
        if ops is not None and crow.get("op", "") and crow["op"] not in ops:
            continue
        paper = crow.get("paper")
        if paper is None or paper == "" or not math.isfinite(float(paper)):
            continue
        metric = crow.get("metric", "")
        if metric not in agg.columns:
            warn(f"compare.csv: '{crow.get('label', '')}': metric '{metric}' is not a "
                 f"results column; not marked")
            continue
        rel = relative_to(crow.get("note", ""))
        for idx, row in agg.iterrows():
            if ops is not None and row["op"] not in ops:
                continue
            if not _row_matches(row, crow):
                continue
            if rel:
                named = str(crow.get("param") or "").split(";")
                base = _base_value(agg, row, rel, metric, named)
                if not math.isfinite(base):
                    warn(f"compare.csv: '{crow.get('label', '')}': no baseline "
                         f"({', '.join(f'{k}={v}' for k, v in rel.items())}) among our "
                         f"points; not marked")
                    continue
                value = float(paper) * base
            else:
                value = float(paper)
            out.append(dict(crow=crow, cidx=cidx, idx=idx, value=value,
                            relative=bool(rel), metric=metric))
    return out


def run_main(main):
    """Runs main(argv) and turns PlotError into a message and exit status 1."""
    try:
        rc = main(sys.argv[1:])
    except PlotError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    sys.exit(rc or 0)
