"""Shared by the swap figures (figure-2, figure-8, figure-9, ablation): reading a
swap run's CSV and compare.csv, normalising, and bar panels with the paper's
values marked.

A swap row is identified by system, variant, app, tasks, local, scale, cover
and lane_depth (empty where a run did not set it); metrics are job_s_mean,
sync_lat_us_mean / _p99, mem_util and mn_cpu_peak (see `dmb_micro --help`,
bench swap). Paper values come from
compare.csv: a hollow diamond at the stated value, or (for ratios) at the
ratio drawn on the normalised axis.
"""

import math
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402

KEYS = ["system", "variant", "app", "tasks", "local", "scale", "cover", "lane_depth"]
METRICS = ["job_s_mean", "job_s_max", "sync_lat_us_mean", "sync_lat_us_p99", "mem_util",
           "mn_cpu_peak", "mn_cpu_mean", "alloc_lat_us_mean", "segment_allocs", "major_faults",
           "stamp_mismatches", "working_set_pages"]


def load(res, name):
    path = os.path.join(res, f"{name}.csv")
    if not os.path.isfile(path):
        raise C.PlotError(f"{C.display_path(path)} not found: run `make {name}` first")
    df = C.read_text_csv(path)
    df = df[df["op"] == "swap"] if "op" in df.columns else df
    if df.empty:
        raise C.PlotError(f"{C.display_path(path)} has no swap rows: run `make {name}` again")
    for k in KEYS:
        if k not in df.columns:
            df[k] = ""
    for m in METRICS:
        df[m] = C.pd.to_numeric(df[m].replace("", math.nan), errors="coerce") \
            if m in df.columns else math.nan
    bad = df[df["stamp_mismatches"] > 0]
    if len(bad):
        raise C.PlotError(f"{len(bad)} point(s) swapped in corrupted pages; see the logs")
    g = df.groupby(KEYS, sort=False, dropna=False)[METRICS].mean().reset_index()
    g["key"] = [S.series_key(s, v) for s, v in zip(g["system"], g["variant"])]
    return g


def paper_marks(res):
    """compare.csv's rows that state a paper value, as dicts (common's compare
    columns) with `rel`: the point a ratio is relative to ({} if absolute)."""
    cmp = C.load_compare(res)
    out = []
    for _, r in cmp.iterrows():
        if r["paper"] != r["paper"]:
            continue
        m = {k: ("" if isinstance(v, float) and v != v else v) for k, v in r.items()}
        m["rel"] = C.relative_to(r["note"])
        m["relative"] = bool(m["rel"]) or "relative" in r["note"]
        out.append(m)
    return out


def find_mark(marks, row, metric):
    """The first of marks (paper_marks()) for metric that names our row: its
    system, its variant (an empty one, e.g. ODRP's, matches any) and the
    columns its params name (app, local, tasks, ...), as common's matching."""
    row = row.copy()
    row["op"] = "swap"
    for m in marks or []:
        if m["metric"] == metric and C._row_matches(row, m):
            return m
    return None


def ref_value(rows, row, rel, metric):
    """Our metric at row's point (app, tasks, local, ...) for the approach rel
    names (system, and variant unless it leaves it open); NaN if we lack it."""
    sel = rows
    for k in KEYS:
        if k in rel:
            want = rel[k]
        elif k in ("system", "variant"):
            continue
        else:
            want = row[k]
        sel = sel[sel[k].astype(str) == str(want)]
    vals = sel[metric].dropna()
    return float(vals.iloc[0]) if len(vals) else math.nan


def mark_y(m, rows, row, metric, div=1.0):
    """Where the paper's value m goes on an axis that shows metric / div: the
    stated value, or its ratio times our value for the approach the ratio is
    relative to (None when we lack that)."""
    if not m:
        return None
    if not m["relative"]:
        return float(m["paper"]) / div
    if not m["rel"]:
        C.warn(f"compare.csv: '{m['label']}': relative to what is not said; not marked")
        return None
    ref = ref_value(rows, row, m["rel"], metric)
    if ref != ref:
        C.warn(f"compare.csv: '{m['label']}': no baseline "
               f"({', '.join(f'{k}={v}' for k, v in m['rel'].items())}) among our points; "
               f"not marked")
        return None
    return float(m["paper"]) * ref / div


