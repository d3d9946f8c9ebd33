// dmb_micro offload_read, mr_reg, mw_bind: verbs primitives on the simulated
// RNIC, no approach (microbench/primitives.h).
#include <memory>

#include "cli/dmb_micro.h"
#include "fabric/sim/profile.h"
#include "microbench/primitives.h"
#include "systems/knobs.h"

namespace dmb::microbench {
namespace {

using systems::ConfigError;

struct OffloadReadArgs : CommonArgs {
  std::string op = "read";
  std::string size = "4KB";
  int ops = 1000;
  int offload_qps = 0;
};

struct MrRegArgs : CommonArgs {
  std::string size = "4KB";
  int ops = 5;
  std::string page = "4KB";
};

struct MwBindArgs : CommonArgs {
  std::string size = "4KB";
  int ops = 100;
  int mw_type = 1;
};

Report RunOffloadRead(const OffloadReadArgs& a) {
  const sim::Profile profile = sim::Profile::ByName(a.profile);
  const uint64_t size = SizeOf(a.size);
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
  s.ops_per_qp = static_cast<uint64_t>(a.ops);
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

Report RunMrReg(const MrRegArgs& a) {
  const sim::Profile profile = sim::Profile::ByName(a.profile);
  const uint64_t size = SizeOf(a.size);
  const uint64_t page = a.page == "4KB" ? 4096 : 2ull << 20;
  constexpr uint64_t kMax = 1ull << 40;
  if (size == 0 || size > kMax || size * static_cast<uint64_t>(a.ops) > (16ull << 40)) {
    throw ConfigError("--size: mr_reg registers 1 B .. 1TB per region and at most 16TB in all (" +
                      std::to_string(a.ops) + " regions), got \"" + a.size +
                      "\"; use a smaller --size or --ops");
  }
  const MrRegResult r = MeasureMrReg(profile, size, a.ops, a.seed, page);
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
                  {"page_bytes", static_cast<double>(page)}};
  return rep;
}

Report RunMwBind(const MwBindArgs& a) {
  const sim::Profile profile = sim::Profile::ByName(a.profile);
  const uint64_t size = SizeOf(a.size);
  constexpr uint64_t kMax = 1ull << 40;
  if (size == 0 || size > kMax) {
    throw ConfigError("--size: mw_bind binds 1 B .. 1TB windows, got \"" + a.size + "\"");
  }
  const auto type = a.mw_type == 1 ? fabric::MwType::kType1 : fabric::MwType::kType2;
  const MwBindResult r = MeasureMwBind(profile, type, size, a.ops, a.seed);
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

void SetupOffloadRead(CLI::App& app, BenchFn* chosen) {
  auto a = std::make_shared<OffloadReadArgs>();
  auto* cmd = app.add_subcommand("offload_read",
                                 "One-sided READ (--op write: WRITE) of --size bytes from one CN\n"
                                 "thread (one QP, one WR outstanding) to the MN while\n"
                                 "--offload-qps extra MN QPs hold offloaded (cross-channel) WRs\n"
                                 "(OneSidedMW 3.2: every such QP slows the MN's RNIC).\n"
                                 "Counters: lat_us_mean lat_us_p99 count mops offload_qps");
  AddIoOption(cmd, &a->op, "READ or WRITE");
  cmd->add_option("--size", a->size, "Bytes per op (1 B .. 60MB)")
      ->check(Size())
      ->capture_default_str();
  AddOpsOption(cmd, &a->ops, "Measured operations");
  cmd->add_option("--offload-qps", a->offload_qps, "MN QPs holding offloaded WRs")
      ->transform(IntIn(0, 65536))
      ->capture_default_str();
  AddCommonOptions(cmd, a.get());
  cmd->callback([a, chosen] { *chosen = [a] { return RunOffloadRead(*a); }; });
}

void SetupMrReg(CLI::App& app, BenchFn* chosen) {
  auto a = std::make_shared<MrRegArgs>();
  auto* cmd =
      app.add_subcommand("mr_reg",
                         "Registers --ops fresh MRs of --size bytes (4 KB pages) one after\n"
                         "the other on the MN's CPU, then deregisters them.\n"
                         "Counters: lat_us_mean lat_us_p50 lat_us_p99 (registration),\n"
                         "dereg_lat_us_mean, count, size_bytes");
  cmd->add_option("--size", a->size, "Bytes per region")->check(Size())->capture_default_str();
  AddOpsOption(cmd, &a->ops, "Regions registered");
  cmd->add_option("--page", a->page,
                  "OS pages backing the region (Patronus and FineMem register hugepage-backed "
                  "memory)")
      ->check(OneOf({"4KB", "2MB"}))
      ->capture_default_str();
  AddCommonOptions(cmd, a.get());
  cmd->callback([a, chosen] { *chosen = [a] { return RunMrReg(*a); }; });
}

void SetupMwBind(CLI::App& app, BenchFn* chosen) {
  auto a = std::make_shared<MwBindArgs>();
  auto* cmd =
      app.add_subcommand("mw_bind",
                         "Binds --ops fresh memory windows of --mw-type over --size bytes\n"
                         "(type 1: ibv_bind_mw; type 2: a BIND_MW WR), then binds each\n"
                         "again (type 1: rebind the bound window; type 2: LOCAL_INV, wait,\n"
                         "BIND_MW). Latency = post -> completion seen by the CPU.\n"
                         "Counters: lat_us_mean lat_us_p50 lat_us_p99 (bind),\n"
                         "rebind_lat_us_mean, invalidate_lat_us_mean (type 2), count,\n"
                         "mw_type, size_bytes");
  cmd->add_option("--size", a->size, "Bytes per window")->check(Size())->capture_default_str();
  AddOpsOption(cmd, &a->ops, "Windows bound");
  cmd->add_option("--mw-type", a->mw_type, "Memory-window type")
      ->transform(OneOf({"1", "2"}))
      ->capture_default_str();
  AddCommonOptions(cmd, a.get());
  cmd->callback([a, chosen] { *chosen = [a] { return RunMwBind(*a); }; });
}

}  // namespace

void SetupVerbsBenches(CLI::App& app, BenchFn* chosen) {
  SetupOffloadRead(app, chosen);
  SetupMrReg(app, chosen);
  SetupMwBind(app, chosen);
}

}  // namespace dmb::microbench
