// Experiment specs (experiments/*.yaml): what `dmbench run` expands into
// points, each one run of a Google Benchmark program (cli/dmb_micro).
//
//   name: figure-10                      # results go to results/<name>/
//   title: "Latency of memory access (a) and allocation (b)"
//   source: "OneSidedMW (NSDI'26) §6.3, Figure 10"
//   cluster: {cns: 1, mn_cores: 1, pool: 1GB}     # defaults for every run
//   seeds: [1]
//   runs:
//     - op: access                       # access | alloc | offload_read | mr_reg | mw_bind
//       params: {io: read, size: 4KB, ops: 2000}  # scalars
//       grid: {threads: [1, 24]}         # lists: the cartesian product is swept
//       systems:                         # access/alloc: approaches (registry names)
//         - {system: static_mr}
//         - {system: rpc_mw, variant: type2, knobs: {mw_type: 2}}
//   paper:                               # the paper's stated values (validation only)
//     - label: "OneSidedMW allocation, 1 thread"
//       where: "§6.3 text"
//       match: {system: onesided_mw, variant: sep, op: alloc, threads: 1}
//       metric: lat_us_mean
//       value: 10.7
//       relative_to: {system: static_mr}  # optional: ours = metric / metric of that row
//       tolerance: 0.25                  # optional: |ours/paper - 1| <= tolerance is a hit
//   findings:                            # optional: what the runs show and why (measured,
//     - "One Alloc QP saturates at ..."  # with numbers), listed under the table in
//                                        # results/README.md
//
// Parameter keys (params and grid share them): threads, cns, mn_cores
// (integer or "unlimited"), pool, io (read|write), size, ops, offload_qps,
// mw_type, profile (access/alloc/kv: the sim's calibration profile with
// readings, e.g. cx5+cn_facing; results carry it in a `profile` column). Validation happens before
// anything runs and every error names the key and the fix: `runs[1].systems[2].knobs.group_size:
// expected an integer in [2, 7], got "three"`.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace dmb::runner {

class SpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SystemEntry {
  std::string system;
  std::string variant;
  std::map<std::string, std::string> knobs;  // validated against the registry
};

struct Run {
  std::string op;
  std::map<std::string, std::string> params;             // scalars, canonical spelling
  std::map<std::string, std::vector<std::string>> grid;  // key -> values, in file order
  std::vector<std::string> grid_order;                   // keys in file order
  std::vector<SystemEntry> systems;                      // empty for primitives
};

struct PaperValue {
  std::string label;
  std::string where;
  std::map<std::string, std::string> match;
  std::map<std::string, std::string> relative_to;  // empty: absolute
  std::string metric;
  double value = 0;
  double tolerance = 0.25;
};

struct Spec {
  std::string path;
  std::string name;
  std::string title;
  std::string source;
  std::map<std::string, std::string> cluster;
  std::vector<uint64_t> seeds;
  std::vector<Run> runs;
  std::vector<PaperValue> paper;
  std::vector<std::string> findings;  // rendered in results/README.md
  uint64_t hash = 0;                  // of the file's bytes
};

// One invocation of the micro program.
struct Point {
  std::string id;  // stable, file-name safe: "alloc-onesided_mw-sep-threads_24-seed1"
  std::string op;
  std::string system;  // empty for primitives
  std::string variant;
  std::map<std::string, std::string> knobs;
  std::map<std::string, std::string> params;  // every parameter, defaults filled in
  uint64_t seed = 1;
  uint64_t hash = 0;  // of everything above: a changed point reruns
};

// Parses and validates; throws SpecError naming the key and the fix (not
// the file: the caller prefixes the path it was given).
Spec LoadSpec(const std::string& path);
Spec ParseSpec(const std::string& yaml_text, const std::string& path = "<spec>");
std::vector<Point> Expand(const Spec& spec);
// `dmbench run --param KEY=VALUE`: sets KEY in every run whose op takes it
// (e.g. keys=1000000 for the paper's scale). Throws SpecError naming the
// problem (unknown key, bad value, a run that sweeps KEY in its grid, no run
// taking it).
void OverrideParam(Spec* spec, const std::string& key, const std::string& value);

// The ops and parameter keys a spec may use (for errors and --help).
const std::vector<std::string>& KnownOps();
const std::vector<std::string>& KnownParams();
// Metrics the micro program reports (and a paper value may name).
const std::vector<std::string>& KnownMetrics();

uint64_t Fnv1a(const std::string& bytes);

}  // namespace dmb::runner
