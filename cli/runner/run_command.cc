#include "cli/runner/run_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <tuple>

#include "cli/runner/micro_command.h"
#include "cli/runner/runner.h"
#include "systems/registry.h"

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
  run->add_option("--jobs,-j", a->jobs, "Points run in parallel (default: one per core)")
      ->check(CLI::Range(1, 4096));
  run->add_option("--filter", a->filter,
                  "Only points whose id matches this glob, e.g. 'alloc-*-threads_24-*'");
  run->add_option("--results", a->results,
                  "Where results/<name>/ goes (points run longest first by the wall times its "
                  "meta.json recorded, else by those of the spec's repository's results/<name>/)")
      ->capture_default_str();
  run->add_option("--micro", a->micro,
                  "The micro program (default: $DMB_MICRO_PATH, else the dmb_micro beside "
                  "this dmbench)");
  run->add_flag("--validate", a->validate_only,
                "Only check the spec and list its points (those --filter and --shard select)");
  run->add_flag("--points-json", a->points_json,
                "Only print the selected points (after --filter and --shard) as a JSON array: "
                "id, op, system, variant, seed, knobs, params (defaults filled in)");
  run->add_option("--param", a->params,
                  "Override a parameter in every run that takes it, e.g. --param keys=1000000 "
                  "(the paper's scale); repeatable");
  run->add_option("--shard", a->shard,
                  "Run only the I-th of N interleaved parts of the selected points, e.g. 2/3 on "
                  "the second of three machines (ansible/figure.yml backend=sim); copy every "
                  "shard's points/ and logs/ into one results/<name>/, then --collect");
  run->add_flag("--collect", a->collect,
                "Run nothing: write <name>.csv, compare.csv and meta.json from the point files "
                "in results/<name>/points/ (e.g. fetched from the shards' machines); exits 1 "
                "naming the selected points that have no result");
  run->add_option("--meta-json", a->meta_json_file,
                  "A file holding a JSON object whose members go into meta.json, replacing the "
                  "runner's own (backend, host, wall_s) or added: where the points ran")
      ->check(CLI::ExistingFile);
  run->add_option("--backend", a->backend,
                  "sim, or ibv: every point on real RDMA devices (access, alloc and kv points; "
                  "pass the daemon and devices with --micro-arg); a point the device cannot "
                  "run is recorded as skipped with the capabilities it lacks")
      ->check(CLI::IsMember({"sim", "ibv"}))
      ->capture_default_str();
  run->add_option("--micro-arg", a->micro_args,
                  "An argument appended to every micro command, e.g. "
                  "--micro-arg=--mn=mn1:18515 --micro-arg=--devices=mlx5_0; repeatable");
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

// --validate: the spec parsed; lists the points --filter and --shard select.
int Validate(const RunCommandArgs& a, const Spec& spec, const RunOptions& o) {
  std::vector<std::string> ids;
  try {
    ids = SelectedIds(spec, o);
  } catch (const SpecError& e) {
    fmt::print(stderr, "dmbench run: {}\n", e.what());
    return 2;
  }
  const size_t total = Expand(spec).size();
  fmt::print("{}: valid, {} points{}\n", a.spec, total,
             ids.size() == total ? "" : fmt::format(" ({} selected)", ids.size()));
  for (const auto& id : ids) fmt::print("  {}\n", id);
  return 0;
}

// Every point's knobs against its MN pool (SystemInfo::check_pool), before
// any point runs: an impossible combination (a chunk larger than the pool, or
// too many of them) fails the whole run at once, naming the point and the fix,
// not that point alone after the others ran.
void CheckPools(const std::vector<Point>& points) {
  for (const Point& p : points) {
    if (p.system.empty()) continue;
    const auto params = PointParams(p);
    const auto pool = params.find("pool");
    if (pool == params.end()) continue;
    const systems::SystemInfo& info = systems::Registry::Get(p.system);
    try {
      info.CheckPool(systems::ValidateKnobs(info.name, info.knobs, p.knobs),
                     std::stoull(pool->second));
    } catch (const systems::ConfigError& e) {
      throw SpecError("point " + p.id + ": " + e.what());
    }
  }
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
    CheckPools(Expand(spec));
  } catch (const SpecError& e) {
    fmt::print(stderr, "dmbench run: {}: {}\n", a.spec, e.what());
    return 2;
  }
  RunOptions o;
  o.filter = a.filter;
  try {
    if (!a.shard.empty()) std::tie(o.shard_index, o.shard_count) = ParseShard(a.shard);
  } catch (const SpecError& e) {
    fmt::print(stderr, "dmbench run: {}\n", e.what());
    return 2;
  }
  if (a.validate_only) return Validate(a, spec, o);
  if (a.points_json) {
    try {
      fmt::print("{}", PointsJson(spec, o));
    } catch (const SpecError& e) {
      fmt::print(stderr, "dmbench run: {}\n", e.what());
      return 2;
    }
    return 0;
  }
  o.force = a.force;
  o.jobs =
      a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.filter = a.filter;
  o.results_root = a.results;
  o.micro_path = a.micro.empty() ? DefaultMicro() : a.micro;
  o.tty = isatty(2);
  o.collect = a.collect;
  o.backend = a.backend;
  o.micro_args = a.micro_args;
  RunSummary s;
  try {
    if (!a.meta_json_file.empty()) {
      std::ifstream in(a.meta_json_file);
      o.meta_json.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (o.meta_json.empty()) throw SpecError("--meta-json " + a.meta_json_file + " is empty");
    }
    s = RunSpec(spec, o);
  } catch (const SpecError& e) {
    fmt::print(stderr, "dmbench run: {}\n", e.what());
    return 2;
  }
  if (a.collect) {
    fmt::print(stderr, "{}: collected {} points, {} missing -> {}/{}/\n", spec.name, s.skipped,
               s.missing.size(), a.results, spec.name);
    for (const auto& m : s.missing) fmt::print(stderr, "  missing: {}\n", m);
    return s.missing.empty() ? 0 : 1;
  }
  fmt::print(stderr, "{}: {} ran, {} skipped, {} failed in {:.1f} s -> {}/{}/\n", spec.name, s.ran,
             s.skipped, s.failed.size(), s.wall_s, a.results, spec.name);
  for (const auto& k : s.skipped_caps) fmt::print(stderr, "  skipped: {}\n", k);
  for (size_t i = 0; i < s.failed.size(); ++i) {
    fmt::print(stderr, "  failed: {}\n    alone: {}\n", s.failed[i], s.reproduce[i]);
  }
  return s.failed.empty() ? 0 : 1;
}

}  // namespace dmb::runner
