#!/usr/bin/env python3
"""How the swap figures' ratios move with the scale knob: 8 Kmeans tasks on
one CN (50% local) at three scales, one line per approach. (a) mean execution
time over Static-MR's at the same scale, (b) MN memory utilization, (c) major
faults per working-set page (the trace's shape, the same for every approach
if the scale kept it). The shaded band in (a): +-5% around each approach's
ratio at figure 2's scale (1/512), the issue's tolerance for a 4x change.
Reads results/scale-invariance/scale-invariance.csv; writes
scale-invariance.png/.pdf.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402
import swap_common as W  # noqa: E402

NAME = "scale-invariance"
REF_SCALE = 1 / 512  # figures 2 and 9


def with_ratios(rows):
    """Adds x (the scale), t_ratio (time over Static-MR's at that scale) and
    faults_per_page; raises when a scale has no Static-MR row."""
    rows = rows.copy()
    rows["x"] = rows["scale"].map(C.to_float)
    tasks = C.pd.to_numeric(rows["tasks"], errors="coerce")
    rows["faults_per_page"] = rows["major_faults"] / (rows["working_set_pages"] * tasks)
    base = rows[rows["system"] == "static_mr"].set_index("x")["job_s_mean"]
    missing = sorted(set(rows["x"]) - set(base.index))
    if missing:
        raise C.PlotError(f"{NAME}: no Static-MR row at scale(s) {missing} to normalize to")
    rows["t_ratio"] = rows["job_s_mean"] / rows["x"].map(base)
    return rows


def main(argv):
    args = C.parser(NAME, __doc__).parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    rows = with_ratios(W.load(res, NAME))
    S.apply()
    fig, axes = S.plt.subplots(1, 3, figsize=(S.FULL_WIDTH_IN, 2.4))
    panels = [("t_ratio", "time / Static-MR"), ("mem_util", "MN memory utilization"),
              ("faults_per_page", "major faults per WS page")]
    keys = S.sort_keys(list(dict.fromkeys(rows["key"])))
    for ax, (metric, ylabel) in zip(axes, panels):
        W.lines(ax, rows, keys, metric)
        for key in keys:
            g = rows[rows["key"] == key].sort_values("x")
            ref = g[g["x"] == REF_SCALE][metric]
            if metric == "t_ratio" and len(ref):
                y = float(ref.iloc[0])
                ax.fill_between(g["x"], 0.95 * y, 1.05 * y, color=S.color(key), alpha=0.12,
                                linewidth=0, zorder=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(set(rows["x"])))
        ax.set_xticklabels([f"1/{round(1 / x)}" for x in sorted(set(rows["x"]))])
        ax.set_xlabel("scale")
        ax.set_ylabel(ylabel)
        ax.margins(y=0.1)
        ax.set_ylim(0, None)
        ax.grid(linewidth=0.3, zorder=0)
    W.finish(fig, axes, ["(a) time ratio", "(b) utilization", "(c) trace shape"],
             [S.series_handle(k) for k in keys], out, NAME)


if __name__ == "__main__":
    C.run_main(main)
