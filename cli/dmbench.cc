// dmbench: the command-line entry point.
//
//   dmbench calibrate [--profile cx5] [--json]   primitive checks vs sources
//   dmbench profile   [--profile cx5]            the profile's values and sources
//   dmbench systems                                approaches and their knobs
//   dmbench micro alloc --system NAME [--set K=V]... [--threads N] [--cns N]
//                       [--mn-cores N|unlimited] [--json] [--backend sim|ibv ...]
//   dmbench micro access --system NAME [--size 64] [--threads N] [--depth D] [--backend ...]
//   dmbench devices                                RDMA devices and capabilities
//   dmbench mn --system NAME [--set K=V]... [--device D] [--port P]   MN daemon
//   dmbench cn --mn HOST:PORT --system NAME ...    CN workers against a daemon
#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <string>

#include "apps/swap/app_cost.h"
#include "apps/swap/workloads.h"
#include "cli/runner/run_command.h"
#include "cli/validators.h"
#include "fabric/sim/profile.h"
#include "microbench/access_bench.h"
#include "microbench/alloc_bench.h"
#ifdef DMB_HAVE_IBV
#include "fabric/ibv/ibv_device.h"
#include "systems/remote/mn_daemon.h"
#endif
#include "cli/json.h"
#include "microbench/primitives.h"
#include "systems/registry.h"

