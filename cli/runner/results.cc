#include "cli/runner/results.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "cli/json.h"
#include "cli/runner/micro_command.h"
#include "fabric/sim/profile.h"

extern char** environ;

namespace dmb::runner {
namespace {

namespace fs = std::filesystem;
using Row = std::map<std::string, std::string>;

std::string Hex(uint64_t v) { return fmt::format("{:016x}", v); }

using dmb::cli::JsonString;

std::string JsonMap(const std::map<std::string, std::string>& m) {
  std::string o = "{";
  for (const auto& [k, v] : m)
    o += (o.size() > 1 ? ", " : "") + JsonString(k) + ": " + JsonString(v);
  return o + "}";
}

Row RowOf(const Spec& spec, const Point& p, const fs::path& path) {
  const YAML::Node n = YAML::LoadFile(path.string());
  const auto params = PointParams(p);
  auto get = [&](const char* k) {
    auto it = params.find(k);
    return it == params.end() ? std::string() : it->second;
  };
  Row r;
  r["figure"] = spec.name;
  r["system"] = p.system;
  r["variant"] = p.variant;
  r["op"] = p.op;
  r["io"] = p.op == "access" ? get("io") : "";
  r["threads"] = get("threads");
  r["cns"] = get("cns");
  r["mn_cores"] = get("mn_cores");
  r["seed"] = std::to_string(p.seed);
  r["size_bytes"] = get("size");
  r["offload_qps"] = get("offload_qps");
  r["mw_type"] = get("mw_type");
  r["page_bytes"] = get("page");
  r["workload"] = get("workload");
  r["value_bytes"] = get("value");
  r["kv_size"] = get("kv_size");
  for (const char* k : {"app", "tasks", "local", "scale", "cover", "skew", "lane_depth"}) {
    r[k] = get(k);
  }
  r["profile"] = get("profile");
  std::string knobs;
  for (const auto& [k, v] : p.knobs) knobs += (knobs.empty() ? "" : ";") + k + "=" + v;
  r["knobs"] = knobs;
  for (const auto& kv : n["metrics"]) {
    r[kv.first.as<std::string>()] = fmt::format("{:.6g}", kv.second.as<double>());
  }
  if (n["skipped"]) r["skipped"] = n["skipped"].as<std::string>();
  return r;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

double Mean(const std::vector<const Row*>& rows, const std::string& metric, bool* ok) {
  double sum = 0;
  int n = 0;
  for (const Row* r : rows) {
    auto it = r->find(metric);
    if (it == r->end() || it->second.empty()) continue;
    sum += std::stod(it->second);
    ++n;
  }
  *ok = n > 0;
  return n ? sum / n : 0;
}

std::vector<const Row*> Matching(const std::vector<Row>& rows,
                                 const std::map<std::string, std::string>& match) {
  std::vector<const Row*> out;
  for (const Row& r : rows) {
    bool all = true;
    for (const auto& [k, v] : match) {
      auto it = r.find(k);
      all = all && it != r.end() && it->second == v;
    }
    if (all) out.push_back(&r);
  }
  return out;
}

std::string CompareCsv(const Spec& spec, const std::vector<Row>& rows) {
  std::string out =
      "figure,label,system,variant,op,threads,param,param_value,metric,paper,ours,ratio,verdict,"
      "where,note\n";
  for (const PaperValue& pv : spec.paper) {
    auto get = [&](const char* k) {
      auto it = pv.match.find(k);
      return it == pv.match.end() ? std::string() : it->second;
    };
    // Every other match key, joined by ';' (the plots match on all of them).
    std::string param, param_value;
    for (const char* k :
         {"offload_qps", "size_bytes",    "mw_type",  "page_bytes",  "io",
          "cns",         "mn_cores",      "workload", "value_bytes", "kv_size",
          "alloc_bytes", "threads_total", "profile",  "app",         "tasks",
          "local",       "scale",         "cover",    "skew",        "lane_depth"}) {
      if (get(k).empty()) continue;
      param += (param.empty() ? "" : ";") + std::string(k);
      param_value += (param_value.empty() ? "" : ";") + get(k);
    }
    bool ok = false;
    double ours = Mean(Matching(rows, pv.match), pv.metric, &ok);
    std::string note;
    if (ok && !pv.relative_to.empty()) {
      auto base_match = pv.match;
      for (const auto& [k, v] : pv.relative_to) base_match[k] = v;
      if (!pv.relative_to.count("variant") && pv.relative_to.count("system")) {
        base_match.erase("variant");
      }
      bool base_ok = false;
      const double base = Mean(Matching(rows, base_match), pv.metric, &base_ok);
      ok = base_ok && base != 0;
      ours = ok ? ours / base : 0;
      std::string rel;
      for (const auto& [k, v] : pv.relative_to) rel += (rel.empty() ? "" : " ") + k + "=" + v;
      note = "relative to " + rel;
    }
    const double ratio = ok && pv.value != 0 ? ours / pv.value : 0;
    const std::string verdict =
        !ok ? "no data" : (std::fabs(ratio - 1) <= pv.tolerance ? "hit" : "miss");
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{:.6g},{},{},{},{},{}\n", CsvField(spec.name),
        CsvField(pv.label), get("system"), get("variant"), get("op"), get("threads"), param,
        param_value, pv.metric, pv.value, ok ? fmt::format("{:.6g}", ours) : "",
        ok ? fmt::format("{:.4f}", ratio) : "", verdict, CsvField(pv.where), CsvField(note));
  }
  return out;
}

// Runs args[0] (looked up on PATH) with `args`, no shell in between (a spec
// path may hold quotes or `;`), stderr discarded; its stdout without the
// trailing newline, or "" when it cannot start or exits non-zero.
std::string Capture(const std::vector<std::string>& args) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return "";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  std::string text;
  char buf[256];
  for (ssize_t n; rc == 0 && (n = read(out[0], buf, sizeof buf)) != 0;) {
    if (n > 0) text.append(buf, static_cast<size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  close(out[0]);
  int status = 0;
  if (rc != 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    return "";
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// A YAML node read from JSON text, written back as JSON: quoted scalars stay
// strings, plain ones (numbers, true, false, null) stay as they were.
std::string JsonOf(const YAML::Node& n) {
  if (n.IsMap()) {
    std::string o = "{";
    for (const auto& kv : n) {
      o += (o.size() > 1 ? ", " : "") + JsonString(kv.first.as<std::string>()) + ": " +
           JsonOf(kv.second);
    }
    return o + "}";
  }
  if (n.IsSequence()) {
    std::string o = "[";
    for (const auto& e : n) o += (o.size() > 1 ? ", " : "") + JsonOf(e);
    return o + "]";
  }
  if (n.IsNull()) return "null";
  const std::string v = n.as<std::string>();
  if (n.Tag() == "?") {  // plain: keep a JSON number or literal as it is
    if (v == "true" || v == "false") return v;
    char* end = nullptr;
    (void)std::strtod(v.c_str(), &end);
    if (!v.empty() && *end == 0) return v;
  }
  return JsonString(v);
}

// meta_json's members in their order, as JSON text; throws SpecError when it
// is not a JSON object.
std::vector<std::pair<std::string, std::string>> ExtraMeta(const std::string& meta_json) {
  std::vector<std::pair<std::string, std::string>> out;
  if (meta_json.empty()) return out;
  YAML::Node n;
  try {
    n = YAML::Load(meta_json);
  } catch (const YAML::Exception& e) {
    throw SpecError(std::string("meta JSON does not parse: ") + e.what());
  }
  if (!n.IsMap())
    throw SpecError("meta JSON must be an object ({\"backend\": ...}), got: " +
                    meta_json.substr(0, 60));
  for (const auto& kv : n) out.emplace_back(kv.first.as<std::string>(), JsonOf(kv.second));
  return out;
}

// `members` as a JSON object, one member a line; `extra` replaces the member
// of its name or goes before the last one (findings).
std::string JsonObject(std::vector<std::pair<std::string, std::string>> members,
                       const std::vector<std::pair<std::string, std::string>>& extra) {
  for (const auto& e : extra) {
    auto it = std::find_if(members.begin(), members.end(),
                           [&e](const auto& m) { return m.first == e.first; });
    if (it != members.end()) {
      it->second = e.second;
    } else {
      members.insert(members.end() - 1, e);
    }
  }
  std::string out = "{\n";
  for (size_t i = 0; i < members.size(); ++i) {
    out += "  " + JsonString(members[i].first) + ": " + members[i].second +
           (i + 1 < members.size() ? ",\n" : "\n");
  }
  return out + "}\n";
}

// `extra` plus "failed_points" (the run's failed points) when there are any.
std::vector<std::pair<std::string, std::string>> WithFailures(
    std::vector<std::pair<std::string, std::string>> extra,
    const std::vector<std::string>& failed) {
  if (failed.empty()) return extra;
  std::string list;
  for (const std::string& f : failed) list += (list.empty() ? "" : ",\n    ") + JsonString(f);
  extra.insert(extra.begin(), {"failed_points", "[\n    " + list + "\n  ]"});
  return extra;
}

// The largest peak_rss_mb among the point files (0 and "" when none has one:
// files written before the runner recorded it).
// What the points with a result cost: the largest peak_rss_mb and its point,
// and every point's wall seconds (meta.json's "point_wall_s", which orders
// the next run longest first).
struct Costs {
  double peak_mb = 0;
  std::string peak_point;
  std::string wall_s;  // JSON members "id": seconds
};

void NoteCost(const fs::path& path, const Point& p, Costs* costs) {
  const YAML::Node n = YAML::LoadFile(path.string());
  if (n["peak_rss_mb"] && n["peak_rss_mb"].as<double>() > costs->peak_mb) {
    costs->peak_mb = n["peak_rss_mb"].as<double>();
    costs->peak_point = p.id;
  }
  if (n["wall_s"]) {
    costs->wall_s += fmt::format("{}{}: {:.1f}", costs->wall_s.empty() ? "" : ", ",
                                 JsonString(p.id), n["wall_s"].as<double>());
  }
}

std::string MetaJson(const Spec& spec, double wall_s, const Costs& costs, const MetaOptions& meta) {
  const std::string dir = fs::absolute(spec.path).parent_path().string();
  const std::string sha = Capture({"git", "-C", dir, "rev-parse", "HEAD"});
  // Dirty: the code or specs differ from the commit (results/ itself does not count).
  const bool dirty = !Capture({"git", "-C", dir, "status", "--porcelain", "--untracked-files=no",
                               "--", ":(top)", ":(top,exclude)results"})
                          .empty();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string seeds;
  for (uint64_t s : spec.seeds) seeds += (seeds.empty() ? "" : ", ") + std::to_string(s);
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::string findings;
  for (const std::string& f : spec.findings) {
    findings += (findings.empty() ? "" : ",\n    ") + JsonString(f);
  }
  return JsonObject(
      {{"name", JsonString(spec.name)},
       {"title", JsonString(spec.title)},
       {"source", JsonString(spec.source)},
       {"git_sha", JsonString(sha.empty() ? "unknown" : sha)},
       {"dirty", dirty ? "true" : "false"},
       {"backend", JsonString(meta.backend)},
       {"profile", "\"cx5\""},
       {"seeds", "[" + seeds + "]"},
       {"calibration_hash", "\"" + Hex(sim::Profile::ByName("cx5").Hash()) + "\""},
       {"spec_hash", "\"" + Hex(spec.hash) + "\""},
       {"host", JsonString(host)},
       {"wall_s", fmt::format("{:.1f}", wall_s)},
       {"peak_rss_mb", fmt::format("{{\"max\": {:.1f}, \"point\": {}}}", costs.peak_mb,
                                   JsonString(costs.peak_point))},
       {"point_wall_s", "{" + costs.wall_s + "}"},
       {"generated_at", "\"" + std::string(when) + "\""},
       {"findings", "[" + (findings.empty() ? "" : "\n    " + findings + "\n  ") + "]"}},
      WithFailures(ExtraMeta(meta.meta_json), meta.failed));
}

}  // namespace

void WriteAtomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

uint64_t PointHash(const Point& p, const std::string& backend) {
  if (backend == "sim") return p.hash;
  uint64_t h = p.hash ^ 0xcbf29ce484222325ull;
  for (char c : "backend=" + backend) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

std::string PointJson(const Point& p, uint64_t hash, const std::map<std::string, double>& metrics,
                      const PointCost& cost, const std::vector<std::string>& cmd,
                      const std::string& skipped) {
  std::string ms = "{";
  for (const auto& [k, v] : metrics) {
    ms += (ms.size() > 1 ? ", " : "") + JsonString(k) + ": " + fmt::format("{:.9g}", v);
  }
  ms += "}";
  std::string c;
  for (const auto& a : cmd) c += (c.empty() ? "" : " ") + a;
  return fmt::format(
      "{{\n  \"id\": {},\n  \"point_hash\": \"{}\",\n  \"op\": {},\n  \"system\": {},\n"
      "  \"variant\": {},\n  \"seed\": {},\n  \"knobs\": {},\n  \"params\": {},\n"
      "  \"metrics\": {},{}\n  \"wall_s\": {:.3f},\n  \"peak_rss_mb\": {:.1f},\n"
      "  \"cmd\": {}\n}}\n",
      JsonString(p.id), Hex(hash), JsonString(p.op), JsonString(p.system), JsonString(p.variant),
      p.seed, JsonMap(p.knobs), JsonMap(PointParams(p)), ms,
      skipped.empty() ? "" : "\n  \"skipped\": " + JsonString(skipped) + ",", cost.wall_s,
      cost.peak_rss_mb, JsonString(c));
}

bool HasResult(const fs::path& path, uint64_t hash) {
  if (!fs::exists(path)) return false;
  try {
    const YAML::Node n = YAML::LoadFile(path.string());
    return n["point_hash"] && n["point_hash"].as<std::string>() == Hex(hash) && n["metrics"];
  } catch (const std::exception&) {
    return false;  // a torn or foreign file: run the point again
  }
}

std::string PointEntryJson(const Point& p) {
  return fmt::format(
      "{{\"id\": {}, \"op\": {}, \"system\": {}, \"variant\": {}, \"seed\": {}, "
      "\"knobs\": {}, \"params\": {}}}",
      JsonString(p.id), JsonString(p.op), JsonString(p.system), JsonString(p.variant), p.seed,
      JsonMap(p.knobs), JsonMap(PointParams(p)));
}

void CheckMetaJson(const std::string& meta_json) { (void)ExtraMeta(meta_json); }

const std::vector<std::string>& CsvColumns() {
  static const std::vector<std::string> c = [] {
    std::vector<std::string> v = {"figure",      "system",  "variant",    "op",       "io",
                                  "threads",     "cns",     "mn_cores",   "seed",     "size_bytes",
                                  "offload_qps", "mw_type", "page_bytes", "workload", "value_bytes",
                                  "kv_size",     "app",     "tasks",      "local",    "scale",
                                  "cover",       "skew",    "lane_depth", "profile",  "knobs"};
    v.insert(v.end(), MetricCols().begin(), MetricCols().end());
    v.push_back("skipped");  // ibv: "needs CAP,..." for a point the device cannot run
    return v;
  }();
  return c;
}

// NAME.csv (every point of the spec with a result, in spec order),
// compare.csv and meta.json.
void WriteResults(const Spec& spec, const std::vector<Point>& all, const fs::path& dir,
                  double wall_s, const MetaOptions& meta) {
  std::vector<Row> rows;
  Costs costs;
  for (const Point& p : all) {
    const fs::path path = dir / "points" / (p.id + ".json");
    if (!HasResult(path, PointHash(p, meta.backend))) continue;
    rows.push_back(RowOf(spec, p, path));
    NoteCost(path, p, &costs);
  }
  std::string csv;
  for (const auto& c : CsvColumns()) csv += (csv.empty() ? "" : ",") + c;
  csv += "\n";
  for (const Row& r : rows) {
    std::string line;
    for (size_t i = 0; i < CsvColumns().size(); ++i) {
      auto it = r.find(CsvColumns()[i]);
      line += (i ? "," : "") + CsvField(it == r.end() ? "" : it->second);
    }
    csv += line + "\n";
  }
  WriteAtomically(dir / (spec.name + ".csv"), csv);
  WriteAtomically(dir / "compare.csv", CompareCsv(spec, rows));
  WriteAtomically(dir / "meta.json", MetaJson(spec, wall_s, costs, meta));
}

// The wall time an earlier run recorded in `meta` (0 when there is none): a
// run that finds every point done keeps it, since the points it writes out
// are that run's.
double EarlierWallSeconds(const fs::path& meta) {
  std::ifstream in(meta);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("\"wall_s\": ");
  return at == std::string::npos ? 0.0 : std::strtod(text.c_str() + at + 10, nullptr);
}

std::map<std::string, double> EarlierPointWalls(const fs::path& meta) {
  std::map<std::string, double> walls;
  if (!fs::exists(meta)) return walls;
  try {
    const YAML::Node n = YAML::LoadFile(meta.string());
    if (!n["point_wall_s"] || !n["point_wall_s"].IsMap()) return walls;
    for (const auto& kv : n["point_wall_s"]) {
      walls[kv.first.as<std::string>()] = kv.second.as<double>();
    }
  } catch (const std::exception&) {
    walls.clear();  // a torn or foreign meta.json orders nothing
  }
  return walls;
}

}  // namespace dmb::runner
