#include "cli/runner/spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "fabric/sim/profile.h"
#include "systems/registry.h"

namespace dmb::runner {
namespace {

using systems::ConfigError;

const std::vector<std::string> kTopKeys = {"name",  "title", "source", "cluster",
                                           "seeds", "runs",  "paper",  "findings"};
const std::vector<std::string> kRunKeys = {"op", "params", "grid", "systems"};
const std::vector<std::string> kSystemKeys = {"system", "variant", "knobs"};
const std::vector<std::string> kPaperKeys = {"label",       "where", "match",    "metric",
                                             "relative_to", "value", "tolerance"};
const std::vector<std::string> kClusterKeys = {"cns", "mn_cores", "pool"};
const std::vector<std::string> kMatchKeys = {
    "system",     "variant",     "op",          "io",          "threads",
    "size_bytes", "offload_qps", "mw_type",     "page_bytes",  "cns",
    "mn_cores",   "workload",    "value_bytes", "alloc_bytes", "threads_total",
    "profile",    "kv_size",     "app",         "tasks",       "local",
    "scale",      "cover",       "skew",        "lane_depth"};

// The parameters each op takes (the micro program refuses the others).
const std::map<std::string, std::vector<std::string>> kOpParams = {
    {"access", {"threads", "cns", "mn_cores", "pool", "io", "size", "ops", "profile"}},
    {"alloc", {"threads", "cns", "mn_cores", "pool", "ops", "batch", "profile"}},
    {"offload_read", {"io", "size", "ops", "offload_qps"}},
    {"mr_reg", {"size", "ops", "page"}},
    {"mw_bind", {"size", "ops", "mw_type"}},
    {"kv",
     {"threads", "cns", "mn_cores", "pool", "workload", "value", "kv_size", "keys", "profile"}},
    {"swap",
     {"cns", "mn_cores", "pool", "app", "scale", "tasks", "local", "swap_gb", "cover", "skew",
      "lane_depth", "profile"}},
};

bool Takes(const std::string& op, const std::string& key) {
  const auto& v = kOpParams.at(op);
  return std::find(v.begin(), v.end(), key) != v.end();
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw SpecError(where + ": " + what);
}

std::string Describe(const YAML::Node& n) {
  if (n.IsScalar()) return "\"" + n.Scalar() + "\"";
  if (n.IsSequence()) return n.size() == 0 ? "an empty list" : "a list";
  if (n.IsMap()) return n.size() == 0 ? "an empty map" : "a map";
  return "nothing";
}

// YAML lets a map name a key twice and keeps one of the values; a spec that
// does so says two things, so it is refused rather than read either way.
void CheckNoRepeatedKeys(const YAML::Node& map, const std::string& where) {
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const std::string k = kv.first.as<std::string>();
    if (!seen.insert(k).second) Fail(where + "." + k, "given twice; give each key once");
  }
}

void CheckKeys(const YAML::Node& map, const std::string& where,
               const std::vector<std::string>& known) {
  if (!map.IsMap()) Fail(where, "expected a map, got " + Describe(map));
  CheckNoRepeatedKeys(map, where);
  for (const auto& kv : map) {
    const std::string k = kv.first.as<std::string>();
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      Fail(where + "." + k, "unknown key; known keys here: " + Join(known));
    }
  }
}

std::string Scalar(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) Fail(where, "expected a value, got " + Describe(n));
  return n.Scalar();
}

std::string Required(const YAML::Node& map, const std::string& key, const std::string& where) {
  if (!map[key]) Fail(where + "." + key, "missing (required)");
  return Scalar(map[key], where + "." + key);
}

bool IsUint(const std::string& s) {
  return !s.empty() && s.size() < 19 && std::all_of(s.begin(), s.end(), ::isdigit);
}

double ParseDouble(const std::string& s, const std::string& where) {
  try {
    size_t used = 0;
    const double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::exception&) {
  }
  Fail(where, "expected a number, got \"" + s + "\"");
}

double Number(const YAML::Node& n, const std::string& where) {
  return ParseDouble(Scalar(n, where), where);
}

