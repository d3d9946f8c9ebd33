#include "cli/runner/runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fnmatch.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli/json.h"
#include "fabric/sim/profile.h"
#include "systems/knobs.h"

extern char** environ;

namespace dmb::runner {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Row = std::map<std::string, std::string>;

// Metrics taken from the micro program's benchmark entry, then the counts and
// the virtual time of the measured phase.
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
    {"cover", "--cover"}};

std::map<std::string, std::string> Params(const Point& p) {
  auto out = p.params;
  if (auto it = kOpDefaults.find(p.op); it != kOpDefaults.end()) {
    for (const auto& [k, v] : it->second) out.emplace(k, v);
  }
  if (p.op == "access" || p.op == "alloc" || p.op == "kv") {
    out.emplace("pool", std::to_string(1ull << 30));
  }
  return out;
}

// The point's identity for `backend`: the spec's hash on the simulator, mixed
// with the backend's name elsewhere (FNV-1a), so a point done on one backend
// is not taken as done on another.
uint64_t PointHash(const Point& p, const std::string& backend) {
  if (backend == "sim") return p.hash;
  uint64_t h = p.hash ^ 0xcbf29ce484222325ull;
  for (char c : "backend=" + backend) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

std::vector<std::string> MicroCommand(const RunOptions& opt, const Point& p,
                                      const std::string& out_json) {
  std::vector<std::string> a = {opt.micro_path, "--bench", p.op};
  if (opt.backend != "sim") a.insert(a.end(), {"--backend", opt.backend});
  a.insert(a.end(), opt.micro_args.begin(), opt.micro_args.end());
  if (!p.system.empty()) a.insert(a.end(), {"--system", p.system});
  for (const auto& [k, v] : p.knobs) a.insert(a.end(), {"--set", k + "=" + v});
  for (const auto& [k, v] : Params(p)) {
    const bool size = k == "pool" || k == "size" || k == "page" || k == "value";
    const auto flag = kFlagOf.find(k);
    if (flag == kFlagOf.end()) throw SpecError("internal: no micro flag for parameter " + k);
    a.insert(a.end(), {flag->second, size ? systems::FormatSize(std::stoull(v)) : v});
  }
  a.insert(a.end(), {"--seed", std::to_string(p.seed), "--benchmark_format=json",
                     "--benchmark_out=" + out_json, "--benchmark_out_format=json"});
  return a;
}

std::string Hex(uint64_t v) { return fmt::format("{:016x}", v); }

using dmb::cli::JsonString;

std::string JsonMap(const std::map<std::string, std::string>& m) {
  std::string o = "{";
  for (const auto& [k, v] : m)
    o += (o.size() > 1 ? ", " : "") + JsonString(k) + ": " + JsonString(v);
  return o + "}";
}

void WriteAtomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string LastLine(const fs::path& p) {
  std::string text = Slurp(p), last;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) last = line;
  }
  return last;
}

// The metrics of the micro program's one benchmark entry.
std::map<std::string, double> ParseMicroJson(const fs::path& p) {
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

std::string PointJson(const Point& p, uint64_t hash, const std::map<std::string, double>& metrics,
                      double wall_s, const std::vector<std::string>& cmd,
                      const std::string& skipped = "") {
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
      "  \"metrics\": {},{}\n  \"wall_s\": {:.3f},\n  \"cmd\": {}\n}}\n",
      JsonString(p.id), Hex(hash), JsonString(p.op), JsonString(p.system), JsonString(p.variant),
      p.seed, JsonMap(p.knobs), JsonMap(Params(p)), ms,
      skipped.empty() ? "" : "\n  \"skipped\": " + JsonString(skipped) + ",", wall_s,
      JsonString(c));
}

// True when `path` holds this very point's result (`hash`: PointHash's).
bool HasResult(const fs::path& path, uint64_t hash) {
  if (!fs::exists(path)) return false;
  try {
    const YAML::Node n = YAML::LoadFile(path.string());
    return n["point_hash"] && n["point_hash"].as<std::string>() == Hex(hash) && n["metrics"];
  } catch (const std::exception&) {
    return false;  // a torn or foreign file: run the point again
  }
}

