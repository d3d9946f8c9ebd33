#!/usr/bin/env python3
"""Regenerates results/README.md from every results/*/compare.csv and
meta.json: per experiment its title, source, git sha (and dirty flag), wall
time, figure, and a table of every value the paper states beside ours (ratio
to 2 decimals, verdict hit / miss / no data), hit or miss, with a summary line.
results/simulator-speed (`make bench`) gets a section of its own: the
simulator's WR rate per case against its bare loop and the 0.2 target, kept
out of the paper counts.

The output is deterministic: experiments in natural name order, rows in
compare.csv order, and no timestamp but the ones meta.json carries.
"""

import argparse
import math
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402
import simulator_speed as SPEED  # noqa: E402

COMMAND = "make figures"


def natural_key(s):
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", s)]


def md(s):
    """Text safe inside a Markdown table cell."""
    s = "" if s is None else str(s)
    if s.lower() == "nan":
        s = ""
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def num(v):
    """A value as the papers write it, 4 significant digits: 14,158 / 170.1 /
    22.5 / 1.126 / 0.8846."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return ""
    if not math.isfinite(f):
        return ""
    if abs(f) >= 1000:
        return f"{f:,.0f}"
    return f"{f:.4g}"


def ratio(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return ""
    return f"{f:.2f}" if math.isfinite(f) else ""


def wall(s):
    try:
        s = float(s)
    except (TypeError, ValueError):
        return "unknown"
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def what(row):
    """The point a paper value is about: 'onesided_mw/sep alloc, 24 threads, offload_qps=96'."""
    parts = []
    sysv = "/".join(x for x in (row.get("system", ""), row.get("variant", "")) if x)
    head = " ".join(x for x in (sysv, row.get("op", "")) if x)
    if head:
        parts.append(head)
    t = row.get("threads", "")
    if t:
        parts.append(f"{t} thread" + ("" if t == "1" else "s"))
    for p, v in C.params_of(row):
        parts.append(f"{p}={C.fmt_size(v) if p in ('size_bytes', 'size') else v}")
    return ", ".join(parts)


def metric_cell(row):
    m = row.get("metric", "")
    note = row.get("note", "")
    rel = C.relative_to(note)
    if rel:
        return f"{m} \u00f7 ({', '.join(f'{k}={v}' for k, v in rel.items())})"
    return m + (f" ({note})" if note else "")


def head_lines(name, d, meta, make):
    """The heading, and (meta.json missing) the line that says so."""
    title = (meta or {}).get("title") or name
    lines = [f"## {md(name)}" + (f": {md(title)}" if title != name else ""), ""]
    if meta is None:
        lines.append(f"- meta.json: missing or unreadable (run `{make}`)")
        C.warn(f"{C.display_path(os.path.join(d, 'meta.json'))} missing or unreadable")
    else:
        if meta.get("source"):
            lines.append(f"- Source: {md(meta['source'])}")
        sha = str(meta.get("git_sha") or "unknown")
        dirty = meta.get("dirty")
        dirty_s = {"true": " (dirty)", "false": " (clean)"}.get(str(dirty).lower(), "")
        lines.append(f"- Git: `{md(sha[:12])}`{dirty_s}")
    return lines


def figure_lines(name, d, make):
    png = os.path.join(d, f"{name}.png")
    if not os.path.isfile(png):
        return [f"- Figure: not drawn yet (`{make}`)", ""]
    pdf = f" ([PDF]({name}/{name}.pdf))" if os.path.isfile(
        os.path.join(d, f"{name}.pdf")) else ""
    return [f"- Figure: [{name}.png]({name}/{name}.png){pdf}", "",
            f"![{md(name)}]({name}/{name}.png)", ""]


def section(name, d):
    meta = C.load_meta(d)
    lines = head_lines(name, d, meta, f"make {name}")
    if meta is not None:
        extra = []
        if meta.get("backend"):
            extra.append(f"backend {md(meta['backend'])}")
        if meta.get("profile"):
            extra.append(f"profile {md(meta['profile'])}")
        seeds = meta.get("seeds")
        if isinstance(seeds, list) and seeds:
            extra.append("seed" + ("s " if len(seeds) > 1 else " ") +
                         ", ".join(str(s) for s in seeds))
        extra.append(f"wall time {wall(meta.get('wall_s'))}")
        if meta.get("generated_at"):
            extra.append(f"run at {md(meta['generated_at'])}")
        lines.append("- Run: " + "; ".join(extra))
        hashes = [f"{k.replace('_hash', '')} `{md(meta[k])}`"
                  for k in ("spec_hash", "calibration_hash") if meta.get(k)]
        if hashes:
            lines.append("- Hashes: " + ", ".join(hashes))
    lines += figure_lines(name, d, f"make {name}")
    counts = table(d, lines)
    lines.extend(findings(meta))
    return lines, counts


def speed_section(name, d):
    """results/simulator-speed: provenance, figure, and per case the model's and
    the bare loop's WR rates; returns (lines, cases meeting the target, cases)."""
    meta = C.load_meta(d)
    lines = head_lines(name, d, meta, "make bench")
    if meta is not None:
        run = [f"host {md(meta.get('host') or 'unknown')}"]
        if meta.get("cores"):
            run.append(f"{md(meta['cores'])} cores")
        if meta.get("build_type"):
            run.append(f"build {md(meta['build_type'])}")
        load = meta.get("load_avg")
        if isinstance(load, list) and load:
            run.append(f"load average {num(load[0])} at the start")
        run.append(f"wall time {wall(meta.get('wall_s'))}")
        if meta.get("generated_at"):
            run.append(f"run at {md(meta['generated_at'])}")
        lines.append("- Run: " + "; ".join(run))
    lines += figure_lines(name, d, "make bench")
    try:
        cases = SPEED.load_cases(d)
    except C.PlotError as e:
        C.warn(str(e))
        return lines + [f"No cases: {md(e)}", ""], 0, 0
    lines.append("| Case | Model WR/s | Bare WR/s | Model / bare | Events / WR | "
                 f"Target {SPEED.TARGET:g} |")
    lines.append("|---|---:|---:|---:|---:|---|")
    met = 0
    for r in cases:
        ok = r["model_over_bare"] >= SPEED.TARGET
        met += ok
        lines.append(f"| {md(r['label'])} | {num(r['sim_wr_per_s'])} | "
                     f"{num(r['bare_wr_per_s'])} | {ratio(r['model_over_bare'])} | "
                     f"{ratio(r['events_per_wr'])} | {'met' if ok else '**short**'} |")
    lines += ["", f"Target model / bare ≥ {SPEED.TARGET:g} met by {met} of {len(cases)} "
              "case(s). Rates are wall-clock: they mean something only on an idle machine.",
              ""]
    return lines, met, len(cases)