// The swap op's own parameters (scale, local, swap_gb, cover, app, skew,
// lane_depth); nullopt for any other key.
std::optional<std::string> CheckSwapParam(const std::string& key, const std::string& v,
                                          const std::string& where) {
  if (key == "scale" || key == "local") {
    const double d = ParseDouble(v, where);
    if (!(d > 0 && d <= 1)) Fail(where, "expected a number in (0, 1], got \"" + v + "\"");
    return v;
  }
  if (key == "swap_gb") {
    if (!(ParseDouble(v, where) > 0)) Fail(where, "expected a number > 0, got \"" + v + "\"");
    return v;
  }
  if (key == "cover") {
    if (v != "lazy" && v != "keep" && v != "whole") {
      Fail(where,
           "expected lazy (segments mapped on first use, freed when empty), keep (never "
           "freed) or whole (the swap area mapped at start), got \"" +
               v + "\"");
    }
    return v;
  }
  if (key == "skew") {
    const double d = ParseDouble(v, where);
    if (!(d > 0 && d <= 10)) {
      Fail(where,
           "expected a Zipf exponent in (0, 10] (memcached's key popularity), got \"" + v + "\"");
    }
    return v;
  }
  if (key == "lane_depth") {
    // dmb_micro swap --lane-depth's range (cli/dmb_micro_swap.cc).
    if (!IsUint(v) || std::stoull(v) < 1 || std::stoull(v) > 256) {
      Fail(where,
           "expected an integer in 1..256 (4 KB I/Os in flight per pager lane), got \"" + v + "\"");
    }
    return std::to_string(std::stoull(v));
  }
  if (key == "app") {
    if (v.empty() || v.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != v.npos) {
      Fail(where, "expected a workload name like kmeans, got \"" + v + "\"");
    }
    return v;
  }
  return std::nullopt;
}

// Checks one parameter value; returns its canonical spelling.
std::string CheckParam(const std::string& key, const std::string& v, const std::string& where) {
  auto positive = [&](uint64_t min) {
    if (!IsUint(v) || std::stoull(v) < min) {
      Fail(where, "expected an integer >= " + std::to_string(min) + ", got \"" + v + "\"");
    }
    return std::to_string(std::stoull(v));
  };
  if (key == "threads" || key == "cns" || key == "ops" || key == "keys" || key == "batch" ||
      key == "tasks") {
    return positive(1);
  }
  if (auto swap = CheckSwapParam(key, v, where)) return *swap;
  if (key == "workload") {
    if (v != "fillsync" && v != "ycsbd" && v != "insert") {
      Fail(where, "expected fillsync, ycsbd or insert, got \"" + v + "\"");
    }
    return v;
  }
  if (key == "offload_qps") return positive(0);
  if (key == "kv_size") {
    if (v != "block" && v != "value") {
      Fail(where,
           "expected block (value sizes the whole KV block) or value (the value alone), "
           "got \"" +
               v + "\"");
    }
    return v;
  }
  if (key == "profile") {
    try {
      (void)sim::Profile::ByName(v);
    } catch (const std::invalid_argument& e) {
      Fail(where, e.what());
    }
    return v;
  }
  if (key == "mn_cores") return v == "unlimited" ? v : positive(1);
  if (key == "mw_type") {
    if (v != "1" && v != "2") Fail(where, "expected 1 or 2, got \"" + v + "\"");
    return v;
  }
  if (key == "page") {
    const auto b = systems::ParseSize(v);
    if (!b || (*b != 4096 && *b != (2u << 20))) {
      Fail(where, "expected 4KB or 2MB (the OS page size), got \"" + v + "\"");
    }
    return std::to_string(*b);
  }
  if (key == "io") {
    if (v != "read" && v != "write") Fail(where, "expected read or write, got \"" + v + "\"");
    return v;
  }
  if (key == "pool" || key == "size" || key == "value") {
    const auto b = systems::ParseSize(v);
    if (!b || *b == 0) Fail(where, "expected a size like 4KB, 1MB or 1GB, got \"" + v + "\"");
    return std::to_string(*b);
  }
  Fail(where, "unknown parameter; known parameters: " + Join(KnownParams()));
}

std::map<std::string, std::string> ScalarMap(const YAML::Node& n, const std::string& where,
                                             const std::vector<std::string>* known) {
  std::map<std::string, std::string> out;
  if (!n) return out;
  if (!n.IsMap()) Fail(where, "expected a map, got " + Describe(n));
  CheckNoRepeatedKeys(n, where);
  for (const auto& kv : n) {
    const std::string k = kv.first.as<std::string>();
    if (known && std::find(known->begin(), known->end(), k) == known->end()) {
      Fail(where + "." + k, "unknown key; known keys here: " + Join(*known));
    }
    out[k] = Scalar(kv.second, where + "." + k);
  }
  return out;
}

