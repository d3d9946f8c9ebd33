// The runner against a stand-in micro program (a shell script that answers
// like dmb_micro): every point runs once, results resume and skip, --force
// reruns, --filter selects, a changed point reruns, a failing point is named.
#include "cli/runner/runner.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "cli/runner/results.h"

namespace dmb::runner {
namespace {

namespace fs = std::filesystem;

const char* kSpec = R"(
name: fake-fig
title: "Runner test"
source: "nowhere"
cluster: {pool: 64MB}
seeds: [1]
runs:
  - op: alloc
    grid: {threads: [1, 24]}
    systems:
      - {system: static_mr}
      - {system: rpc_mw, variant: type2, knobs: {mw_type: 2}}
  - op: offload_read
    grid: {offload_qps: [0, 96]}
paper:
  - {label: "rpc alloc 24", where: "§x", match: {system: rpc_mw, op: alloc, threads: 24},
     metric: lat_us_mean, value: 48}
  - {label: "relative", where: "§y", match: {system: rpc_mw, op: alloc, threads: 24},
     relative_to: {system: static_mr}, metric: lat_us_mean, value: 10}
  - {label: "missing", where: "§z", match: {system: finemem, op: alloc}, metric: lat_us_mean,
     value: 1}
)";

// Answers like dmb_micro: latency = 2 x threads (+1 for rpc_mw, + the
// --lane-depth if given), one entry.
// Appends each invocation to $FAKE_LOG (its arguments to $FAKE_ARGS if set);
// exits 1 for the system in $FAKE_FAIL, 77 (skipped) for the one in $FAKE_SKIP.
const char* kFake = R"SH(#!/bin/sh
[ -n "$FAKE_ARGS" ] && echo "$*" >> "$FAKE_ARGS"
out=""; threads=1; sys=none; depth=0
while [ $# -gt 0 ]; do
  case "$1" in
    --benchmark_out=*) out="${1#--benchmark_out=}";;
    --threads) threads="$2"; shift;;
    --system) sys="$2"; shift;;
    --lane-depth) depth="$2"; shift;;
  esac
  shift
done
echo "$sys $threads" >> "$FAKE_LOG"
if [ "$sys" = "$FAKE_FAIL" ]; then echo "fake: $sys refused" >&2; exit 1; fi
if [ "$sys" = "$FAKE_SKIP" ]; then echo "skipped: needs cross_channel ($sys on x)" >&2; exit 77; fi
extra=0; [ "$sys" = rpc_mw ] && extra=1
lat=$((2 * threads + extra + depth))
printf '{"context": {}, "benchmarks": [{"name": "x", "real_time": 5.0, "time_unit": "us", "lat_us_p50": %s, "lat_us_p99": %s, "lat_us_mean": %s, "count": 10}]}\n' $lat $lat $lat > "$out"
)SH";

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dmb_runner_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fake_ = dir_ / "fake_micro.sh";
    std::ofstream(fake_) << kFake;
    fs::permissions(fake_, fs::perms::owner_all);
    log_ = dir_ / "invocations.log";
    setenv("FAKE_LOG", log_.c_str(), 1);
    unsetenv("FAKE_FAIL");
    unsetenv("FAKE_SKIP");
    unsetenv("FAKE_ARGS");
    spec_path_ = dir_ / "fake-fig.yaml";
    std::ofstream(spec_path_) << kSpec;
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunSummary Run(RunOptions o = {}) {
    o.micro_path = fake_.string();
    o.results_root = (dir_ / "results").string();
    o.jobs = 2;
    return RunSpec(LoadSpec(spec_path_.string()), o);
  }
  int Invocations() {
    std::ifstream in(log_);
    int n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
  }
  std::string Read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  fs::path Out() const { return dir_ / "results" / "fake-fig"; }

  fs::path dir_, fake_, log_, spec_path_;
};