namespace {

int Calibrate(const std::string& profile_name, bool json, uint64_t seed) {
  const auto profile = dmb::sim::Profile::ByName(profile_name);
  if (!json) {
    fmt::print(stderr,
               "running {} primitive microbenchmarks on the simulated cluster "
               "(profile {}, seed {})...\n",
               dmb::microbench::kCalibrationPrimitives, profile.name, seed);
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
          "\"source_ref\": {}}}{}\n",
          r.name, r.sim, r.source, r.unit, dmb::cli::JsonString(r.source_ref),
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
  int batch = 8;  // micro alloc: chunks held before freeing
  int depth = 1;  // micro access: operations outstanding per thread
  std::string pool = "1GB";
  bool json = false;
  uint64_t seed = 1;
  std::string backend = "sim";
  std::vector<std::string> devices;
  std::string mn;  // ibv: "" (MN in this process), "spawn" or HOST:PORT
  std::string mn_device;
  std::string size = "4KB";  // micro access: bytes per operation
  std::string op = "both";   // micro access: read, write or both
};

void ApplyBackend(const MicroArgs& a, dmb::harness::TestbedSpec* bed) {
  bed->backend = a.backend;
  bed->devices = a.devices;
  bed->mn_endpoint = a.mn;
  bed->mn_device = a.mn_device;
  if (a.backend == "sim" && (!a.mn.empty() || !a.devices.empty())) {
    throw dmb::systems::ConfigError("--mn and --devices need --backend ibv");
  }
}

void AddBackendOptions(CLI::App* c, MicroArgs* a) {
  c->add_option("--backend", a->backend,
                "sim (deterministic simulated cluster) or ibv (real RDMA devices; times are wall "
                "clock)")
      ->check(CLI::IsMember({"sim", "ibv"}))
      ->capture_default_str();
  c->add_option("--devices", a->devices,
                "ibv: RDMA devices of this process's nodes, round robin (default: the first)")
      ->delimiter(',');
  c->add_option("--mn", a->mn,
                "ibv: where the MN runs: omitted = in this process; 'spawn' = start a `dmbench "
                "mn` daemon; HOST:PORT = a running daemon");
  c->add_option("--mn-device", a->mn_device, "ibv with --mn spawn: the daemon's RDMA device");
}

// Every --pool: checked by CLI11 as the option is parsed (validators.h,
// shared with dmb_micro).
const CLI::Validator kSize = dmb::cli::Size();
using dmb::cli::IntIn;
using dmb::cli::SizeOf;

// --threads, --cns and --ops of `micro alloc` and `micro access`, bounded
// as dmb_micro bounds them (a count of 0 or less ran nothing and printed
// zeros; a huge one ran out of memory).
void AddCountOptions(CLI::App* c, MicroArgs* a, const std::string& ops_help) {
  c->add_option("--threads", a->threads, "CN threads per CN (repeatable)")
      ->transform(IntIn(1, 4096));
  c->add_option("--cns", a->cns, "Compute nodes")->transform(IntIn(1, 1024))->capture_default_str();
  c->add_option("--ops", a->ops, ops_help)->transform(IntIn(1, 100'000'000))->capture_default_str();
}

int MicroAccess(const MicroArgs& a) {
  dmb::microbench::AccessBenchSpec spec;
  spec.bed.system = a.system;
  for (const auto& s : a.sets) dmb::systems::AddAssignment(s, &spec.bed.knobs);
  spec.bed.cns = a.cns;
  spec.bed.seed = a.seed;
  spec.bed.pool_bytes = SizeOf(a.pool);
  ApplyBackend(a, &spec.bed);
  spec.ops_per_thread = a.ops;
  spec.depth = a.depth;
  const uint64_t size = SizeOf(a.size);
  if (size == 0 || size > std::numeric_limits<uint32_t>::max()) {
    throw dmb::systems::ConfigError("--size: expected 1 B .. the chunk size, got \"" + a.size +
                                    "\"");
  }
  spec.size_bytes = static_cast<uint32_t>(size);
  const std::vector<int> threads = a.threads.empty() ? std::vector<int>{1} : a.threads;
  std::vector<bool> writes;
  if (a.op != "write") writes.push_back(false);
  if (a.op != "read") writes.push_back(true);
  std::vector<dmb::microbench::AccessBenchResult> results;
  for (int t : threads) {
    for (bool w : writes) {
      spec.threads = t;
      spec.write = w;
      if (!a.json) {
        fmt::print(stderr, "{} on {}: {} thread(s) x {} CN(s), depth {}, {} B {}s x {}...\n",
                   a.system, a.backend, t, a.cns, a.depth, size, w ? "WRITE" : "READ", a.ops);
      }
      results.push_back(dmb::microbench::RunAccessBench(spec));
    }
  }
  if (a.json) {
    fmt::print("[\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      fmt::print(
          "{}  {{\"system\": \"{}\", \"knobs\": {}, \"backend\": \"{}\", \"threads\": {}, "
          "\"depth\": {}, \"cns\": {}, \"op\": \"{}\", \"size_bytes\": {}, \"count\": {}, "
          "\"lat_us_p50\": {:.4f}, \"lat_us_p99\": {:.4f}, \"lat_us_mean\": {:.4f}, \"mops\": "
          "{:.6f}}}",
          i ? ",\n" : "", r.system, dmb::cli::JsonString(r.knobs), r.backend, r.threads, r.depth,
          r.cns, r.op.op, r.size_bytes, r.op.count, r.op.lat_us_p50, r.op.lat_us_p99,
          r.op.lat_us_mean, r.mops);
    }
    fmt::print("\n]\n");
    return 0;
  }
  fmt::print("{:<10} {:<4} {:>7} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10}\n", "system", "back",
             "threads", "op", "bytes", "p50_us", "p99_us", "mean_us", "Mops");
  for (const auto& r : results) {
    fmt::print("{:<10} {:<4} {:>7} {:>6} {:>6} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.4f}\n", r.system,
               r.backend, r.threads * r.cns, r.op.op, r.size_bytes, r.op.lat_us_p50,
               r.op.lat_us_p99, r.op.lat_us_mean, r.mops);
  }
  return 0;
}

struct DevicesArgs {
  bool check = false;
  std::string device;                // "" = every device (listing) / the first (check)
  std::vector<std::string> require;  // capability names (DeviceCaps' fields)
};

#ifdef DMB_HAVE_IBV
void PrintDevice(const dmb::fabric::ibv::DeviceInfo& d) {
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  fmt::print("{}: {} port {} mtu {} gid[{}] {}\n", d.name, d.transport, d.port_state,
             d.active_mtu_bytes, d.gid_index, d.gid);
  fmt::print("  max_qp_wr {}  max_mr {}  max_mw {}  max_qp_rd_atom {}  max_mr_size {}\n",
             d.max_qp_wr, d.max_mr, d.max_mw, d.max_qp_rd_atom, d.max_mr_size);
  fmt::print(
      "  mw_type1 {}  mw_type2 {}  atomics {}  masked_atomics {}  cross_channel {}  "
      "qpn_in_bind {}\n",
      yn(d.caps.mw_type1), yn(d.caps.mw_type2), yn(d.caps.atomics), yn(d.caps.masked_atomics),
      yn(d.caps.cross_channel), yn(d.caps.qpn_in_bind));
  for (const auto& n : d.notes) fmt::print("  note: {}\n", n);
}
#endif

// Lists the devices; with --check, checks that one (--device, else the first)
// exists with port 1 ACTIVE and every --require capability, naming what is
// missing (ansible/site.yml runs this on every RDMA host).
int ListDevices(const DevicesArgs& a) {
  if (!a.check && !a.require.empty()) {
    fmt::print(stderr, "dmbench devices: --require needs --check\n");
    return 2;
  }
#ifdef DMB_HAVE_IBV
  const auto devs = dmb::fabric::ibv::ListDevices();
  if (devs.empty()) {
    fmt::print(
        "no RDMA devices (ibv_get_device_list found none).\n"
        "On a machine without RDMA use the simulator (the default), or run the Soft-RoCE tier:\n"
        "  make test-rxe\n");
    return 1;
  }
  if (!a.check) {
    for (const auto& d : devs) {
      if (a.device.empty() || d.name == a.device) PrintDevice(d);
    }
    return 0;
  }
  const dmb::fabric::ibv::DeviceInfo* dev = a.device.empty() ? &devs[0] : nullptr;
  std::string names;
  for (const auto& d : devs) {
    if (d.name == a.device) dev = &d;
    names += (names.empty() ? "" : ", ") + d.name;
  }
  if (!dev) {
    fmt::print(stderr, "dmbench devices: no RDMA device '{}' here (devices: {})\n", a.device,
               names);
    return 1;
  }
  PrintDevice(*dev);
  std::vector<std::string> missing;
  try {
    missing = dmb::fabric::MissingCaps(dev->caps, a.require);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr,
               "dmbench devices: {} (capabilities: mw_type1, mw_type2, atomics, masked_atomics, "
               "cross_channel, qpn_in_bind)\n",
               e.what());
    return 2;
  }
  // rdma-core names the state in lower case ("active"): test the state itself.
  if (!dev->port_active) {
    fmt::print(stderr,
               "dmbench devices: {} port 1 is {}, not ACTIVE (cable, link, or rdma link "
               "add for Soft-RoCE?)\n",
               dev->name, dev->port_state);
    return 1;
  }
  if (!missing.empty()) {
    fmt::print(stderr, "dmbench devices: {} lacks {} (required: {})\n", dev->name,
               fmt::join(missing, ", "), fmt::join(a.require, ", "));
    return 1;
  }
  fmt::print("{}: port ACTIVE{}{}\n", dev->name, a.require.empty() ? "" : ", has ",
             fmt::join(a.require, ", "));
  return 0;
#else
  (void)a;
  fmt::print(stderr, "dmbench was built without libibverbs (apt-get install libibverbs-dev)\n");
  return 1;
#endif
}