SystemEntry ParseSystem(const YAML::Node& n, const std::string& where) {
  CheckKeys(n, where, kSystemKeys);
  SystemEntry e;
  e.system = Required(n, "system", where);
  const systems::SystemInfo* info = nullptr;
  try {
    info = &systems::Registry::Get(e.system);
  } catch (const ConfigError& err) {
    Fail(where + ".system", err.what());
  }
  if (n["variant"]) e.variant = Scalar(n["variant"], where + ".variant");
  e.knobs = ScalarMap(n["knobs"], where + ".knobs", nullptr);
  try {
    (void)systems::ValidateKnobs(e.system, info->knobs, e.knobs);
  } catch (const ConfigError& err) {
    // "rpc_mw.mw_type: expected ..." -> "<where>.knobs.mw_type: expected ..."
    std::string msg = err.what();
    const std::string prefix = e.system + ".";
    if (msg.rfind(prefix, 0) == 0) {
      throw SpecError(where + ".knobs." + msg.substr(prefix.size()));
    }
    throw SpecError(where + ".knobs: " + msg);
  }
  return e;
}

Run ParseRun(const YAML::Node& n, const std::string& where) {
  CheckKeys(n, where, kRunKeys);
  Run r;
  r.op = Required(n, "op", where);
  if (std::find(KnownOps().begin(), KnownOps().end(), r.op) == KnownOps().end()) {
    Fail(where + ".op", "unknown op \"" + r.op + "\"; known ops: " + Join(KnownOps()));
  }
  for (const auto& [k, v] : ScalarMap(n["params"], where + ".params", &KnownParams())) {
    r.params[k] = CheckParam(k, v, where + ".params." + k);
    if (!Takes(r.op, k)) {
      Fail(where + ".params." + k,
           "op " + r.op + " does not take it; it takes: " + Join(kOpParams.at(r.op)));
    }
  }
  if (const YAML::Node g = n["grid"]) {
    if (!g.IsMap()) Fail(where + ".grid", "expected a map of lists, got " + Describe(g));
    CheckNoRepeatedKeys(g, where + ".grid");
    for (const auto& kv : g) {
      const std::string k = kv.first.as<std::string>();
      const std::string w = where + ".grid." + k;
      if (std::find(KnownParams().begin(), KnownParams().end(), k) == KnownParams().end()) {
        Fail(w, "unknown parameter; known parameters: " + Join(KnownParams()));
      }
      if (!Takes(r.op, k)) {
        Fail(w, "op " + r.op + " does not take it; it takes: " + Join(kOpParams.at(r.op)));
      }
      if (!kv.second.IsSequence() || kv.second.size() == 0) {
        Fail(w, "expected a non-empty list like [1, 24], got " + Describe(kv.second));
      }
      std::vector<std::string> vals;
      for (size_t i = 0; i < kv.second.size(); ++i) {
        const std::string wi = w + "[" + std::to_string(i) + "]";
        vals.push_back(CheckParam(k, Scalar(kv.second[i], wi), wi));
      }
      r.grid[k] = vals;
      r.grid_order.push_back(k);
    }
  }
  const bool needs_systems = r.op == "access" || r.op == "alloc" || r.op == "kv" || r.op == "swap";
  if (needs_systems) {
    const YAML::Node s = n["systems"];
    if (!s) Fail(where + ".systems", "missing (required for op " + r.op + ")");
    if (!s.IsSequence() || s.size() == 0) {
      Fail(where + ".systems", "expected a non-empty list of {system, variant, knobs}");
    }
    for (size_t i = 0; i < s.size(); ++i) {
      r.systems.push_back(ParseSystem(s[i], where + ".systems[" + std::to_string(i) + "]"));
    }
  } else if (n["systems"]) {
    Fail(where + ".systems", "op " + r.op + " measures a primitive and takes no systems");
  }
  return r;
}

PaperValue ParsePaper(const YAML::Node& n, const std::string& where) {
  CheckKeys(n, where, kPaperKeys);
  PaperValue p;
  p.label = Required(n, "label", where);
  p.where = Required(n, "where", where);
  p.metric = Required(n, "metric", where);
  if (std::find(KnownMetrics().begin(), KnownMetrics().end(), p.metric) == KnownMetrics().end()) {
    Fail(where + ".metric", "unknown metric \"" + p.metric + "\"; known: " + Join(KnownMetrics()));
  }
  if (!n["value"]) Fail(where + ".value", "missing (required)");
  p.value = Number(n["value"], where + ".value");
  if (!n["match"]) Fail(where + ".match", "missing (required)");
  p.match = ScalarMap(n["match"], where + ".match", &kMatchKeys);
  p.relative_to = ScalarMap(n["relative_to"], where + ".relative_to", &kMatchKeys);
  if (n["tolerance"]) {
    p.tolerance = Number(n["tolerance"], where + ".tolerance");
    if (p.tolerance <= 0) Fail(where + ".tolerance", "expected a number > 0");
  }
  return p;
}

