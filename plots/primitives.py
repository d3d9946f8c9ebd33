#!/usr/bin/env python3
"""Protection primitives, as Patronus (FAST'23) Figure 1 and FineMem (OSDI'25)
Table 1 report them:

(a) MR registration latency against MR size (log-log, 4 KB .. 1 GB): mean
    (solid) and p99 (dashed), deregistration (dotted) when measured, and MW
    bind beside it for contrast (constant in size).
(b) MW bind, invalidate (type-2 LOCAL_INV, Patronus' unbind) and rebind
    latency for type-1 and type-2 MWs (bars: mean; thin whisker ending in a
    dash: p99 where measured; a p99 equal to the mean is not drawn as a second
    line or whisker, the legend says 'p99 = mean').

Hollow black diamonds: the paper's stated values (compare.csv), tagged with the
paper they come from; hollow triangles: a ratio the paper states, applied to
our own baseline. A black error bar spans the seeds' min..max when there are
several.

Reads results/primitives/primitives.csv (op=mr_reg and op=mw_bind) and
compare.csv; writes primitives.png and primitives.pdf.
"""

import math
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedLocator, NullFormatter  # noqa: E402

NAME = "primitives"
SERIES_DIMS = ["system", "variant", "threads", "cns", "mn_cores", "knobs", "io", "page_bytes"]
# (b): operation -> (mean metric, p99 metric or None). The invalidation (type-2
# LOCAL_INV, Patronus' unbind) is invalidate_lat_us_mean when the CSV has it,
# else free_lat_us_mean.
MW_OPS = [("bind", "lat_us_mean", "lat_us_p99"),
          ("invalidate", "invalidate_lat_us_mean", None),
          ("rebind", "rebind_lat_us_mean", None)]


def mw_ops(mw):
    ops = list(MW_OPS)
    if not mw["invalidate_lat_us_mean"].notna().any():
        ops[1] = ("invalidate", "free_lat_us_mean", "free_lat_us_p99")
    return ops


def op_of_metric(metric):
    if metric.startswith("rebind_"):
        return "rebind"
    if metric.startswith(("free_", "invalidate_")):
        return "invalidate"
    return "bind"


def dereg_col(mr):
    """MR deregistration: dereg_lat_us_mean when present, else free_lat_us_mean."""
    return "dereg_lat_us_mean" if mr["dereg_lat_us_mean"].notna().any() else "free_lat_us_mean"


ABBREV = {"PAT": "Patronus", "OSMW": "OneSidedMW"}


def source_tag(where):
    """'FineMem Table 1 (...)' or '[PAT] §1: ...' -> 'FineMem' / 'Patronus'; '' when
    it names no paper."""
    m = re.match(r"\[?([A-Za-z][A-Za-z0-9-]*)\]?", (where or "").strip())
    if not m or m.group(1) in ("Figure", "Fig", "Table", "Section", "text"):
        return ""
    return ABBREV.get(m.group(1), m.group(1))


def mw_key(t):
    return S.series_key("mw", f"type{t}" if t else "")


def suffix(vals, dims):
    parts = []
    for d, v in zip(dims, vals):
        if d == "threads":
            parts.append(f"{v} thread" + ("" if v == "1" else "s"))
        elif d in ("system", "variant"):
            parts.append(v or "-")
        elif d == "page_bytes":
            parts.append(C.fmt_size(C.to_float(v)) + " pages" if v else "? pages")
        else:
            parts.append(f"{d}={v or '?'}")
    return (" (" + ", ".join(parts) + ")") if parts else ""


def split(agg, dims):
    if not dims:
        return [((), agg)]
    keys = sorted({tuple(r) for r in agg[dims].itertuples(index=False)},
                  key=lambda t: [C.num_sort_key(v) for v in t])
    return [(k, agg[(agg[dims] == list(k)).all(axis=1)]) for k in keys]


def size_axis(ax, sizes):
    """log2 x axis with size labels (4 KB .. 1 GB), at most ~6 labels."""
    ax.set_xscale("log", base=2)
    lo, hi = min(sizes), max(sizes)
    pows = [2 ** e for e in range(int(math.floor(math.log2(lo))),
                                  int(math.ceil(math.log2(hi))) + 1)]
    step = 1
    while len(pows[::step]) > 6:
        step *= 2
    major = pows[::step]
    if pows[-1] not in major and pows[-1] >= hi:
        major.append(pows[-1])
    ax.xaxis.set_major_locator(FixedLocator(major))
    ax.xaxis.set_minor_locator(FixedLocator(pows))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels([C.fmt_size(v).replace(" ", "") for v in major])
    ax.set_xlim(lo / 1.5, hi * 1.5)


