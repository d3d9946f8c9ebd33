#include "cli/runner/run_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "cli/runner/runner.h"

namespace dmb::runner {

CLI::App* AddRunCommand(CLI::App& app, RunCommandArgs* a) {
  auto* run = app.add_subcommand(
      "run",
      "Run an experiment spec (experiments/*.yaml) on the simulator: every point of its grid as\n"
      "its own process (dmb_micro, beside dmbench), then results/<name>/<name>.csv, compare.csv\n"
      "(the paper's values beside ours) and meta.json. Points already done are skipped, so an\n"
      "interrupted run resumes. Example: dmbench run experiments/figure-10.yaml --jobs 2");
  run->add_option("spec", a->spec, "The spec file")->required();
  run->add_flag("--force", a->force, "Rerun points that already have results");
  run->add_option("--jobs,-j", a->jobs, "Points run in parallel (default: one per core)");
  run->add_option("--filter", a->filter,
                  "Only points whose id matches this glob, e.g. 'alloc-*-threads_24-*'");
  run->add_option("--results", a->results, "Where results/<name>/ goes")->capture_default_str();
  run->add_option("--micro", a->micro,
                  "The micro program (default: $DMB_MICRO_PATH, else the dmb_micro beside "
                  "this dmbench)");
  run->add_flag("--validate", a->validate_only, "Only check the spec and list its points");
  run->add_option("--param", a->params,
                  "Override a parameter in every run that takes it, e.g. --param keys=1000000 "
                  "(the paper's scale); repeatable");
  return run;
}

namespace {

std::string DefaultMicro() {
  if (const char* e = std::getenv("DMB_MICRO_PATH")) return e;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return (self.parent_path() / "dmb_micro").string();
}

}  // namespace

int RunCommand(const RunCommandArgs& a) {
  Spec spec;
  try {
    spec = LoadSpec(a.spec);
    for (const auto& kv : a.params) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) throw SpecError("--param " + kv + ": expected KEY=VALUE");
      OverrideParam(&spec, kv.substr(0, eq), kv.substr(eq + 1));
    }
    (void)Expand(spec);
  } catch (const SpecError& e) {
    fmt::print(stderr, "dmbench run: {}: {}\n", a.spec, e.what());
    return 2;
  }
  if (a.validate_only) {
    const auto points = Expand(spec);
    fmt::print("{}: valid, {} points\n", a.spec, points.size());
    for (const auto& p : points) fmt::print("  {}\n", p.id);
    return 0;
  }
  RunOptions o;
  o.force = a.force;
  o.jobs =
      a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.filter = a.filter;
  o.results_root = a.results;
  o.micro_path = a.micro.empty() ? DefaultMicro() : a.micro;
  o.tty = isatty(2);
  RunSummary s;
  try {
    s = RunSpec(spec, o);
  } catch (const SpecError& e) {
    fmt::print(stderr, "dmbench run: {}\n", e.what());
    return 2;
  }
  fmt::print(stderr, "{}: {} ran, {} skipped, {} failed in {:.1f} s -> {}/{}/\n", spec.name, s.ran,
             s.skipped, s.failed.size(), s.wall_s, a.results, spec.name);
  for (const auto& f : s.failed) fmt::print(stderr, "  failed: {}\n", f);
  return s.failed.empty() ? 0 : 1;
}

}  // namespace dmb::runner