def out_of_scale_cap(vals, factor=4.0):
    """Where to cut bars out of scale: factor x the median of vals when the
    largest is above it, else None (no bar is cut)."""
    finite = sorted(v for v in vals if v == v)
    med = finite[len(finite) // 2] if finite else 0
    return factor * med if med > 0 and finite[-1] > factor * med else None


def draw_cut(ax, x, width, cap, value, fmt="{:.0f}", fontsize=5.5, rotation=0):
    """Marks a bar drawn only up to cap: a white break across it near the
    top and its true value written above it (rotation 90: narrow bars)."""
    for dy in (0.86, 0.9):
        ax.plot([x - width * 0.6, x + width * 0.6], [cap * (dy - 0.02), cap * (dy + 0.02)],
                color="white", linewidth=1.6, solid_capstyle="butt", zorder=4, clip_on=False)
    ax.annotate(fmt.format(value), (x, cap), xytext=(0, 1), textcoords="offset points",
                ha="center", va="bottom", fontsize=fontsize, rotation=rotation, zorder=7)


def bars(ax, rows, metric, ylabel, marks=None, base=None, fmt="{:.2f}"):
    """One bar per row (in order), labelled below; value on top. base: divide
    by it (a normalised panel). marks: paper_marks(); a paper ratio is drawn
    at ratio x our value for the approach it is relative to (mark_y). A bar
    more than 4x the others' median is cut at the top edge, its value written."""
    xs = list(range(len(rows)))
    S.distinguish(rows["key"])  # e.g. Static-MR's three covers: three greys
    vals = [(r[metric] / base if base else r[metric]) for _, r in rows.iterrows()]
    cap = out_of_scale_cap(vals)
    drawn = []  # (x, shown height, value, paper y or None)
    for x, v, (_, r) in zip(xs, vals, rows.iterrows()):
        if v != v:
            continue
        shown = min(v, cap) if cap else v
        ax.bar(x, shown, width=0.7, color=S.color(r["key"]), edgecolor="black",
               linewidth=0.5, zorder=3, hatch="//" if shown < v else "")
        m = find_mark(marks, r, metric)
        y = mark_y(m, rows, r, metric, base or 1.0)
        if y is not None:
            S.draw_paper(ax, x, y, relative=m["relative"])
        drawn.append((x, shown, v, y))
    top = max([d[1] for d in drawn] + [d[3] for d in drawn if d[3] is not None] + [0.0])
    for x, shown, v, y in drawn:
        # A paper marker just above the bar would cover the value: write it
        # above the marker instead.
        over = y is not None and shown <= y <= shown + 0.12 * top
        ax.annotate(fmt.format(v), (x, y if over else shown), xytext=(0, 4 if over else 0),
                    textcoords="offset points", ha="center", va="bottom", fontsize=6, zorder=7)
    ax.set_xticks(xs)
    ax.set_xticklabels([S.label(k) for k in rows["key"]], rotation=35, ha="right", fontsize=6)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, top * 1.18 if top > 0 else 1)
    ax.grid(axis="y", linewidth=0.3, zorder=0)


def legend(fig, any_paper=True):
    if any_paper:
        fig.legend(handles=S.paper_handles(absolute=True, relative=True), loc="upper right",
                   fontsize=6, frameon=False)


def lines(ax, rows, keys, metric, div=1.0):
    """One line per approach in `keys` (rows' key), over rows' column x."""
    for key in keys:
        g = rows[rows["key"] == key].sort_values("x")
        ax.plot(g["x"], g[metric] / div, color=S.color(key), marker=S.marker(key),
                label=S.label(key), zorder=3)


def finish(fig, axes, titles, handles, out, name):
    """Panel titles, one legend row on top, then NAME.png/.pdf in `out`."""
    for ax, t in zip(axes, titles):
        ax.set_title(t, fontsize=8)
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=6,
               frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    for p in S.savefig(fig, os.path.join(out, name)):
        print(C.display_path(p))
