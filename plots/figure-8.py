#!/usr/bin/env python3
"""OneSidedMW (NSDI'26) Figure 8: Kmeans, Memcached-ETC, PageRank and BC on 6
CNs (one task each) at 50% (plain bars) and 25% (hatched) local memory:
execution time normalized to 100% local memory (top), peak MN CPU (middle),
MN memory utilization (bottom), one column per application.

In the top row a bar more than 2.5x the panel's median (ODRP's times) is cut
at that height, marked with a white break and its value written above it.
Hollow diamonds / triangles: the paper's stated values and ratios (applied to
our value for the approach it is relative to, at the same point) where it
states one for that bar.
Reads results/figure-8/figure-8.csv and compare.csv; writes figure-8.png/.pdf.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402
import swap_common as W  # noqa: E402

NAME = "figure-8"
APPS = ["kmeans-32g", "memcached", "pagerank", "bc"]
APP_LABEL = {"kmeans-32g": "Kmeans", "memcached": "Memcached-ETC", "pagerank": "PageRank",
             "bc": "BC"}
LOCALS = ["0.5", "0.25"]
PANELS = [("job_s_mean", "time / 100% local"), ("mn_cpu_peak", "peak MN CPU (cores)"),
          ("mem_util", "MN memory utilization")]


def draw_app(ax, rows, marks, app, metric, local_time, cut=False, ticklabels=True):
    """One panel: a pair of bars (50%, 25% local) per approach. cut: bars more
    than 2.5x the median are cut at that height with their value written
    (ODRP's times would flatten every other bar)."""
    sub = rows[(rows["app"] == app) & (rows["variant"] != "local")]
    keys = S.sort_keys(list(dict.fromkeys(sub["key"])))
    w = 0.38
    div = local_time if metric == "job_s_mean" else 1.0
    drawn = []  # (x, value, key, j, paper mark, paper y)
    for i, key in enumerate(keys):
        for j, loc in enumerate(LOCALS):
            g = sub[(sub["key"] == key) & (sub["local"].map(C.norm_num) == C.norm_num(loc))]
            if g.empty:
                continue
            r = g.iloc[0]
            # the compare row that names this bar (an empty variant, ODRP's,
            # matches any); a ratio times our value for what it is relative to
            m = W.find_mark(marks, r, metric)
            drawn.append((i + (j - 0.5) * w, r[metric] / div, key, j, m,
                          W.mark_y(m, sub, r, metric, div)))
    cap = W.out_of_scale_cap([d[1] for d in drawn], 2.5) if cut else None
    for x, v, key, j, m, y in drawn:
        shown = min(v, cap) if cap else v
        ax.bar(x, shown, width=w, color=S.color(key), edgecolor="black", linewidth=0.4,
               hatch="////" if j else "", zorder=3)
        if shown < v:
            W.draw_cut(ax, x, w, cap, v, rotation=90)
        if y is not None:
            S.draw_paper(ax, x, min(y, cap) if cap else y, relative=m["relative"], size=4)
    if cap:
        ax.set_ylim(0, cap * 1.22)
    ax.set_xticks(range(len(keys)))
    if ticklabels:
        ax.set_xticklabels([S.label(k) for k in keys], rotation=55, ha="right",
                           rotation_mode="anchor", fontsize=6.5)
    else:
        ax.set_xticklabels([])
    ax.grid(axis="y", linewidth=0.3, zorder=0)
    return keys


def main(argv):
    args = C.parser(NAME, __doc__).parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    rows = W.load(res, NAME)
    marks = W.paper_marks(res)
    S.apply()
    apps = [a for a in APPS if (rows["app"] == a).any()]
    if not apps:
        raise C.PlotError(f"{NAME}: no rows for {', '.join(APPS)}")
    fig, axes = S.plt.subplots(3, len(apps), figsize=(S.FULL_WIDTH_IN, 5.6), squeeze=False)
    for c, app in enumerate(apps):
        local = rows[(rows["app"] == app) & (rows["variant"] == "local")]["job_s_mean"]
        if local.empty:
            C.warn(f"{NAME}: {app} has no 100%-local run; time is not normalized")
        lt = float(local.iloc[0]) if len(local) else 1.0
        for r, (metric, ylabel) in enumerate(PANELS):
            # the same approaches in every row: their names under the last one
            draw_app(axes[r][c], rows, marks, app, metric, lt, cut=(r == 0),
                     ticklabels=(r == len(PANELS) - 1))
            if c == 0:
                axes[r][c].set_ylabel(ylabel, fontsize=7)
        axes[0][c].set_title(APP_LABEL.get(app, app), fontsize=8)
    from matplotlib.patches import Patch
    handles = [Patch(facecolor="white", edgecolor="black", label="50% local"),
               Patch(facecolor="white", edgecolor="black", hatch="////", label="25% local")]
    fig.legend(handles=handles + S.paper_handles(True, True), loc="upper center", ncol=4,
               fontsize=6, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    for p in S.savefig(fig, os.path.join(out, NAME)):
        print(C.display_path(p))


if __name__ == "__main__":
    C.run_main(main)