Row RowOf(const Spec& spec, const Point& p, const fs::path& path) {
  const YAML::Node n = YAML::LoadFile(path.string());
  const auto params = Params(p);
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
  for (const char* k : {"app", "tasks", "local", "scale", "cover"}) r[k] = get(k);
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
    for (const char* k : {"offload_qps", "size_bytes", "mw_type", "page_bytes", "io", "cns",
                          "mn_cores", "workload", "value_bytes", "kv_size", "alloc_bytes",
                          "threads_total", "profile", "app", "tasks", "local", "scale", "cover"}) {
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

std::string Shell(const std::string& cmd) {
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, f)) out += buf;
    pclose(f);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
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

std::string MetaJson(const Spec& spec, double wall_s, const RunOptions& opt) {
  const std::string dir = fs::absolute(spec.path).parent_path().string();
  const std::string sha = Shell("git -C '" + dir + "' rev-parse HEAD 2>/dev/null");
  // Dirty: the code or specs differ from the commit (results/ itself does not count).
  const bool dirty = !Shell("git -C '" + dir +
                            "' status --porcelain --untracked-files=no -- ':(top)' "
                            "':(top,exclude)results' 2>/dev/null")
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
  std::vector<std::pair<std::string, std::string>> m = {
      {"name", JsonString(spec.name)},
      {"title", JsonString(spec.title)},
      {"source", JsonString(spec.source)},
      {"git_sha", JsonString(sha.empty() ? "unknown" : sha)},
      {"dirty", dirty ? "true" : "false"},
      {"backend", JsonString(opt.backend)},
      {"profile", "\"cx5\""},
      {"seeds", "[" + seeds + "]"},
      {"calibration_hash", "\"" + Hex(sim::Profile::ByName("cx5").Hash()) + "\""},
      {"spec_hash", "\"" + Hex(spec.hash) + "\""},
      {"host", JsonString(host)},
      {"wall_s", fmt::format("{:.1f}", wall_s)},
      {"generated_at", "\"" + std::string(when) + "\""},
      {"findings", "[" + (findings.empty() ? "" : "\n    " + findings + "\n  ") + "]"}};
  for (const auto& extra : ExtraMeta(opt.meta_json)) {
    auto it =
        std::find_if(m.begin(), m.end(), [&](const auto& e) { return e.first == extra.first; });
    if (it != m.end()) {
      it->second = extra.second;
    } else {
      m.insert(m.end() - 1, extra);  // findings stay last
    }
  }
  std::string out = "{\n";
  for (size_t i = 0; i < m.size(); ++i) {
    out += "  " + JsonString(m[i].first) + ": " + m[i].second + (i + 1 < m.size() ? ",\n" : "\n");
  }
  return out + "}\n";
}

std::string MinutesSeconds(double s) {
  const long t = static_cast<long>(s + 0.5);
  return fmt::format("{}:{:02d}", t / 60, t % 60);
}

pid_t Spawn(const std::vector<std::string>& args, const fs::path& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  return pid;
}

}  // namespace

const std::vector<std::string>& CsvColumns() {
  static const std::vector<std::string> c = [] {
    std::vector<std::string> v = {"figure",      "system",  "variant",    "op",       "io",
                                  "threads",     "cns",     "mn_cores",   "seed",     "size_bytes",
                                  "offload_qps", "mw_type", "page_bytes", "workload", "value_bytes",
                                  "kv_size",     "app",     "tasks",      "local",    "scale",
                                  "cover",       "profile", "knobs"};
    v.insert(v.end(), MetricCols().begin(), MetricCols().end());
    v.push_back("skipped");  // ibv: "needs CAP,..." for a point the device cannot run
    return v;
  }();
  return c;
}

