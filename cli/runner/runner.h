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
//                      hash, spec hash, host, wall time
#pragma once

#include <string>
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
};

struct RunSummary {
  size_t total = 0;  // points selected (after --filter)
  size_t ran = 0;
  size_t skipped = 0;
  std::vector<std::string> failed;  // "id (see logs/id.log): last line"
  double wall_s = 0;
};

// Runs the selected points, then writes the CSV, compare.csv and meta.json
// from every point of the spec that has a result. Throws SpecError when the
// micro program is missing.
RunSummary RunSpec(const Spec& spec, const RunOptions& opt);

}  // namespace dmb::runner
