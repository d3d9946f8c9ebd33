#include "cli/runner/runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fnmatch.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "cli/runner/micro_command.h"
#include "cli/runner/results.h"

extern char** environ;

namespace dmb::runner {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

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

// A point the device cannot run (the micro program exited 77 on ibv): a
// result that says so, with the capabilities it lacks from the log's last line.
void RecordSkipped(const RunOptions& opt, const fs::path& dir, const Point& p,
                   const std::vector<std::string>& cmd, const PointCost& cost, RunSummary* sum) {
  std::string reason = LastLine(dir / "logs" / (p.id + ".log"));
  if (reason.rfind("skipped: ", 0) == 0) reason = reason.substr(9);
  WriteAtomically(dir / "points" / (p.id + ".json"),
                  PointJson(p, PointHash(p, opt.backend), {}, cost, cmd, reason));
  ++sum->ran;
  sum->skipped_caps.push_back(p.id + ": " + reason);
}

// `a` as one shell word: as it is when that is safe, else single-quoted.
std::string ShellWord(const std::string& a) {
  static constexpr std::string_view kPlain =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_=,./:+-@%";
  if (!a.empty() && a.find_first_not_of(kPlain) == std::string::npos) return a;
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// `cmd` as one shell line that runs the point alone and prints to the
// console: without the JSON output the runner reads.
std::string ReproduceLine(const std::vector<std::string>& cmd) {
  std::string line;
  for (const std::string& a : cmd) {
    if (a.rfind("--benchmark_out", 0) == 0 || a == "--benchmark_format=json") continue;
    line += (line.empty() ? "" : " ") + ShellWord(a);
  }
  return line;
}

// One finished child: its point's JSON from the micro program's output, or
// why it failed (the log's last line, or the output's fault). True if it ran.
bool FinishPoint(const RunOptions& opt, const fs::path& dir, const Point& p,
                 const std::vector<std::string>& cmd, int status, const PointCost& cost,
                 RunSummary* sum) {
  const fs::path gb = dir / "points" / (p.id + ".gb.json");
  const fs::path log = dir / "logs" / (p.id + ".log");
  bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::string why;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77 && opt.backend != "sim") {
    RecordSkipped(opt, dir, p, cmd, cost, sum);
    ok = true;
  } else if (ok) {
    try {
      WriteAtomically(dir / "points" / (p.id + ".json"),
                      PointJson(p, PointHash(p, opt.backend), ParseMicroJson(gb), cost, cmd));
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
  if (!ok) {
    sum->failed.push_back(p.id + " (" + log.string() + "): " + why);
    sum->reproduce.push_back(ReproduceLine(cmd));
  }
  return ok;
}

struct Child {
  const Point* p;
  std::vector<std::string> cmd;
  Clock::time_point start;
};

// What the unfinished points have left: each its wall time recorded in
// meta.json (`walls`) at this run's pace or, unknown, the mean of the points
// finished in this run; a running one less what it has spent (at least 0).
double EtaSeconds(const std::map<std::string, double>& walls, const WallPace& pace,
                  double mean_done_s, const std::vector<const Point*>& todo, size_t next,
                  const std::map<pid_t, Child>& running, int jobs) {
  auto expected = [&](const Point* p) {
    auto it = walls.find(p->id);
    return it == walls.end() ? mean_done_s : it->second * pace.factor();
  };
  std::vector<double> left;
  for (size_t i = next; i < todo.size(); ++i) left.push_back(expected(todo[i]));
  for (const auto& [pid, c] : running) {
    const double spent = std::chrono::duration<double>(Clock::now() - c.start).count();
    left.push_back(std::max(0.0, expected(c.p) - spent));
  }
  return SecondsLeft(left, jobs);
}

// Runs `todo`, up to opt.jobs micro processes at once, with a progress line
// (points done, elapsed, ETA) per finished point. `walls`: the points' wall
// times of the last run (meta.json), for the ETA.
void RunPoints(const RunOptions& opt, const fs::path& dir, const std::vector<const Point*>& todo,
               const std::map<std::string, double>& walls, Clock::time_point t0, RunSummary* sum) {
  std::map<pid_t, Child> running;
  size_t next = 0, done = 0;
  double done_s = 0;
  WallPace pace;
  while (next < todo.size() || !running.empty()) {
    while (next < todo.size() && static_cast<int>(running.size()) < std::max(1, opt.jobs)) {
      const Point* p = todo[next++];
      const fs::path out = dir / "points" / (p->id + ".gb.json");
      Child c{p, MicroCommand(opt.micro_path, *p, out.string(), opt.backend, opt.micro_args),
              Clock::now()};
      running[Spawn(c.cmd, dir / "logs" / (p->id + ".log"))] = c;
    }
    int status = 0;
    rusage ru{};
    const pid_t pid = wait4(-1, &status, 0, &ru);
    if (pid < 0) break;
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const Child c = it->second;
    running.erase(it);
    const double secs = std::chrono::duration<double>(Clock::now() - c.start).count();
    const PointCost cost{secs, static_cast<double>(ru.ru_maxrss) / 1024};  // ru_maxrss: KiB
    const bool ok = FinishPoint(opt, dir, *c.p, c.cmd, status, cost, sum);
    ++done;
    done_s += secs;
    if (auto w = walls.find(c.p->id); w != walls.end()) pace.Add(w->second, secs);
    const double el = std::chrono::duration<double>(Clock::now() - t0).count();
    const double eta = EtaSeconds(walls, pace, done_s / done, todo, next, running, opt.jobs);
    fmt::print(stderr, "{}[{:>{}}/{}] {:3.0f}%  elapsed {}  ETA {}  {} {} ({:.1f} s){}",
               opt.tty ? "\r\033[K" : "", done, std::to_string(todo.size()).size(), todo.size(),
               100.0 * done / std::max<size_t>(1, todo.size()), MinutesSeconds(el),
               MinutesSeconds(eta), ok ? "ok  " : "FAIL", c.p->id, secs, opt.tty ? "" : "\n");
  }
  if (opt.tty && !todo.empty()) fmt::print(stderr, "\n");
}

// Longest first (the last run's wall seconds, meta.json's point_wall_s), so
// with several jobs the long points do not start last and run alone at the
// end. Points never run before go first, in spec order: their cost is
// unknown.
void OrderLongestFirst(const std::map<std::string, double>& walls,
                       std::vector<const Point*>* todo) {
  auto wall = [&](const Point* p) {
    auto it = walls.find(p->id);
    return it == walls.end() ? std::numeric_limits<double>::infinity() : it->second;
  };
  std::stable_sort(todo->begin(), todo->end(),
                   [&](const Point* a, const Point* b) { return wall(a) > wall(b); });
}

// The points' recorded wall times: this results directory's meta.json, else
// (a results root of its own, e.g. --results /tmp/r) the committed one of the
// spec's repository, results/<name>/meta.json beside its experiments/.
std::map<std::string, double> RecordedWalls(const Spec& spec, const fs::path& dir) {
  std::map<std::string, double> walls = EarlierPointWalls(dir / "meta.json");
  if (!walls.empty()) return walls;
  const fs::path repo = fs::path(spec.path).parent_path().parent_path();
  return EarlierPointWalls(repo / "results" / spec.name / "meta.json");
}

// Throws SpecError for options no run can use: a missing micro program (not
// needed to collect), an unknown backend, a bad shard or --meta-json.
void CheckOptions(const RunOptions& opt) {
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
  CheckMetaJson(opt.meta_json);  // a bad --meta-json fails before any point runs
}

}  // namespace

std::string PointsJson(const Spec& spec, const RunOptions& opt) {
  const std::vector<Point> all = Expand(spec);
  std::string out = "[";
  for (const Point* p : SelectShard(all, opt)) {
    out += (out.size() > 1 ? ",\n  " : "\n  ") + PointEntryJson(*p);
  }
  return out + "\n]\n";
}

std::vector<std::string> SelectedIds(const Spec& spec, const RunOptions& opt) {
  const std::vector<Point> all = Expand(spec);
  std::vector<std::string> ids;
  for (const Point* p : SelectShard(all, opt)) ids.push_back(p->id);
  return ids;
}

double SecondsLeft(const std::vector<double>& left_s, int jobs) {
  double total = 0, longest = 0;
  for (double s : left_s) {
    total += s;
    longest = std::max(longest, s);
  }
  return std::max(total / std::max(1, jobs), longest);
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
  CheckOptions(opt);
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
    const std::map<std::string, double> walls = RecordedWalls(spec, dir);
    OrderLongestFirst(walls, &todo);
    RunPoints(opt, dir, todo, walls, t0, &sum);
  }
  sum.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double meta_wall_s = todo.empty() ? EarlierWallSeconds(dir / "meta.json") : sum.wall_s;
  WriteResults(spec, all, dir, meta_wall_s, {opt.backend, opt.meta_json, sum.failed});
  return sum;
}

}  // namespace dmb::runner