def findings(meta):
    """The spec's `findings:` (what bounds what, measured), as a list."""
    items = (meta or {}).get("findings") or []
    if not isinstance(items, list) or not items:
        return []
    return ["Findings (from the spec):", ""] + [f"- {md(str(f))}" for f in items] + [""]


def table(d, lines):
    """Appends the paper-vs-ours table of compare.csv; returns the verdict counts."""
    compare_path = os.path.join(d, "compare.csv")
    counts = {"hit": 0, "miss": 0, "no data": 0}
    if not os.path.isfile(compare_path):
        C.warn(f"{C.display_path(compare_path)} not found")
        lines.append("No compare.csv: the paper's values were not compared.")
        lines.append("")
        return counts
    cmp = C.load_compare(d)
    if cmp.empty:
        lines.append("The spec states no paper values.")
        lines.append("")
        return counts
    lines.append("| What the paper states | Where | Point | Metric | Paper | Ours | Ratio "
                 "| Verdict |")
    lines.append("|---|---|---|---|---:|---:|---:|---|")
    for _, r in cmp.iterrows():
        row = {k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        verdict = str(row.get("verdict", "")).strip().lower() or "no data"
        if verdict not in counts:
            C.warn(f"{C.display_path(compare_path)}: unknown verdict '{verdict}'")
            counts[verdict] = 0
        counts[verdict] += 1
        shown = {"hit": "hit", "miss": "**miss**", "no data": "no data"}.get(
            verdict, md(verdict))
        lines.append("| " + " | ".join([
            md(row.get("label", "")), md(row.get("where", "")), md(what(row)),
            md(metric_cell(row)), num(row.get("paper")), num(row.get("ours")),
            ratio(row.get("ratio")), shown]) + " |")
    lines.append("")
    lines.append(summary(counts))
    lines.append("")
    return counts


def summary(counts):
    s = f"{counts.get('hit', 0)} hit, {counts.get('miss', 0)} miss"
    for k in sorted(counts):
        if k not in ("hit", "miss") and counts[k]:
            s += f", {counts[k]} {k}"
    return s


def anchor(heading):
    """GitHub's anchor of a '## ...' heading."""
    return re.sub(r"[^a-z0-9 _-]", "", heading[3:].lower()).replace(" ", "-")


def render(results):
    names = sorted((e for e in os.listdir(results)
                    if os.path.isdir(os.path.join(results, e)) and
                    (os.path.isfile(os.path.join(results, e, "compare.csv")) or
                     os.path.isfile(os.path.join(results, e, "meta.json")) or
                     os.path.isfile(os.path.join(results, e, f"{e}.csv")) or
                     os.path.isfile(os.path.join(results, e, f"{e}.json")))),
                   key=natural_key)
    head = [
        "<!-- Generated by plots/results_readme.py (`" + COMMAND + "`); do not edit. -->",
        "# Results",
        "",
        f"Generated by `{COMMAND}` (`plots/results_readme.py`) from every "
        "`results/*/compare.csv` and `meta.json`; edits here are overwritten.",
        "",
        "Each experiment's table lists every value its paper states beside ours, hit or "
        "miss: *ratio* = ours / paper, and *hit* means the ratio is within the spec's "
        "tolerance (25% unless the spec says otherwise). A metric written `m \u00f7 (k=v)` "
        "is our m divided by our m at the point with k=v (the paper states a ratio). "
        "Reproduce one experiment with `make NAME`.",
        "",
    ]
    if not names:
        C.warn(f"no experiments under {C.display_path(results)}")
        return "\n".join(head + ["No results yet: run `make figures`.", ""])
    body, index, total = [], [], {"hit": 0, "miss": 0, "no data": 0}
    speed = []
    for name in names:
        if name == SPEED.NAME:
            lines, met, n = speed_section(name, os.path.join(results, name))
            body += lines
            speed = ["", f"Simulator speed (`make bench`): [{name}](#{anchor(lines[0])}), "
                     f"model / bare ≥ {SPEED.TARGET:g} in {met} of {n} case(s)."]
            continue
        lines, counts = section(name, os.path.join(results, name))
        body += lines
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
        index.append(f"| [{md(name)}](#{anchor(lines[0])}) | {counts.get('hit', 0)} | "
                     f"{counts.get('miss', 0)} | {counts.get('no data', 0)} |")
    head += ["| Experiment | Hit | Miss | No data |", "|---|---:|---:|---:|"] + index
    head += speed + ["", f"Overall: {summary(total)}.", ""]
    return "\n".join(head + body).rstrip("\n") + "\n"


def main(argv):
    ap = argparse.ArgumentParser(prog="results_readme.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", metavar="DIR", default="results",
                    help="the results root holding one directory per experiment "
                         "(default: results, from the repository root)")
    ap.add_argument("--output", metavar="FILE", default=None,
                    help="where to write (default: DIR/README.md); '-' for stdout")
    args = ap.parse_args(argv)
    results = args.results
    if results == "results" and not os.path.isdir(results):
        alt = os.path.join(C.REPO_ROOT, "results")
        if os.path.isdir(alt):
            results = alt
    if not os.path.isdir(results):
        raise C.PlotError(f"{C.display_path(results)} not found: run `make figures` first")
    text = render(results)
    out = args.output or os.path.join(results, "README.md")
    if out == "-":
        sys.stdout.write(text)
        return 0
    C.write_text(out, text)
    return 0


if __name__ == "__main__":
    C.run_main(main)
