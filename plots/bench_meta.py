#!/usr/bin/env python3
"""Writes results/simulator-speed/meta.json after `make bench`: the run's
provenance, with the keys the runner's meta.json uses where they mean the
same (cli/runner/results.cc): name, title, source, git_sha, dirty (the code
differs from the commit; results/ does not count), host, wall_s,
generated_at; and what a speed measurement needs besides: cores, cpu_mhz,
load_avg (1, 5, 15 min, as the benchmark saw it when it started: the
numbers mean little unless the machine was idle), build_type and cxx_flags
(dmbench's build, from DIR/CMakeCache.txt; the benchmark JSON's
library_build_type is Debian's libbenchmark's own).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402


def git(*args):
    try:
        return subprocess.run(["git", "-C", C.REPO_ROOT, *args], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def cmake_cache(build_dir):
    """CMakeCache.txt's NAME:TYPE=VALUE entries as {NAME: VALUE} ({} when absent)."""
    out = {}
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8") as f:
            for line in f:
                name, sep, value = line.rstrip("\n").partition("=")
                if sep and not line.startswith(("#", "//")):
                    out[name.split(":")[0]] = value
    except OSError:
        C.warn(f"{C.display_path(build_dir)}/CMakeCache.txt not readable: no build type")
    return out


def meta(bench_json, build_dir, start):
    try:
        with open(bench_json, encoding="utf-8") as f:
            ctx = json.load(f).get("context", {})
    except (OSError, ValueError, AttributeError) as e:
        raise C.PlotError(f"{C.display_path(bench_json)}: cannot read it ({e})")
    cache = cmake_cache(build_dir)
    build_type = cache.get("CMAKE_BUILD_TYPE", "")
    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no", "--", ":(top)",
                 ":(top,exclude)results")
    return {
        "name": "simulator-speed",
        "title": "Simulated WRs per wall-clock second, model and bare loop, per case",
        "source": "issue 18; microbench/sim_speed_bench.cc (`make bench`)",
        "git_sha": sha or "unknown",
        "dirty": None if status is None else bool(status),
        "host": ctx.get("host_name") or socket.gethostname(),
        "cores": ctx.get("num_cpus") or os.cpu_count(),
        "cpu_mhz": ctx.get("mhz_per_cpu"),
        "load_avg": ctx.get("load_avg"),
        "build_type": build_type,
        "cxx_flags": " ".join(x for x in (cache.get("CMAKE_CXX_FLAGS", ""),
                                          cache.get(f"CMAKE_CXX_FLAGS_{build_type.upper()}", ""))
                              if x),
        "benchmark_library_build_type": ctx.get("library_build_type"),
        "wall_s": round(time.time() - start, 1),
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def main(argv):
    ap = argparse.ArgumentParser(prog="bench_meta.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", metavar="FILE", required=True,
                    help="sim_speed_bench's --benchmark_out JSON")
    ap.add_argument("--build", metavar="DIR", default="build/release",
                    help="the build the benchmark came from (default: build/release)")
    ap.add_argument("--start", metavar="EPOCH_S", type=float, required=True,
                    help="when the run started (date +%%s.%%N), for wall_s")
    ap.add_argument("--out", metavar="FILE", default=None,
                    help="default: meta.json beside --bench")
    args = ap.parse_args(argv)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.bench)), "meta.json")
    text = json.dumps(meta(args.bench, args.build, args.start), indent=2) + "\n"
    C.write_text(out, text)
    return 0


if __name__ == "__main__":
    C.run_main(main)
