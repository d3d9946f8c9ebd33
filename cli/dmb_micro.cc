// dmb_micro: one experiment point as a Google Benchmark program.
//
// The experiment runner starts it once per point and parses Google
// Benchmark's JSON (--benchmark_format=json). Every run registers exactly one
// benchmark with one iteration whose manual time is the virtual time of the
// measured phase; the results are counters (plain values, virtual us).
//
// Each bench is a CLI11 subcommand (cli/dmb_micro.h): `dmb_micro alloc
// --system rpc_mw ...`. `--bench alloc` anywhere on the line names it too:
// the runner writes it so, and so do the commands recorded in results/.
// The point is simulated before the benchmark is registered, so that bad
// input (unknown bench/system/knob, a pool too small, ...) exits 2 with one
// line on stderr and never a half-written JSON document.
#include "cli/dmb_micro.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "systems/knobs.h"

namespace dmb::microbench {
namespace {

using systems::ConfigError;

constexpr const char* kAbout = R"(dmb_micro BENCH [options] [Google Benchmark flags]

Runs ONE experiment point on the deterministic simulated RDMA cluster (or,
access, alloc and kv with --backend ibv, on real RDMA devices) and reports it
as one Google Benchmark entry: Iterations 1, manual time = the virtual time
of the measured phase, counters in virtual microseconds (wall clock on ibv).
`--bench BENCH` anywhere on the line is the same as BENCH first.
`dmb_micro BENCH --help` lists the bench's options.)";

constexpr const char* kFooter = R"(
Google Benchmark flags (--benchmark_*, --v) are passed on, e.g.
  --benchmark_format=json --benchmark_out=F --benchmark_out_format=json

Output: one entry in "benchmarks", named after the bench, with time_unit "us",
real_time = virtual time of the measured phase (mr_reg, mw_bind: the summed
registrations / binds), the counters above as numeric fields, and label
"bench=..,system=..,threads=..,...,knobs=K=V,K=V" (knobs last; "-" for none).
Exit status: 0 ok, 2 bad input (one line on stderr names it and the fix),
1 the simulation failed, 77 skipped: the ibv device lacks what the approach
needs (access, alloc, kv with --backend ibv; one line on stderr:
"skipped: needs CAP,...").

Example:
  dmb_micro alloc --system rpc_mw --set mw_type=2 --threads 24 \
      --benchmark_format=json)";

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::vector<std::string> BenchNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* b : app.get_subcommands({})) names.push_back(b->get_name());
  return names;
}

// The command line with `--bench B` (or --bench=B; the last one counts)
// taken out and B put first, where CLI11 looks for a subcommand.
std::vector<std::string> BenchFirst(const CLI::App& app, int argc, char** argv, bool* by_flag) {
  std::vector<std::string> args;
  std::string bench;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--bench") {
      if (i + 1 == argc || std::string_view(argv[i + 1]).starts_with("--")) {
        throw ConfigError("--bench needs a value (see --help)");
      }
      bench = argv[++i];
    } else if (arg.starts_with("--bench=")) {
      bench = arg.substr(8);
    } else {
      args.emplace_back(arg);
    }
  }
  *by_flag = !bench.empty();
  if (*by_flag) {
    const std::vector<std::string> names = BenchNames(app);
    if (std::find(names.begin(), names.end(), bench) == names.end()) {
      throw ConfigError("unknown bench '" + bench + "'; known benches: " + Join(names));
    }
    args.insert(args.begin(), bench);
  }
  return args;
}

// "a bench is required`where`: ..., BENCH one of access, alloc, ..."
std::string BenchRequired(const CLI::App& app, const std::string& where = "") {
  return "a bench is required" + where + ": dmb_micro BENCH [options], BENCH one of " +
         Join(BenchNames(app));
}

bool IsBenchmarkFlag(std::string_view arg) {
  return arg.starts_with("--benchmark_") || arg == "--v" || arg.starts_with("--v=");
}

// Google Benchmark answers an unknown output format with its usage and exit
// status 0, as if it had run: refused here instead, naming the formats.
void CheckFormat(const std::string& arg) {
  for (const std::string_view flag : {"--benchmark_format=", "--benchmark_out_format="}) {
    if (!arg.starts_with(flag)) continue;
    const std::string value = arg.substr(flag.size());
    if (value != "console" && value != "json" && value != "csv") {
      throw ConfigError(std::string(flag.substr(0, flag.size() - 1)) +
                        ": expected console, json or csv, got \"" + value + "\"");
    }
  }
}