int MicroAlloc(const MicroArgs& a) {
  dmb::microbench::AllocBenchSpec spec;
  spec.bed.system = a.system;
  ApplyBackend(a, &spec.bed);
  for (const auto& s : a.sets) dmb::systems::AddAssignment(s, &spec.bed.knobs);
  spec.bed.cns = a.cns;
  spec.bed.seed = a.seed;
  if (a.mn_cores == "unlimited") {
    spec.bed.mn_cores = dmb::harness::kUnlimitedCores;
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
  spec.bed.pool_bytes = SizeOf(a.pool);
  spec.ops_per_thread = a.ops;
  spec.batch = a.batch;
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
            "{}  {{\"system\": \"{}\", \"knobs\": {}, \"threads\": {}, \"cns\": {}, "
            "\"mn_cores\": {}, \"op\": \"{}\", \"count\": {}, \"failures\": {}, "
            "\"lat_us_p50\": {:.4f}, \"lat_us_p99\": {:.4f}, \"lat_us_mean\": {:.4f}, "
            "\"kops\": {:.3f}, \"mn_cpu_busy_frac\": {:.6f}, \"mn_cpu_cores_busy\": {:.4f}}}",
            first ? "" : ",\n", r.system, dmb::cli::JsonString(r.knobs), r.threads, r.cns,
            r.mn_cores, op->op, op->count, op->failures, op->lat_us_p50, op->lat_us_p99,
            op->lat_us_mean, op->kops, r.mn_cpu_busy_frac, r.mn_cpu_cores_busy);
        first = false;
      }
    }
    fmt::print("\n]\n");
    return 0;
  }
  fmt::print("{:<10} {:>7} {:>5} {:>10} {:>10} {:>10} {:>10} {:>8} {:>12}  {}\n", "system",
             "threads", "op", "p50_us", "p99_us", "mean_us", "kops", "fails", "mn_cpu_busy",
             "knobs");
  for (const auto& r : results) {
    for (const auto* op : {&r.alloc, &r.free}) {
      fmt::print("{:<10} {:>7} {:>5} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.1f} {:>8} {:>12.3f}  {}\n",
                 r.system, r.threads * r.cns, op->op, op->lat_us_p50, op->lat_us_p99,
                 op->lat_us_mean, op->kops, op->failures, r.mn_cpu_busy_frac, r.knobs);
    }
  }
  return 0;
}

