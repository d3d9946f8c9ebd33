// `dmbench run SPEC`: expands a spec into points (spec.h), runs each point
// as its own process (the Google Benchmark program cli/dmb_micro, `jobs` at a
// time; its command line and JSON: micro_command.h), and leaves under
// results/<name>/ (results.h writes them):
//   points/<id>.json   one per point: parameters, metrics, wall time. Written
//                      atomically when the point finishes, so an interrupted
//                      run resumes where it stopped; a point whose file exists
//                      with the same parameters is skipped unless --force.
//   logs/<id>.log      the point's stdout and stderr
//   <name>.csv         tidy: one row per point, units in column names
//   compare.csv        the paper's stated values beside ours (ratio, hit/miss)
//   meta.json          git sha and dirty flag, backend, seeds, calibration
//                      hash, spec hash, host, wall time, each point's wall
//                      time (point_wall_s), the points that failed
//                      in this run (failed_points, when any)
//
// Points run longest first by the wall time meta.json recorded for them
// (points it does not know first, in spec order), so with several jobs a
// long point does not start last and finish alone.
//
// A sweep spread over machines (ansible/figure.yml): each machine runs one
// shard (`shard_count` > 1: every shard_count-th selected point, from
// shard_index), the points/ and logs/ of every shard are copied into one
// results/<name>/, and a `collect` run writes the CSV, compare.csv and
// meta.json from them without running anything: the same files a run on one
// machine writes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cli/runner/spec.h"

namespace dmb::runner {

struct RunOptions {
  bool force = false;
  int jobs = 1;
  std::string filter;  // glob on point ids; empty: every point
  std::string results_root = "results";
  std::string micro_path;  // the dmb_micro executable
  bool tty = false;        // progress on one line (\r) instead of one per point
  int shard_index = 0;     // 0-based; points i of the selection with i % count == index
  int shard_count = 1;
  bool collect = false;  // run nothing: results from the point files already there
  // "sim", or "ibv": every point runs on real devices (`dmb_micro --backend
  // ibv` plus micro_args, e.g. --mn HOST:PORT --devices D). A point's result
  // counts only for the backend it ran on. A point the device cannot run
  // (dmb_micro exits 77) is recorded as skipped, with the capabilities it
  // lacks in the CSV's `skipped` column.
  std::string backend = "sim";
  std::vector<std::string> micro_args;  // appended to every micro command
  // A JSON object (text) whose members go into meta.json, replacing the
  // runner's member of the same name (backend, host, wall_s) or added after
  // them: where the points ran (figure.yml's hosts, devices, capabilities).
  std::string meta_json;
};

struct RunSummary {
  size_t total = 0;  // points selected (after --filter)
  size_t ran = 0;
  size_t skipped = 0;
  std::vector<std::string> failed;        // "id (see logs/id.log): last line"
  std::vector<std::string> reproduce;     // failed[i]'s command, to run it alone (console output)
  std::vector<std::string> missing;       // collect: selected points without a result
  std::vector<std::string> skipped_caps;  // ibv: "id: needs CAP,..." (device lacks them)
  double wall_s = 0;
};

// Runs the selected points, then writes the CSV, compare.csv and meta.json
// from every point of the spec that has a result. Throws SpecError when the
// micro program is missing (not needed to collect), for a bad shard or for
// meta_json that is not a JSON object.
RunSummary RunSpec(const Spec& spec, const RunOptions& opt);

// The points `opt` selects (--filter, then the shard) as a JSON array, one
// object per point: id, op, system, variant, seed, knobs and params (every
// parameter, defaults filled in, as the point's file records them). What
// ansible/figure.yml backend=ibv starts a daemon for, point by point.
std::string PointsJson(const Spec& spec, const RunOptions& opt);

// The ids of the points `opt` selects (--filter, then the shard), in spec
// order: what `dmbench run --validate` lists. Throws SpecError as RunSpec
// does for a filter that matches nothing.
std::vector<std::string> SelectedIds(const Spec& spec, const RunOptions& opt);

// The progress line's estimate of the seconds a run has left: `left_s` holds
// each unfinished point's expected seconds still to run. `jobs` at a time
// share the sum, but a point cannot be split: never less than the longest.
double SecondsLeft(const std::vector<double>& left_s, int jobs);

// How this run's points compare with the wall times meta.json recorded for
// them: a run at another scale (--param keys=1000000), on another machine or
// beside other work takes a different multiple of every recorded wall. The
// ETA scales the recorded walls of the points left by factor(): this run's
// seconds over the recorded seconds of its finished points that have one
// (1 until one has).
struct WallPace {
  double actual_s = 0;
  double recorded_s = 0;
  void Add(double recorded, double actual) {
    recorded_s += recorded;
    actual_s += actual;
  }
  double factor() const { return recorded_s > 0 ? actual_s / recorded_s : 1; }
};

// "2/3" (the second of three shards) as {index 1, count 3}; throws SpecError
// naming the text otherwise.
std::pair<int, int> ParseShard(const std::string& text);

}  // namespace dmb::runner