namespace {

// The points --filter selects (all without one); a filter that selects none
// is an error naming a few ids.
std::vector<const Point*> SelectPoints(const std::vector<Point>& all, const RunOptions& opt) {
  std::vector<const Point*> selected;
  for (const Point& p : all) {
    if (opt.filter.empty() || fnmatch(opt.filter.c_str(), p.id.c_str(), 0) == 0) {
      selected.push_back(&p);
    }
  }
  if (!opt.filter.empty() && selected.empty()) {
    std::string ids;
    for (size_t i = 0; i < all.size() && i < 6; ++i) ids += (i ? ", " : "") + all[i].id;
    throw SpecError("--filter '" + opt.filter + "' matches none of the " +
                    std::to_string(all.size()) + " points (e.g. " + ids + ")");
  }
  return selected;
}

// SelectPoints', then every shard_count-th of them from shard_index.
std::vector<const Point*> SelectShard(const std::vector<Point>& all, const RunOptions& opt) {
  std::vector<const Point*> out;
  const std::vector<const Point*> filtered = SelectPoints(all, opt);
  for (size_t i = 0; i < filtered.size(); ++i) {
    if (static_cast<int>(i % opt.shard_count) == opt.shard_index) out.push_back(filtered[i]);
  }
  return out;
}

// One finished child: its point's JSON from the micro program's output, or
// why it failed (the log's last line, or the output's fault). True if it ran.
bool FinishPoint(const RunOptions& opt, const fs::path& dir, const Point& p,
                 const std::vector<std::string>& cmd, int status, double secs, RunSummary* sum) {
  const fs::path gb = dir / "points" / (p.id + ".gb.json");
  const fs::path log = dir / "logs" / (p.id + ".log");
  bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::string why;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77 && opt.backend != "sim") {
    // The device lacks what the approach needs: a result that says so.
    std::string reason = LastLine(log);
    if (reason.rfind("skipped: ", 0) == 0) reason = reason.substr(9);
    WriteAtomically(dir / "points" / (p.id + ".json"),
                    PointJson(p, PointHash(p, opt.backend), {}, secs, cmd, reason));
    ++sum->ran;
    sum->skipped_caps.push_back(p.id + ": " + reason);
    ok = true;
  } else if (ok) {
    try {
      WriteAtomically(dir / "points" / (p.id + ".json"),
                      PointJson(p, PointHash(p, opt.backend), ParseMicroJson(gb), secs, cmd));
      ++sum->ran;
    } catch (const std::exception& e) {
      ok = false;
      why = e.what();
    }
  } else {
    why = LastLine(log);
  }
  std::error_code ec;
  fs::remove(gb, ec);
  if (!ok) sum->failed.push_back(p.id + " (" + log.string() + "): " + why);
  return ok;
}

// Runs `todo`, up to opt.jobs micro processes at once, with a progress line
// (points done, elapsed, ETA) per finished point.
void RunPoints(const RunOptions& opt, const fs::path& dir, const std::vector<const Point*>& todo,
               Clock::time_point t0, RunSummary* sum) {
  struct Child {
    const Point* p;
    std::vector<std::string> cmd;
    Clock::time_point start;
  };
  std::map<pid_t, Child> running;
  size_t next = 0, done = 0;
  while (next < todo.size() || !running.empty()) {
    while (next < todo.size() && static_cast<int>(running.size()) < std::max(1, opt.jobs)) {
      const Point* p = todo[next++];
      const fs::path out = dir / "points" / (p->id + ".gb.json");
      Child c{p, MicroCommand(opt, *p, out.string()), Clock::now()};
      running[Spawn(c.cmd, dir / "logs" / (p->id + ".log"))] = c;
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) break;
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const Child c = it->second;
    running.erase(it);
    const double secs = std::chrono::duration<double>(Clock::now() - c.start).count();
    const bool ok = FinishPoint(opt, dir, *c.p, c.cmd, status, secs, sum);
    ++done;
    const double el = std::chrono::duration<double>(Clock::now() - t0).count();
    const double eta = el / done * (todo.size() - done);
    fmt::print(stderr, "{}[{:>{}}/{}] {:3.0f}%  elapsed {}  ETA {}  {} {} ({:.1f} s){}",
               opt.tty ? "\r\033[K" : "", done, std::to_string(todo.size()).size(), todo.size(),
               100.0 * done / std::max<size_t>(1, todo.size()), MinutesSeconds(el),
               MinutesSeconds(eta), ok ? "ok  " : "FAIL", c.p->id, secs, opt.tty ? "" : "\n");
  }
  if (opt.tty && !todo.empty()) fmt::print(stderr, "\n");
}