// Each subcommand: one setup function that declares its options and sets
// the callback that runs it (CLI11's subcommands-in-functions pattern). The
// callback leaves the exit code in *rc; errors propagate out of parse().

void SetupCalibrate(CLI::App& app, int* rc) {
  struct Args {
    std::string profile = "cx5";
    bool json = false;
    uint64_t seed = 1;
  };
  auto a = std::make_shared<Args>();
  auto* cal = app.add_subcommand(
      "calibrate",
      "Measure each calibration primitive (one READ, one MW bind, one MR registration, one\n"
      "chained WR, ...) on the simulated cluster and compare it with its source. Exits 3 when\n"
      "a primitive is more than 10% off.");
  cal->add_option("--profile", a->profile, "NIC calibration profile")->capture_default_str();
  cal->add_flag("--json", a->json,
                "Print an object keyed by primitive: {sim, source, unit, source_ref}");
  cal->add_option("--seed", a->seed, "Root seed of the simulation")->capture_default_str();
  cal->callback([a, rc] { *rc = Calibrate(a->profile, a->json, a->seed); });
}

void SetupProfile(CLI::App& app, int* rc) {
  auto profile = std::make_shared<std::string>("cx5");
  auto* prof = app.add_subcommand("profile", "Print a calibration profile's values and sources");
  prof->add_option("--profile", *profile, "NIC calibration profile")->capture_default_str();
  prof->callback([profile, rc] { *rc = ShowProfile(*profile); });
}

