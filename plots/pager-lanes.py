#!/usr/bin/env python3
"""Pager lane depth (apps/swap/lane_slots.h): 8 Kmeans tasks on one CN at 50%
local memory, each pager lane (one RC QP) carrying 1 or 16 4 KB I/Os at a
time. (a) mean execution time over Static-MR's at the same depth, (b) mean
(bar) and p99 (dash) synchronous swap-in latency; per approach, depth 1 and
depth 16 side by side (first solid, then hatched).

Reads results/pager-lanes/pager-lanes.csv; writes pager-lanes.png/.pdf.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402
import swap_common as W  # noqa: E402

NAME = "pager-lanes"
# The spec's two OneSidedMW variants by what they configure.
LABEL = {"static_mr/1GB": "Static-MR", "rpc_mw/type2-1MB": "RPC-MW\n(type-2)",
         "onesided_mw/1MB": "OneSidedMW\n(+Grouping+Sep)",
         "onesided_mw/none": "OneSidedMW\n(neither)"}
WIDTH = 0.8


def with_ratios(rows):
    """Adds depth (lane_depth as a number) and t_ratio (time over Static-MR's
    at the same depth); raises when a depth has no Static-MR row."""
    rows = rows.copy()
    rows["depth"] = C.pd.to_numeric(rows["lane_depth"], errors="coerce")
    if rows["depth"].isna().any():
        raise C.PlotError(f"{NAME}: rows without a lane_depth (a CSV from before the "
                          "lane_depth column? run `make pager-lanes` again)")
    rows["depth"] = rows["depth"].astype(int)
    base = rows[rows["system"] == "static_mr"].groupby("depth")["job_s_mean"].first()
    missing = sorted(set(rows["depth"]) - set(base.index))
    if missing:
        raise C.PlotError(f"{NAME}: no Static-MR row at lane depth(s) {missing} to normalize to")
    rows["t_ratio"] = rows["job_s_mean"] / rows["depth"].map(base)
    return rows


def grouped(ax, rows, keys, depths, metric, ylabel, fmt, p99=None):
    """Per approach (x) one bar per depth; the value on top, p99 as a dash."""
    n = len(depths)
    w = WIDTH / n
    top = 0.0
    drawn = []  # (x, value, p99 or None)
    for x, key in enumerate(keys):
        for i, d in enumerate(depths):
            r = rows[(rows["key"] == key) & (rows["depth"] == d)]
            if r.empty or r[metric].iloc[0] != r[metric].iloc[0]:
                continue
            v = float(r[metric].iloc[0])
            xi = x - WIDTH / 2 + w * (i + 0.5)
            ax.bar(xi, v, width=w, zorder=3, **S.bar_style(key, i))
            q = None
            if p99 and r[p99].iloc[0] == r[p99].iloc[0]:
                q = float(r[p99].iloc[0])
                ax.plot([xi], [q], linestyle="none", marker="_", markersize=7,
                        markeredgewidth=1.1, color=S.P99_COLOR, zorder=4)
            drawn.append((xi, v, q))
            top = max(top, v, q or 0.0)
    for xi, v, q in drawn:
        # A p99 dash just above the bar would cover the value: write it above the dash.
        over = q is not None and v <= q <= v + 0.12 * top
        ax.annotate(fmt.format(v), (xi, q if over else v), xytext=(0, 1 if over else 0),
                    textcoords="offset points", ha="center", va="bottom", fontsize=5.5, zorder=7)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([LABEL.get(k, S.label(k)) for k in keys], fontsize=6)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1)
    ax.grid(axis="y", linewidth=0.3, zorder=0)


def main(argv):
    args = C.parser(NAME, __doc__).parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    rows = with_ratios(W.load(res, NAME))
    S.apply()
    keys = S.sort_keys(list(dict.fromkeys(rows["key"])))
    depths = sorted(set(rows["depth"]))
    fig, axes = S.plt.subplots(1, 2, figsize=(S.FULL_WIDTH_IN, 2.4))
    grouped(axes[0], rows, keys, depths, "t_ratio", "time / Static-MR (same depth)", "{:.2f}")
    axes[0].axhline(1.0, color="black", linewidth=0.5, zorder=2)
    grouped(axes[1], rows, keys, depths, "sync_lat_us_mean", "sync swap-in latency (\u00b5s)",
            "{:.1f}", p99="sync_lat_us_p99")
    W.finish(fig, axes, ["(a) end to end", "(b) sync swap-in"],
             S.dim_handles(depths, fmt="lane depth {} (I/Os in flight)") + [S.p99_handle()],
             out, NAME)


if __name__ == "__main__":
    C.run_main(main)
