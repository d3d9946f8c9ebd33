#include "cli/runner/micro_command.h"

#include <yaml-cpp/yaml.h>

#include <stdexcept>

#include "systems/knobs.h"

namespace dmb::runner {
namespace {

// Defaults per op, filled into every point (so a point file says everything).
const std::map<std::string, std::map<std::string, std::string>> kOpDefaults = {
    {"access", {{"io", "read"}, {"size", "4096"}, {"ops", "2000"}}},
    {"alloc", {{"ops", "200"}}},
    {"offload_read", {{"size", "4096"}, {"ops", "1000"}, {"offload_qps", "0"}}},
    {"mr_reg", {{"size", "4096"}, {"page", "4096"}}},
    {"kv",
     {{"workload", "fillsync"}, {"value", "1024"}, {"kv_size", "block"}, {"keys", "1000000"}}},
    {"mw_bind", {{"size", "4096"}, {"mw_type", "1"}}},
    {"swap",
     {{"app", "kmeans"},
      {"scale", "0.00390625"},
      {"tasks", "1"},
      {"local", "0.5"},
      {"swap_gb", "32"},
      {"cover", "lazy"}}},
};

const std::map<std::string, std::string> kFlagOf = {
    {"threads", "--threads"}, {"cns", "--cns"},     {"mn_cores", "--mn-cores"},
    {"pool", "--pool"},       {"io", "--op"},       {"size", "--size"},
    {"ops", "--ops"},         {"batch", "--batch"}, {"offload_qps", "--offload-qps"},
    {"mw_type", "--mw-type"}, {"page", "--page"},   {"workload", "--workload"},
    {"value", "--value"},     {"keys", "--keys"},   {"profile", "--profile"},
    {"kv_size", "--kv-size"}, {"app", "--app"},     {"scale", "--scale"},
    {"tasks", "--tasks"},     {"local", "--local"}, {"swap_gb", "--swap-gb"},
    {"cover", "--cover"},     {"skew", "--skew"},   {"lane_depth", "--lane-depth"}};

}  // namespace

const std::vector<std::string>& MetricCols() {
  static const std::vector<std::string> c = [] {
    std::vector<std::string> v = KnownMetrics();
    v.insert(v.end(), {"alloc_bytes", "threads_total", "count", "failures", "virtual_s"});
    v.insert(v.end(), {"major_faults", "swap_writes", "segment_allocs", "segment_frees",
                       "stamp_mismatches", "peak_mapped_bytes", "working_set_pages"});
    return v;
  }();
  return c;
}

std::map<std::string, std::string> PointParams(const Point& p) {
  auto out = p.params;
  if (auto it = kOpDefaults.find(p.op); it != kOpDefaults.end()) {
    for (const auto& [k, v] : it->second) out.emplace(k, v);
  }
  if (p.op == "access" || p.op == "alloc" || p.op == "kv") {
    out.emplace("pool", std::to_string(1ull << 30));
  }
  return out;
}

std::vector<std::string> MicroCommand(const std::string& micro_path, const Point& p,
                                      const std::string& out_json, const std::string& backend,
                                      const std::vector<std::string>& extra) {
  std::vector<std::string> a = {micro_path, "--bench", p.op};
  if (backend != "sim") a.insert(a.end(), {"--backend", backend});
  a.insert(a.end(), extra.begin(), extra.end());
  if (!p.system.empty()) a.insert(a.end(), {"--system", p.system});
  for (const auto& [k, v] : p.knobs) a.insert(a.end(), {"--set", k + "=" + v});
  for (const auto& [k, v] : PointParams(p)) {
    const bool size = k == "pool" || k == "size" || k == "page" || k == "value";
    const auto flag = kFlagOf.find(k);
    if (flag == kFlagOf.end()) throw SpecError("internal: no micro flag for parameter " + k);
    a.insert(a.end(), {flag->second, size ? systems::FormatSize(std::stoull(v)) : v});
  }
  a.insert(a.end(), {"--seed", std::to_string(p.seed), "--benchmark_format=json",
                     "--benchmark_out=" + out_json, "--benchmark_out_format=json"});
  return a;
}

std::map<std::string, double> ParseMicroJson(const std::filesystem::path& p) {
  const YAML::Node root = YAML::LoadFile(p.string());
  const YAML::Node b = root["benchmarks"];
  if (!b || !b.IsSequence() || b.size() != 1) {
    throw std::runtime_error(p.string() + ": expected exactly one benchmark entry");
  }
  std::map<std::string, double> m;
  for (const std::string& k : MetricCols()) {
    if (b[0][k]) m[k] = b[0][k].as<double>();
  }
  const double t = b[0]["real_time"].as<double>();
  const std::string unit = b[0]["time_unit"] ? b[0]["time_unit"].as<std::string>() : "ns";
  const double scale = unit == "s" ? 1 : unit == "ms" ? 1e-3 : unit == "us" ? 1e-6 : 1e-9;
  m["virtual_s"] = t * scale;
  return m;
}

}  // namespace dmb::runner