void SetupListings(CLI::App& app, int* rc) {
  app.add_subcommand("systems", "List the approaches and their knobs")->callback([rc] {
    *rc = ListSystems();
  });
  auto d = std::make_shared<DevicesArgs>();
  auto* devices = app.add_subcommand(
      "devices",
      "List RDMA devices and what each can do. With --check: exit 0 only if the device\n"
      "(--device, else the first) exists, its port 1 is ACTIVE and it has every --require\n"
      "capability; otherwise name the device and what it lacks, exit 1.");
  devices->add_flag("--check", d->check, "Check instead of only listing");
  devices->add_option("--device", d->device, "Only this device");
  devices
      ->add_option("--require", d->require,
                   "With --check: capabilities the device must have, e.g. "
                   "cross_channel,atomics")
      ->delimiter(',');
  devices->callback([d, rc] { *rc = ListDevices(*d); });
}

void SetupMicroAlloc(CLI::App* micro, int* rc) {
  auto a = std::make_shared<MicroArgs>();
  auto* alloc = micro->add_subcommand(
      "alloc",
      "Allocation and free latency (p50/p99/mean, virtual us) and MN CPU busy fraction.\n"
      "Each CN thread allocates a batch of chunks, then frees them, over and over.\n"
      "Without --threads it runs 1 and 24 threads (OneSidedMW Fig 10b).");
  alloc->add_option("--system", a->system, "Approach (see `dmbench systems`)")->required();
  alloc->add_option("--set", a->sets, "Knob as KNOB=VALUE, e.g. --set mw_type=2");
  AddCountOptions(alloc, a.get(), "Measured allocations per thread");
  alloc->add_option("--mn-cores", a->mn_cores, "MN cores: N or 'unlimited'")->capture_default_str();
  alloc
      ->add_option("--batch", a->batch,
                   "Chunks a thread holds before freeing them; >= ops + 16 (warm-up): "
                   "threads only allocate, so kops is the sustained allocation rate")
      ->transform(IntIn(1, 100'000'000))
      ->capture_default_str();
  alloc->add_option("--pool", a->pool, "MN memory the approach manages")
      ->check(kSize)
      ->capture_default_str();
  alloc->add_option("--seed", a->seed, "Root seed")->capture_default_str();
  alloc->add_flag("--json", a->json,
                  "JSON records: system, threads, op, lat_us_p50, lat_us_p99, lat_us_mean, "
                  "mn_cpu_busy_frac, ...");
  AddBackendOptions(alloc, a.get());
  alloc->callback([a, rc] { *rc = MicroAlloc(*a); });
}

void SetupMicroAccess(CLI::App* micro, int* rc) {
  auto a = std::make_shared<MicroArgs>();
  a->ops = 10000;
  auto* access = micro->add_subcommand(
      "access",
      "One-sided READ and WRITE latency (p50/p99/mean) and rate through an allocated chunk,\n"
      "4 KB by default, --depth operations outstanding per thread. With --backend ibv,\n"
      "compare with perftest on the same device\n"
      "(ib_read_lat / ib_read_bw) to see dmbench's overhead above raw verbs.");
  access->add_option("--system", a->system, "Approach")->default_val("static_mr");
  access->add_option("--set", a->sets, "Knob as KNOB=VALUE");
  AddCountOptions(access, a.get(), "Measured operations per thread");
  access->add_option("--depth", a->depth, "Operations outstanding per thread, on its one lane")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  access->add_option("--size", a->size, "Bytes per operation (64B, 4KB, ...: 1 B .. the chunk)")
      ->check(kSize)
      ->capture_default_str();
  access->add_option("--op", a->op, "read, write or both")
      ->check(CLI::IsMember({"read", "write", "both"}))
      ->capture_default_str();
  access->add_option("--pool", a->pool, "MN memory the approach manages (one chunk per thread)")
      ->check(kSize)
      ->capture_default_str();
  access->add_option("--seed", a->seed, "Root seed (sim)")->capture_default_str();
  access->add_flag("--json", a->json, "JSON records");
  AddBackendOptions(access, a.get());
  access->callback([a, rc] { *rc = MicroAccess(*a); });
}

