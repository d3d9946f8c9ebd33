// TraceCache: recorded traces kept on disk by (workload, scale, seed, knobs),
// so a later run replays the same trace without re-running the algorithm.
//
// A file is <dir>/<workload>-scale<scale>-seed<seed>[-<knobs>].trace holding
// a text key line (workload, scale, seed, the workload's version string,
// which changes whenever its algorithm or parameters change, and the knobs
// when set) and the serialized trace. Knobs at their defaults are "", so
// the files written before knobs existed keep their names and key lines. A file whose key line or
// body does not match is re-recorded. Files are written to a temporary name and renamed into place.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "apps/swap/trace.h"

namespace dmb::apps::swap {

struct TraceKey {
  std::string workload;
  double scale = 1.0;
  uint64_t seed = 0;
  std::string version;  // the workload's algorithm/parameter version
  std::string knobs;    // e.g. "skew=0.5"; "" for the workload's defaults
  std::string FileName() const;
  std::string KeyLine() const;
};

// Where the tools keep traces: $DMB_TRACE_DIR, else ~/.cache/dmbench/traces
// (/tmp/.cache/... without a HOME).
std::string DefaultTraceDir();

class TraceCache {
 public:
  explicit TraceCache(std::filesystem::path dir);

  // The trace for `key`: from disk if a valid file exists (*hit = true),
  // else from `record`, then stored.
  Trace GetOrRecord(const TraceKey& key, const std::function<Trace()>& record, bool* hit = nullptr);
  std::filesystem::path PathOf(const TraceKey& key) const { return dir_ / key.FileName(); }

 private:
  bool Load(const TraceKey& key, Trace* out) const;
  void Store(const TraceKey& key, const Trace& t) const;

  std::filesystem::path dir_;
};

}  // namespace dmb::apps::swap
