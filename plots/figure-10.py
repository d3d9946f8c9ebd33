#!/usr/bin/env python3
"""OneSidedMW (NSDI'26) Figure 10: latency of (a) memory access (one-sided
READ) and (b) memory allocation, per approach, with 1 and 24 CN threads.

Bars: mean latency over the measured operations (averaged over seeds; a black
error bar spans the seeds' min..max when there are several); the thin whisker
ending in a dash is the p99. Hollow black diamonds: the paper's stated values
(compare.csv); hollow triangles: a ratio the paper states, applied to our own
baseline (e.g. ODRP's 3.2x of one-sided RDMA). A panel's y axis is logarithmic
when its values span more than two decades.

Reads results/figure-10/figure-10.csv (op=access with io=read, and op=alloc)
and compare.csv; writes figure-10.png and figure-10.pdf. Rows a cluster run
skipped (the RDMA device lacks what the approach needs) get no bar and are
named under the panels.
"""

import math
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402

NAME = "figure-10"
OTHER_DIMS = ["size_bytes", "cns", "mn_cores", "offload_qps", "mw_type"]


def split_knobs(df):
    """Series key per row; a (system, variant) run with several knob sets gets
    the knobs in its key so that none is silently averaged away."""
    df = df.copy()
    df["key"] = [S.series_key(s, v) for s, v in zip(df["system"], df["variant"])]
    for key, g in df.groupby("key"):
        if g["knobs"].nunique() > 1:
            C.warn(f"{NAME}: {key} ran with several knob sets; one bar group each")
            parsed = [dict(kv.partition("=")[::2] for kv in re.split(r"[;,]", k) if kv)
                      for k in g["knobs"]]
            names = sorted({n for p in parsed for n in p})
            differ = [n for n in names if len({p.get(n, "") for p in parsed}) > 1]
            # one differing knob: its value ("1MB"); several: "k=v,k=v"
            tags = [p.get(differ[0], "") if len(differ) == 1 else
                    ",".join(f"{n}={p.get(n, '')}" for n in differ) for p in parsed]
            df.loc[g.index, "key"] = [S.series_key(s, (v + "," if v else "") + t)
                                      for s, v, t in zip(g["system"], g["variant"], tags)]
    return df


def select(df, op):
    sub = df[df["op"] == op]
    if sub.empty:
        return sub
    if op == "access":
        if (sub["io"] != "").any():
            reads = sub[sub["io"] == "read"]
            if reads.empty:
                C.warn(f"{NAME}: no access rows with io=read (io: "
                       f"{', '.join(sorted(sub['io'].unique()))})")
            sub = reads
        else:
            C.warn(f"{NAME}: the io column is empty; taking every access row as READ")
    for dim in OTHER_DIMS:
        if not sub.empty:
            sub = C.pick_one(sub, dim, "4096" if dim == "size_bytes" else None,
                             f"{NAME} {op}")
    return sub


