// dmb_micro: one experiment point as a Google Benchmark program.
//
// The experiment runner starts it once per point and parses Google
// Benchmark's JSON (--benchmark_format=json). Every run registers exactly one
// benchmark with one iteration whose manual time is the virtual time of the
// measured phase; the results are counters (plain values, virtual us).
//
// The point is simulated before the benchmark is registered, so that bad
// input (unknown bench/system/knob, a pool too small, ...) exits 2 with one
// line on stderr and never a half-written JSON document.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "apps/kvstore/kv_workload.h"
#include "apps/swap/swap_run.h"
#include "apps/swap/trace_cache.h"
#include "fabric/sim/profile.h"
#include "microbench/access_bench.h"
#include "microbench/alloc_bench.h"
#include "microbench/primitives.h"
#include "systems/knobs.h"
#include "systems/registry.h"

namespace dmb::microbench {
namespace {

using harness::kUnlimitedCores;
using harness::Testbed;
using harness::TestbedSpec;
using systems::ConfigError;

constexpr const char* kUsage = R"(usage: dmb_micro --bench BENCH [options] [Google Benchmark flags]

Runs ONE experiment point on the deterministic simulated RDMA cluster and
reports it as one Google Benchmark entry: Iterations 1, manual time = the
virtual time of the measured phase, counters in virtual microseconds.

Benches (--bench):
  access        Each CN thread allocates one chunk from --system and READs (or
                WRITEs, --op) --size bytes of it, one op outstanding, --ops times
                (after 100 unmeasured warm-up ops).
                Counters: lat_us_p50 lat_us_p99 lat_us_mean count mops
  alloc         Each CN thread repeatedly allocates a batch of chunks from
                --system and frees them; --ops measured allocations per thread,
                --batch chunks held before freeing (default 8; >= ops + 16:
                allocate only, so kops is the sustained allocation rate).
                Counters: lat_us_p50 lat_us_p99 lat_us_mean kops (allocation),
                free_lat_us_p50 free_lat_us_p99 free_lat_us_mean free_kops,
                count, failures, free_failures, mn_cpu_busy_frac
  offload_read  One-sided READ (--op write: WRITE) of --size bytes from one CN
                thread (one QP, one WR outstanding) to the MN while
                --offload-qps extra MN QPs hold offloaded (cross-channel) WRs
                (OneSidedMW 3.2: every such QP slows the MN's RNIC).
                Counters: lat_us_mean lat_us_p99 count mops offload_qps
  mr_reg        Registers --ops fresh MRs of --size bytes (4 KB pages) one after
                the other on the MN's CPU, then deregisters them.
                Counters: lat_us_mean lat_us_p50 lat_us_p99 (registration),
                dereg_lat_us_mean, count, size_bytes
  mw_bind       Binds --ops fresh memory windows of --mw-type over --size bytes
                (type 1: ibv_bind_mw; type 2: a BIND_MW WR), then binds each
                again (type 1: rebind the bound window; type 2: LOCAL_INV, wait,
                BIND_MW). Latency = post -> completion seen by the CPU.
                Counters: lat_us_mean lat_us_p50 lat_us_p99 (bind),
                rebind_lat_us_mean, invalidate_lat_us_mean (type 2), count,
                mw_type, size_bytes
  kv            The OneSidedMW paper's KV store (RACE index, slab allocator) on
                --system: cns x threads clients, one partition each, --keys
                random keys of --key-bytes in --value byte blocks (§6.1).
                --workload fillsync: insert every key (measured), then delete a
                random 90% (deleterandom); ycsbd: --keys ops, 50% inserts, 50%
                reads of keys already inserted, then delete 90%; insert:
                inserts only (Figure 7). Manual time = the measured phase.
                Counters: tput_mops lat_us_p50 lat_us_p99 lat_us_mean
                insert_lat_us_p99, get_lat_us_p99 (ycsbd), delete_tput_mops
                (fillsync, ycsbd), count, failures, dealloc_rate (MN memory
                the store gave back after the workload / its peak), mn_cpu_peak
                (MN cores busy in the busiest of 20 intervals per phase, the
                first and last dropped: the steady state),
                mn_cpu_mean (phase 1), alloc_bytes, value_bytes, block_bytes, keys,
                threads_total, peak_mn_bytes, buckets_per_partition

  swap          Fastswap-style swapping (apps/swap, OneSidedMW 5.1/6.2) on
                --system: --tasks copies of --app dealt over --cns CNs, each in
                a cgroup holding --local of its working set; pages go to
                remote memory in segments of the approach's granularity.
                --scale shrinks working sets and the --swap-gb swap area (the
                paper's 32 GB per CN); a granularity above 4 MB is a fraction
                of that area (Static-MR's 1 GB = 1/32) and shrinks with it
                (to a power of two, at least 1 MB). --cover: how segments
                cover the area (lazy, keep, whole). Traces are recorded once
                and cached in --trace-dir. Manual time = the run (first task
                start to last exit). Counters: job_s_mean job_s_max
                sync_lat_us_mean sync_lat_us_p99 mem_util mn_cpu_peak
                mn_cpu_mean alloc_lat_us_mean major_faults swap_writes
                segment_allocs segment_frees stamp_mismatches (must be 0)
                failures peak_mapped_bytes working_set_pages alloc_bytes
                threads_total (tasks)

Options (each names the benches it applies to; others are an error):
  --system NAME        access, alloc, kv, swap: approach (default static_mr;
                       see `dmbench systems`)
  --set KNOB=VALUE     access, alloc, kv, swap: approach knob, repeatable
  --threads N          access, alloc, kv: CN threads per CN (default 1)
  --cns N              access, alloc, kv, swap: compute nodes (default 1)
  --mn-cores N|unlimited  access, alloc, kv, swap: MN CPU cores (default 1)
  --pool SIZE          access, alloc, kv, swap: MN memory the approach manages
                       (default 1GB; swap: the CNs' swap areas)
  --op read|write      access, offload_read (default read)
  --size SIZE          access, offload_read, mr_reg, mw_bind: bytes per op,
                       region or window, e.g. 64B, 4KB, 1MB, 1GB or a byte
                       count (default 4KB)
  --ops N              all but kv: measured operations (per thread for access/alloc);
                       default access 2000, alloc 200, offload_read 1000,
                       mr_reg 5, mw_bind 100
  --batch N            alloc: chunks each thread holds before freeing them
                       (default 8)
  --offload-qps N      offload_read: MN QPs holding offloaded WRs (default 0)
  --mw-type 1|2        mw_bind: memory-window type (default 1)
  --page 4KB|2MB       mr_reg: OS pages backing the region (default 4KB; Patronus and
                       FineMem register hugepage-backed memory)
  --workload W         kv: fillsync, ycsbd or insert (default fillsync)
  --value SIZE         kv: the size the paper's Figures 6-7 label (default 1KB): with
                       --kv-size block the whole KV block (8 B header + key +
                       value), with --kv-size value the value alone; the block
                       must fit the approach's chunk
  --kv-size block|value  kv: what --value sizes (default block: a 1 KB point fills
                       the 1 KB size class, as the paper's deallocation rates
                       0.9^k say; value: db_bench's --value_size, a 2 KB block)
  --keys N             kv: keys over all threads (ycsbd: ops; default 1000000,
                       db_bench's and the paper's; the figure specs use fewer)
  --key-bytes N        kv: key bytes (default 16)
  --app NAME           swap: kmeans, kmeans-32g, pagerank, ... (default kmeans)
  --scale X            swap: fraction of the paper's sizes, (0, 1] (default 1/256)
  --tasks N            swap: application copies over all CNs (default 1)
  --local X            swap: local memory / working set, (0, 1] (default 0.5)
  --swap-gb X          swap: swap area per CN at scale 1, in GB (default 32)
  --cover lazy|keep|whole  swap: segments mapped on first store and freed
                       when empty, never freed, or the area mapped at start
                       (default lazy)
  --trace-dir DIR      swap: trace cache (default $DMB_TRACE_DIR, else
                       ~/.cache/dmbench/traces)
  --backend sim|ibv    access, alloc: the simulated cluster (default) or real RDMA
                       devices (times are then wall clock; the CNs run in this
                       process). An approach whose needs the device lacks
                       (`dmbench devices`) is not run: exit 77, naming them.
  --devices D[,D]      access, alloc with ibv: this process's RDMA devices
  --mn HOST:PORT|spawn access, alloc with ibv: a running `dmbench mn` daemon
                       (ansible/figure.yml starts one per point), or start one
  --seed N             all: root seed of the simulation (default 1)
  --profile NAME       all: NIC calibration profile (default cx5)
  --help               this text

Google Benchmark flags (--benchmark_*, --v) are passed on, e.g.
  --benchmark_format=json --benchmark_out=F --benchmark_out_format=json

Output: one entry in "benchmarks", named after the bench, with time_unit "us",
real_time = virtual time of the measured phase (mr_reg, mw_bind: the summed
registrations / binds), the counters above as numeric fields, and label
"bench=..,system=..,threads=..,...,knobs=K=V,K=V" (knobs last; "-" for none).
Exit status: 0 ok, 2 bad input (one line on stderr names it and the fix),
1 the simulation failed, 77 skipped: the ibv device lacks what the approach
needs (one line on stderr: "skipped: needs CAP,...").

Example:
  dmb_micro --bench alloc --system rpc_mw --set mw_type=2 --threads 24 \
      --benchmark_format=json
)";

const std::vector<std::string> kBenches = {"access",  "alloc", "offload_read", "mr_reg",
                                           "mw_bind", "kv",    "swap"};

struct Args {
  std::string bench;
  std::string system = "static_mr";
  std::vector<std::string> sets;
  int threads = 1;
  int cns = 1;
  std::string mn_cores = "1";
  std::string pool = "1GB";
  uint64_t seed = 1;
  std::string op = "read";
  std::string size = "4KB";
  std::optional<int> ops;
  int batch = 8;  // alloc
  int offload_qps = 0;
  int mw_type = 1;
  uint64_t page = 4096;  // mr_reg: pages backing the region
  std::string profile = "cx5";
  std::string workload = "fillsync";  // kv
  std::string value = "1KB";          // kv
  std::string kv_size = "block";      // kv: what --value sizes
  uint64_t keys = 1000000;            // kv
  uint32_t key_bytes = 16;            // kv
  apps::swap::SwapRunSpec swap;       // swap
  std::string backend = "sim";        // access, alloc: sim | ibv
  std::vector<std::string> devices;   // ibv: this process's devices
  std::string mn;                     // ibv: "" | spawn | HOST:PORT
  std::vector<std::string> given;     // our flags as given, in order
};

// An ibv point the device cannot run: the capabilities it lacks.
struct Skipped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One benchmark entry, computed before it is reported.
struct Report {
  std::string name;
  std::string label;
  double seconds = 0;  // manual time: virtual seconds of the measured phase
  std::vector<std::pair<std::string, double>> counters;
};

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

template <typename T>
T ParseInt(const std::string& flag, const std::string& v, T min, T max) {
  T out{};
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size() || out < min || out > max) {
    throw ConfigError(flag + ": expected an integer in [" + std::to_string(min) + ", " +
                      std::to_string(max) + "], got \"" + v + "\"");
  }
  return out;
}

// `v` if it is one of `choices`, else ConfigError "FLAG: expected a, b or c,
// got "v"".
std::string Choice(const std::string& flag, const std::string& v,
                   const std::vector<std::string>& choices) {
  for (const auto& c : choices) {
    if (v == c) return v;
  }
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  throw ConfigError(flag + ": expected " + list + ", got \"" + v + "\"");
}

uint64_t ParseSizeOr(const std::string& flag, const std::string& v) {
  const auto s = systems::ParseSize(v);
  if (!s) {
    throw ConfigError(flag + ": expected a size like 64B, 4KB, 1MB, 1GB or a byte count, got \"" +
                      v + "\"");
  }
  return *s;
}

struct FlagDef {
  std::string name;
  std::vector<std::string> benches;  // empty: every bench
  bool takes_value = true;
};

const std::vector<FlagDef>& Flags() {
  static const std::vector<FlagDef> flags = {
      {"--bench", {}},
      {"--system", {"access", "alloc", "kv", "swap"}},
      {"--set", {"access", "alloc", "kv", "swap"}},
      {"--threads", {"access", "alloc", "kv"}},
      {"--cns", {"access", "alloc", "kv", "swap"}},
      {"--mn-cores", {"access", "alloc", "kv", "swap"}},
      {"--pool", {"access", "alloc", "kv", "swap"}},
      {"--op", {"access", "offload_read"}},
      {"--size", {"access", "offload_read", "mr_reg", "mw_bind"}},
      {"--ops", {"access", "alloc", "offload_read", "mr_reg", "mw_bind"}},
      {"--batch", {"alloc"}},
      {"--offload-qps", {"offload_read"}},
      {"--mw-type", {"mw_bind"}},
      {"--page", {"mr_reg"}},
      {"--workload", {"kv"}},
      {"--value", {"kv"}},
      {"--kv-size", {"kv"}},
      {"--keys", {"kv"}},
      {"--key-bytes", {"kv"}},
      {"--app", {"swap"}},
      {"--scale", {"swap"}},
      {"--tasks", {"swap"}},
      {"--local", {"swap"}},
      {"--swap-gb", {"swap"}},
      {"--cover", {"swap"}},
      {"--trace-dir", {"swap"}},
      {"--backend", {"access", "alloc"}},
      {"--devices", {"access", "alloc"}},
      {"--mn", {"access", "alloc"}},
      {"--seed", {}},
      {"--profile", {}},
  };
  return flags;
}

double ParseFraction(const std::string& flag, const std::string& v, bool upto_one) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != 0 || !(d > 0) || (upto_one && d > 1)) {
    throw ConfigError(flag + ": expected a number " + (upto_one ? "in (0, 1]" : "> 0") +
                      ", got \"" + v + "\"");
  }
  return d;
}

void AssignSwap(apps::swap::SwapRunSpec* s, const std::string& flag, const std::string& v) {
  if (flag == "--app") s->workload = v;
  if (flag == "--scale") s->scale = ParseFraction(flag, v, true);
  if (flag == "--tasks") s->tasks = ParseInt<int>(flag, v, 1, 4096);
  if (flag == "--local") s->local_ratio = ParseFraction(flag, v, true);
  if (flag == "--swap-gb") s->swap_gb = ParseFraction(flag, v, false);
  if (flag == "--cover") s->segment_policy = Choice(flag, v, {"lazy", "keep", "whole"});
  if (flag == "--trace-dir") s->trace_dir = v;
}

void Assign(Args* a, const std::string& flag, const std::string& v) {
  if (flag == "--bench") {
    a->bench = v;
  } else if (flag == "--system") {
    a->system = v;
  } else if (flag == "--set") {
    a->sets.push_back(v);
  } else if (flag == "--threads") {
    a->threads = ParseInt<int>(flag, v, 1, 4096);
  } else if (flag == "--cns") {
    a->cns = ParseInt<int>(flag, v, 1, 1024);
  } else if (flag == "--mn-cores") {
    a->mn_cores = v;
  } else if (flag == "--pool") {
    a->pool = v;
  } else if (flag == "--op") {
    a->op = Choice(flag, v, {"read", "write"});
  } else if (flag == "--size") {
    a->size = v;
  } else if (flag == "--ops") {
    a->ops = ParseInt<int>(flag, v, 1, 100'000'000);
  } else if (flag == "--batch") {
    a->batch = ParseInt<int>(flag, v, 1, 100'000'000);
  } else if (flag == "--offload-qps") {
    a->offload_qps = ParseInt<int>(flag, v, 0, 65536);
  } else if (flag == "--page") {
    if (v != "4KB" && v != "2MB")
      throw ConfigError("--page: expected 4KB or 2MB, got \"" + v + "\"");
    a->page = v == "4KB" ? 4096 : 2ull << 20;
  } else if (flag == "--mw-type") {
    if (v != "1" && v != "2") throw ConfigError("--mw-type: expected 1 or 2, got \"" + v + "\"");
    a->mw_type = v == "1" ? 1 : 2;
  } else if (flag == "--seed") {
    a->seed = ParseInt<uint64_t>(flag, v, 0, std::numeric_limits<uint64_t>::max());
  } else if (flag == "--profile") {
    a->profile = v;
  } else if (flag == "--workload") {
    a->workload = Choice(flag, v, {"fillsync", "ycsbd", "insert"});
  } else if (flag == "--value") {
    a->value = v;
  } else if (flag == "--kv-size") {
    a->kv_size = Choice(flag, v, {"block", "value"});
  } else if (flag == "--keys") {
    a->keys = ParseInt<uint64_t>(flag, v, 1, 100'000'000);
  } else if (flag == "--key-bytes") {
    a->key_bytes = ParseInt<uint32_t>(flag, v, 8, 1024);
  } else if (flag == "--backend") {
    a->backend = Choice(flag, v, {"sim", "ibv"});
  } else if (flag == "--devices") {
    for (size_t at = 0; at <= v.size();) {
      const size_t comma = std::min(v.find(',', at), v.size());
      if (comma > at) a->devices.push_back(v.substr(at, comma - at));
      at = comma + 1;
    }
  } else if (flag == "--mn") {
    a->mn = v;
  } else {
    AssignSwap(&a->swap, flag, v);
  }
}

bool IsBenchmarkFlag(std::string_view arg) {
  return arg.starts_with("--benchmark_") || arg == "--v" || arg.starts_with("--v=");
}

// Parses our flags; leaves argv[0] and the Google Benchmark flags in *rest.
Args Parse(int argc, char** argv, std::vector<char*>* rest) {
  Args a;
  rest->push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (IsBenchmarkFlag(arg)) {
      rest->push_back(argv[i]);
      continue;
    }
    if (!arg.starts_with("--")) {
      throw ConfigError("unexpected argument \"" + arg + "\"; options start with -- (see --help)");
    }
    const size_t eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    const FlagDef* def = nullptr;
    for (const auto& f : Flags()) {
      if (f.name == flag) def = &f;
    }
    if (!def) throw ConfigError("unknown flag '" + flag + "'; see dmb_micro --help");
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc && !std::string_view(argv[i + 1]).starts_with("--")) {
      value = argv[++i];
    } else {
      throw ConfigError(flag + " needs a value (see --help)");
    }
    Assign(&a, flag, value);
    a.given.push_back(flag);
  }
  if (a.bench.empty()) throw ConfigError("--bench is required: one of " + Join(kBenches));
  bool known = false;
  for (const auto& b : kBenches) known |= b == a.bench;
  if (!known) {
    throw ConfigError("unknown bench '" + a.bench + "'; known benches: " + Join(kBenches));
  }
  for (const auto& flag : a.given) {
    for (const auto& f : Flags()) {
      if (f.name != flag || f.benches.empty()) continue;
      bool ok = false;
      for (const auto& b : f.benches) ok |= b == a.bench;
      if (!ok) {
        throw ConfigError(flag + " does not apply to --bench " + a.bench + " (only to " +
                          Join(f.benches) + "); drop it");
      }
    }
  }
  if (a.backend == "sim" && (!a.mn.empty() || !a.devices.empty())) {
    throw ConfigError("--mn and --devices need --backend ibv");
  }
  if (!a.ops) {
    a.ops = a.bench == "access"         ? 2000
            : a.bench == "alloc"        ? 200
            : a.bench == "offload_read" ? 1000
            : a.bench == "mr_reg"       ? 5
                                        : 100;
  }
  return a;
}

TestbedSpec BedSpec(const Args& a) {
  // "unknown system 'x'; known systems: ...", "rpc_mw: unknown knob 'x'; ..."
  const auto& info = systems::Registry::Get(a.system);
  TestbedSpec bed;
  bed.system = a.system;
  for (const auto& s : a.sets) bed.knobs.insert(systems::SplitAssignment(s));
  (void)systems::ValidateKnobs(a.system, info.knobs, bed.knobs);
  bed.cns = a.cns;
  bed.seed = a.seed;
  bed.profile = a.profile;
  if (a.mn_cores == "unlimited") {
    bed.mn_cores = kUnlimitedCores;
  } else {
    bed.mn_cores = ParseInt<int>("--mn-cores", a.mn_cores, 1, kUnlimitedCores);
  }
  bed.pool_bytes = ParseSizeOr("--pool", a.pool);
  bed.backend = a.backend;
  bed.devices = a.devices;
  bed.mn_endpoint = a.mn;
  if (a.backend == "ibv") {
    const auto missing = harness::MissingMnCaps(bed);
    if (!missing.empty()) {
      std::string caps;
      for (const auto& c : missing) caps += (caps.empty() ? "" : ",") + c;
      throw Skipped("needs " + caps + " (" + a.system + " on device " +
                    (a.devices.empty() ? std::string("the first") : a.devices.front()) + ")");
    }
  }
  return bed;
}

std::string BedLabel(const Args& a, const TestbedSpec& bed, int threads) {
  return "bench=" + a.bench + ",system=" + a.system + ",threads=" + std::to_string(threads) +
         ",cns=" + std::to_string(bed.cns) + ",mn_cores=" + a.mn_cores +
         ",pool=" + systems::FormatSize(bed.pool_bytes);
}

std::string KnobsLabel(const std::string& knobs) {
  return ",knobs=" + (knobs.empty() ? "-" : knobs);
}

Report RunAccess(const Args& a) {
  AccessBenchSpec spec;
  spec.bed = BedSpec(a);
  spec.threads = a.threads;
  spec.ops_per_thread = *a.ops;
  const uint64_t size = ParseSizeOr("--size", a.size);
  if (size == 0 || size > std::numeric_limits<uint32_t>::max()) {
    throw ConfigError("--size: expected 1 B .. the chunk size, got \"" + a.size + "\"");
  }
  spec.size_bytes = static_cast<uint32_t>(size);
  spec.write = a.op == "write";
  const AccessBenchResult r = RunAccessBench(spec);
  Report rep;
  rep.name = "access";
  rep.label = BedLabel(a, spec.bed, a.threads) + ",op=" + a.op +
              ",size=" + systems::FormatSize(size) + KnobsLabel(r.knobs);
  rep.seconds = r.elapsed_us * 1e-6;
  rep.counters = {{"lat_us_p50", r.op.lat_us_p50},
                  {"lat_us_p99", r.op.lat_us_p99},
                  {"lat_us_mean", r.op.lat_us_mean},
                  {"count", static_cast<double>(r.op.count)},
                  {"mops", r.mops}};
  return rep;
}

Report RunAlloc(const Args& a) {
  AllocBenchSpec spec;
  spec.bed = BedSpec(a);
  spec.threads = a.threads;
  spec.ops_per_thread = *a.ops;
  spec.batch = a.batch;
  const AllocBenchResult r = RunAllocBench(spec);
  Report rep;
  rep.name = "alloc";
  rep.label = BedLabel(a, spec.bed, a.threads) + KnobsLabel(r.knobs);
  rep.seconds = r.elapsed_us * 1e-6;
  rep.counters = {{"lat_us_p50", r.alloc.lat_us_p50},
                  {"lat_us_p99", r.alloc.lat_us_p99},
                  {"lat_us_mean", r.alloc.lat_us_mean},
                  {"kops", r.alloc.kops},
                  {"free_kops", r.free.kops},
                  {"free_lat_us_p50", r.free.lat_us_p50},
                  {"free_lat_us_p99", r.free.lat_us_p99},
                  {"free_lat_us_mean", r.free.lat_us_mean},
                  {"count", static_cast<double>(r.alloc.count)},
                  {"failures", static_cast<double>(r.alloc.failures)},
                  {"free_failures", static_cast<double>(r.free.failures)},
                  {"mn_cpu_busy_frac", r.mn_cpu_busy_frac}};
  return rep;
}

Report RunOffloadRead(const Args& a, const sim::Profile& profile) {
  const uint64_t size = ParseSizeOr("--size", a.size);
  constexpr uint64_t kMax = 60ull << 20;  // RunLoad's MN buffer
  if (size == 0 || size > kMax) {
    throw ConfigError("--size: offload_read moves 1 B .. 60MB per op, got \"" + a.size + "\"");
  }
  LoadSpec s;
  s.cns = 1;
  s.qps_per_cn = 1;
  s.depth = 1;
  s.bytes = static_cast<uint32_t>(size);
  s.opcode = a.op == "write" ? fabric::Opcode::kWrite : fabric::Opcode::kRead;
  s.ops_per_qp = static_cast<uint64_t>(*a.ops);
  s.offloaded_mn_qps = a.offload_qps;
  const LoadResult r = RunLoad(profile, s, a.seed);
  Report rep;
  rep.name = "offload_read";
  rep.label = "bench=offload_read,system=verbs,threads=1,op=" + a.op +
              ",size=" + systems::FormatSize(size) +
              ",offload_qps=" + std::to_string(a.offload_qps) + ",knobs=-";
  rep.seconds = PsToS(r.elapsed_ps);
  rep.counters = {{"lat_us_mean", r.lat_us_mean},
                  {"lat_us_p99", r.lat_us_p99},
                  {"count", static_cast<double>(r.ops)},
                  {"mops", r.mops()},
                  {"offload_qps", static_cast<double>(a.offload_qps)}};
  return rep;
}

// Summed virtual seconds of every sample in `h`.
double SumS(const Histogram& h) { return h.mean() * static_cast<double>(h.count()) / kPsPerS; }

Report RunMrReg(const Args& a, const sim::Profile& profile) {
  const uint64_t size = ParseSizeOr("--size", a.size);
  constexpr uint64_t kMax = 1ull << 40;
  if (size == 0 || size > kMax || size * static_cast<uint64_t>(*a.ops) > (16ull << 40)) {
    throw ConfigError("--size: mr_reg registers 1 B .. 1TB per region and at most 16TB in all (" +
                      std::to_string(*a.ops) + " regions), got \"" + a.size +
                      "\"; use a smaller --size or --ops");
  }
  const MrRegResult r = MeasureMrReg(profile, size, *a.ops, a.seed, a.page);
  Report rep;
  rep.name = "mr_reg";
  rep.label = "bench=mr_reg,system=verbs,threads=1,size=" + systems::FormatSize(size) + ",knobs=-";
  rep.seconds = SumS(r.reg);
  rep.counters = {{"lat_us_mean", r.reg.mean_us()},
                  {"lat_us_p50", r.reg.p50_us()},
                  {"lat_us_p99", r.reg.p99_us()},
                  {"dereg_lat_us_mean", r.dereg.mean_us()},
                  {"count", static_cast<double>(r.reg.count())},
                  {"size_bytes", static_cast<double>(size)},
                  {"page_bytes", static_cast<double>(a.page)}};
  return rep;
}

Report RunMwBind(const Args& a, const sim::Profile& profile) {
  const uint64_t size = ParseSizeOr("--size", a.size);
  constexpr uint64_t kMax = 1ull << 40;
  if (size == 0 || size > kMax) {
    throw ConfigError("--size: mw_bind binds 1 B .. 1TB windows, got \"" + a.size + "\"");
  }
  const auto type = a.mw_type == 1 ? fabric::MwType::kType1 : fabric::MwType::kType2;
  const MwBindResult r = MeasureMwBind(profile, type, size, *a.ops, a.seed);
  Report rep;
  rep.name = "mw_bind";
  rep.label = "bench=mw_bind,system=verbs,threads=1,mw_type=" + std::to_string(a.mw_type) +
              ",size=" + systems::FormatSize(size) + ",knobs=-";
  rep.seconds = SumS(r.bind);
  rep.counters = {{"lat_us_mean", r.bind.mean_us()},
                  {"lat_us_p50", r.bind.p50_us()},
                  {"lat_us_p99", r.bind.p99_us()},
                  {"rebind_lat_us_mean", r.rebind.mean_us()}};
  if (a.mw_type == 2) rep.counters.push_back({"invalidate_lat_us_mean", r.invalidate.mean_us()});
  rep.counters.push_back({"count", static_cast<double>(r.bind.count())});
  rep.counters.push_back({"mw_type", static_cast<double>(a.mw_type)});
  rep.counters.push_back({"size_bytes", static_cast<double>(size)});
  return rep;
}

Report RunKv(const Args& a) {
  const uint64_t value = ParseSizeOr("--value", a.value);
  if (value > (32ull << 10)) {
    throw ConfigError(
        "--value: the KV store's largest block is 32KB (header and key included), "
        "got \"" +
        a.value + "\"; use a smaller --value");
  }
  apps::kv::KvWorkloadSpec spec;
  spec.workload = a.workload;
  spec.threads = a.threads;
  spec.keys = a.keys;
  spec.value_bytes = static_cast<uint32_t>(value);
  spec.size_is = a.kv_size;
  spec.key_bytes = a.key_bytes;
  spec.seed = a.seed;
  const TestbedSpec bed = BedSpec(a);
  Testbed tb(bed);
  const apps::kv::KvWorkloadResult r = apps::kv::RunKvWorkload(tb, spec);
  if (r.failures > 0 && r.first_failure_oom) {
    throw ConfigError(
        std::to_string(r.failures) + " ops ran out of memory, first: " + r.first_failure +
        "; use a larger --pool (now " + systems::FormatSize(bed.pool_bytes) + ") or fewer --keys");
  }
  if (r.failures > 0) {
    std::fprintf(stderr, "dmb_micro: warning: %lu failed ops, first: %s\n",
                 static_cast<unsigned long>(r.failures), r.first_failure.c_str());
  }
  Report rep;
  rep.name = "kv";
  rep.label = BedLabel(a, bed, a.threads) + ",workload=" + a.workload +
              ",value=" + systems::FormatSize(value) + ",kv_size=" + a.kv_size +
              ",keys=" + std::to_string(a.keys) + ",key_bytes=" + std::to_string(a.key_bytes) +
              ",commit=" + r.commit + KnobsLabel(r.knobs);
  rep.seconds = PsToS(r.phase1_ps);
  rep.counters = {{"tput_mops", r.tput_mops()},
                  {"lat_us_p50", r.lat.p50_us()},
                  {"lat_us_p99", r.lat.p99_us()},
                  {"lat_us_mean", r.lat.mean_us()},
                  {"insert_lat_us_p99", r.insert_lat.p99_us()}};
  if (a.workload == "ycsbd") rep.counters.push_back({"get_lat_us_p99", r.get_lat.p99_us()});
  if (a.workload != "insert") rep.counters.push_back({"delete_tput_mops", r.delete_tput_mops()});
  const auto d = [](uint64_t v) { return static_cast<double>(v); };
  for (const auto& c : std::vector<std::pair<std::string, double>>{
           {"count", d(r.ops)},
           {"failures", d(r.failures)},
           {"dealloc_rate", r.dealloc_rate},
           {"mn_cpu_peak", r.mn_cpu_peak},
           {"mn_cpu_mean", r.mn_cpu_mean},
           {"alloc_bytes", d(r.granularity_bytes)},
           {"value_bytes", d(value)},
           {"block_bytes", d(r.block_bytes)},
           {"keys", d(a.keys)},
           {"threads_total", d(static_cast<uint64_t>(r.threads_total))},
           {"peak_mn_bytes", d(r.peak_mn_bytes)},
           {"buckets_per_partition", d(r.buckets_per_partition)}}) {
    rep.counters.push_back(c);
  }
  return rep;
}

// A granularity above 4 MB is a fraction of the swap area and shrinks with
// it (see --help); smaller ones (one swap cluster, 1 MB, or less) do not.
void ScaleCoarseGranularity(TestbedSpec* bed, double scale) {
  auto it = bed->knobs.find("granularity");
  if (it == bed->knobs.end()) return;
  const uint64_t g = systems::ParseSize(it->second).value_or(0);
  if (g <= (4ull << 20)) return;
  uint64_t scaled = 1ull << 20;
  while (scaled * 2 <= static_cast<double>(g) * scale) scaled *= 2;
  it->second = systems::FormatSize(scaled);
}

Report RunSwapBench(const Args& a) {
  apps::swap::SwapRunSpec spec = a.swap;
  spec.seed = a.seed;
  if (spec.trace_dir.empty()) spec.trace_dir = apps::swap::DefaultTraceDir();
  TestbedSpec bed = BedSpec(a);
  ScaleCoarseGranularity(&bed, spec.scale);
  const uint64_t area = static_cast<uint64_t>(spec.swap_gb * spec.scale * (1ull << 30));
  const uint64_t g =
      systems::ParseSize(bed.knobs.count("granularity") ? bed.knobs["granularity"] : "4KB")
          .value_or(4096);
  if (std::find(a.given.begin(), a.given.end(), "--pool") == a.given.end()) {
    bed.pool_bytes = static_cast<uint64_t>(a.cns) * ((area + g - 1) / g * g + g);
  }
  bed.cn_cores = 24;  // [OSMW] §6: two 12-core Xeons per node
  Testbed tb(bed);
  const apps::swap::SwapRunResult r = apps::swap::RunSwap(tb, spec);
  if (r.stamp_mismatches > 0) {
    throw std::runtime_error(
        std::to_string(r.stamp_mismatches) +
        " swapped-in pages did not hold what was swapped out; first: " + r.first_mismatch);
  }
  if (r.failures > 0) {
    std::fprintf(stderr, "dmb_micro: warning: %lu failed swap operations, first: %s\n",
                 static_cast<unsigned long>(r.failures), r.first_failure.c_str());
  }
  Report rep;
  rep.name = "swap";
  rep.label = BedLabel(a, bed, spec.tasks) + ",app=" + spec.workload +
              ",tasks=" + std::to_string(spec.tasks) +
              ",local=" + std::to_string(spec.local_ratio) +
              ",scale=" + std::to_string(spec.scale) + ",cover=" + spec.segment_policy +
              KnobsLabel(r.knobs);
  rep.seconds = PsToS(r.run_ps);
  const auto d = [](uint64_t v) { return static_cast<double>(v); };
  rep.counters = {{"job_s_mean", r.job_s_mean},
                  {"job_s_max", r.job_s_max},
                  {"sync_lat_us_mean", r.sync_lat.mean_us()},
                  {"sync_lat_us_p99", r.sync_lat.p99_us()},
                  {"mem_util", r.mem_util},
                  {"mn_cpu_peak", r.mn_cpu_peak},
                  {"mn_cpu_mean", r.mn_cpu_mean},
                  {"alloc_lat_us_mean", r.alloc_lat.mean_us()},
                  {"major_faults", d(r.major_faults)},
                  {"swap_writes", d(r.writes)},
                  {"segment_allocs", d(r.allocs)},
                  {"segment_frees", d(r.frees)},
                  {"stamp_mismatches", d(r.stamp_mismatches)},
                  {"failures", d(r.failures)},
                  {"peak_mapped_bytes", d(r.peak_mapped_bytes)},
                  {"working_set_pages", d(r.working_set_pages)},
                  {"alloc_bytes", d(r.segment_bytes)},
                  {"threads_total", d(static_cast<uint64_t>(spec.tasks))},
                  {"count", d(r.touches)},
                  {"minor_faults", d(r.minor_faults)},
                  {"reclaimed_bg", d(r.reclaimed_bg)},
                  {"reclaimed_direct", d(r.reclaimed_direct)},
                  {"kept_no_slot", d(r.kept_no_slot)},
                  {"swap_reads", d(r.reads)}};
  return rep;
}

Report Run(const Args& a) {
  const sim::Profile profile = sim::Profile::ByName(a.profile);  // names the known ones
  if (a.bench == "access") return RunAccess(a);
  if (a.bench == "alloc") return RunAlloc(a);
  if (a.bench == "offload_read") return RunOffloadRead(a, profile);
  if (a.bench == "mr_reg") return RunMrReg(a, profile);
  if (a.bench == "kv") return RunKv(a);
  if (a.bench == "swap") return RunSwapBench(a);
  return RunMwBind(a, profile);
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

}  // namespace
}  // namespace dmb::microbench

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(dmb::microbench::kUsage, stdout);
      return 0;
    }
  }
  std::vector<char*> rest;
  dmb::microbench::Report rep;
  try {
    const dmb::microbench::Args args = dmb::microbench::Parse(argc, argv, &rest);
    int bm_argc = static_cast<int>(rest.size());
    rest.push_back(nullptr);
    benchmark::Initialize(&bm_argc, rest.data());
    if (benchmark::ReportUnrecognizedArguments(bm_argc, rest.data())) return 2;
    rep = dmb::microbench::Run(args);
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
  dmb::microbench::Register(rep);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
