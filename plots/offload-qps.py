#!/usr/bin/env python3
"""OneSidedMW (NSDI'26) §3.2, the offloading effect: one-sided READ latency
against the number of MN-side QPs holding offloaded WRs ("With 96 MN-side QPs
containing offloaded logic, the latency of one-sided READ operations increases
by 12.6%").

x: offload_qps; y: READ latency in µs, mean (solid) and p99 (dashed; not drawn
when it equals the mean, which the legend then says), one
colour per READ size (and per any other parameter the runs vary). A black
error bar spans the seeds' min..max when there are several. The paper's
values from compare.csv: hollow diamonds for absolute values, hollow
triangles for a ratio the paper states applied to our own baseline (our
latency at offload_qps=0), annotated with the paper's and our change (and,
for a compare row that is a calibration source, that ours is set by it).

Reads results/offload-qps/offload-qps.csv (op=offload_read) and compare.csv;
writes offload-qps.png and offload-qps.pdf.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

NAME = "offload-qps"
OP = "offload_read"
SERIES_DIMS = ["system", "variant", "size_bytes", "threads", "io", "cns", "mn_cores", "mw_type",
               "knobs"]
PALETTE = ["#d62728", "#0072b2", "#009e73", "#e69f00", "#4d4d4d", "#cc79a7", "#56b4e9",
           "#a6761d"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "h"]


def series_label(vals, dims):
    parts = []
    vals = dict(zip(dims, vals))
    if "system" in vals or "variant" in vals:
        parts.append(S.label(S.series_key(vals.get("system", ""), vals.get("variant", ""))))
    for d in dims:
        v = vals[d]
        if d in ("system", "variant"):
            continue
        if d == "size_bytes":
            parts.append(f"{C.fmt_size(v)} READ" if v else "size ?")
        elif d == "threads":
            parts.append(f"{v} thread" + ("" if v == "1" else "s"))
        else:
            parts.append(f"{d}={v or '?'}")
    return ", ".join(parts)


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
    noqps = sub["offload_qps"] == ""
    if noqps.all():
        raise C.PlotError(f"{C.display_path(df.attrs['path'])}: the offload_qps column is "
                          f"empty; it is the x axis of this figure")
    if noqps.any():
        C.warn(f"{NAME}: {int(noqps.sum())} row(s) without offload_qps left out")
        sub = sub[~noqps]
    agg = C.aggregate(sub)
    agg["x"] = agg["offload_qps"].map(C.to_float)
    dims = C.varying(agg, SERIES_DIMS)
    if not dims:
        groups = [((), agg)]
    else:
        keys = sorted({tuple(r) for r in agg[dims].itertuples(index=False)},
                      key=lambda t: [C.num_sort_key(v) for v in t])
        groups = [(k, agg[(agg[dims] == list(k)).all(axis=1)]) for k in keys]

    fig, ax = S.plt.subplots(figsize=(S.COLUMN_WIDTH_IN, 2.5))
    handles = []
    series_of = {}
    seeds = int(agg["n_seeds"].max())
    ymax = 0.0
    any_p99 = False
    p99_same = []  # series whose p99 equals their mean at every point
    for i, (k, g) in enumerate(groups):
        g = g.sort_values("x")
        if "system" in dims and not set(dims) - {"system", "variant"}:
            key = S.series_key(*(dict(zip(dims, k)).get(c, "") for c in ("system", "variant")))
            col, mk = S.color(key), S.marker(key)
        else:
            col, mk = PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]
        name = series_label(k, dims) if dims else (
            f"{C.fmt_size(g['size_bytes'].iloc[0])} READ" if g["size_bytes"].iloc[0] else "READ")
        mean = g["lat_us_mean"]
        if mean.isna().all():
            C.warn(f"{NAME}: series '{name}' has no lat_us_mean; left out")
            continue
        ax.plot(g["x"], mean, color=col, marker=mk, linestyle="-", zorder=4)
        if seeds > 1:
            ax.errorbar(g["x"], mean, yerr=[mean - g["lat_us_mean_min"],
                                            g["lat_us_mean_max"] - mean],
                        fmt="none", ecolor="black", elinewidth=0.7, capsize=1.5, zorder=5)
        p99 = g["lat_us_p99"]
        if S.p99_is_mean(mean, p99):
            p99_same.append(name)  # one line, not two on top of each other
        elif p99.notna().any():
            any_p99 = True
            ax.plot(g["x"], p99, color=col, marker=mk, markerfacecolor="white",
                    linestyle="--", linewidth=1.0, zorder=3)
        else:
            C.warn(f"{NAME}: series '{name}' has no lat_us_p99")
        ymax = max(ymax, float(mean.max()), float(p99.max()) if p99.notna().any() else 0.0)
        handles.append(Line2D([], [], color=col, marker=mk, label=name))
        for idx in g.index:
            series_of[idx] = (col, name)

    marks = C.paper_points(compare, agg, ops={OP})
    any_abs = any_rel = False
    notes = {}  # compare row -> [(x, y, our change, series name)] for relative values
    for m in marks:
        if m["idx"] not in series_of:
            continue
        row = agg.loc[m["idx"]]
        x, y = row["x"], m["value"]
        S.draw_paper(ax, x, y, relative=m["relative"], size=5.5)
        ymax = max(ymax, y)
        if m["relative"]:
            any_rel = True
            paper = float(m["crow"]["paper"])
            base = y / paper if paper else float("nan")
            ours = row[m["metric"]] / base if base == base and base else float("nan")
            notes.setdefault(m["cidx"], (m["crow"], []))[1].append(
                (x, y, ours, series_of[m["idx"]][1]))
        else:
            any_abs = True
    # One note per relative paper value, top left:
    # "paper +12.6% at 96 QPs / ours +12.9% (4 KB READ)".
    ty = 0.97
    for _, (crow, pts) in sorted(notes.items(), key=lambda kv: str(kv[0])):
        paper = float(crow["paper"])
        qps = ", ".join(sorted({f"{x:g}" for x, _, _, _ in pts}, key=float))
        # compare.csv calls a value the model was calibrated to a calibration
        # source: ours equals it by construction, which is not agreement
        calib = "calibration" in " ".join(str(crow.get(c, "")) for c in
                                          ("label", "note", "where")).lower()
        lines = [f"paper: {100 * (paper - 1):+.1f}% at {qps} QPs" +
                 (" (calibration input)" if calib else "")]
        for _, _, ours, name in pts:
            if ours == ours:
                lines.append(f"ours: {100 * (ours - 1):+.1f}%" +
                             (f" ({name})" if len(pts) > 1 else "") +
                             (" (calibrated to it: not a check)" if calib else ""))
        txt = "\n".join(lines)
        ax.text(0.03, ty, txt, transform=ax.transAxes, ha="left", va="top", fontsize=6.5,
                color="#222222", zorder=7,
                bbox=dict(boxstyle="square,pad=0.2", facecolor="white", edgecolor="none",
                          alpha=0.8))
        ty -= 0.06 * len(lines) + 0.03

    ax.set_xlabel("MN QPs holding offloaded WRs")
    ax.set_ylabel("READ latency (\u00b5s)")
    ax.set_ylim(0, ymax * 1.3 if ymax > 0 else 1)
    xs = sorted(agg["x"].dropna().unique())
    ax.set_xlim(min(xs) - (max(xs) - min(xs)) * 0.04 - 0.5,
                max(xs) + (max(xs) - min(xs)) * 0.04 + 0.5)
    if len(xs) <= 10:
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{v:g}" for v in xs])
    same_all = p99_same and not any_p99
    styles = [Line2D([], [], color="#333333", linestyle="-",
                     label="mean = p99" if same_all else "mean")]
    if any_p99:
        styles.append(Line2D([], [], color="#333333", linestyle="--", label="p99"))
        for h in handles:
            if h.get_label() in p99_same:
                h.set_label(h.get_label() + " (p99 = mean)")
    if seeds > 1:
        styles.append(S.seeds_handle(seeds))
    all_handles = handles + styles + S.paper_handles(any_abs, any_rel)
    fig.tight_layout(rect=(0, 0, 1, 0.84 if len(all_handles) > 3 else 0.9))
    fig.legend(handles=all_handles, loc="upper center", bbox_to_anchor=(0.5, 1.0),
               ncol=min(3, len(all_handles)))
    png, pdf = S.savefig(fig, os.path.join(out, NAME))
    print(f"wrote {C.display_path(png)} and {C.display_path(pdf)}")
    return 0


if __name__ == "__main__":
    C.run_main(main)
