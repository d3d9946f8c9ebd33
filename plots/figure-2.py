#!/usr/bin/env python3
"""OneSidedMW (NSDI'26) Figure 2: 48 Kmeans tasks on 6 CNs, 50% local memory,
one MN core: (a) MN memory utilization, (b) peak MN CPU (cores busy),
(c) mean execution time normalized to Static-MR (lazy segments).

Bars: ours; hollow diamonds: the paper's stated values; hollow triangles: a
ratio the paper states, on the normalized axis.
Reads results/figure-2/figure-2.csv and compare.csv; writes figure-2.png/.pdf.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402
import swap_common as W  # noqa: E402

NAME = "figure-2"


def main(argv):
    args = C.parser(NAME, __doc__).parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    rows = W.load(res, NAME)
    marks = W.paper_marks(res)
    S.apply()
    base = rows[(rows["system"] == "static_mr") & (rows["cover"].isin(["", "lazy"]))]
    if base.empty:
        raise C.PlotError(f"{NAME}: no Static-MR (lazy) row to normalize to")
    fig, axes = S.plt.subplots(1, 3, figsize=(S.FULL_WIDTH_IN, 2.4))
    b = base.iloc[0]
    W.bars(axes[0], rows, "mem_util", "MN memory utilization", marks)
    W.bars(axes[1], rows, "mn_cpu_peak", "peak MN CPU (cores)", marks, fmt="{:.3f}")
    W.bars(axes[2], rows, "job_s_mean", "time / Static-MR", marks, base=b["job_s_mean"])
    for ax, t in zip(axes, ["(a) memory efficiency", "(b) MN CPU", "(c) performance"]):
        ax.set_title(t, fontsize=8)
    W.legend(fig)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    for p in S.savefig(fig, os.path.join(out, NAME)):
        print(C.display_path(p))


if __name__ == "__main__":
    C.run_main(main)
