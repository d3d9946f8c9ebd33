// dmbench: the command-line entry point.
//
//   dmbench calibrate [--profile cx5] [--json]   primitive checks vs sources
//   dmbench profile   [--profile cx5]            the profile's values and sources
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "fabric/sim/profile.h"
#include "microbench/primitives.h"

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*cal) return Calibrate(profile, json, seed);
    if (*prof) return ShowProfile(profile);
  } catch (const std::exception& e) {
    fmt::print(stderr, "dmbench: error: {}\n", e.what());
    return 2;
  }
  return 0;
}
