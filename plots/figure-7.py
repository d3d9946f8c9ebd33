#!/usr/bin/env python3
"""OneSidedMW (NSDI'26) Figure 7: scalability of the disaggregated key-value
store on 6 CNs (insert-only, 1 KB values) as the number of CN threads grows:
(a) throughput (Mops), (b) P99 latency (us, logarithmic) and (c) peak MN CPU
(%, 100% = one core busy; above 100% only with unlimited MN cores), against the
total number of CN threads (threads_total = threads per CN x CNs).

One line per system/variant: Static-MR, OneSidedMW(8 KB), OneSidedMW(4 KB),
RPC-MW(4 KB), and RPC-MW(4 KB) with unlimited MN cores (mn_cores=unlimited, or
'unlimited' in the variant), drawn dashed with hollow markers in RPC-MW's
colour. Hollow triangles: a ratio the paper states (e.g. 80.2% of
Static-MR's peak) applied to our own baseline; hollow diamonds: absolute paper
values (compare.csv); each in the colour of the series it is about (one
about the unlimited series is tagged 'unlimited'). With
several seeds a thin error bar spans their min..max.

Reads results/figure-7/figure-7.csv (op=kv) and compare.csv; writes
figure-7.png and figure-7.pdf.
"""

import math
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from matplotlib.lines import Line2D  # noqa: E402

import common as C  # noqa: E402
import kv_common as KV  # noqa: E402
import style as S  # noqa: E402

NAME = "figure-7"

# (metric, scale, title, y label, log y)
PANELS = [
    ("tput_mops", 1.0, "(a) Throughput", "Throughput (Mops)", False),
    ("lat_us_p99", 1.0, "(b) P99 latency", "P99 latency (\u00b5s)", True),
    ("mn_cpu_peak", 100.0, "(c) Peak MN CPU", "Peak MN CPU (%)", False),
]


def is_unlimited(variant, mn_cores):
    return mn_cores == "unlimited" or "unlimited" in (variant or "").lower()


def base_variant(variant):
    """'4KB-unlimited' -> '4KB'."""
    toks = [t for t in re.split(r"[-_,;\s/]+", variant or "") if t and t.lower() != "unlimited"]
    return "-".join(toks)


def series_of(system, variant, mn_cores):
    """(key, colour, marker, line style, hollow marker, label) of a series."""
    if is_unlimited(variant, mn_cores):
        base = S.series_key(system, base_variant(variant))
        lab = S.label(base)
        lab = lab[:-1] + ", unlimited MN CPU)" if lab.endswith(")") else \
            lab + "(unlimited MN CPU)"
        return (S.series_key(system, variant or "unlimited") + "|unlimited", S.color(base),
                S.marker(base), "--", True, lab)
    key = S.series_key(system, variant)
    return key, S.color(key), S.marker(key), "-", False, S.label(key)


