// What `dmbench run` writes under results/<name>/ (see runner.h): one file
// per point as it finishes, then the figure's CSV, compare.csv and
// meta.json from every point that has a result.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/runner/spec.h"

namespace dmb::runner {

// Replaces `path` with `text` at once (a .tmp file renamed over it): an
// interrupted run leaves the old file or the new one, never half of one.
void WriteAtomically(const std::filesystem::path& path, const std::string& text);

// The point's identity for `backend`: the spec's hash on the simulator, mixed
// with the backend's name elsewhere (FNV-1a), so a point done on one backend
// is not taken as done on another.
uint64_t PointHash(const Point& p, const std::string& backend);

// What running a point cost this host: its wall time, and the micro
// process's peak resident memory (the child's ru_maxrss; 0 if unknown).
struct PointCost {
  double wall_s = 0;
  double peak_rss_mb = 0;
};

// points/<id>.json: the point, its metrics, its cost (wall_s, peak_rss_mb)
// and the command that ran it (`hash`: PointHash's). `skipped`, when not
// empty: why the device could not run it ("needs CAP,..."), the CSV's
// `skipped` column.
std::string PointJson(const Point& p, uint64_t hash, const std::map<std::string, double>& metrics,
                      const PointCost& cost, const std::vector<std::string>& cmd,
                      const std::string& skipped = "");
// True when `path` holds this very point's result (`hash`: PointHash's).
bool HasResult(const std::filesystem::path& path, uint64_t hash);

// One line of `dmbench run --points-json`: the point's id, op, system,
// variant, seed, knobs and params (every parameter, defaults filled in).
std::string PointEntryJson(const Point& p);

// What meta.json says of where the points ran.
struct MetaOptions {
  std::string backend = "sim";  // the points' backend (and PointHash's)
  // A JSON object (text) whose members replace the runner's member of the
  // same name or are added before "findings"; "" for none.
  std::string meta_json;
  // The points that failed in the run writing the files ("id (log): why"):
  // meta.json's "failed_points", present only when there are some, so a
  // partial CSV says why it is partial.
  std::vector<std::string> failed;
};
// Throws SpecError when meta_json (non-empty) is not a JSON object.
void CheckMetaJson(const std::string& meta_json);

// NAME.csv (every point of `all` with a result for meta.backend in
// dir/points, in spec order), compare.csv and meta.json (wall_s: the run's
// wall time; peak_rss_mb: the largest of the points' and which point).
void WriteResults(const Spec& spec, const std::vector<Point>& all, const std::filesystem::path& dir,
                  double wall_s, const MetaOptions& meta);
// The wall seconds each point took when it last ran, by point id, from
// meta.json's "point_wall_s" (empty when there is no readable meta.json).
std::map<std::string, double> EarlierPointWalls(const std::filesystem::path& meta);

// The wall time an earlier run recorded in `meta` (0 when there is none).
double EarlierWallSeconds(const std::filesystem::path& meta);

// The CSV's columns, in order (the plots in plots/ read them by name).
const std::vector<std::string>& CsvColumns();

}  // namespace dmb::runner
