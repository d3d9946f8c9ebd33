// verbs_diff: runs the differential verbs corpus on a backend and on the
// simulator and compares the transcripts line by line.
//
//   verbs_diff [--backend sim|ibv] [--devices rxe0,rxe1] [--gid-index N]
//              [--filter SUBSTR] [--list] [--verbose]
//
// One line per scenario: PASS (same transcript), DEVIATION-ok (differs only
// where a declared deviation says so), FAIL (anything else, or the sim misses
// the spec), with the differing lines. Exit status 1 on any FAIL, 2 when the
// backend cannot start.
// With --backend sim the simulator is compared with itself (determinism).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/verbs_diff/scenario.h"

namespace dmb::verbs_diff {
namespace {

void Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--backend sim|ibv] [--devices DEV0,DEV1] [--gid-index N]\n"
               "          [--filter SUBSTR] [--list] [--verbose]\n",
               argv0);
}

std::vector<std::string> SplitComma(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const size_t c = s.find(',');
    out.emplace_back(s.substr(0, c));
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  return out;
}

Task<void> Probe(Env&, Transcript& t) {
  t.Note("nodes", "ok");
  co_return;
}

void PrintTranscript(const char* who, const Transcript& t) {
  std::printf("    --- %s transcript ---\n", who);
  for (const auto& l : t.lines()) std::printf("    | %s = %s\n", l.label.c_str(), l.value.c_str());
  if (!t.detail.empty()) std::printf("    | (detail: %s)\n", t.detail.c_str());
}

struct Options {
  BackendOptions other;
  std::string filter;
  bool list = false, verbose = false;
};

// Reads the command line into *o; returns an exit status when the program
// is done (--help: 0, bad usage: 2), -1 to go on.
int ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        Usage(argv[0]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backend") {
      o->other.kind = value();
    } else if (a == "--devices") {
      o->other.devices = SplitComma(value());
    } else if (a == "--gid-index") {
      o->other.gid_index = std::atoi(value().c_str());
    } else if (a == "--filter") {
      o->filter = value();
    } else if (a == "--list") {
      o->list = true;
    } else if (a == "--verbose" || a == "-v") {
      o->verbose = true;
    } else if (a == "--help" || a == "-h") {
      Usage(argv[0]);
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument '%s'\n", argv[i]);
      Usage(argv[0]);
      return 2;
    }
  }
  if (o->other.kind == "ibv" && o->other.devices.empty()) {
    std::fprintf(stderr, "--backend ibv needs --devices (e.g. rxe0,rxe1)\n");
    return 2;
  }
  return -1;
}

void ListScenarios(const std::vector<const Scenario*>& chosen) {
  for (const Scenario* s : chosen) {
    std::printf("%-48s %s\n", s->name.c_str(), s->checks.c_str());
    for (const auto& d : s->deviations) {
      std::printf("    deviation on %s: '%s' = %s -- %s\n", d.family.c_str(), d.label.c_str(),
                  d.value.c_str(), d.reason.c_str());
    }
  }
  std::printf("%zu scenarios\n", chosen.size());
}

enum class Verdict { kPass, kDeviationOk, kFail };

// The lines where the other backend's transcript differs from the sim's.
void PrintDiffs(const std::vector<Difference>& diffs, const Transcript& ot,
                const std::string& family) {
  // After an exception on the other backend, its missing lines are implied.
  const bool other_threw = ot.Find("exception") != nullptr;
  int implied = 0;
  for (const auto& d : diffs) {
    if (other_threw && !d.allowed && d.other == kAbsent) {
      ++implied;
      continue;
    }
    std::printf("    %s '%s': sim=%s %s=%s (%s)\n", d.allowed ? "ok  " : "DIFF", d.label.c_str(),
                d.sim.c_str(), family.c_str(), d.other.c_str(), d.note.c_str());
  }
  if (implied) std::printf("    (%d later sim lines missing after the exception)\n", implied);
  if (ot.Find("exception") && !ot.detail.empty()) {
    std::printf("    %s exception: %s\n", family.c_str(), ot.detail.c_str());
  }
}

// Runs `s` on the simulator and on `o.other`, prints its verdict line and
// what differs.
Verdict RunOne(const Scenario& s, const Options& o, const std::string& family) {
  const BackendOptions sim{.kind = "sim", .seed = 1};
  const Transcript st = RunScenario(sim, s);
  const Transcript ot = RunScenario(o.other, s);
  const auto devs = DeviationsFor(s, family);
  const auto diffs = Compare(st, ot, devs);
  const auto spec = st.SpecMismatches();
  bool failed = !spec.empty() || st.Find("exception") != nullptr;
  bool deviated = false;
  for (const auto& d : diffs) (d.allowed ? deviated : failed) = true;
  std::printf("%-13s %s\n", failed ? "FAIL" : deviated ? "DEVIATION-ok" : "PASS", s.name.c_str());
  for (const auto& m : spec) std::printf("    sim misses the spec: %s\n", m.c_str());
  if (st.Find("exception")) std::printf("    sim exception: %s\n", st.detail.c_str());
  PrintDiffs(diffs, ot, family);
  if (o.verbose || failed) {
    if (o.verbose) PrintTranscript("sim", st);
    if (o.verbose || !diffs.empty()) PrintTranscript(family.c_str(), ot);
  }
  std::fflush(stdout);
  return failed ? Verdict::kFail : deviated ? Verdict::kDeviationOk : Verdict::kPass;
}

int Main(int argc, char** argv) {
  Options o;
  if (const int rc = ParseArgs(argc, argv, &o); rc >= 0) return rc;
  std::vector<const Scenario*> chosen;
  for (const auto& s : AllScenarios()) {
    if (o.filter.empty() || s.name.find(o.filter) != std::string::npos) chosen.push_back(&s);
  }
  if (o.list) {
    ListScenarios(chosen);
    return 0;
  }

  // A backend that cannot even set up the two nodes is one error, not one
  // FAIL per scenario.
  const Transcript probe = RunScenario(o.other, {"probe", "Env::Init only", Probe});
  if (probe.Find("exception")) {
    std::fprintf(stderr, "verbs_diff: backend '%s' cannot set up the scenario nodes: %s\n",
                 o.other.kind.c_str(), probe.detail.c_str());
    return 2;
  }

  const std::string family = BackendFamily(o.other);
  int pass = 0, dev_ok = 0, fail = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Scenario* s : chosen) {
    const Verdict v = RunOne(*s, o, family);
    (v == Verdict::kFail ? fail : v == Verdict::kDeviationOk ? dev_ok : pass)++;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("summary: %zu scenarios on sim vs %s: %d PASS, %d DEVIATION-ok, %d FAIL (%.1f s)\n",
              chosen.size(), family.c_str(), pass, dev_ok, fail, secs);
  return fail ? 1 : 0;
}

}  // namespace
}  // namespace dmb::verbs_diff

int main(int argc, char** argv) { return dmb::verbs_diff::Main(argc, argv); }