TEST_F(RunnerTest, RunsEveryPointOnceAndWritesCsvCompareAndMeta) {
  const RunSummary s = Run();
  EXPECT_EQ(s.total, 6u);
  EXPECT_EQ(s.ran, 6u);
  EXPECT_TRUE(s.failed.empty());
  EXPECT_EQ(Invocations(), 6);
  EXPECT_TRUE(fs::exists(Out() / "points" / "alloc-rpc_mw-type2-threads_24-seed1.json"));
  const std::string csv = Read(Out() / "fake-fig.csv");
  EXPECT_EQ(csv.rfind("figure,system,variant,op,io,threads,cns,mn_cores,seed,size_bytes,", 0), 0u);
  // The rpc_mw type2 row at 24 threads, read by column name.
  std::istringstream lines(csv);
  std::string header, line;
  std::getline(lines, header);
  auto split = [](const std::string& l) {
    std::vector<std::string> f;
    std::stringstream ss(l);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (!l.empty() && l.back() == ',') f.push_back("");
    return f;
  };
  const auto cols = split(header);
  auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(cols.begin(), cols.end(), name) - cols.begin());
  };
  bool found = false;
  while (std::getline(lines, line)) {
    const auto f = split(line);
    if (f[col("system")] != "rpc_mw" || f[col("threads")] != "24") continue;
    found = true;
    EXPECT_EQ(f[col("variant")], "type2");
    EXPECT_EQ(f[col("op")], "alloc");
    EXPECT_EQ(f[col("knobs")], "mw_type=2");
    EXPECT_EQ(f[col("lat_us_mean")], "49");
    EXPECT_EQ(f[col("count")], "10");
    EXPECT_EQ(f[col("io")], "");
  }
  EXPECT_TRUE(found) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);  // header + 6 points
  const std::string cmp = Read(Out() / "compare.csv");
  EXPECT_NE(cmp.find("rpc alloc 24,rpc_mw,,alloc,24,,,lat_us_mean,48,49,1.0208,hit"),
            std::string::npos)
      << cmp;
  EXPECT_NE(cmp.find("relative,rpc_mw,,alloc,24,,,lat_us_mean,10,1.02083,0.1021,miss"),
            std::string::npos)
      << cmp;
  EXPECT_NE(cmp.find("missing,finemem,,alloc,,,,lat_us_mean,1,,,no data"), std::string::npos);
  const std::string meta = Read(Out() / "meta.json");
  for (const char* k : {"\"git_sha\"", "\"dirty\"", "\"backend\": \"sim\"", "\"seeds\": [1]",
                        "\"calibration_hash\"", "\"spec_hash\"", "\"host\"", "\"wall_s\""}) {
    EXPECT_NE(meta.find(k), std::string::npos) << k;
  }
}

// Each point records its process's peak resident memory (a shell script
// here: a few MB, never 0), and meta.json the largest with its point.
TEST_F(RunnerTest, PointsAndMetaRecordThePeakResidentMemory) {
  (void)Run();
  auto peak_of = [](const std::string& text) {
    const size_t at = text.find("\"peak_rss_mb\": ");
    return at == std::string::npos ? -1.0 : std::strtod(text.c_str() + at + 15, nullptr);
  };
  std::map<std::string, double> mb;
  for (const auto& e : fs::directory_iterator(Out() / "points")) {
    mb[e.path().stem().string()] = peak_of(Read(e.path()));
    EXPECT_GT(mb[e.path().stem().string()], 0.5) << e.path();
    EXPECT_LT(mb[e.path().stem().string()], 1024) << e.path();
  }
  ASSERT_EQ(mb.size(), 6u);
  const std::string meta = Read(Out() / "meta.json");
  const std::string key = "\"peak_rss_mb\": {\"max\": ";
  const size_t at = meta.find(key);
  ASSERT_NE(at, std::string::npos) << meta;
  const double max_mb = std::strtod(meta.c_str() + at + key.size(), nullptr);
  const size_t q = meta.find("\"point\": \"", at) + 10;
  const std::string id = meta.substr(q, meta.find('"', q) - q);
  ASSERT_EQ(mb.count(id), 1u) << meta;
  EXPECT_DOUBLE_EQ(mb[id], max_mb);
  for (const auto& [p, v] : mb) EXPECT_LE(v, max_mb) << p;
}