// NAME.csv (every point of the spec with a result, in spec order),
// compare.csv and meta.json.
void WriteResults(const Spec& spec, const std::vector<Point>& all, const fs::path& dir,
                  double wall_s, const RunOptions& opt) {
  std::vector<Row> rows;
  for (const Point& p : all) {
    const fs::path path = dir / "points" / (p.id + ".json");
    if (HasResult(path, PointHash(p, opt.backend))) rows.push_back(RowOf(spec, p, path));
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
  WriteAtomically(dir / "meta.json", MetaJson(spec, wall_s, opt));
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

}  // namespace

std::string PointsJson(const Spec& spec, const RunOptions& opt) {
  const std::vector<Point> all = Expand(spec);
  std::string out = "[";
  for (const Point* p : SelectShard(all, opt)) {
    out += fmt::format(
        "{}\n  {{\"id\": {}, \"op\": {}, \"system\": {}, \"variant\": {}, \"seed\": {}, "
        "\"knobs\": {}, \"params\": {}}}",
        out.size() > 1 ? "," : "", JsonString(p->id), JsonString(p->op), JsonString(p->system),
        JsonString(p->variant), p->seed, JsonMap(p->knobs), JsonMap(Params(*p)));
  }
  return out + "\n]\n";
}

std::pair<int, int> ParseShard(const std::string& text) {
  const size_t slash = text.find('/');
  int i = 0, n = 0;
  try {
    size_t used_i = 0, used_n = 0;
    if (slash != std::string::npos) {
      i = std::stoi(text.substr(0, slash), &used_i);
      n = std::stoi(text.substr(slash + 1), &used_n);
    }
    if (used_i != slash || used_n != text.size() - slash - 1) n = 0;
  } catch (const std::exception&) {
    n = 0;
  }
  if (n < 1 || i < 1 || i > n) {
    throw SpecError("--shard: expected I/N with 1 <= I <= N (the I-th of N machines), got '" +
                    text + "'");
  }
  return {i - 1, n};
}

RunSummary RunSpec(const Spec& spec, const RunOptions& opt) {
  const auto t0 = Clock::now();
  if (!opt.collect && (opt.micro_path.empty() || !fs::exists(opt.micro_path))) {
    throw SpecError("the micro program '" + opt.micro_path +
                    "' does not exist; build it (`make release`) or pass --micro PATH");
  }
  if (opt.backend != "sim" && opt.backend != "ibv") {
    throw SpecError("backend: expected sim or ibv, got '" + opt.backend + "'");
  }
  if (opt.shard_count < 1 || opt.shard_index < 0 || opt.shard_index >= opt.shard_count) {
    throw SpecError(fmt::format("shard {} of {}: expected 0 <= index < count", opt.shard_index,
                                opt.shard_count));
  }
  (void)ExtraMeta(opt.meta_json);  // a bad --meta-json fails before any point runs
  const std::vector<Point> all = Expand(spec);
  const std::vector<const Point*> selected = SelectShard(all, opt);
  const fs::path dir = fs::path(opt.results_root) / spec.name;
  fs::create_directories(dir / "points");
  fs::create_directories(dir / "logs");

  RunSummary sum;
  sum.total = selected.size();
  std::vector<const Point*> todo;
  for (const Point* p : selected) {
    if (!opt.force && HasResult(dir / "points" / (p->id + ".json"), PointHash(*p, opt.backend))) {
      ++sum.skipped;
    } else if (opt.collect) {
      sum.missing.push_back(p->id);
    } else {
      todo.push_back(p);
    }
  }
  const std::string shard =
      opt.shard_count > 1 ? fmt::format(", shard {}/{}", opt.shard_index + 1, opt.shard_count) : "";
  if (opt.collect) {
    fmt::print(stderr, "{}: collecting {} points ({} with results, {} missing) in {}\n", spec.name,
               sum.total, sum.skipped, sum.missing.size(), dir.string());
  } else {
    fmt::print(stderr, "{}: {} points{} ({} to run, {} already done{}), {} job(s) -> {}\n",
               spec.name, sum.total, shard, todo.size(), sum.skipped,
               opt.force ? "" : "; --force reruns them", opt.jobs, dir.string());
    RunPoints(opt, dir, todo, t0, &sum);
  }
  sum.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double meta_wall_s = todo.empty() ? EarlierWallSeconds(dir / "meta.json") : sum.wall_s;
  WriteResults(spec, all, dir, meta_wall_s, opt);
  return sum;
}

}  // namespace dmb::runner