void SetupMicro(CLI::App& app, int* rc) {
  auto* micro = app.add_subcommand(
      "micro",
      "Microbenchmarks of an approach (simulator by default; --backend ibv for real devices)");
  micro->require_subcommand(1);
  SetupMicroAlloc(micro, rc);
  SetupMicroAccess(micro, rc);
}

void SetupRun(CLI::App& app, int* rc) {
  auto a = std::make_shared<dmb::runner::RunCommandArgs>();
  dmb::runner::AddRunCommand(app, a.get())->callback([a, rc] {
    *rc = dmb::runner::RunCommand(*a);
  });
}

#ifdef DMB_HAVE_IBV
void SetupMn(CLI::App& app, int* rc) {
  struct Args {
    dmb::systems::remote::MnDaemonOptions opts;
    std::vector<std::string> sets;
    std::string pool = "256MB";
  };
  auto a = std::make_shared<Args>();
  auto* mn = app.add_subcommand(
      "mn",
      "Run an approach's MN side on a real RDMA device and serve CN processes (`dmbench cn`,\n"
      "`dmbench micro ... --backend ibv --mn HOST:PORT`) until the operator sends\n"
      "`shutdown <token>`. The operator token is printed at start and written to\n"
      "<port-file>.token (mode 0600); reclaim and shutdown need it, CN processes do not get it.");
  mn->add_option("--system", a->opts.system, "Approach (see `dmbench systems`)")->required();
  mn->add_option("--set", a->sets, "Knob as KNOB=VALUE");
  mn->add_option("--device", a->opts.device, "RDMA device (default: the first)");
  mn->add_option("--port", a->opts.port, "TCP port of the bootstrap channel (0 = any)")
      ->capture_default_str();
  mn->add_option("--port-file", a->opts.port_file, "Write the chosen port to this file");
  mn->add_option("--pool", a->pool, "MN memory the approach manages")
      ->check(kSize)
      ->capture_default_str();
  mn->add_option("--mn-cores", a->opts.mn_cores, "RPC worker coroutines")->capture_default_str();
  mn->add_flag("--verbose", a->opts.verbose, "Log every bootstrap request");
  mn->callback([a, rc] {
    for (const auto& s : a->sets) dmb::systems::AddAssignment(s, &a->opts.knobs);
    a->opts.pool_bytes = SizeOf(a->pool);
    *rc = dmb::systems::remote::RunMnDaemon(a->opts);
  });
}

void SetupCn(CLI::App& app, int* rc) {
  auto a = std::make_shared<MicroArgs>();
  auto* cn = app.add_subcommand(
      "cn",
      "CN workers against a running `dmbench mn` daemon: the allocation benchmark, then the\n"
      "access benchmark, over real verbs.");
  cn->add_option("--mn", a->mn, "The daemon's HOST:PORT")->required();
  cn->add_option("--system", a->system, "Approach (must match the daemon's)")->required();
  cn->add_option("--set", a->sets, "Knobs (must match the daemon's)");
  cn->add_option("--devices", a->devices, "This process's RDMA device(s)")->delimiter(',');
  cn->add_option("--threads", a->threads, "CN threads (repeatable)")->transform(IntIn(1, 4096));
  cn->add_option("--ops", a->ops, "Operations per thread")
      ->transform(IntIn(1, 100'000'000))
      ->capture_default_str();
  cn->add_flag("--json", a->json, "JSON records");
  cn->callback([a, rc] {
    a->backend = "ibv";
    a->pool = "256MB";
    if (a->threads.empty()) a->threads = {1};
    if (const int r = MicroAlloc(*a); r != 0) {
      *rc = r;
      return;
    }
    a->ops = std::max(a->ops, 1000);
    *rc = MicroAccess(*a);
  });
}
#endif