std::string Safe(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return o;
}

}  // namespace

const std::vector<std::string>& KnownOps() {
  static const std::vector<std::string> k = {"access",  "alloc", "offload_read", "mr_reg",
                                             "mw_bind", "kv",    "swap"};
  return k;
}

const std::vector<std::string>& KnownMetrics() {
  static const std::vector<std::string> k = {"lat_us_p50",
                                             "lat_us_p99",
                                             "lat_us_mean",
                                             "free_lat_us_p50",
                                             "free_lat_us_p99",
                                             "free_lat_us_mean",
                                             "rebind_lat_us_mean",
                                             "dereg_lat_us_mean",
                                             "invalidate_lat_us_mean",
                                             "mops",
                                             "kops",
                                             "free_kops",
                                             "mn_cpu_busy_frac",
                                             "tput_mops",
                                             "delete_tput_mops",
                                             "insert_lat_us_p99",
                                             "get_lat_us_p99",
                                             "dealloc_rate",
                                             "mn_cpu_peak",
                                             "mn_cpu_mean",
                                             "job_s_mean",
                                             "job_s_max",
                                             "sync_lat_us_mean",
                                             "sync_lat_us_p99",
                                             "mem_util",
                                             "alloc_lat_us_mean"};
  return k;
}

const std::vector<std::string>& KnownParams() {
  static const std::vector<std::string> k = {
      "threads", "cns",   "mn_cores", "pool",  "io",      "size",  "ops",     "offload_qps",
      "mw_type", "page",  "workload", "value", "keys",    "batch", "profile", "kv_size",
      "app",     "scale", "tasks",    "local", "swap_gb", "cover", "skew",    "lane_depth"};
  return k;
}

uint64_t Fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Spec ParseSpec(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw SpecError("not valid YAML (line " + std::to_string(e.mark.line + 1) + "): " + e.msg);
  }
  if (!root.IsMap()) {
    throw SpecError(std::string(root.IsNull() ? "empty: " : "") +
                    "expected a map with name, runs, ... (see experiments/figure-10.yaml)");
  }
  CheckKeys(root, "spec", kTopKeys);
  Spec s;
  s.path = path;
  s.hash = Fnv1a(text);
  s.name = Required(root, "name", "spec");
  // Lowercase letters, digits, '-' and '_' (it names results/<name>/).
  const bool name_ok =
      !s.name.empty() && s.name[0] != '-' && s.name[0] != '_' &&
      std::all_of(s.name.begin(), s.name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      });
  if (!name_ok) {
    Fail("name", "expected lowercase letters, digits, - and _ (it names results/<name>/), got \"" +
                     s.name + "\"");
  }
  if (root["title"]) s.title = Scalar(root["title"], "title");
  if (root["source"]) s.source = Scalar(root["source"], "source");
  if (const YAML::Node f = root["findings"]) {
    if (!f.IsSequence()) Fail("findings", "expected a list of sentences (strings)");
    for (size_t i = 0; i < f.size(); ++i) {
      s.findings.push_back(Scalar(f[i], "findings[" + std::to_string(i) + "]"));
    }
  }
  for (const auto& [k, v] : ScalarMap(root["cluster"], "cluster", &kClusterKeys)) {
    s.cluster[k] = CheckParam(k, v, "cluster." + k);
  }
  if (const YAML::Node seeds = root["seeds"]) {
    if (!seeds.IsSequence() || seeds.size() == 0) Fail("seeds", "expected a list like [1, 2]");
    for (size_t i = 0; i < seeds.size(); ++i) {
      const std::string w = "seeds[" + std::to_string(i) + "]";
      const std::string v = Scalar(seeds[i], w);
      if (!IsUint(v)) Fail(w, "expected a non-negative integer, got \"" + v + "\"");
      s.seeds.push_back(std::stoull(v));
    }
  } else {
    s.seeds = {1};
  }
  const YAML::Node runs = root["runs"];
  if (!runs) Fail("runs", "missing (required): a list of {op, params, grid, systems}");
  if (!runs.IsSequence() || runs.size() == 0) Fail("runs", "expected a non-empty list");
  for (size_t i = 0; i < runs.size(); ++i) {
    s.runs.push_back(ParseRun(runs[i], "runs[" + std::to_string(i) + "]"));
  }
  if (const YAML::Node paper = root["paper"]) {
    if (!paper.IsSequence()) Fail("paper", "expected a list of stated values");
    for (size_t i = 0; i < paper.size(); ++i) {
      s.paper.push_back(ParsePaper(paper[i], "paper[" + std::to_string(i) + "]"));
    }
  }
  (void)Expand(s);  // duplicate points are a spec error too
  return s;
}

