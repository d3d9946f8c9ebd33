// The runner's side of the micro program's interface (cli/dmb_micro): the
// command line that runs a point, and the metrics read back from its
// Google Benchmark JSON.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/runner/spec.h"

namespace dmb::runner {

// The point's parameters with the op's defaults filled in, so that a point
// file says everything.
std::map<std::string, std::string> PointParams(const Point& p);

// `micro_path --bench OP [--backend B EXTRA...] --system S --set K=V ...
// --seed N` and the Google Benchmark flags that write its JSON to
// `out_json`. `backend` other than sim, and `extra` (e.g. --mn HOST:PORT
// --devices D), go right after the bench.
std::vector<std::string> MicroCommand(const std::string& micro_path, const Point& p,
                                      const std::string& out_json,
                                      const std::string& backend = "sim",
                                      const std::vector<std::string>& extra = {});

// The metrics a point's result has (the micro program's counters, the
// counts, then virtual_s: the virtual time of the measured phase).
const std::vector<std::string>& MetricCols();

// The metrics of the micro program's one benchmark entry in `gb_json`;
// throws std::runtime_error when there is not exactly one.
std::map<std::string, double> ParseMicroJson(const std::filesystem::path& gb_json);

}  // namespace dmb::runner
