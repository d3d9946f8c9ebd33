// dmb_micro access: one-sided READ/WRITE latency through an approach's chunk.
#include <limits>
#include <memory>

#include "cli/dmb_micro.h"
#include "microbench/access_bench.h"
#include "systems/knobs.h"

namespace dmb::microbench {
namespace {

struct AccessArgs : BedArgs {
  int threads = 1;
  int depth = 1;
  std::string op = "read";
  std::string size = "4KB";
  int ops = 2000;
};

Report RunAccess(const AccessArgs& a) {
  AccessBenchSpec spec;
  spec.bed = BedSpec(a);
  spec.threads = a.threads;
  spec.ops_per_thread = a.ops;
  spec.depth = a.depth;
  const uint64_t size = SizeOf(a.size);
  if (size == 0 || size > std::numeric_limits<uint32_t>::max()) {
    throw systems::ConfigError("--size: expected 1 B .. the chunk size, got \"" + a.size + "\"");
  }
  spec.size_bytes = static_cast<uint32_t>(size);
  spec.write = a.op == "write";
  const AccessBenchResult r = RunAccessBench(spec);
  Report rep;
  rep.name = "access";
  rep.label = BedLabel(a, spec.bed, a.threads) +
              (a.depth > 1 ? ",depth=" + std::to_string(a.depth) : "") + ",op=" + a.op +
              ",size=" + systems::FormatSize(size) + KnobsLabel(r.knobs);
  rep.seconds = r.elapsed_us * 1e-6;
  rep.counters = {{"lat_us_p50", r.op.lat_us_p50},
                  {"lat_us_p99", r.op.lat_us_p99},
                  {"lat_us_mean", r.op.lat_us_mean},
                  {"count", static_cast<double>(r.op.count)},
                  {"mops", r.mops}};
  return rep;
}

}  // namespace

void SetupAccess(CLI::App& app, BenchFn* chosen) {
  auto a = std::make_shared<AccessArgs>();
  auto* access =
      app.add_subcommand("access",
                         "Each CN thread allocates one chunk from --system and READs (or\n"
                         "WRITEs, --op) --size bytes of it --ops times (after 100 unmeasured\n"
                         "warm-up ops), --depth ops outstanding on its one lane.\n"
                         "Counters: lat_us_p50 lat_us_p99 lat_us_mean count mops");
  AddBedOptions(access, a.get(), "MN memory the approach manages");
  AddIbvOptions(access, a.get());
  AddThreadsOption(access, &a->threads);
  AddIoOption(access, &a->op, "READ or WRITE");
  access->add_option("--size", a->size, "Bytes per op (1 B .. the chunk size)")
      ->check(Size())
      ->capture_default_str();
  AddOpsOption(access, &a->ops, "Measured operations per thread");
  access->add_option("--depth", a->depth, "Operations outstanding per thread (on its lane)")
      ->transform(IntIn(1, 256))
      ->capture_default_str();
  access->callback([a, chosen] { *chosen = [a] { return RunAccess(*a); }; });
}

}  // namespace dmb::microbench