void OverrideParam(Spec* spec, const std::string& key, const std::string& value) {
  const std::string where = "--param " + key;
  if (std::find(KnownParams().begin(), KnownParams().end(), key) == KnownParams().end()) {
    Fail(where, "unknown parameter; known parameters: " + Join(KnownParams()));
  }
  const std::string v = CheckParam(key, value, where);
  int applied = 0;
  for (size_t i = 0; i < spec->runs.size(); ++i) {
    Run& r = spec->runs[i];
    if (!Takes(r.op, key)) continue;
    if (r.grid.count(key)) {
      Fail(where, "runs[" + std::to_string(i) + "] sweeps " + key + " in its grid; edit the spec");
    }
    r.params[key] = v;
    ++applied;
  }
  if (applied == 0) Fail(where, "no run of this spec takes it");
}

Spec LoadSpec(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw SpecError("a directory, not a spec file (the figures' specs are experiments/*.yaml)");
  }
  std::ifstream in(path);
  if (!in) throw SpecError("cannot read the spec (the figures' specs are experiments/*.yaml)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseSpec(ss.str(), path);
}

std::vector<Point> Expand(const Spec& spec) {
  std::vector<Point> out;
  std::map<std::string, std::string> seen;  // id -> where
  for (size_t ri = 0; ri < spec.runs.size(); ++ri) {
    const Run& r = spec.runs[ri];
    std::vector<SystemEntry> systems = r.systems;
    if (systems.empty()) systems.push_back({});
    // Cartesian product of the grid, in file order (last key fastest).
    std::vector<std::map<std::string, std::string>> combos = {{}};
    for (const std::string& k : r.grid_order) {
      std::vector<std::map<std::string, std::string>> next;
      for (const auto& c : combos) {
        for (const std::string& v : r.grid.at(k)) {
          auto m = c;
          m[k] = v;
          next.push_back(m);
        }
      }
      combos = std::move(next);
    }
    for (const SystemEntry& se : systems) {
      for (const auto& combo : combos) {
        for (uint64_t seed : spec.seeds) {
          Point p;
          p.op = r.op;
          p.system = se.system;
          p.variant = se.variant;
          p.knobs = se.knobs;
          p.seed = seed;
          if (Takes(p.op, "threads"))
            p.params = {{"threads", "1"}, {"cns", "1"}, {"mn_cores", "1"}};
          for (const auto& [k, v] : spec.cluster) {
            if (Takes(p.op, k)) p.params[k] = v;  // cluster shape: where the op has one
          }
          for (const auto& [k, v] : r.params) p.params[k] = v;
          for (const auto& [k, v] : combo) p.params[k] = v;
          p.id = p.op;
          if (!p.system.empty()) p.id += "-" + Safe(p.system);
          if (!p.variant.empty()) p.id += "-" + Safe(p.variant);
          for (const std::string& k : r.grid_order) p.id += "-" + k + "_" + Safe(combo.at(k));
          p.id += "-seed" + std::to_string(seed);
          std::string key = p.op + "|" + p.system + "|" + p.variant + "|" + std::to_string(seed);
          for (const auto& [k, v] : p.knobs) key += "|k:" + k + "=" + v;
          for (const auto& [k, v] : p.params) key += "|p:" + k + "=" + v;
          p.hash = Fnv1a(key);
          const std::string where = "runs[" + std::to_string(ri) + "]";
          if (auto it = seen.find(p.id); it != seen.end()) {
            throw SpecError(where + ": point \"" + p.id + "\" is also produced by " + it->second +
                            "; give one of them a different variant or grid");
          }
          seen[p.id] = where;
          out.push_back(std::move(p));
        }
      }
    }
  }
  return out;
}

}  // namespace dmb::runner