def panel_mr(ax, mr, mw, compare):
    ax.set_title("(a) MR registration vs. MR size")
    ax.set_xlabel("MR size")
    ax.set_ylabel("Latency (\u00b5s)")
    handles, values, sizes, pos = [], [], [], {}
    if mr.empty:
        C.warn(f"{NAME}: no mr_reg rows; panel (a) has no MR registration curve")
    seeds = 1
    for i, (k, g) in enumerate(split(mr, C.varying(mr, SERIES_DIMS)) if not mr.empty else []):
        g = g.assign(x=g["size_bytes"].map(C.to_float)).dropna(subset=["x"]).sort_values("x")
        if g.empty or g["lat_us_mean"].isna().all():
            C.warn(f"{NAME}: an mr_reg series has no size_bytes or lat_us_mean; left out")
            continue
        sfx = suffix(k, C.varying(mr, SERIES_DIMS))
        series = "mr" if i == 0 else f"mr/{i}"
        col, mk = S.color(series), S.marker(series)
        ax.plot(g["x"], g["lat_us_mean"], color=col, marker=mk, zorder=4)
        same = S.p99_is_mean(g["lat_us_mean"], g["lat_us_p99"])  # one line for both
        handles.append(Line2D([], [], color=col, marker=mk,
                              label="MR register, mean" + (" = p99" if same else "") + sfx))
        seeds = max(seeds, int(g["n_seeds"].max()))
        if g["n_seeds"].max() > 1:
            ax.errorbar(g["x"], g["lat_us_mean"],
                        yerr=[g["lat_us_mean"] - g["lat_us_mean_min"],
                              g["lat_us_mean_max"] - g["lat_us_mean"]],
                        fmt="none", ecolor="black", elinewidth=0.7, capsize=1.5, zorder=5)
        if g["lat_us_p99"].notna().any() and not same:
            ax.plot(g["x"], g["lat_us_p99"], color=col, linestyle="--", linewidth=0.9,
                    marker=mk, markerfacecolor="white", markersize=3, zorder=3)
            handles.append(Line2D([], [], color=col, linestyle="--", linewidth=0.9, marker=mk,
                                  markerfacecolor="white", markersize=3,
                                  label="MR register, p99" + sfx))
        dc = dereg_col(g)
        if g[dc].notna().any():
            dcol = S.lighten(col, 0.35)
            ax.plot(g["x"], g[dc], color=dcol, linestyle=":", marker="v",
                    markersize=3, zorder=3)
            handles.append(Line2D([], [], color=dcol, linestyle=":", marker="v", markersize=3,
                                  label="MR deregister, mean" + sfx))
        for idx in g.index:
            pos[idx] = g.loc[idx, "x"]
        sizes += list(g["x"])
        values += [v for c in ("lat_us_mean", "lat_us_p99", dc)
                   for v in g[c].dropna() if v > 0]
    # MW bind beside MR registration (Patronus Figure 1's contrast).
    if not mw.empty:
        for t, g in mw.groupby("mw_type", sort=True):
            g = g.assign(x=g["size_bytes"].map(C.to_float)).dropna(subset=["x", "lat_us_mean"])
            g = g.groupby("x", as_index=False)["lat_us_mean"].mean().sort_values("x")
            if g.empty:
                continue
            key = mw_key(t)
            ax.plot(g["x"], g["lat_us_mean"], color=S.color(key), marker=S.marker(key),
                    linestyle="-" if len(g) > 1 else "none", zorder=4)
            handles.append(Line2D([], [], color=S.color(key), marker=S.marker(key),
                                  linestyle="-" if len(g) > 1 else "none",
                                  label=f"{S.label(key)} bind, mean"))
            sizes += list(g["x"])
            values += [v for v in g["lat_us_mean"] if v > 0]
    marks = [m for m in C.paper_points(compare, mr, ops={"mr_reg"}) if m["idx"] in pos]
    tags = {}
    for m in marks:
        x, y = pos[m["idx"]], m["value"]
        if y <= 0:
            continue
        S.draw_paper(ax, x, y, relative=m["relative"], size=5.5)
        values.append(y)
        tags.setdefault((x, round(math.log10(y), 1)), source_tag(m["crow"].get("where", "")))
    # Tags right of their marker, except a marker with a close neighbour on its
    # right, whose tag goes left (so two near markers get tags on opposite sides).
    items = [(math.log2(x), ly, x, tag) for (x, ly), tag in sorted(tags.items()) if tag]
    for i, (lx, ly, x, tag) in enumerate(items):
        right = not any(0 < o[0] - lx < 3 and abs(o[1] - ly) < 0.6 for o in items[i + 1:])
        ax.annotate(tag, (x, 10 ** ly), xytext=(5 if right else -5, -2),
                    textcoords="offset points", fontsize=5.8, color="#333333",
                    ha="left" if right else "right", va="top")
    if not sizes:
        S.no_data(ax, "no mr_reg data")
        ax.set_xticks([])
        return [], seeds, False, False
    size_axis(ax, sizes)
    ax.set_yscale("log")
    if values:
        ax.set_ylim(10 ** math.floor(math.log10(min(values) * 0.8)),
                    10 ** math.ceil(math.log10(max(values) * 1.25)) *
                    (3 if len(handles) > 3 else 1))
    ax.grid(True, which="major")
    return handles, seeds, any(not m["relative"] for m in marks), \
        any(m["relative"] for m in marks)


