#!/usr/bin/env python3
"""OneSidedMW (NSDI'26) Figure 6: the disaggregated key-value store on one CN
(24 threads) and one MN core, against the allocation granularity.

For every workload (fillsync = insert-only; ycsbd = 50% read / 50% insert) and
value size, a 2x2 block of panels: (a) throughput (Mops), (b) deallocation
rate (%, the share of MN memory freed after the 90% deletes), (c) P99 latency
(us; logarithmic when it spans more than two decades) and (d) peak MN CPU (%,
100% = one core busy). The x axis is the approach's allocation granularity
(alloc_bytes, log2). One line per approach (OneSidedMW, RPC-MW(type-1),
RPC-MW(type-2), and any other variant such as OneSidedMW(aq4)); Static-MR, which
has one granularity (16 MB), is a horizontal dashed reference line. ODRP cannot
run the store (fixed 4 KB I/O), which the figure says in a note.
Hollow black diamonds: the paper's stated values (compare.csv); hollow
triangles: a ratio the paper states (e.g. 33.9% of Static-MR's throughput)
applied to our own baseline. With several seeds a thin error bar spans their
min..max.

Reads results/figure-6/figure-6.csv (op=kv) and compare.csv; writes
figure-6.png and figure-6.pdf (every value size as a row of blocks, 1 KB
first), or with --value SIZE only that value size into figure-6-SIZE.png/.pdf.

The key-value store's CSV reading and aggregation are in kv_common.py (shared
with figure-7.py).
"""

import math
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

import common as C  # noqa: E402
import kv_common as KV  # noqa: E402
import style as S  # noqa: E402

NAME = "figure-6"

WORKLOAD_ORDER = ["fillsync", "ycsbd", "insert"]
WORKLOAD_LABEL = {"fillsync": "insert-only", "ycsbd": "50% read / 50% insert",
                  "insert": "insert-only"}


def size_label(b):
    """512 -> '512 B', 2048 -> '2 KB', 16777216 -> '16 MB'."""
    return C.fmt_size(b)


def order_workloads(ws):
    return sorted(ws, key=lambda w: (WORKLOAD_ORDER.index(w) if w in WORKLOAD_ORDER else 99, w))


def order_values(vs):
    """1 KB first (the paper's main case), then the others ascending."""
    return sorted(vs, key=lambda v: (v != "1024", C.num_sort_key(v)))


# (metric, scale, panel title, y label, log allowed, bottom at zero)
PANELS = [
    ("tput_mops", 1.0, "(a) Throughput", "Throughput (Mops)", False),
    ("dealloc_rate", 100.0, "(b) Deallocation rate", "Deallocation rate (%)", False),
    ("lat_us_p99", 1.0, "(c) P99 latency", "P99 latency (\u00b5s)", True),
    ("mn_cpu_peak", 100.0, "(d) Peak MN CPU", "Peak MN CPU (%)", False),
]


