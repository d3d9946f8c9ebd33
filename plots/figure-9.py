#!/usr/bin/env python3
"""OneSidedMW (NSDI'26) Figure 9: 1 to 48 Kmeans tasks on 6 CNs (50% local):
(a) mean execution time normalized to one task on Static-MR, (b) peak MN CPU
(cores busy), (c) MN memory utilization, one line per approach.

Hollow triangles at 48 tasks: the paper's ratios (17.3%, 29.2%, 6.3% over
Static-MR; 1.67x Static-MR's utilization; ODRP 1.323x OneSidedMW's time, ...)
applied to our value for the approach each is relative to.
Reads results/figure-9/figure-9.csv and compare.csv; writes figure-9.png/.pdf.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402
import swap_common as W  # noqa: E402

NAME = "figure-9"


def main(argv):
    args = C.parser(NAME, __doc__).parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    rows = W.load(res, NAME)
    rows["x"] = rows["tasks"].map(C.to_float)
    base = rows[(rows["system"] == "static_mr") & (rows["x"] == rows["x"].min())]
    if base.empty:
        raise C.PlotError(f"{NAME}: no Static-MR row at the fewest tasks to normalize to")
    t0 = float(base["job_s_mean"].iloc[0])
    marks = W.paper_marks(res)
    S.apply()
    fig, axes = S.plt.subplots(1, 3, figsize=(S.FULL_WIDTH_IN, 2.4))
    panels = [("job_s_mean", "time / 1 task Static-MR", t0), ("mn_cpu_peak", "peak MN CPU (cores)",
              1.0), ("mem_util", "MN memory utilization", 1.0)]
    keys = S.sort_keys(list(dict.fromkeys(rows["key"])))
    for ax, (metric, ylabel, div) in zip(axes, panels):
        W.lines(ax, rows, keys, metric, div)
        for key in keys:
            r = rows[rows["key"] == key].sort_values("x").iloc[-1]
            m = W.find_mark(marks, r, metric)
            # a ratio is scaled by the approach it is relative to (Static-MR,
            # or OneSidedMW for ODRP's time), at the same number of tasks
            y = W.mark_y(m, rows, r, metric, div)
            if y is not None:
                S.draw_paper(ax, r["x"], y, relative=m["relative"], color=S.color(key))
        ax.set_xlabel("Kmeans tasks")
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, None)
        ax.grid(linewidth=0.3, zorder=0)
    paper = S.paper_handles(True, True)
    # the marks share x = 48 tasks: each is in its series' colour
    paper[0].set_label(paper[0].get_label() + " (in series colour)")
    W.finish(fig, axes, ["(a) execution time", "(b) MN CPU", "(c) memory utilization"],
             [S.series_handle(k) for k in keys] + paper, out, NAME)


if __name__ == "__main__":
    C.run_main(main)
