// The option groups dmb_micro's benches share, the validators that check
// their values, and the testbed the approach benches build from them.
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>

#include "cli/dmb_micro.h"
#include "fabric/sim/profile.h"
#include "systems/knobs.h"
#include "systems/registry.h"

namespace dmb::microbench {

using harness::kUnlimitedCores;
using harness::TestbedSpec;

CLI::Validator Fraction(bool upto_one) {
  return CLI::Validator(
      [upto_one](std::string& v) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != 0 || !(d > 0) || (upto_one && d > 1)) {
          return std::string("expected a number ") + (upto_one ? "in (0, 1]" : "> 0") + ", got \"" +
                 v + "\"";
        }
        // A hexadecimal float: CLI11 reads it (strtold) to exactly this double.
        char exact[64];
        std::snprintf(exact, sizeof exact, "%a", d);
        v = exact;
        return {};
      },
      upto_one ? "(0, 1]" : "> 0");
}

CLI::Validator OneOf(const std::vector<std::string>& choices) {
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  return CLI::Validator(
      [choices, list](std::string& v) -> std::string {
        for (const auto& c : choices) {
          if (v == c) return {};
        }
        return "expected " + list + ", got \"" + v + "\"";
      },
      list);
}

CLI::Validator ProfileName() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        try {
          (void)sim::Profile::ByName(v);
          return {};
        } catch (const std::exception& e) {  // "unknown calibration profile 'x'; known ..."
          return e.what();
        }
      },
      "NAME");
}

CLI::Validator MnCores() {
  const CLI::Validator cores = IntIn<int>(1, kUnlimitedCores);
  return CLI::Validator(
      [cores](std::string& v) -> std::string {
        if (v == "unlimited") return {};
        std::string copy = v;  // the label repeats the value as given
        return cores(copy);
      },
      "N|unlimited");
}

void AddCommonOptions(CLI::App* bench, CommonArgs* a) {
  bench->add_option("--seed", a->seed, "Root seed of the simulation")
      ->transform(IntIn<uint64_t>(0, std::numeric_limits<uint64_t>::max()))
      ->capture_default_str();
  bench->add_option("--profile", a->profile, "NIC calibration profile (see `dmbench profile`)")
      ->check(ProfileName())
      ->capture_default_str();
}

void AddBedOptions(CLI::App* bench, BedArgs* a, const std::string& pool_help) {
  a->bench = bench->get_name();
  bench->add_option("--system", a->system, "Approach (see `dmbench systems`)")
      ->capture_default_str();
  bench->add_option("--set", a->sets, "Approach knob as KNOB=VALUE, repeatable (--set mw_type=2)")
      ->allow_extra_args(false);  // one KNOB=VALUE per --set
  bench->add_option("--cns", a->cns, "Compute nodes")
      ->transform(IntIn(1, 1024))
      ->capture_default_str();
  bench->add_option("--mn-cores", a->mn_cores, "MN CPU cores: N or 'unlimited'")
      ->check(MnCores())
      ->capture_default_str();
  a->pool_option =
      bench->add_option("--pool", a->pool, pool_help)->check(Size())->capture_default_str();
  AddCommonOptions(bench, a);
}

void AddIbvOptions(CLI::App* bench, BedArgs* a) {
  bench
      ->add_option("--backend", a->backend,
                   "sim (the simulated cluster) or ibv (real RDMA devices; times are then wall\n"
                   "clock, the CNs run in this process). An approach whose needs the device\n"
                   "lacks (`dmbench devices`) is not run: exit 77, naming them")
      ->transform(OneOf({"sim", "ibv"}))
      ->capture_default_str();
  bench->add_option("--devices", a->devices, "ibv: this process's RDMA devices, D[,D]")
      ->delimiter(',')
      ->allow_extra_args(false);
  bench->add_option("--mn", a->mn,
                    "ibv: a running `dmbench mn` daemon HOST:PORT (ansible/figure.yml starts\n"
                    "one per point), or 'spawn' to start one");
}

void AddThreadsOption(CLI::App* bench, int* threads) {
  bench->add_option("--threads", *threads, "CN threads per CN")
      ->transform(IntIn(1, 4096))
      ->capture_default_str();
}

void AddOpsOption(CLI::App* bench, int* ops, const std::string& what) {
  bench->add_option("--ops", *ops, what)->transform(IntIn(1, 100'000'000))->capture_default_str();
}

void AddIoOption(CLI::App* bench, std::string* op, const std::string& what) {
  bench->add_option("--op", *op, what)->transform(OneOf({"read", "write"}))->capture_default_str();
}

TestbedSpec BedSpec(const BedArgs& a) {
  // "unknown system 'x'; known systems: ...", "rpc_mw: unknown knob 'x'; ..."
  const auto& info = systems::Registry::Get(a.system);
  TestbedSpec bed;
  bed.system = a.system;
  for (const auto& s : a.sets) systems::AddAssignment(s, &bed.knobs);
  (void)systems::ValidateKnobs(a.system, info.knobs, bed.knobs);
  bed.cns = a.cns;
  bed.seed = a.seed;
  bed.profile = a.profile;
  if (a.mn_cores == "unlimited") {
    bed.mn_cores = kUnlimitedCores;
  } else {
    std::from_chars(a.mn_cores.data(), a.mn_cores.data() + a.mn_cores.size(), bed.mn_cores);
  }
  bed.pool_bytes = SizeOf(a.pool);
  if (a.backend == "sim" && (!a.mn.empty() || !a.devices.empty())) {
    throw systems::ConfigError("--mn and --devices need --backend ibv");
  }
  bed.backend = a.backend;
  bed.devices = a.devices;
  bed.mn_endpoint = a.mn;
  if (a.backend == "ibv") {
    std::string caps;
    for (const auto& c : harness::MissingMnCaps(bed)) caps += (caps.empty() ? "" : ",") + c;
    if (!caps.empty()) {
      throw Skipped("needs " + caps + " (" + a.system + " on device " +
                    (a.devices.empty() ? std::string("the first") : a.devices.front()) + ")");
    }
  }
  return bed;
}

std::string BedLabel(const BedArgs& a, const TestbedSpec& bed, int threads) {
  return "bench=" + a.bench + ",system=" + a.system + ",threads=" + std::to_string(threads) +
         ",cns=" + std::to_string(bed.cns) + ",mn_cores=" + a.mn_cores +
         ",pool=" + systems::FormatSize(bed.pool_bytes);
}

std::string KnobsLabel(const std::string& knobs) {
  return ",knobs=" + (knobs.empty() ? "-" : knobs);
}

}  // namespace dmb::microbench