def granularity_axis(ax, xs):
    ax.set_xscale("log", base=2)
    lo = min([512.0] + list(xs))
    hi = max([32768.0] + list(xs))
    ticks = [2.0 ** e for e in range(int(math.floor(math.log2(lo))),
                                     int(math.ceil(math.log2(hi))) + 1)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([(f"{int(t)}" if t < 1024 else f"{t / 1024:g}K") for t in ticks])
    ax.set_xlim(lo / 1.35, hi * 1.35)


def panel(ax, block, marks, metric, scale, title, ylabel, may_log, info):
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("Allocation granularity (B)")
    values = []
    static = block[block["key"] == "static_mr"]
    others = block[block["key"] != "static_mr"]
    granularity_axis(ax, [float(x) for x in others["alloc_bytes"] if x != ""])
    drawn_any = False
    for key in S.sort_keys(others["key"].unique()):
        s = others[(others["key"] == key) & (others["alloc_bytes"] != "")].copy()
        s["x"] = s["alloc_bytes"].astype(float)
        s = s[s[metric].notna()].sort_values("x")
        if s.empty:
            continue
        for idx, x in zip(s.index, s["x"]):
            info["pos"][idx] = x
        if s["x"].duplicated().any():
            C.warn(f"{NAME}: {info['where']}: {key} has several points at one granularity "
                   f"(variants {', '.join(sorted(s['variant'].unique()))}); {metric} averaged")
            cols = {c: "mean" for c in (metric, metric + "_min", metric + "_max")}
            cols["n_seeds"] = "max"
            s = s.groupby("x", sort=True).agg(cols).reset_index()
        ys = list(s[metric] * scale)
        ax.plot(s["x"], ys, color=S.color(key), marker=S.marker(key), zorder=3,
                markersize=3.5)
        if int(s["n_seeds"].max()) > 1:
            KV.seed_bars(ax, list(s["x"]), ys, list(s[metric + "_min"]),
                         list(s[metric + "_max"]), S.color(key), scale)
        values += ys
        info["keys"].add(key)
        drawn_any = True
    static_ys = []
    for _, r in static.iterrows():
        y = r[metric]
        if y != y:
            continue
        ax.axhline(y * scale, color=S.color("static_mr"), linestyle="--", linewidth=1.0,
                   zorder=2)
        values.append(y * scale)
        static_ys.append(y * scale)
        info["static"].add(r["alloc_bytes"])
        drawn_any = True
    pts = []
    for m in marks:
        if m["metric"] != metric:
            continue
        if m["idx"] in info["pos"]:
            x = info["pos"][m["idx"]]
        elif m["idx"] in static.index:
            x = ax.get_xlim()[1] / 1.2  # Static-MR's value: at the right end of its line
        else:
            continue
        pts.append((x, m["value"] * scale, m["relative"]))
        values.append(m["value"] * scale)
    if not drawn_any:
        C.warn(f"{NAME}: no {metric} values for {info['where']}; panel '{title}' is empty")
        S.no_data(ax, f"no {metric} data")
        return
    pos = [v for v in values if v > 0]
    if may_log and pos and max(pos) / min(pos) > 100:
        ax.set_yscale("log")
        ax.set_ylim(10 ** math.floor(math.log10(min(pos) * 0.9)), max(pos) * 2.5)
    else:
        top = (max(values) if values else 1.0) or 1.0
        floor = [y for y in static_ys if y <= 0.02 * top]
        # Static-MR at (or near) 0 would lie on the x axis: the axis starts a
        # little below 0 and the line says its value
        ax.set_ylim(-0.06 * top if floor else 0, top * 1.15)
        for y in floor:
            ax.annotate(f"Static-MR: {y:.2g}", (0.02, y), xycoords=("axes fraction", "data"),
                        xytext=(0, 2), textcoords="offset points", ha="left", va="bottom",
                        fontsize=6, color=S.color("static_mr"), zorder=5)
    for x, y, rel in pts:
        if S.draw_paper(ax, x, y, relative=rel) is not None:
            info["paper_rel" if rel else "paper_abs"] = True


def select_block(df, what):
    for dim, prefer in (("threads", "24"), ("cns", "1"), ("mn_cores", "1")):
        df = C.pick_one(df, dim, prefer, what)
    static = df[df["key"] == "static_mr"]
    if static["alloc_bytes"].nunique() > 1:
        keep = C.pick_one(static, "alloc_bytes", str(16 << 20), f"{what} Static-MR")
        df = df[(df["key"] != "static_mr") | df.index.isin(keep.index)]
    return df


def main(argv):
    ap = C.parser(NAME, __doc__)
    ap.add_argument("--value", metavar="SIZE", default=None,
                    help="draw only this value size (e.g. 1KB or 1024) into "
                         "figure-6-SIZE.png/.pdf (default: every value size, 1 KB first, "
                         "into figure-6.png/.pdf)")
    args = ap.parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    df = KV.load_kv(res, NAME)
    compare = C.load_compare(res)
    S.apply()

    df["key"] = [KV.approach_key(s, v, k, t) for s, v, k, t in
                 zip(df["system"], df["variant"], df["knobs"], df["mw_type"])]
    if (df["system"] == "").any():
        C.warn(f"{NAME}: {int((df['system'] == '').sum())} row(s) without a system; left out")
        df = df[df["system"] != ""]
    values = order_values(df["value_bytes"].unique())
    base = NAME
    if args.value:
        want = C.norm_num(KV.parse_size(args.value))
        if want not in values:
            raise C.PlotError(f"--value {args.value}: no rows with value_bytes={want} "
                              f"(have: {', '.join(values)})")
        values = [want]
        base = f"{NAME}-{size_label(want).replace(' ', '')}"
    workloads = order_workloads(df["workload"].unique())
    if (df["workload"] == "").any():
        C.warn(f"{NAME}: rows without a workload; drawn as their own block")

    nv, nw = len(values), len(workloads)
    fig = S.plt.figure(figsize=(min(S.FULL_WIDTH_IN, 3.55 * nw), 0.55 + 3.05 * nv + 0.25),
                       constrained_layout=True)
    fig.set_constrained_layout_pads(w_pad=0.02, h_pad=0.02, wspace=0.03, hspace=0.02)
    rows = fig.subfigures(nv + 2, 1, height_ratios=[0.55] + [3.05] * nv + [0.25])
    info = dict(keys=set(), static=set(), pos={}, paper_abs=False, paper_rel=False, seeds=1)
    # The size the spec names: the whole KV block (kv_size block) or the value.
    unit = "KV blocks" if (df["kv_size"] == "block").any() else "values"
    for vi, v in enumerate(values):
        blocks = rows[vi + 1].subfigures(1, nw, wspace=0.04)
        blocks = [blocks] if nw == 1 else list(blocks)
        for wi, w in enumerate(workloads):
            sub = blocks[wi]
            wl = WORKLOAD_LABEL.get(w, w or "workload ?")
            where = f"workload={w or '?'}, value_bytes={v or '?'}"
            sub.suptitle(f"{wl}, {size_label(v) if v else '?'} {unit}", fontsize=8.5,
                         fontweight="bold")
            axes = sub.subplots(2, 2)
            block = df[(df["value_bytes"] == v) & (df["workload"] == w)]
            if block.empty:
                C.warn(f"{NAME}: no points for {where}")
            block = select_block(block, f"{NAME} {where}")
            agg = KV.aggregate_kv(block) if not block.empty else block.assign(n_seeds=[])
            if not agg.empty:
                agg["key"] = [KV.approach_key(s, vv, k, t) for s, vv, k, t in
                              zip(agg["system"], agg["variant"], agg["knobs"], agg["mw_type"])]
                info["seeds"] = max(info["seeds"], int(agg["n_seeds"].max()))
            # The paper's values, matched within this block only (so a ratio to
            # Static-MR uses this block's Static-MR).
            marks = C.paper_points(compare, agg, ops={"kv"}) if not agg.empty else []
            info["pos"] = {}
            info["where"] = where
            for ax, (metric, scale, title, ylabel, may_log) in zip(axes.flat, PANELS):
                if agg.empty:
                    ax.set_title(title)
                    S.no_data(ax)
                    continue
                panel(ax, agg, marks, metric, scale, title, ylabel, may_log, info)
            for ax in axes[0]:
                ax.set_xlabel("")

    keys = S.sort_keys(info["keys"])
    handles = [S.series_handle(k, markersize=3.5) for k in keys]
    for g in sorted(info["static"], key=C.num_sort_key):
        handles.append(Line2D([], [], color=S.color("static_mr"), linestyle="--", linewidth=1.0,
                              label=f"Static-MR ({size_label(g)})" if g else "Static-MR"))
    if info["seeds"] > 1:
        handles.append(S.seeds_handle(info["seeds"]))
    handles += S.paper_handles(info["paper_abs"], info["paper_rel"])
    if not keys and not info["static"]:
        C.warn(f"{NAME}: no series drawn")
    ncol = min(len(handles), 4 if nw > 1 else 2) or 1
    rows[0].legend(handles=handles, loc="center", ncol=ncol)
    has_odrp = (df["system"] == "odrp").any()
    note = ("ODRP: fixed 4 KB I/O, not applicable (the store needs variable-size I/O)"
            if not has_odrp else "")
    rows[-1].text(0.5, 0.5, note, ha="center", va="center", fontsize=7, style="italic",
                  color="#555555")
    png, pdf = S.savefig(fig, os.path.join(out, base))
    print(f"wrote {C.display_path(png)} and {C.display_path(pdf)}")
    return 0


if __name__ == "__main__":
    C.run_main(main)