def main(argv):
    ap = C.parser(NAME, __doc__)
    args = ap.parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    df = KV.load_kv(res, NAME)
    compare = C.load_compare(res)
    S.apply()

    if (df["system"] == "").any():
        C.warn(f"{NAME}: {int((df['system'] == '').sum())} row(s) without a system; left out")
        df = df[df["system"] != ""]
    what = NAME
    if df["workload"].nunique() > 1:
        df = C.pick_one(df, "workload", "insert", what)
    if df["value_bytes"].nunique() > 1:
        df = C.pick_one(df, "value_bytes", "1024", what)
    if df["cns"].nunique() > 1:
        C.warn(f"{NAME}: several cns values ({', '.join(sorted(df['cns'].unique()))}); the x "
               f"axis (threads_total) mixes them")
    agg = KV.aggregate_kv(df)
    agg = agg[agg["threads_total"] != ""]
    if agg.empty:
        raise C.PlotError(f"{C.display_path(df.attrs['path'])}: no row has threads_total "
                          f"(or threads): nothing to draw")
    agg["x"] = agg["threads_total"].astype(float)
    styles = {}
    agg["series"] = ""
    no_variant = 0
    variants = {}
    for idx, r in agg.iterrows():
        variant = r["variant"]
        if not variant and r["alloc_bytes"] != "":
            # no variant: the allocation size tells the series apart (OneSidedMW 8 KB / 4 KB)
            variant = C.fmt_size(r["alloc_bytes"]).replace(" ", "")
            no_variant += 1
        variants[idx] = variant
    # distinct styles for the approaches (OneSidedMW 8 KB and 4 KB: two markers)
    S.distinguish(S.series_key(agg.at[i, "system"], base_variant(v)) for i, v in variants.items())
    for idx, r in agg.iterrows():
        st = series_of(r["system"], variants[idx], r["mn_cores"])
        styles[st[0]] = st
        agg.at[idx, "series"] = st[0]

    if no_variant:
        C.warn(f"{NAME}: {no_variant} point(s) without a variant; series named by alloc_bytes")

    # Static-MR, RPC-MW, OneSidedMW in the papers' order; larger sizes first
    # (the paper's legend: OneSidedMW(8 KB) before (4 KB)); unlimited after its base.
    def order(k):
        base = k.split("|")[0]
        sys_ = base.partition("/")[0]
        rank = S.SYSTEM_ORDER.index(sys_) if sys_ in S.SYSTEM_ORDER else 99
        size = KV.parse_size(next((t for t in re.split(r"[-_/]+", base)
                                   if KV.parse_size(t) == KV.parse_size(t)), "nan"))
        return (rank, -(size if size == size else 0), k.endswith("|unlimited"), k)
    series = sorted(styles, key=order)

    marks = C.paper_points(compare, agg, ops={"kv"})
    fig, axes = S.plt.subplots(1, 3, figsize=(S.FULL_WIDTH_IN, 2.35))
    seeds = int(agg["n_seeds"].max())
    paper_abs = paper_rel = False
    drawn = set()
    xs_all = sorted(agg["x"].unique())
    for ax, (metric, scale, title, ylabel, log) in zip(axes, PANELS):
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("Total CN threads (6 CNs)" if set(agg["cns"]) == {"6"} else
                      "Total CN threads")
        ax.set_xlim(0, max(xs_all) * 1.04)
        values = []
        pos = {}
        for k in series:
            _, col, mk, ls, hollow, _ = styles[k]
            s = agg[(agg["series"] == k) & agg[metric].notna()].sort_values("x")
            if s.empty:
                continue
            ys = list(s[metric] * scale)
            ax.plot(s["x"], ys, color=col, marker=mk, linestyle=ls, markersize=3.5,
                    markerfacecolor="white" if hollow else col, markeredgecolor=col,
                    zorder=3)
            if seeds > 1:
                KV.seed_bars(ax, list(s["x"]), ys, list(s[metric + "_min"]),
                             list(s[metric + "_max"]), col, scale)
            values += ys
            drawn.add(k)
            for idx, x in zip(s.index, s["x"]):
                pos[idx] = x
        # each paper mark in the colour of the series it is about (at 288
        # threads they share an x)
        pts = [(pos[m["idx"]], m["value"] * scale, m["relative"],
                styles[agg.at[m["idx"], "series"]][1], styles[agg.at[m["idx"], "series"]][4])
               for m in marks if m["metric"] == metric and m["idx"] in pos]
        # A paper mark far above every curve (a ratio times a small baseline)
        # would squash them: on a linear axis it is drawn at the top edge
        # with its value written beside it.
        ceiling = 2 * max(values) if values and not log else math.inf
        values += [y for _, y, _, _, _ in pts if y <= ceiling]
        if not values:
            C.warn(f"{NAME}: no {metric} values; panel '{title}' is empty")
            S.no_data(ax, f"no {metric} data")
            continue
        positive = [v for v in values if v > 0]
        if log and positive:
            ax.set_yscale("log")
            ax.set_ylim(10 ** math.floor(math.log10(min(positive) * 0.9)),
                        10 ** math.ceil(math.log10(max(positive) * 1.1)))
        else:
            ax.set_ylim(0, (max(values) if max(values) > 0 else 1.0) * 1.12)
        if any(y > ceiling for _, y, _, _, _ in pts):
            ax.set_ylim(0, ax.get_ylim()[1] * 1.15)  # a free band for the clipped marks
        top = ax.get_ylim()[1]
        for x, y, rel, col, unlimited in pts:
            if unlimited and y <= ceiling:
                # RPC-MW with and without unlimited MN cores share a colour
                ax.annotate("unlimited", (x, y), textcoords="offset points", xytext=(-5, 0),
                            ha="right", va="center", fontsize=5.5, color=col,
                            bbox=dict(fc="white", ec="none", pad=0.3))
            if y > ceiling:
                ax.annotate(f"\u2191 {y:.3g}", (x, top * 0.96), textcoords="offset points",
                            xytext=(-6, 0), ha="right", va="center", fontsize=6.5,
                            color=col, bbox=dict(fc="white", ec="none", pad=0.4))
                y = top * 0.96
            if S.draw_paper(ax, x, y, relative=rel, color=col) is not None:
                paper_rel |= rel
                paper_abs |= not rel
    if not drawn:
        C.warn(f"{NAME}: no series drawn")
    handles = []
    for k in series:
        if k not in drawn:
            continue
        _, col, mk, ls, hollow, lab = styles[k]
        handles.append(Line2D([], [], color=col, marker=mk, linestyle=ls, markersize=3.5,
                              markerfacecolor="white" if hollow else col,
                              markeredgecolor=col, label=lab))
    if seeds > 1:
        handles.append(S.seeds_handle(seeds))
    for h in S.paper_handles(paper_abs, paper_rel):
        h.set_label(h.get_label() + " (series colour)")
        handles.append(h)
    ncol = min(4, len(handles)) or 1
    legend_rows = max(1, math.ceil(len(handles) / ncol))
    fig.tight_layout(w_pad=1.5, rect=(0, 0, 1, 0.99 - 0.075 * legend_rows))
    fig.legend(handles=handles, loc="upper center", ncol=ncol, bbox_to_anchor=(0.5, 1.0))
    png, pdf = S.savefig(fig, os.path.join(out, NAME))
    print(f"wrote {C.display_path(png)} and {C.display_path(pdf)}")
    return 0


if __name__ == "__main__":
    C.run_main(main)
