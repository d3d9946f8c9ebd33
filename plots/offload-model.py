#!/usr/bin/env python3
"""The same OneSidedMW points under the four readings of the offload penalty
(experiments/offload-model.yaml; fabric/sim/profile_cx5.cc): (a) 4 KB READ
latency, (b) allocation latency, both at the most CN threads the spec ran
on one CN, (c) KV insert throughput on 6 CNs at the most threads per CN. One
group of bars per system/variant, one bar per profile: +all_cross_channel
(every cross-channel QP costs processing-unit time, our MN-local chain QPs
too), cx5 (the default: only QPs connected to another node count),
+all_cross_channel+latency_only and +latency_only (the penalty holds no
processing unit). The paper's values from compare.csv: hollow
diamonds over the bar of their profile (a ratio: the paper's ratio times
our baseline, drawn as the relative marker).

Reads results/offload-model/offload-model.csv and compare.csv; writes
offload-model.png and offload-model.pdf.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

NAME = "offload-model"
PROFILES = ["cx5+all_cross_channel", "cx5", "cx5+all_cross_channel+latency_only",
            "cx5+latency_only"]
PROFILE_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#8172b3"]
# and a hatch each, so the bars are told apart without colour too
PROFILE_HATCHES = ["", "////", "xxxx", "...."]
PANELS = [("access", "lat_us_mean", "4 KB READ latency (\u00b5s)", "(a) access"),
          ("alloc", "lat_us_mean", "allocation latency (\u00b5s)", "(b) allocation"),
          ("kv", "tput_mops", "KV insert throughput (Mops)", "(c) KV, 6 CNs")]


def panel_rows(agg, op):
    """Rows of `op` at its largest thread count, and that count."""
    sub = agg[agg["op"] == op].copy()
    if sub.empty:
        return sub, None
    sub["x"] = sub["threads"].map(C.to_float)
    top = sub["x"].max()
    return sub[sub["x"] == top], top


def draw_panel(ax, rows, metric, marks):
    keys = S.sort_keys(list({S.series_key(s, v) for s, v in zip(rows["system"], rows["variant"])}))
    width = 0.8 / len(PROFILES)
    ymax = 0.0
    for gi, key in enumerate(keys):
        for pi, prof in enumerate(PROFILES):
            r = rows[(rows["profile"] == prof) &
                     ([S.series_key(s, v) == key for s, v in zip(rows["system"], rows["variant"])])]
            if r.empty or r[metric].isna().all():
                continue
            y = float(r[metric].iloc[0])
            x = gi - 0.4 + width * (pi + 0.5)
            ax.bar(x, y, width, color=PROFILE_COLORS[pi], hatch=PROFILE_HATCHES[pi],
                   edgecolor="black", linewidth=0.4, zorder=3)
            ymax = max(ymax, y)
            for m in marks:
                if m["metric"] == metric and m["idx"] in r.index:
                    S.draw_paper(ax, x, m["value"], relative=m["relative"], size=5.0)
                    ymax = max(ymax, m["value"])
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([S.label(k) for k in keys], rotation=20, ha="right")
    ax.set_ylim(0, ymax * 1.15 if ymax > 0 else 1)
    return bool(keys)


def main(argv):
    ap = C.parser(NAME, __doc__)
    args = ap.parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    df = C.load_results(res, NAME)
    compare = C.load_compare(res)
    S.apply()
    agg = C.aggregate(df)
    unknown = sorted(set(agg["profile"]) - set(PROFILES))
    if unknown:
        C.warn(f"{NAME}: profile(s) {', '.join(unknown)} are not drawn")
    marks = C.paper_points(compare, agg)
    fig, axes = S.plt.subplots(1, len(PANELS), figsize=(S.FULL_WIDTH_IN, 2.7))
    for ax, (op, metric, ylabel, title) in zip(axes, PANELS):
        rows, top = panel_rows(agg, op)
        if rows.empty or not draw_panel(ax, rows, metric, marks):
            S.no_data(ax, f"no {op} rows")
            continue
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}, {top:g} thread" + ("" if top == 1 else "s"), fontsize=8)
    handles = [Patch(facecolor=c, hatch=h, edgecolor="black", linewidth=0.4,
                     label=p + (" (default)" if p == "cx5" else ""))
               for p, c, h in zip(PROFILES, PROFILE_COLORS, PROFILE_HATCHES)]
    handles += S.paper_handles(any(not m["relative"] for m in marks),
                               any(m["relative"] for m in marks))
    fig.tight_layout(rect=(0, 0, 1, 0.86))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1.0),
               ncol=len(handles), fontsize=7)
    png, pdf = S.savefig(fig, os.path.join(out, NAME))
    print(f"wrote {C.display_path(png)} and {C.display_path(pdf)}")
    return 0


if __name__ == "__main__":
    C.run_main(main)