// "1/512" or "0.001953125": a scale in (0, 1].
double ParseScale(const std::string& v) {
  const size_t slash = v.find('/');
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (slash != std::string::npos && end == v.c_str() + slash) {
    const double den = std::strtod(v.c_str() + slash + 1, &end);
    d = den > 0 ? d / den : 0;
  }
  if (v.empty() || *end != 0 || !(d > 0) || d > 1) {
    throw CLI::ValidationError("--scale", "expected a fraction in (0, 1] like 1/512, got " + v);
  }
  return d;
}

void SetupAppCost(CLI::App& app, int* rc) {
  struct Args {
    std::vector<std::string> apps;
    std::string scale = "1/512";
    uint64_t seed = 1;
    int reps = 3;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "app-cost",
      "Measure a swap workload's own CPU per page touched (the profile's swap.app_page_*):\n"
      "the algorithm run with all memory local and the recorder off (thread CPU time, the\n"
      "graph's generation left out), divided by the pages its trace touches.");
  cmd->add_option("--app", a->apps, "Workloads (default: every one)")
      ->check(CLI::IsMember(dmb::apps::swap::WorkloadNames()));
  cmd->add_option("--scale", a->scale, "Fraction of the paper's working set")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Input seed")->capture_default_str();
  cmd->add_option("--reps", a->reps, "Runs per workload; the fastest counts")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->callback([a, rc] {
    const double scale = ParseScale(a->scale);
    dmb::apps::swap::TraceCache cache(dmb::apps::swap::DefaultTraceDir());
    std::vector<std::string> apps = a->apps.empty() ? dmb::apps::swap::WorkloadNames() : a->apps;
    fmt::print("{:<11} {:>12} {:>13} {:>9} {:>11} {:>11}\n", "workload", "scale", "pages_touched",
               "cpu_s", "input_cpu_s", "us_per_page");
    for (const std::string& w : apps) {
      const dmb::apps::swap::AppCost c =
          dmb::apps::swap::MeasureAppCost(cache, w, scale, a->seed, a->reps);
      fmt::print("{:<11} {:>12.9f} {:>13} {:>9.3f} {:>11.3f} {:>11.3f}\n", w, c.scale,
                 c.pages_touched, c.cpu_s, c.input_cpu_s, c.us_per_page());
      std::fflush(stdout);
    }
    *rc = 0;
  });
}

// CLI11 answers a misspelt command ("dmbench bogus", "dmbench micro kv")
// with "A subcommand is required"; this names it and lists the commands of
// its level instead. False after printing that.
bool KnownCommands(CLI::App& app, int argc, char** argv) {
  CLI::App* level = &app;
  std::string path = "dmbench";
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const auto subs = level->get_subcommands([](CLI::App*) { return true; });
    if (word.empty() || word[0] == '-' || subs.empty()) return true;
    std::vector<std::string> names;
    for (CLI::App* sub : subs) {
      if (sub->get_name() == word) level = sub;
      names.push_back(sub->get_name());
    }
    if (level->get_name() != word) {
      fmt::print(stderr, "{}: unknown command '{}'; the commands are {} (`{} --help`)\n", path,
                 word, fmt::join(names, ", "), path);
      return false;
    }
    path += " " + word;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dmbench: RDMA disaggregated-memory management approaches on a deterministic simulated\n"
      "cluster (default) or real verbs. Run `dmbench SUBCOMMAND --help` for details."};
  app.require_subcommand(1);
  int rc = 0;
  SetupCalibrate(app, &rc);
  SetupProfile(app, &rc);
  SetupListings(app, &rc);
  SetupMicro(app, &rc);
  SetupRun(app, &rc);
  SetupAppCost(app, &rc);
#ifdef DMB_HAVE_IBV
  SetupMn(app, &rc);
  SetupCn(app, &rc);
#endif
  if (!KnownCommands(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help, exit 0); bad input exits 2, as
    // every other check of dmbench's does, not with CLI11's own codes.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "dmbench: error: {}\n", e.what());
    return 2;
  }
  return rc;
}
