// dmb_micro's benches, one CLI11 subcommand each (CLI11's "subcommands in
// files" pattern): cli/dmb_micro_<bench>.cc declares the bench's options in
// its Setup function and computes its Report; the option groups several
// benches share, the validators and the testbed every approach bench builds
// are here (cli/dmb_micro_options.cc). cli/dmb_micro.cc is the program:
// the command line, Google Benchmark's flags, the one benchmark entry.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cli/validators.h"
#include "harness/testbed.h"

namespace dmb::microbench {

// One benchmark entry, computed before it is reported.
struct Report {
  std::string name;
  std::string label;
  double seconds = 0;  // manual time: virtual seconds of the measured phase
  std::vector<std::pair<std::string, double>> counters;
};

// What the parsed bench runs: its subcommand's callback sets it, and main
// calls it once Google Benchmark has taken its flags (bad input never
// leaves a half-written JSON document).
using BenchFn = std::function<Report()>;

// An ibv point the device cannot run: what it lacks ("needs CAP,... (system
// on device D)"). dmb_micro exits 77 with "skipped: " and the text.
struct Skipped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void SetupAccess(CLI::App& app, BenchFn* chosen);
void SetupAlloc(CLI::App& app, BenchFn* chosen);
void SetupVerbsBenches(CLI::App& app, BenchFn* chosen);  // offload_read, mr_reg, mw_bind
void SetupKv(CLI::App& app, BenchFn* chosen);
void SetupSwap(CLI::App& app, BenchFn* chosen);

// --seed, --profile: every bench.
struct CommonArgs {
  uint64_t seed = 1;
  std::string profile = "cx5";
};
void AddCommonOptions(CLI::App* bench, CommonArgs* a);

// An approach on the simulated cluster: access, alloc, kv, swap.
struct BedArgs : CommonArgs {
  std::string bench;
  std::string system = "static_mr";
  std::vector<std::string> sets;
  int cns = 1;
  std::string mn_cores = "1";  // N or "unlimited", as given (the label repeats it)
  std::string pool = "1GB";
  const CLI::Option* pool_option = nullptr;  // count() > 0: --pool was given
  std::string backend = "sim";               // sim | ibv (AddIbvOptions)
  std::vector<std::string> devices;          // ibv: this process's devices
  std::string mn;                            // ibv: "" | spawn | HOST:PORT
};
// --system, --set, --cns, --mn-cores, --pool and the common options.
// `pool_help` says what the pool is for this bench.
void AddBedOptions(CLI::App* bench, BedArgs* a, const std::string& pool_help);
// --backend sim|ibv, --devices D[,D], --mn HOST:PORT|spawn: real RDMA
// devices instead of the simulated cluster (access, alloc, kv).
void AddIbvOptions(CLI::App* bench, BedArgs* a);
// --threads: CN threads per CN (access, alloc, kv).
void AddThreadsOption(CLI::App* bench, int* threads);
// --ops N, measured operations (`what`), default *ops.
void AddOpsOption(CLI::App* bench, int* ops, const std::string& what);
// --op read|write (access, offload_read).
void AddIoOption(CLI::App* bench, std::string* op, const std::string& what);

// The testbed `a` names, its knobs checked against the registry; throws
// ConfigError ("unknown system 'x'; known systems: ...", "--mn and --devices
// need --backend ibv"), and Skipped when an ibv device lacks what the
// approach needs.
harness::TestbedSpec BedSpec(const BedArgs& a);
// "bench=..,system=..,threads=..,cns=..,mn_cores=..,pool=.."
std::string BedLabel(const BedArgs& a, const harness::TestbedSpec& bed, int threads);
// ",knobs=K=V,K=V" ("-" for none): the label's last field.
std::string KnobsLabel(const std::string& knobs);

// Validators (IntIn and Size in validators.h, shared with dmbench). Use
// them with ->transform().
using cli::IntIn;
// A number > 0 (upto_one: in (0, 1]), read by std::strtod.
CLI::Validator Fraction(bool upto_one);
// One of `choices`: "expected a, b or c, got "v"".
CLI::Validator OneOf(const std::vector<std::string>& choices);
using cli::Size;  // validators.h: 64B, 4KB, 1MB, 1GB or a byte count
// A calibration profile sim::Profile::ByName knows (cx5, cx5+mn_poll, ...).
CLI::Validator ProfileName();
// N in [1, harness::kUnlimitedCores] or "unlimited".
CLI::Validator MnCores();
using cli::SizeOf;

}  // namespace dmb::microbench
