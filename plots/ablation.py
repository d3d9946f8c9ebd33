#!/usr/bin/env python3
"""OneSidedMW (NSDI'26) §6.3, the optimizations in the swap system: 48 Kmeans
tasks on 6 CNs at 50% local memory, OneSidedMW with neither optimization,
+Grouping, +Grouping+Sep: (a) mean (bar) and p99 (dash) synchronous swap-in
latency, (b) mean execution time normalized to neither.

Hollow triangles: the paper's ratios (24.3% lower sync latency with Grouping,
up to 6.9% and 7.6% faster) applied to the variant each is relative to.
Reads results/ablation/ablation.csv and compare.csv; writes ablation.png/.pdf.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402
import swap_common as W  # noqa: E402

NAME = "ablation"
ORDER = ["none", "group", "group+sep"]
LABEL = {"none": "neither", "group": "+Grouping", "group+sep": "+Grouping\n+Sep"}


def paper_points(res, rows, metric, base):
    """(x, y) of each paper ratio: ratio x the value of the variant it is
    relative to, over base."""
    cmp = C.load_compare(res)
    pts = []
    for _, c in cmp[cmp["metric"] == metric].iterrows():
        ref = c["note"].split("variant=")[-1].strip() if "variant=" in c["note"] else ""
        if c["variant"] in ORDER and ref in ORDER and c["paper"] == c["paper"]:
            ref_v = rows.loc[rows["variant"] == ref, metric]
            if len(ref_v):
                pts.append((ORDER.index(c["variant"]), c["paper"] * ref_v.iloc[0] / base))
    return pts


def main(argv):
    args = C.parser(NAME, __doc__).parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    rows = W.load(res, NAME)
    rows = rows[rows["variant"].isin(ORDER)].copy()
    if rows.empty:
        raise C.PlotError(f"{NAME}: no rows with variant none, group or group+sep")
    rows["o"] = rows["variant"].map(ORDER.index)
    rows = rows.sort_values("o")
    S.apply()
    fig, axes = S.plt.subplots(1, 2, figsize=(S.COLUMN_WIDTH_IN * 1.5, 2.3))
    xs = list(rows["o"])
    col = S.color(S.series_key("onesided_mw", ""))
    base_t = rows.loc[rows["variant"] == "none", "job_s_mean"]
    base_t = float(base_t.iloc[0]) if len(base_t) else float(rows["job_s_mean"].iloc[0])
    panels = [("sync_lat_us_mean", "sync swap-in latency (\u00b5s)", 1.0),
              ("job_s_mean", "time / neither", base_t)]
    for ax, (metric, ylabel, base) in zip(axes, panels):
        vals = rows[metric] / base
        ax.bar(xs, vals, width=0.6, color=[S.lighten(col, a) for a in (0.6, 0.3, 0.0)][:len(xs)],
               edgecolor="black", linewidth=0.5, zorder=3)
        for x, v in zip(xs, vals):
            ax.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=6)
        top = float(vals.max())
        if metric == "sync_lat_us_mean":
            ax.plot(xs, rows["sync_lat_us_p99"], linestyle="none", marker="_", markersize=10,
                    color=S.P99_COLOR, zorder=4)
            top = max(top, float(rows["sync_lat_us_p99"].max()))
        for x, y in paper_points(res, rows, metric, base):
            S.draw_paper(ax, x, y, relative=True)
            top = max(top, y)
        ax.set_xticks(range(len(ORDER)))
        ax.set_xticklabels([LABEL[v] for v in ORDER], fontsize=6)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, top * 1.12)  # room for the values written on top of the bars
        ax.grid(axis="y", linewidth=0.3, zorder=0)
    axes[0].set_title("(a) sync swap-in", fontsize=8)
    axes[1].set_title("(b) end to end", fontsize=8)
    fig.legend(handles=S.paper_handles(absolute=False, relative=True) + [S.p99_handle()],
               loc="upper right", fontsize=6, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    for p in S.savefig(fig, os.path.join(out, NAME)):
        print(C.display_path(p))


if __name__ == "__main__":
    C.run_main(main)
