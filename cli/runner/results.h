// What `dmbench run` writes under results/<name>/ (see runner.h): one file
// per point as it finishes, then the figure's CSV, compare.csv and
// meta.json from every point that has a result.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/runner/spec.h"

namespace dmb::runner {

// Replaces `path` with `text` at once (a .tmp file renamed over it): an
// interrupted run leaves the old file or the new one, never half of one.
void WriteAtomically(const std::filesystem::path& path, const std::string& text);

// points/<id>.json: the point, its metrics, its wall time and the command
// that ran it.
std::string PointJson(const Point& p, const std::map<std::string, double>& metrics, double wall_s,
                      const std::vector<std::string>& cmd);
// True when `path` holds this very point's result (same point hash).
bool HasResult(const std::filesystem::path& path, const Point& p);

// NAME.csv (every point of `all` with a result in dir/points, in spec
// order), compare.csv and meta.json (wall_s: the run's wall time).
void WriteResults(const Spec& spec, const std::vector<Point>& all, const std::filesystem::path& dir,
                  double wall_s);
// The wall time an earlier run recorded in `meta` (0 when there is none).
double EarlierWallSeconds(const std::filesystem::path& meta);

// The CSV's columns, in order (the plots in plots/ read them by name).
const std::vector<std::string>& CsvColumns();

}  // namespace dmb::runner
