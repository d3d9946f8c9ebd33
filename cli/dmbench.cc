// dmbench: the command-line entry point.
//
//   dmbench calibrate [--profile cx5] [--json]   primitive checks vs sources
//   dmbench profile   [--profile cx5]            the profile's values and sources
//   dmbench systems                                approaches and their knobs
//   dmbench micro alloc --system NAME [--set K=V]... [--threads N] [--cns N]
//                       [--mn-cores N|unlimited] [--json]
#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "fabric/sim/profile.h"
#include "microbench/alloc_bench.h"
#include "microbench/primitives.h"
#include "systems/registry.h"

namespace {

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

int Calibrate(const std::string& profile_name, bool json, uint64_t seed) {
  const auto profile = dmb::sim::Profile::ByName(profile_name);
  if (!json) {
    fmt::print(stderr,
               "running {} primitive microbenchmarks on the simulated cluster "
               "(profile {}, seed {})...\n",
               9, profile.name, seed);
  }
  uint64_t trace_hash = 0;
  const auto results = dmb::microbench::RunCalibration(profile, seed, &trace_hash);
  int misses = 0;
  for (const auto& r : results) misses += (r.ratio() < 0.9 || r.ratio() > 1.1);
  if (json) {
    fmt::print("{{\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      fmt::print(
          "  \"{}\": {{\"sim\": {:.6g}, \"source\": {:.6g}, \"unit\": \"{}\", "
          "\"source_ref\": \"{}\"}}{}\n",
          r.name, r.sim, r.source, r.unit, JsonEscape(r.source_ref),
          i + 1 < results.size() ? "," : "");
    }
    fmt::print("}}\n");
  } else {
    fmt::print("{:<26} {:>10} {:>10} {:<5} {:>6}  {}\n", "primitive", "sim", "source", "unit",
               "ratio", "source");
    for (const auto& r : results) {
      const bool ok = r.ratio() >= 0.9 && r.ratio() <= 1.1;
      fmt::print("{:<26} {:>10.3f} {:>10.3f} {:<5} {:>6.3f}{} {}\n", r.name, r.sim, r.source,
                 r.unit, r.ratio(), ok ? " " : "!", r.source_ref);
    }
    fmt::print("profile hash {:016x}; {} of {} primitives within 10% of their source\n",
               profile.Hash(), results.size() - misses, results.size());
    fmt::print("trace hash {:016x} (seed {}; the same seed reproduces it)\n", trace_hash, seed);
  }
  return misses == 0 ? 0 : 3;
}

int ShowProfile(const std::string& profile_name) {
  const auto p = dmb::sim::Profile::ByName(profile_name);
  fmt::print("profile {} (hash {:016x})\n", p.name, p.Hash());
  for (const auto& prm : p.Describe()) {
    fmt::print("  {:<28} {:>12.4g} {:<6} {}\n", prm.name, prm.value, prm.unit, prm.source);
  }
  fmt::print("CPU costs:\n");
  for (const auto& c : p.cpu_costs) {
    fmt::print("  {:<28} {:>12.4g} {:<6} {}\n", c.name, c.us, "us", c.source);
  }
  return 0;
}

int ListSystems() {
  for (const auto* s : dmb::systems::Registry::All()) {
    fmt::print("{}\n  {}\n", s->name, s->summary);
    for (const auto& k : s->knobs) {
      fmt::print("  --set {}=VALUE   (default {}) {}\n", k.name, k.default_value, k.help);
    }
  }
  return 0;
}

struct MicroArgs {
  std::string system;
  std::vector<std::string> sets;
  std::vector<int> threads;
  int cns = 1;
  std::string mn_cores = "1";
  int ops = 200;
  std::string pool = "1GB";
  bool json = false;
  uint64_t seed = 1;
};