def panel_mw(ax, mw, compare):
    size = mw["size_bytes"].iloc[0] if not mw.empty else ""
    ax.set_title("(b) MW operations" + (f" ({C.fmt_size(size)})" if size else ""))
    ax.set_ylabel("Latency (\u00b5s)")
    if mw.empty:
        C.warn(f"{NAME}: no mw_bind rows; panel (b) is empty")
        S.no_data(ax, "no mw_bind data")
        ax.set_xticks([])
        return [], 1, False, False
    types = sorted(mw["mw_type"].unique(), key=C.num_sort_key)
    all_ops = mw_ops(mw)
    ops = [o for o in all_ops if mw[o[1]].notna().any()]
    missing = [o[0] for o in all_ops if o not in ops]
    if missing:
        C.warn(f"{NAME}: no MW {', '.join(missing)} latency measured; left out of panel (b)")
    n = len(types)
    width = 0.8 / max(n, 1)
    pos, values = {}, []
    seeds = int(mw["n_seeds"].max())
    p99_same, p99_drawn = {}, False
    for i, (op, mcol, pcol) in enumerate(ops):
        for j, t in enumerate(types):
            rows = mw[mw["mw_type"] == t]
            if len(rows) > 1:
                C.warn(f"{NAME}: {len(rows)} mw_bind points for mw_type={t or '?'}; averaged")
            mean = rows[mcol].mean()
            if mean != mean:
                continue
            p99 = rows[pcol].mean() if pcol else None
            if p99 is not None and S.p99_is_mean([mean], [p99]):
                p99_same.setdefault(op, None)  # a whisker of length 0: said in the legend
                p99 = None
            elif p99 is not None and p99 == p99:
                p99_drawn = True
            x = i + (j - (n - 1) / 2) * width
            key = mw_key(t)
            st = S.bar_style(key, 0)
            S.draw_bar(ax, x, width * 0.9, mean, p99, rows[mcol + "_min"].min(),
                       rows[mcol + "_max"].max(), **st)
            pos[(op, t)] = x
            values += [v for v in (mean, p99) if v is not None and v == v]
    drawn = []
    for m in C.paper_points(compare, mw, ops={"mw_bind"}):
        key = (op_of_metric(m["metric"]), mw.loc[m["idx"], "mw_type"])
        if key in pos:
            drawn.append(m)
            S.draw_paper(ax, pos[key], m["value"], relative=m["relative"], size=5.5)
            values.append(m["value"])
    ax.set_xticks(range(len(ops)))
    ax.set_xticklabels([o[0] for o in ops])
    ax.set_xlim(-0.6, len(ops) - 0.4)
    ax.tick_params(axis="x", length=0)
    ax.grid(False, axis="x")
    ax.set_ylim(0, (max(values) if values else 1) * 1.5)
    handles = [Patch(label=S.label(mw_key(t)), **S.bar_style(mw_key(t), 0)) for t in types]
    if p99_drawn:
        handles.append(S.p99_handle())
    if p99_same:
        handles.append(Line2D([], [], linestyle="none",
                              label=f"p99 = mean ({', '.join(p99_same)})"))
    return handles, seeds, any(not m["relative"] for m in drawn), \
        any(m["relative"] for m in drawn)


def main(argv):
    ap = C.parser(NAME, __doc__)
    args = ap.parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    df = C.load_results(res, NAME)
    compare = C.load_compare(res)
    S.apply()

    mr = C.aggregate(df[df["op"] == "mr_reg"])
    mw_rows = df[df["op"] == "mw_bind"]
    mw_all = C.aggregate(mw_rows)
    mw = C.aggregate(C.pick_one(mw_rows, "size_bytes", "4096", f"{NAME} mw_bind")) \
        if not mw_rows.empty else mw_all
    if mr.empty and mw.empty:
        raise C.PlotError(f"{C.display_path(df.attrs['path'])} has no mr_reg or mw_bind rows "
                          f"(ops: {', '.join(sorted(df['op'].unique()))})")

    fig, (a, b) = S.plt.subplots(1, 2, figsize=(S.FULL_WIDTH_IN, 2.6),
                                 gridspec_kw={"width_ratios": [1.55, 1]})
    ha, seeds_a, abs_a, rel_a = panel_mr(a, mr, mw_all, compare)
    hb, seeds_b, abs_b, rel_b = panel_mw(b, mw, compare)
    if ha:
        a.legend(handles=ha, loc="upper left", ncol=1, fontsize=6.5)
    extra = S.paper_handles(abs_a or abs_b, rel_a or rel_b)
    if max(seeds_a, seeds_b) > 1:
        extra.append(S.seeds_handle(max(seeds_a, seeds_b)))
    if hb or extra:
        b.legend(handles=hb + extra, loc="upper left", ncol=2, fontsize=6.5)
    fig.tight_layout(w_pad=2.0)
    png, pdf = S.savefig(fig, os.path.join(out, NAME))
    print(f"wrote {C.display_path(png)} and {C.display_path(pdf)}")
    return 0


if __name__ == "__main__":
    C.run_main(main)