TEST_F(RunnerTest, ASecondRunSkipsAndForceReruns) {
  (void)Run();
  // A run that finds every point done keeps the wall time of the run that
  // produced them (it wrote 0.0 before).
  auto wall_line = [&] {
    const std::string meta = Read(Out() / "meta.json");
    const size_t at = meta.find("\"wall_s\"");
    return meta.substr(at, meta.find('\n', at) - at);
  };
  std::string meta = Read(Out() / "meta.json");
  meta.replace(meta.find("\"wall_s\""), wall_line().size(), "\"wall_s\": 123.4,");
  std::ofstream(Out() / "meta.json") << meta;
  const RunSummary again = Run();
  EXPECT_EQ(wall_line(), "\"wall_s\": 123.4,");
  EXPECT_EQ(again.ran, 0u);
  EXPECT_EQ(again.skipped, 6u);
  EXPECT_EQ(Invocations(), 6);
  RunOptions f;
  f.force = true;
  EXPECT_EQ(Run(f).ran, 6u);
  EXPECT_EQ(Invocations(), 12);
}

TEST_F(RunnerTest, AnInterruptedRunResumesWithTheMissingPoints) {
  (void)Run();
  // As if killed: one point never finished, one file torn mid-write.
  fs::remove(Out() / "points" / "alloc-static_mr-threads_24-seed1.json");
  std::ofstream(Out() / "points" / "offload_read-offload_qps_96-seed1.json") << "{\"id\": \"off";
  const RunSummary s = Run();
  EXPECT_EQ(s.ran, 2u);
  EXPECT_EQ(s.skipped, 4u);
  EXPECT_EQ(Invocations(), 8);
  const std::string csv = Read(Out() / "fake-fig.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
}

TEST_F(RunnerTest, FilterSelectsPointsAndTheCsvKeepsEveryResult) {
  RunOptions o;
  o.filter = "alloc-*-threads_24-*";
  const RunSummary s = Run(o);
  EXPECT_EQ(s.total, 2u);
  EXPECT_EQ(Invocations(), 2);
  (void)Run();  // the rest
  EXPECT_EQ(Invocations(), 6);
  o.filter = "nothing-*";
  EXPECT_THROW(Run(o), SpecError);
}

TEST_F(RunnerTest, AChangedPointRunsAgain) {
  (void)Run();
  std::string text = Read(spec_path_);
  text.replace(text.find("{mw_type: 2}"), 12, "{mw_type: 1}");
  std::ofstream(spec_path_) << text;
  const RunSummary s = Run();
  EXPECT_EQ(s.ran, 2u);  // rpc_mw type2's two points (same ids, new knobs)
  EXPECT_EQ(Invocations(), 8);
}

// meta.json records every point's wall time, and the next run starts the
// longest first; points it does not know go before them, in spec order.
TEST_F(RunnerTest, PointsRunLongestFirstByTheWallTimeMetaJsonRecorded) {
  (void)Run();
  const std::map<std::string, double> walls = EarlierPointWalls(Out() / "meta.json");
  ASSERT_EQ(walls.size(), 6u) << Read(Out() / "meta.json");
  std::vector<std::string> ids;
  for (const auto& [id, s] : walls) {
    EXPECT_GE(s, 0.0) << id;
    ids.push_back(id);
  }
  std::ofstream(Out() / "meta.json") << "{\"point_wall_s\": {\"" << ids[0] << "\": 3.0, \""
                                     << ids[1] << "\": 90.5, \"" << ids[2] << "\": 40.0}}\n";
  const fs::path args = dir_ / "args.log";
  setenv("FAKE_ARGS", args.c_str(), 1);
  RunOptions o;
  o.micro_path = fake_.string();
  o.results_root = (dir_ / "results").string();
  o.force = true;
  o.jobs = 1;
  ::testing::internal::CaptureStderr();
  (void)RunSpec(LoadSpec(spec_path_.string()), o);
  const std::string progress = ::testing::internal::GetCapturedStderr();
  // The ETA counts the recorded walls of the points left at this run's pace:
  // before a recorded point has finished, as recorded (40 + 90.5 + 3 s, rounded, while
  // the unknown ones run); once the 90.5 s one took the fake's milliseconds,
  // the 40 and 3 s left take about as little (not 0:43, the recorded sum).
  EXPECT_NE(progress.find("ETA 2:14"), std::string::npos) << progress;
  const size_t line = progress.find(ids[1] + " (");
  ASSERT_NE(line, std::string::npos) << progress;
  const size_t start = progress.rfind('[', line);
  EXPECT_NE(progress.substr(start, line - start).find("ETA 0:00"), std::string::npos) << progress;
  std::vector<std::string> order;
  std::ifstream in(args);
  for (std::string l; std::getline(in, l);) {
    const size_t at = l.find("/points/") + 8;
    order.push_back(l.substr(at, l.find(".gb.json", at) - at));
  }
  std::vector<std::string> expected;  // the unknown ones in spec order, then 90.5, 40, 3 s
  for (const Point& p : Expand(LoadSpec(spec_path_.string()))) {
    if (p.id != ids[0] && p.id != ids[1] && p.id != ids[2]) expected.push_back(p.id);
  }
  expected.insert(expected.end(), {ids[1], ids[2], ids[0]});
  EXPECT_EQ(order, expected);
}

TEST(WallPace, ScalesTheRecordedWallsByWhatThisRunsPointsTook) {
  WallPace pace;
  EXPECT_DOUBLE_EQ(pace.factor(), 1);  // nothing finished: as recorded
  pace.Add(3.0, 30.0);                 // e.g. --param keys=1000000 on a 100,000-key record
  pace.Add(1.0, 10.0);
  EXPECT_DOUBLE_EQ(pace.factor(), 10);
  pace.Add(4.0, 0.0);  // a point that took no time pulls the pace down
  EXPECT_DOUBLE_EQ(pace.factor(), 5);
}

// A results root of its own (--results /tmp/r) has no meta.json yet: the
// order comes from the spec's repository's results/<name>/meta.json.
TEST_F(RunnerTest, AFreshResultsRootOrdersByTheRepositorysRecordedWalls) {
  fs::create_directories(dir_ / "experiments");
  const fs::path spec = dir_ / "experiments" / "fake-fig.yaml";
  fs::copy_file(spec_path_, spec);
  std::vector<std::string> ids;
  for (const Point& p : Expand(LoadSpec(spec.string()))) ids.push_back(p.id);
  ASSERT_GE(ids.size(), 3u);
  fs::create_directories(dir_ / "results" / "fake-fig");
  std::ofstream(dir_ / "results" / "fake-fig" / "meta.json")
      << "{\"point_wall_s\": {\"" << ids[0] << "\": 1.0, \"" << ids[1] << "\": 2.0, \"" << ids[2]
      << "\": 30.0}}\n";
  const fs::path args = dir_ / "args.log";
  setenv("FAKE_ARGS", args.c_str(), 1);
  RunOptions o;
  o.micro_path = fake_.string();
  o.results_root = (dir_ / "elsewhere").string();
  o.jobs = 1;
  (void)RunSpec(LoadSpec(spec.string()), o);
  std::vector<std::string> order;
  std::ifstream in(args);
  for (std::string l; std::getline(in, l);) {
    const size_t at = l.find("/points/") + 8;
    order.push_back(l.substr(at, l.find(".gb.json", at) - at));
  }
  ASSERT_EQ(order.size(), ids.size());
  // The unknown ones first (spec order), then 30, 2 and 1 s.
  EXPECT_EQ(std::vector<std::string>(order.end() - 3, order.end()),
            (std::vector<std::string>{ids[2], ids[1], ids[0]}));
}

TEST(SecondsLeft, TheJobsShareTheSumButTheLongestPointIsAFloor) {
  EXPECT_DOUBLE_EQ(SecondsLeft({10, 10, 10, 10}, 2), 20);
  EXPECT_DOUBLE_EQ(SecondsLeft({600, 50, 50}, 2), 600);
  EXPECT_DOUBLE_EQ(SecondsLeft({600, 50, 50}, 1), 700);
  EXPECT_DOUBLE_EQ(SecondsLeft({}, 2), 0);
  EXPECT_DOUBLE_EQ(SecondsLeft({8}, 0), 8);  // jobs < 1 runs one at a time
}

TEST_F(RunnerTest, AFailingPointIsNamedWithItsLogAndTheOthersFinish) {
  setenv("FAKE_FAIL", "rpc_mw", 1);
  const RunSummary s = Run();
  EXPECT_EQ(s.ran, 4u);
  ASSERT_EQ(s.failed.size(), 2u);
  EXPECT_NE(s.failed[0].find("alloc-rpc_mw-type2-threads_"), std::string::npos) << s.failed[0];
  EXPECT_NE(s.failed[0].find("fake: rpc_mw refused"), std::string::npos) << s.failed[0];
  EXPECT_NE(s.failed[0].find(".log"), std::string::npos);
  // Each failure comes with the line that runs it alone, printing to the console.
  ASSERT_EQ(s.reproduce.size(), 2u);
  EXPECT_NE(s.reproduce[0].find("--system rpc_mw"), std::string::npos) << s.reproduce[0];
  EXPECT_NE(s.reproduce[0].find("--seed 1"), std::string::npos) << s.reproduce[0];
  EXPECT_EQ(s.reproduce[0].find("--benchmark_out"), std::string::npos) << s.reproduce[0];
  EXPECT_EQ(s.reproduce[0].find("--benchmark_format=json"), std::string::npos) << s.reproduce[0];
  // meta.json says why its CSV lacks them; a run without failures says nothing.
  const std::string meta = Read(Out() / "meta.json");
  const size_t at = meta.find("\"failed_points\": [");
  ASSERT_NE(at, std::string::npos) << meta;
  EXPECT_NE(meta.find("alloc-rpc_mw-type2-threads_1-seed1", at), std::string::npos) << meta;
  EXPECT_NE(meta.find("fake: rpc_mw refused", at), std::string::npos) << meta;
  unsetenv("FAKE_FAIL");
  (void)Run();
  EXPECT_EQ(Read(Out() / "meta.json").find("failed_points"), std::string::npos);
}

// ansible/figure.yml's sweep: three machines run one shard each, their
// points/ are copied into one results/<name>/ and --collect writes the files;
// the CSV and compare.csv are the ones a run on one machine writes.
TEST_F(RunnerTest, ShardsRunEachPointOnceAndCollectWritesWhatOneRunWrites) {
  const fs::path merged = dir_ / "merged" / "fake-fig";
  fs::create_directories(merged / "points");
  size_t ran = 0;
  for (int i = 0; i < 3; ++i) {
    RunOptions o;
    o.shard_index = i;
    o.shard_count = 3;
    o.micro_path = fake_.string();
    o.results_root = (dir_ / ("shard" + std::to_string(i))).string();
    const RunSummary s = RunSpec(LoadSpec(spec_path_.string()), o);
    EXPECT_EQ(s.total, 2u) << "shard " << i;
    ran += s.ran;
    for (const auto& e : fs::directory_iterator(fs::path(o.results_root) / "fake-fig" / "points")) {
      fs::copy_file(e.path(), merged / "points" / e.path().filename());  // throws on a duplicate
    }
  }
  EXPECT_EQ(ran, 6u);
  EXPECT_EQ(Invocations(), 6);
  RunOptions c;
  c.collect = true;
  c.results_root = (dir_ / "merged").string();  // no micro program needed
  const RunSummary s = RunSpec(LoadSpec(spec_path_.string()), c);
  EXPECT_EQ(s.skipped, 6u);
  EXPECT_TRUE(s.missing.empty());
  EXPECT_EQ(Invocations(), 6);  // collect ran nothing
  (void)Run();                  // the same spec on one machine
  const std::string csv = Read(merged / "fake-fig.csv");
  EXPECT_EQ(csv, Read(Out() / "fake-fig.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
  EXPECT_EQ(Read(merged / "compare.csv"), Read(Out() / "compare.csv"));
}

TEST_F(RunnerTest, ShardsFollowTheFilter) {
  RunOptions o;
  o.filter = "alloc-*";
  o.shard_index = 1;
  o.shard_count = 2;
  const RunSummary s = Run(o);
  EXPECT_EQ(s.total, 2u);  // the 2nd and 4th of the 4 alloc points
  EXPECT_EQ(Invocations(), 2);
}

TEST_F(RunnerTest, CollectNamesTheMissingPointsAndRunsNothing) {
  RunOptions o;
  o.filter = "alloc-*";
  (void)Run(o);
  RunOptions c;
  c.collect = true;
  c.micro_path = "/nonexistent/dmb_micro";
  c.results_root = (dir_ / "results").string();
  const RunSummary s = RunSpec(LoadSpec(spec_path_.string()), c);
  EXPECT_EQ(s.skipped, 4u);
  ASSERT_EQ(s.missing.size(), 2u);
  EXPECT_EQ(s.missing[0], "offload_read-offload_qps_0-seed1");
  EXPECT_EQ(Invocations(), 4);
  const std::string csv = Read(Out() / "fake-fig.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);  // header + the 4 with results
}

TEST_F(RunnerTest, MetaJsonMembersReplaceTheRunnersOrJoinThem) {
  RunOptions o;
  o.meta_json =
      R"({"backend": "ibv", "wall_s": 12.5, "hosts": {"mn": ["mn1"], "cn": ["cn1", "cn2"]},)"
      R"( "mn_cpus": "0", "note": "a \"quoted\" word"})";
  (void)Run(o);
  const std::string meta = Read(Out() / "meta.json");
  EXPECT_NE(meta.find("\"backend\": \"ibv\","), std::string::npos) << meta;
  EXPECT_EQ(meta.find("\"backend\": \"sim\""), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"wall_s\": 12.5,"), std::string::npos) << meta;
  EXPECT_NE(meta.find(R"("hosts": {"mn": ["mn1"], "cn": ["cn1", "cn2"]},)"), std::string::npos)
      << meta;
  EXPECT_NE(meta.find(R"("mn_cpus": "0",)"), std::string::npos) << meta;  // a string stays one
  EXPECT_NE(meta.find(R"("note": "a \"quoted\" word",)"), std::string::npos) << meta;
  EXPECT_LT(meta.find("\"hosts\""), meta.find("\"findings\""));
  o.meta_json = "[1, 2]";
  EXPECT_THROW(Run(o), SpecError);
  o.meta_json = "{\"backend\": ";
  EXPECT_THROW(Run(o), SpecError);
}

TEST_F(RunnerTest, PointsJsonListsTheSelectionWithEveryParameter) {
  RunOptions o;
  o.filter = "alloc-rpc_mw-*";
  const std::string json = PointsJson(LoadSpec(spec_path_.string()), o);
  EXPECT_NE(json.find(R"({"id": "alloc-rpc_mw-type2-threads_1-seed1", "op": "alloc", )"
                      R"("system": "rpc_mw", "variant": "type2", "seed": 1, )"
                      R"("knobs": {"mw_type": "2"}, "params": {)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("ops": "200")"), std::string::npos) << json;  // a default filled in
  EXPECT_NE(json.find(R"("threads": "24")"), std::string::npos) << json;
  EXPECT_EQ(std::count(json.begin(), json.end(), '{') - std::count(json.begin(), json.end(), '}'),
            0);
  EXPECT_EQ(Invocations(), 0);
  o.filter = "none-*";
  EXPECT_THROW((void)PointsJson(LoadSpec(spec_path_.string()), o), SpecError);
}

// A swap run swept over lane_depth: each point's row says its depth in the
// lane_depth column, and a paper value matched on lane_depth compares that
// depth's row alone (the stand-in's latency is 2 + depth).
TEST_F(RunnerTest, LaneDepthIsACsvColumnAndAMatchKey) {
  std::ofstream(spec_path_) << R"(
name: fake-fig
seeds: [1]
runs:
  - op: swap
    grid: {lane_depth: [1, 16]}
    systems: [{system: static_mr}]
paper:
  - {label: "deep", where: "§x", match: {system: static_mr, op: swap, lane_depth: 16},
     metric: lat_us_mean, value: 18}
)";
  const RunSummary s = Run();
  EXPECT_EQ(s.ran, 2u);
  const std::string csv = Read(Out() / "fake-fig.csv");
  EXPECT_NE(csv.find(",cover,skew,lane_depth,profile,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",lazy,,16,,"), std::string::npos) << csv;  // cover, skew, lane_depth
  EXPECT_NE(csv.find(",lazy,,1,,"), std::string::npos) << csv;
  const std::string cmp = Read(Out() / "compare.csv");
  EXPECT_NE(cmp.find("deep,static_mr,,swap,,lane_depth,16,lat_us_mean,18,18,1.0000,hit"),
            std::string::npos)
      << cmp;
}

TEST(ParseShard, ReadsIOfNAndNamesBadText) {
  EXPECT_EQ(ParseShard("1/1"), std::make_pair(0, 1));
  EXPECT_EQ(ParseShard("3/3"), std::make_pair(2, 3));
  for (const char* bad : {"0/3", "4/3", "3", "1/0", "a/b", "1/3x", "", "-1/3"}) {
    try {
      (void)ParseShard(bad);
      ADD_FAILURE() << bad;
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find("expected I/N"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos);
    }
  }
}

// ansible/figure.yml backend=ibv: the micro program gets --backend ibv and the
// daemon's address; a point the device cannot run is a row that says why; a
// point done on the simulator is not taken as done on ibv.
TEST_F(RunnerTest, IbvPointsRunWithTheirArgsAndSkippedOnesSayWhy) {
  (void)Run();  // the simulator's results
  EXPECT_EQ(Invocations(), 6);
  setenv("FAKE_SKIP", "rpc_mw", 1);
  setenv("FAKE_ARGS", (dir_ / "args.log").c_str(), 1);
  RunOptions o;
  o.backend = "ibv";
  o.micro_args = {"--mn", "mn1:18515"};
  o.filter = "alloc-*";
  const RunSummary s = Run(o);
  EXPECT_EQ(s.ran, 4u);  // none taken from the simulator's run
  EXPECT_TRUE(s.failed.empty());
  ASSERT_EQ(s.skipped_caps.size(), 2u);
  EXPECT_NE(s.skipped_caps[0].find("needs cross_channel"), std::string::npos);
  EXPECT_NE(Read(dir_ / "args.log").find("--backend ibv --mn mn1:18515"), std::string::npos);
  const std::string point = Read(Out() / "points" / "alloc-rpc_mw-type2-threads_1-seed1.json");
  EXPECT_NE(point.find("\"skipped\": \"needs cross_channel (rpc_mw on x)\""), std::string::npos)
      << point;
  // The CSV holds the ibv points only: two measured, two skipped with the reason.
  const std::string csv = Read(Out() / "fake-fig.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5) << csv;
  EXPECT_NE(csv.find(",skipped\n"), std::string::npos);  // the last column
  EXPECT_NE(csv.find(",needs cross_channel (rpc_mw on x)\n"), std::string::npos) << csv;
  EXPECT_NE(Read(Out() / "meta.json").find("\"backend\": \"ibv\""), std::string::npos);
  EXPECT_EQ(Run(o).ran, 0u);  // resumes: every ibv point is done
  RunOptions bad;
  bad.backend = "rdma";
  EXPECT_THROW(Run(bad), SpecError);
}

TEST_F(RunnerTest, AMissingMicroProgramSaysHowToBuildIt) {
  RunOptions o;
  o.micro_path = "/nonexistent/dmb_micro";
  o.results_root = (dir_ / "results").string();
  try {
    (void)RunSpec(LoadSpec(spec_path_.string()), o);
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("make release"), std::string::npos);
  }
}

// meta.json asks git for the commit of the spec's directory. A directory
// name is the user's text: quotes, $( ) and ; in it are a name, never shell
// code (meta.json once came from `sh -c "git -C '<dir>' ..."`), and the
// commit is still found.
TEST_F(RunnerTest, ASpecDirectoryNamedLikeShellCodeRunsNothingButGit) {
  const std::string name = "q'$(touch pwned1)';touch pwned2;'";
  const fs::path sub = dir_ / name;
  fs::create_directories(sub);
  std::ofstream(sub / "fake-fig.yaml") << kSpec;
  // Sets up the repository with a quoted path, as a careful shell user would.
  std::string quoted = "'";
  for (char c : sub.string()) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  const std::string git = "git -C " + quoted + " -c user.name=t -c user.email=t@t ";
  ASSERT_EQ(
      std::system(
          (git + "init -q && " + git + "add fake-fig.yaml && " + git + "commit -q -m x").c_str()),
      0);
  std::ofstream(sub / "fake-fig.yaml", std::ios::app) << "# edited after the commit\n";
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);  // where `touch pwned*` would land
  RunOptions o;
  o.micro_path = fake_.string();
  o.results_root = (dir_ / "results").string();
  (void)RunSpec(LoadSpec((sub / "fake-fig.yaml").string()), o);
  fs::current_path(cwd);
  EXPECT_FALSE(fs::exists(dir_ / "pwned1"));
  EXPECT_FALSE(fs::exists(dir_ / "pwned2"));
  const std::string meta = Read(Out() / "meta.json");
  const size_t at = meta.find("\"git_sha\": \"");
  ASSERT_NE(at, std::string::npos) << meta;
  const std::string sha = meta.substr(at + 12, 40);
  EXPECT_EQ(sha.find_first_not_of("0123456789abcdef"), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"dirty\": true"), std::string::npos) << "the spec was edited: " << meta;
}

}  // namespace
}  // namespace dmb::runner