int MicroAlloc(const MicroArgs& a) {
  dmb::microbench::AllocBenchSpec spec;
  spec.bed.system = a.system;
  for (const auto& s : a.sets) spec.bed.knobs.insert(dmb::systems::SplitAssignment(s));
  spec.bed.cns = a.cns;
  spec.bed.seed = a.seed;
  if (a.mn_cores == "unlimited") {
    spec.bed.mn_cores = dmb::microbench::kUnlimitedCores;
  } else {
    try {
      spec.bed.mn_cores = std::stoi(a.mn_cores);
    } catch (const std::exception&) {
      spec.bed.mn_cores = 0;
    }
    if (spec.bed.mn_cores < 1 || std::to_string(spec.bed.mn_cores) != a.mn_cores) {
      throw dmb::systems::ConfigError(
          "--mn-cores: expected a positive integer or 'unlimited', got \"" + a.mn_cores + "\"");
    }
  }
  const auto pool = dmb::systems::ParseSize(a.pool);
  if (!pool) {
    throw dmb::systems::ConfigError("--pool: expected a size like 256MB or 1GB, got \"" + a.pool +
                                    "\"");
  }
  spec.bed.pool_bytes = *pool;
  spec.ops_per_thread = a.ops;
  const std::vector<int> threads = a.threads.empty() ? std::vector<int>{1, 24} : a.threads;
  std::vector<dmb::microbench::AllocBenchResult> results;
  for (int t : threads) {
    spec.threads = t;
    if (!a.json) {
      fmt::print(stderr, "{} ({}): {} thread(s) x {} CN(s), {} MN core(s), {} allocs/thread...\n",
                 a.system, a.sets.empty() ? "defaults" : fmt::format("{}", fmt::join(a.sets, ",")),
                 t, a.cns, a.mn_cores, a.ops);
    }
    results.push_back(dmb::microbench::RunAllocBench(spec));
  }
  if (a.json) {
    fmt::print("[\n");
    bool first = true;
    for (const auto& r : results) {
      for (const auto* op : {&r.alloc, &r.free}) {
        fmt::print(
            "{}  {{\"system\": \"{}\", \"knobs\": \"{}\", \"threads\": {}, \"cns\": {}, "
            "\"mn_cores\": {}, \"op\": \"{}\", \"count\": {}, \"failures\": {}, "
            "\"lat_us_p50\": {:.4f}, \"lat_us_p99\": {:.4f}, \"lat_us_mean\": {:.4f}, "
            "\"mn_cpu_busy_frac\": {:.6f}, \"mn_cpu_cores_busy\": {:.4f}}}",
            first ? "" : ",\n", r.system, JsonEscape(r.knobs), r.threads, r.cns, r.mn_cores, op->op,
            op->count, op->failures, op->lat_us_p50, op->lat_us_p99, op->lat_us_mean,
            r.mn_cpu_busy_frac, r.mn_cpu_cores_busy);
        first = false;
      }
    }
    fmt::print("\n]\n");
    return 0;
  }
  fmt::print("{:<10} {:>7} {:>5} {:>10} {:>10} {:>10} {:>8} {:>12}  {}\n", "system", "threads",
             "op", "p50_us", "p99_us", "mean_us", "fails", "mn_cpu_busy", "knobs");
  for (const auto& r : results) {
    for (const auto* op : {&r.alloc, &r.free}) {
      fmt::print("{:<10} {:>7} {:>5} {:>10.2f} {:>10.2f} {:>10.2f} {:>8} {:>12.3f}  {}\n", r.system,
                 r.threads * r.cns, op->op, op->lat_us_p50, op->lat_us_p99, op->lat_us_mean,
                 op->failures, r.mn_cpu_busy_frac, r.knobs);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dmbench: RDMA disaggregated-memory management approaches on a deterministic simulated\n"
      "cluster (default) or real verbs. Run `dmbench SUBCOMMAND --help` for details."};
  app.require_subcommand(1);

  std::string profile = "cx5";
  bool json = false;
  uint64_t seed = 1;
  auto* cal = app.add_subcommand(
      "calibrate",
      "Measure each calibration primitive (one READ, one MW bind, one MR registration, one\n"
      "chained WR, ...) on the simulated cluster and compare it with its source. Exits 3 when\n"
      "a primitive is more than 10% off.");
  cal->add_option("--profile", profile, "NIC calibration profile")->capture_default_str();
  cal->add_flag("--json", json,
                "Print an object keyed by primitive: {sim, source, unit, source_ref}");
  cal->add_option("--seed", seed, "Root seed of the simulation")->capture_default_str();

  auto* prof = app.add_subcommand("profile", "Print a calibration profile's values and sources");
  prof->add_option("--profile", profile, "NIC calibration profile")->capture_default_str();

  auto* sys = app.add_subcommand("systems", "List the approaches and their knobs");

  MicroArgs micro_args;
  auto* micro = app.add_subcommand("micro", "Microbenchmarks of an approach on the simulator");
  micro->require_subcommand(1);
  auto* alloc = micro->add_subcommand(
      "alloc",
      "Allocation and free latency (p50/p99/mean, virtual us) and MN CPU busy fraction.\n"
      "Each CN thread allocates a batch of chunks, then frees them, over and over.\n"
      "Without --threads it runs 1 and 24 threads (OneSidedMW Fig 10b).");
  alloc->add_option("--system", micro_args.system, "Approach (see `dmbench systems`)")->required();
  alloc->add_option("--set", micro_args.sets, "Knob as KNOB=VALUE, e.g. --set mw_type=2");
  alloc->add_option("--threads", micro_args.threads, "CN threads per CN (repeatable)");
  alloc->add_option("--cns", micro_args.cns, "Compute nodes")->capture_default_str();
  alloc->add_option("--mn-cores", micro_args.mn_cores, "MN cores: N or 'unlimited'")
      ->capture_default_str();
  alloc->add_option("--ops", micro_args.ops, "Measured allocations per thread")
      ->capture_default_str();
  alloc->add_option("--pool", micro_args.pool, "MN memory the approach manages")
      ->capture_default_str();
  alloc->add_option("--seed", micro_args.seed, "Root seed")->capture_default_str();
  alloc->add_flag("--json", micro_args.json,
                  "JSON records: system, threads, op, lat_us_p50, lat_us_p99, lat_us_mean, "
                  "mn_cpu_busy_frac, ...");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*cal) return Calibrate(profile, json, seed);
    if (*prof) return ShowProfile(profile);
    if (*sys) return ListSystems();
    if (*alloc) return MicroAlloc(micro_args);
  } catch (const std::exception& e) {
    fmt::print(stderr, "dmbench: error: {}\n", e.what());
    return 2;
  }
  return 0;
}
