#!/usr/bin/env python3
"""OneSidedMW's allocation latency and rate against CN threads on one CN
(experiments/alloc-rate.yaml): (a) mean allocation latency (solid) and p99
(dashed), (b) allocations per second (kops, thousands per virtual second),
one line per variant (sep: every thread shares one Alloc QP; nosep: a pair
per thread). x: CN threads, log2 scale. A black error bar spans the seeds'
min..max when there are several. The paper's values from compare.csv:
hollow diamonds (stated), drawn on the panel of their metric.

Reads results/alloc-rate/alloc-rate.csv (op=alloc) and compare.csv; writes
alloc-rate.png and alloc-rate.pdf.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

NAME = "alloc-rate"
OP = "alloc"
PANELS = [("lat_us_mean", "allocation latency (\u00b5s)", "(a) latency"),
          ("kops", "allocations / s (thousands)", "(b) rate")]


def series(agg):
    """(key, rows sorted by threads) per system/variant."""
    agg = agg.copy()
    agg["key"] = [S.series_key(s, v) for s, v in zip(agg["system"], agg["variant"])]
    agg["x"] = agg["threads"].map(C.to_float)
    if agg["x"].isna().all():
        raise C.PlotError(f"{NAME}: the threads column is empty; it is the x axis")
    out = []
    for key in S.sort_keys(list(agg["key"].unique())):
        g = agg[agg["key"] == key].dropna(subset=["x"]).sort_values("x")
        if g["knobs"].nunique() > 1:
            C.warn(f"{NAME}: {key} ran with several knob sets; their points are averaged")
        out.append((key, g))
    return agg, out


def draw_panel(ax, groups, metric, seeds):
    ymax = 0.0
    for key, g in groups:
        y = g[metric]
        if y.isna().all():
            C.warn(f"{NAME}: {S.label(key)} has no {metric}; left out of that panel")
            continue
        col, mk = S.color(key), S.marker(key)
        ax.plot(g["x"], y, color=col, marker=mk, linestyle="-", zorder=4)
        if seeds > 1:
            ax.errorbar(g["x"], y, yerr=[y - g[metric + "_min"], g[metric + "_max"] - y],
                        fmt="none", ecolor="black", elinewidth=0.7, capsize=1.5, zorder=5)
        ymax = max(ymax, float(y.max()))
        if metric == "lat_us_mean" and g["lat_us_p99"].notna().any():
            ax.plot(g["x"], g["lat_us_p99"], color=col, marker=mk, markerfacecolor="white",
                    linestyle="--", linewidth=1.0, zorder=3)
            ymax = max(ymax, float(g["lat_us_p99"].max()))
    return ymax


def main(argv):
    ap = C.parser(NAME, __doc__)
    args = ap.parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    df = C.load_results(res, NAME)
    compare = C.load_compare(res)
    S.apply()
    sub = df[df["op"] == OP]
    if sub.empty:
        raise C.PlotError(f"{C.display_path(df.attrs['path'])} has no {OP} rows "
                          f"(ops: {', '.join(sorted(df['op'].unique()))})")
    agg, groups = series(C.aggregate(sub))
    seeds = int(agg["n_seeds"].max())
    marks = C.paper_points(compare, agg, ops={OP})
    fig, axes = S.plt.subplots(1, 2, figsize=(S.FULL_WIDTH_IN, 2.6))
    xs = sorted(agg["x"].dropna().unique())
    for ax, (metric, ylabel, title) in zip(axes, PANELS):
        ymax = draw_panel(ax, groups, metric, seeds)
        for m in marks:
            if m["metric"] == metric:
                S.draw_paper(ax, agg.loc[m["idx"], "x"], m["value"], size=5.5)
                ymax = max(ymax, m["value"])
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{v:g}" for v in xs])
        ax.set_xlabel("CN threads (one CN)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=8)
        ax.set_ylim(0, ymax * 1.15 if ymax > 0 else 1)
    handles = [S.series_handle(k) for k, _ in groups]
    handles.append(Line2D([], [], color="#333333", linestyle="--", label="p99"))
    if seeds > 1:
        handles.append(S.seeds_handle(seeds))
    handles += S.paper_handles(bool(marks), False)
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1.0),
               ncol=len(handles))
    png, pdf = S.savefig(fig, os.path.join(out, NAME))
    print(f"wrote {C.display_path(png)} and {C.display_path(pdf)}")
    return 0


if __name__ == "__main__":
    C.run_main(main)