// Why `arg`, left over by CLI11, is not ours: `bench` the parsed bench
// (null: none), `before` whether it came before it.
[[noreturn]] void Reject(const CLI::App& app, const CLI::App* bench, bool by_flag, bool before,
                         const std::string& arg) {
  if (!arg.starts_with("-")) {
    if (!bench) {
      throw ConfigError("unknown bench '" + arg + "'; known benches: " + Join(BenchNames(app)));
    }
    throw ConfigError("unexpected argument \"" + arg + "\"; options start with -- (see --help)");
  }
  const std::string flag = arg.substr(0, arg.find('='));
  std::vector<std::string> takers;
  for (const CLI::App* b : app.get_subcommands({})) {
    if (b->get_option_no_throw(flag)) takers.push_back(b->get_name());
  }
  if (takers.empty()) throw ConfigError("unknown flag '" + flag + "'; see dmb_micro --help");
  if (!bench) throw ConfigError(BenchRequired(app, " before " + flag));
  if (before) {
    throw ConfigError(flag + " comes after the bench: dmb_micro " + bench->get_name() + " " + flag +
                      " ...");
  }
  throw ConfigError(flag + " does not apply to " + (by_flag ? "--bench " : "") + bench->get_name() +
                    " (only to " + Join(takers) + "); drop it");
}

// What CLI11 left over: Google Benchmark's flags (--benchmark_*, --v),
// passed on after argv[0]; anything else is an error naming the argument
// (Reject).
std::vector<std::string> BenchmarkFlags(const CLI::App& app, const CLI::App* bench, bool by_flag) {
  std::vector<std::string> flags;
  for (const bool before : {true, false}) {
    if (!before && !bench) break;
    for (const std::string& arg : before ? app.remaining() : bench->remaining()) {
      if (!IsBenchmarkFlag(arg)) Reject(app, bench, by_flag, before, arg);
      CheckFormat(arg);
      flags.push_back(arg);
    }
  }
  return flags;
}

void Register(const Report& rep) {
  benchmark::RegisterBenchmark(rep.name.c_str(),
                               [rep](benchmark::State& state) {
                                 for (auto _ : state) state.SetIterationTime(rep.seconds);
                                 state.SetLabel(rep.label);
                                 for (const auto& [name, value] : rep.counters) {
                                   state.counters[name] = benchmark::Counter(value);
                                 }
                               })
      ->Iterations(1)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

// Parses the command line, hands Google Benchmark its flags, runs the bench
// and reports it. Returns the exit status; bad input throws ConfigError.
int Run(int argc, char** argv) {
  CLI::App app(kAbout, "dmb_micro");
  app.footer(kFooter);
  app.allow_extras();            // Google Benchmark's flags (BenchmarkFlags)
  app.require_subcommand(0, 1);  // one bench; none is an error naming them
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  BenchFn chosen;
  SetupAccess(app, &chosen);
  SetupAlloc(app, &chosen);
  SetupVerbsBenches(app, &chosen);
  SetupKv(app, &chosen);
  SetupSwap(app, &chosen);
  for (CLI::App* b : app.get_subcommands({})) b->allow_extras();

  bool by_flag = false;
  std::vector<std::string> args = BenchFirst(app, argc, argv, &by_flag);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw ConfigError(e.what());
  }
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  const CLI::App* bench = parsed.empty() ? nullptr : parsed.front();
  std::vector<std::string> bm_args = BenchmarkFlags(app, bench, by_flag);
  if (!chosen) throw ConfigError(BenchRequired(app));
  bm_args.insert(bm_args.begin(), argv[0]);
  std::vector<char*> bm_argv;
  for (std::string& a : bm_args) bm_argv.push_back(a.data());
  int bm_argc = static_cast<int>(bm_argv.size());
  bm_argv.push_back(nullptr);
  benchmark::Initialize(&bm_argc, bm_argv.data());
  if (benchmark::ReportUnrecognizedArguments(bm_argc, bm_argv.data())) return 2;
  Register(chosen());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace
}  // namespace dmb::microbench

int main(int argc, char** argv) {
  try {
    return dmb::microbench::Run(argc, argv);
  } catch (const dmb::microbench::Skipped& e) {
    std::fprintf(stderr, "skipped: %s\n", e.what());
    return 77;
  } catch (const std::invalid_argument& e) {  // ConfigError, unknown profile
    std::fprintf(stderr, "dmb_micro: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dmb_micro: error: %s\n", e.what());
    return 1;
  }
}