def panel(ax, agg, compare, op, title):
    ax.set_title(title)
    ax.set_ylabel("Latency (\u00b5s)")
    if agg.empty:
        C.warn(f"{NAME}: no {op} rows; panel '{title}' is empty")
        S.no_data(ax, f"no {op} data")
        ax.set_xticks([])
        return dict(threads=[], seeds=1, paper_abs=False, paper_rel=False, p99=False)
    agg = split_knobs(agg)
    keys = S.sort_keys(agg["key"].unique())
    threads = sorted(agg["threads"].unique(), key=C.num_sort_key)
    n = len(threads)
    width = 0.8 / n
    pos = {}
    values = []
    seeds = int(agg["n_seeds"].max())
    any_p99 = bool(agg["lat_us_p99"].notna().any())
    for i, key in enumerate(keys):
        for j, t in enumerate(threads):
            rows = agg[(agg["key"] == key) & (agg["threads"] == t)]
            if rows.empty:
                C.warn(f"{NAME}: no {op} point for {key} with threads={t or '?'}; bar left out")
                continue
            if len(rows) > 1:
                C.warn(f"{NAME}: {len(rows)} {op} points for {key} threads={t}; averaged")
            mean = rows["lat_us_mean"].mean()
            if mean != mean:
                C.warn(f"{NAME}: {op} {key} threads={t}: lat_us_mean is empty; bar left out")
                continue
            p99 = rows["lat_us_p99"].mean()
            lo, hi = rows["lat_us_mean_min"].min(), rows["lat_us_mean_max"].max()
            x = i + (j - (n - 1) / 2) * width
            for idx in rows.index:
                pos[idx] = x
            S.draw_bar(ax, x, width * 0.92, mean, p99, lo, hi, **S.bar_style(key, j))
            values += [v for v in (mean, p99, lo, hi) if v == v and v > 0]
    marks = C.paper_points(compare, agg, ops={op})
    drawn = []
    for m in marks:
        if m["idx"] in pos:
            drawn.append((pos[m["idx"]], m["value"], m["relative"]))
            if m["value"] > 0:
                values.append(m["value"])
    if values and max(values) / min(values) > 100:
        ax.set_yscale("log")
        ax.grid(True, which="major", axis="y")
        ax.set_ylim(bottom=10 ** math.floor(math.log10(min(values) * 0.9)),
                    top=max(values) * 2.5)
    else:
        ax.set_ylim(0, (max(values) if values else 1) * 1.12)
    ax.grid(False, axis="x")
    for x, y, rel in drawn:
        S.draw_paper(ax, x, y, relative=rel)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([S.label(k) for k in keys], rotation=30, ha="right",
                       rotation_mode="anchor")
    ax.set_xlim(-0.6, len(keys) - 0.4)
    ax.tick_params(axis="x", length=0)
    return dict(threads=threads, seeds=seeds, paper_abs=any(not r for _, _, r in drawn),
                paper_rel=any(r for _, _, r in drawn), p99=any_p99)


def main(argv):
    ap = C.parser(NAME, __doc__)
    args = ap.parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    df, skipped = C.split_skipped(C.load_results(res, NAME))
    compare = C.load_compare(res)
    S.apply()

    access = select(df, "access")
    alloc = select(df, "alloc")
    if access.empty and alloc.empty:
        raise C.PlotError(f"{C.display_path(df.attrs['path'])} has no access (io=read) or "
                          f"alloc rows: nothing to draw")
    fig, axes = S.plt.subplots(1, 2, figsize=(S.FULL_WIDTH_IN, 2.55))
    size = access["size_bytes"].iloc[0] if not access.empty else ""
    ta = "(a) Memory access" + (f" ({C.fmt_size(size)} READ)" if size else " (READ)")
    info_a = panel(axes[0], C.aggregate(access), compare, "access", ta)
    info_b = panel(axes[1], C.aggregate(alloc), compare, "alloc", "(b) Memory allocation")

    threads = sorted(set(info_a["threads"]) | set(info_b["threads"]), key=C.num_sort_key)
    handles = S.dim_handles(threads, "{} thread")
    for h, t in zip(handles, threads):
        h.set_label(f"{t} thread" + ("" if t == "1" else "s") if t else "threads: ?")
    if info_a["p99"] or info_b["p99"]:
        handles.append(S.p99_handle())
    else:
        C.warn(f"{NAME}: no lat_us_p99 values; bars show the mean only")
    seeds = max(info_a["seeds"], info_b["seeds"])
    if seeds > 1:
        handles.append(S.seeds_handle(seeds))
    handles += S.paper_handles(info_a["paper_abs"] or info_b["paper_abs"],
                               info_a["paper_rel"] or info_b["paper_rel"])
    fig.tight_layout(w_pad=2.0, rect=(0, 0.06 if skipped else 0, 1, 0.9))
    C.note_skipped(fig, skipped)
    fig.legend(handles=handles, loc="upper center", ncol=len(handles),
               bbox_to_anchor=(0.5, 1.0))
    png, pdf = S.savefig(fig, os.path.join(out, NAME))
    print(f"wrote {C.display_path(png)} and {C.display_path(pdf)}")
    return 0


if __name__ == "__main__":
    C.run_main(main)
