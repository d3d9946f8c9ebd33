#!/usr/bin/env python3
"""How fast the simulator itself runs (`make bench`, microbench/sim_speed_bench.cc;
issue 18). Per case (READ ping-pong, 288 QPs x 24, 6,912 QPs x 4, the
OneSidedMW allocation storm) the simulated WRs the model executes per
wall-clock second (sim_wr_per_s) beside its bare reference loop's
(bare_wr_per_s: the same Simulator's event queue and coroutines, the same
shape and count of WRs, no RNIC model), on a log axis. Above each pair:
model_over_bare; on each model bar a dashed tick where the target
(model_over_bare = 0.2) would put it.

Reads results/simulator-speed/simulator-speed.json (Google Benchmark's JSON)
and meta.json; writes simulator-speed.png and simulator-speed.pdf.
"""

import json
import math
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import style as S  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

NAME = "simulator-speed"
TARGET = 0.2  # model_over_bare the issue asks for
COUNTERS = ["sim_wr_per_s", "bare_wr_per_s", "model_over_bare", "events_per_wr"]
CASE_LABELS = {
    "BM_ReadPingPong": "READ ping-pong",
    "BM_Read288QpsDepth24": "288 QPs \u00d7 24",
    "BM_Read6912QpsDepth4": "6,912 QPs \u00d7 4",
    "BM_OneSidedMwAllocStorm": "OneSidedMW alloc storm",
}
MODEL_COLOR = "#0072b2"
BARE_COLOR = "#bbbbbb"


def case_label(name):
    """'BM_ReadPingPong/min_time:1.000' -> 'READ ping-pong'."""
    base = str(name).split("/")[0]
    return CASE_LABELS.get(base, base.removeprefix("BM_"))


def load_cases(results_dir):
    """The cases of NAME.json in benchmark order, as dicts (case, label and
    every counter); a case that failed or lacks a counter is named and left
    out. PlotError when the file is absent or unreadable or no case is left."""
    path = os.path.join(results_dir, f"{NAME}.json")
    if not os.path.isfile(path):
        raise C.PlotError(f"{C.display_path(path)} not found: run `make bench` first")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise C.PlotError(f"{C.display_path(path)}: cannot read it ({e})")
    benches = data.get("benchmarks") if isinstance(data, dict) else None
    rows = []
    for b in benches if isinstance(benches, list) else []:
        if not isinstance(b, dict) or b.get("run_type", "iteration") != "iteration":
            continue
        name = b.get("name", "?")
        if b.get("error_occurred"):
            C.warn(f"{NAME}: {name} failed ({b.get('error_message', '')}), not drawn")
            continue
        missing = [k for k in COUNTERS if not isinstance(b.get(k), (int, float))]
        if missing:
            C.warn(f"{NAME}: {name} lacks {', '.join(missing)}, not drawn")
            continue
        rows.append(dict(case=name.split("/")[0], label=case_label(name),
                         **{k: float(b[k]) for k in COUNTERS}))
    if not rows:
        raise C.PlotError(f"{C.display_path(path)} has no case with the counters "
                          f"{', '.join(COUNTERS)}")
    return rows


def subtitle(meta):
    """'vm, 2 cores, Release, 7f0d757 (dirty)' from meta.json (or '')."""
    if not meta:
        return ""
    parts = [str(meta[k]) for k in ("host",) if meta.get(k)]
    if meta.get("cores"):
        parts.append(f"{meta['cores']} cores")
    if meta.get("build_type"):
        parts.append(str(meta["build_type"]))
    if meta.get("git_sha"):
        dirty = " (dirty)" if str(meta.get("dirty")).lower() == "true" else ""
        parts.append(str(meta["git_sha"])[:7] + dirty)
    return ", ".join(parts)


def draw(ax, rows):
    w = 0.38
    top, low = 0.0, math.inf
    for i, r in enumerate(rows):
        ax.bar(i - w / 2, r["sim_wr_per_s"], w, color=MODEL_COLOR,
               edgecolor=S.darken(MODEL_COLOR), linewidth=0.5, zorder=3)
        ax.bar(i + w / 2, r["bare_wr_per_s"], w, color=BARE_COLOR,
               edgecolor=S.darken(BARE_COLOR), linewidth=0.5, zorder=3)
        ax.hlines(TARGET * r["bare_wr_per_s"], i - w, i, colors="black",
                  linestyles=(0, (3, 1.5)), linewidth=0.9, zorder=4)
        high = max(r["sim_wr_per_s"], r["bare_wr_per_s"])
        top = max(top, high)
        low = min(low, r["sim_wr_per_s"], TARGET * r["bare_wr_per_s"])
        missed = r["model_over_bare"] < TARGET
        ax.annotate(f"{r['model_over_bare']:.2f}", (i, high), xytext=(0, 2),
                    textcoords="offset points", ha="center", va="bottom", fontsize=7,
                    color="#b2182b" if missed else "black")
    ax.set_yscale("log")
    if top > 0 and low > 0:  # whole decades, the lowest bar well above the floor
        ax.set_ylim(10 ** math.floor(math.log10(low / 2)), top * 4)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["label"] for r in rows], rotation=15, ha="right")
    ax.set_ylabel("simulated WRs per wall second")


def main(argv):
    ap = C.parser(NAME, __doc__)
    args = ap.parse_args(argv)
    res, out = C.resolve_dirs(args, NAME)
    rows = load_cases(res)
    S.apply()
    fig, ax = S.plt.subplots(figsize=(S.COLUMN_WIDTH_IN * 1.3, 2.8))
    draw(ax, rows)
    sub = subtitle(C.load_meta(res))
    ax.set_title("model / bare above each pair (red: short of the target)" +
                 (f"\n{sub}" if sub else ""), fontsize=7)
    handles = [Patch(color=MODEL_COLOR, label="model (sim_wr_per_s)"),
               Patch(color=BARE_COLOR, label="bare loop (bare_wr_per_s)"),
               Line2D([], [], color="black", linestyle=(0, (3, 1.5)), linewidth=0.9,
                      label=f"target: {TARGET:g} \u00d7 bare")]
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1.0),
               ncol=len(handles), fontsize=6.5)
    os.makedirs(out, exist_ok=True)
    png, pdf = S.savefig(fig, os.path.join(out, NAME))
    print(f"wrote {C.display_path(png)} and {C.display_path(pdf)}")
    return 0


if __name__ == "__main__":
    C.run_main(main)
