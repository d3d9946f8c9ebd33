// Spec validation: every malformed spec fails before anything runs, with a
// message that names the key and says what was expected.
#include "cli/runner/spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cli/runner/micro_command.h"
#include "cli/runner/results.h"

namespace dmb::runner {
namespace {

const char* kGood = R"(
name: fig-x
title: "A test figure"
source: "Somebody (2026) Figure 1"
cluster: {cns: 1, mn_cores: 1, pool: 64MB}
seeds: [1, 2]
runs:
  - op: access
    params: {io: read, size: 4KB, ops: 100}
    grid: {threads: [1, 24]}
    systems:
      - {system: static_mr}
      - {system: rpc_mw, variant: type2, knobs: {mw_type: 2}}
  - op: offload_read
    grid: {offload_qps: [0, 96]}
paper:
  - {label: "x", where: "§1", match: {system: static_mr, op: access, threads: 1},
     metric: lat_us_mean, value: 2.9}
)";

std::string ErrorOf(const std::string& yaml) {
  try {
    (void)ParseSpec(yaml, "t.yaml");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(Spec, AGoodSpecExpandsIntoNamedPoints) {
  const Spec s = ParseSpec(kGood);
  const auto points = Expand(s);
  // access: 2 systems x 2 threads x 2 seeds; offload_read: 2 x 2 seeds.
  ASSERT_EQ(points.size(), 12u);
  EXPECT_EQ(points[0].id, "access-static_mr-threads_1-seed1");
  EXPECT_EQ(points[5].id, "access-rpc_mw-type2-threads_1-seed2");
  EXPECT_EQ(points[5].knobs.at("mw_type"), "2");
  EXPECT_EQ(points[5].params.at("size"), "4096");
  EXPECT_EQ(points[5].params.at("pool"), std::to_string(64ull << 20));
  EXPECT_EQ(points[11].id, "offload_read-offload_qps_96-seed2");
  EXPECT_NE(points[0].hash, points[1].hash);
  EXPECT_EQ(ParseSpec(kGood).runs.size(), 2u);
}

// Findings are kept in order for results/README.md; anything but a list of
// strings is refused by name.
TEST(Spec, FindingsAreAListOfSentences) {
  EXPECT_TRUE(ParseSpec(kGood).findings.empty());
  const Spec s = ParseSpec(std::string(kGood) + "findings:\n  - \"A is bound by B.\"\n  - C\n");
  ASSERT_EQ(s.findings.size(), 2u);
  EXPECT_EQ(s.findings[0], "A is bound by B.");
  EXPECT_EQ(s.findings[1], "C");
  EXPECT_NE(ErrorOf(std::string(kGood) + "findings: just one\n").find("findings: expected a list"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kGood) + "findings:\n  - {a: 1}\n").find("findings[0]"),
            std::string::npos);
}

TEST(Spec, WrongTypeIsNamedWithItsPath) {
  EXPECT_EQ(ErrorOf(Replace(kGood, "grid: {threads: [1, 24]}", "grid: {threads: [1, many]}")),
            "runs[0].grid.threads[1]: expected an integer >= 1, got \"many\"");
  EXPECT_EQ(ErrorOf(Replace(kGood, "grid: {threads: [1, 24]}", "grid: {threads: 24}")),
            "runs[0].grid.threads: expected a non-empty list like [1, 24], got \"24\"");
  EXPECT_EQ(ErrorOf(Replace(kGood, "size: 4KB", "size: big")),
            "runs[0].params.size: expected a size like 4KB, 1MB or 1GB, got \"big\"");
  EXPECT_EQ(ErrorOf(Replace(kGood, "value: 2.9", "value: fast")),
            "paper[0].value: expected a number, got \"fast\"");
}

TEST(Spec, UnknownSystemListsTheKnownOnes) {
  const std::string e = ErrorOf(Replace(kGood, "{system: static_mr}", "{system: static_rm}"));
  EXPECT_EQ(e.rfind("runs[0].systems[0].system: unknown system 'static_rm'; known systems: ", 0),
            0u)
      << e;
}

TEST(Spec, UnknownOrBadKnobIsNamedUnderItsSystem) {
  EXPECT_EQ(ErrorOf(Replace(kGood, "knobs: {mw_type: 2}", "knobs: {mwtype: 2}"))
                .rfind("runs[0].systems[1].knobs: rpc_mw: unknown knob 'mwtype'; known knobs: ", 0),
            0u);
  EXPECT_EQ(ErrorOf(Replace(kGood, "knobs: {mw_type: 2}", "knobs: {mw_type: three}")),
            "runs[0].systems[1].knobs.mw_type: expected an integer in [1, 2], got \"three\"");
  const std::string osmw =
      Replace(kGood, "{system: static_mr}", "{system: onesided_mw, knobs: {group_size: three}}");
  EXPECT_EQ(ErrorOf(osmw),
            "runs[0].systems[0].knobs.group_size: expected an integer in [2, 6], got \"three\"");
}

TEST(Spec, MissingFieldsAreNamed) {
  EXPECT_EQ(ErrorOf(Replace(kGood, "name: fig-x", "")), "spec.name: missing (required)");
  EXPECT_EQ(ErrorOf(Replace(kGood, "  - op: offload_read", "  - params: {}")),
            "runs[1].op: missing (required)");
  EXPECT_EQ(ErrorOf(Replace(kGood,
                            "    systems:\n      - {system: static_mr}\n      - {system: rpc_mw, "
                            "variant: type2, knobs: {mw_type: 2}}\n",
                            "")),
            "runs[0].systems: missing (required for op access)");
  EXPECT_EQ(ErrorOf(Replace(kGood, "metric: lat_us_mean, ", "")),
            "paper[0].metric: missing (required)");
}

TEST(Spec, UnknownKeysOpsAndMetricsAreNamed) {
  EXPECT_EQ(ErrorOf(Replace(kGood, "seeds: [1, 2]", "seeds: [1, 2]\ncolour: red")),
            "spec.colour: unknown key; known keys here: name, title, source, cluster, seeds, "
            "runs, paper, findings");
  EXPECT_EQ(
      ErrorOf(Replace(kGood, "op: offload_read", "op: offload"))
          .rfind("runs[1].op: unknown op \"offload\"; known ops: access, alloc, offload_read", 0),
      0u);
  EXPECT_EQ(ErrorOf(Replace(kGood, "metric: lat_us_mean", "metric: latency"))
                .rfind("paper[0].metric: unknown metric \"latency\"; known: lat_us_p50", 0),
            0u);
  EXPECT_EQ(ErrorOf(Replace(kGood, "grid: {offload_qps: [0, 96]}",
                            "grid: {offload_qps: [0, 96]}\n    systems: [{system: static_mr}]")),
            "runs[1].systems: op offload_read measures a primitive and takes no systems");
}

TEST(Spec, AParameterTheOpDoesNotTakeIsNamed) {
  EXPECT_EQ(ErrorOf(Replace(kGood, "grid: {offload_qps: [0, 96]}",
                            "grid: {offload_qps: [0, 96], threads: [1, 2]}")),
            "runs[1].grid.threads: op offload_read does not take it; it takes: io, size, ops, "
            "offload_qps");
  // The cluster shape applies only where an op has one.
  const auto points = Expand(ParseSpec(kGood));
  EXPECT_EQ(points.back().params.count("cns"), 0u);
  EXPECT_EQ(points.back().params.count("pool"), 0u);
}

TEST(Spec, KvRunsAndParamOverrides) {
  const std::string kv =
      Replace(kGood, "  - op: offload_read\n    grid: {offload_qps: [0, 96]}",
              "  - op: kv\n    params: {workload: fillsync, value: 1KB}\n"
              "    grid: {threads: [1, 24]}\n    systems: [{system: onesided_mw}]");
  Spec s = ParseSpec(kv);
  EXPECT_EQ(Expand(s).back().params.at("value"), "1024");
  OverrideParam(&s, "keys", "1000000");
  EXPECT_EQ(Expand(s).back().params.at("keys"), "1000000");
  EXPECT_THROW(OverrideParam(&s, "threads", "2"), SpecError);  // swept in a grid
  EXPECT_THROW(OverrideParam(&s, "keys", "many"), SpecError);
  EXPECT_THROW(OverrideParam(&s, "offload_qps", "3"), SpecError);  // no run takes it
  EXPECT_EQ(ErrorOf(Replace(kv, "workload: fillsync", "workload: fill")),
            "runs[1].params.workload: expected fillsync, ycsbd or insert, got \"fill\"");
  EXPECT_NE(ErrorOf(Replace(kv, "value: 1KB", "value: 1KB, kv_size: val"))
                .find("runs[1].params.kv_size: expected block"),
            std::string::npos);
}

TEST(Spec, SwapRunsCheckTheirParameters) {
  const std::string swap =
      Replace(kGood, "  - op: offload_read\n    grid: {offload_qps: [0, 96]}",
              "  - op: swap\n    params: {app: kmeans, scale: 0.001953125, local: 0.5}\n"
              "    grid: {tasks: [1, 48]}\n    systems: [{system: onesided_mw}]");
  Spec s = ParseSpec(swap);
  const auto points = Expand(s);
  EXPECT_EQ(points.back().params.at("tasks"), "48");
  EXPECT_EQ(points.back().params.at("app"), "kmeans");
  OverrideParam(&s, "scale", "1");  // the paper's scale
  EXPECT_EQ(Expand(s).back().params.at("scale"), "1");
  EXPECT_EQ(ErrorOf(Replace(swap, "local: 0.5", "local: 2")),
            "runs[1].params.local: expected a number in (0, 1], got \"2\"");
  EXPECT_EQ(ErrorOf(Replace(swap, "scale: 0.001953125", "scale: 0")),
            "runs[1].params.scale: expected a number in (0, 1], got \"0\"");
  EXPECT_NE(ErrorOf(Replace(swap, "local: 0.5", "local: 0.5, cover: often"))
                .find("runs[1].params.cover: expected lazy"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(Replace(swap, "app: kmeans", "app: \"K means\"")),
            "runs[1].params.app: expected a workload name like kmeans, got \"K means\"");
  EXPECT_EQ(ErrorOf(Replace(swap, "grid: {tasks: [1, 48]}", "grid: {tasks: [0]}")),
            "runs[1].grid.tasks[0]: expected an integer >= 1, got \"0\"");
}

// Figures 6-7 on ibv: a kv point's command gets --backend ibv and the
// daemon's address before its own flags, as access and alloc points do
// (dmb_micro_test's IbvOptionsParseUpToTheDevice runs this spelling).
TEST(Spec, KvPointsRunOnIbvWithTheDaemonsAddress) {
  const std::string kv =
      Replace(kGood, "  - op: offload_read\n    grid: {offload_qps: [0, 96]}",
              "  - op: kv\n    params: {keys: 1000}\n    grid: {workload: [fillsync, ycsbd]}\n"
              "    systems: [{system: rpc_mw, knobs: {mw_type: 2, granularity: 2KB}}]");
  std::vector<Point> points;
  for (const Point& p : Expand(ParseSpec(kv))) {
    if (p.op == "kv") points.push_back(p);
  }
  ASSERT_EQ(points.size(), 4u);  // two workloads, two seeds
  const auto cmd =
      MicroCommand("dmb_micro", points[0], "out.json", "ibv", {"--mn=mn1:18515", "--devices=d0"});
  const std::vector<std::string> head(cmd.begin(), cmd.begin() + 7);
  EXPECT_EQ(head, (std::vector<std::string>{"dmb_micro", "--bench", "kv", "--backend", "ibv",
                                            "--mn=mn1:18515", "--devices=d0"}));
  const auto wl = std::find(cmd.begin(), cmd.end(), "--workload");
  ASSERT_NE(wl, cmd.end());
  EXPECT_EQ(*(wl + 1), "fillsync");
}

// memcached's key popularity as a swept parameter: passed as --skew, in the
// CSV's skew column; absent, the point (and its hash) is as before the knob.
TEST(Spec, SwapSkewIsAParameterTheMicroProgramGets) {
  const std::string swap =
      Replace(kGood, "  - op: offload_read\n    grid: {offload_qps: [0, 96]}",
              "  - op: swap\n    params: {app: memcached, scale: 0.001953125}\n"
              "    grid: {skew: [0.5, 1.2]}\n    systems: [{system: static_mr}]");
  std::vector<Point> points;
  for (const Point& p : Expand(ParseSpec(swap))) {
    if (p.op == "swap" && p.seed == 1) points.push_back(p);
  }
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[1].params.at("skew"), "1.2");
  EXPECT_NE(points[0].hash, points[1].hash);
  const auto cmd = MicroCommand("dmb_micro", points[0], "out.json", "sim", {});
  const auto it = std::find(cmd.begin(), cmd.end(), "--skew");
  ASSERT_NE(it, cmd.end());
  EXPECT_EQ(*(it + 1), "0.5");
  const auto plain = Expand(ParseSpec(Replace(swap, "grid: {skew: [0.5, 1.2]}", "grid: {}")));
  EXPECT_EQ(PointParams(plain.back()).count("skew"), 0u);  // no default filled in
  EXPECT_EQ(ErrorOf(Replace(swap, "skew: [0.5, 1.2]", "skew: [0]")),
            "runs[1].grid.skew[0]: expected a Zipf exponent in (0, 10] (memcached's key "
            "popularity), got \"0\"");
  const auto cols = CsvColumns();
  EXPECT_NE(std::find(cols.begin(), cols.end(), "skew"), cols.end());
}

// The pager lanes' depth (apps/swap/lane_slots.h) as a swept parameter:
// passed as --lane-depth, in the CSV's lane_depth column after skew; an
// integer in 1..256 or the spec is refused; absent, the point is as before
// the knob (no default filled in, the hash of a spec written before it).
TEST(Spec, SwapLaneDepthIsAParameterTheMicroProgramGets) {
  const std::string swap =
      Replace(kGood, "  - op: offload_read\n    grid: {offload_qps: [0, 96]}",
              "  - op: swap\n    params: {app: kmeans, scale: 0.001953125}\n"
              "    grid: {lane_depth: [1, 16]}\n    systems: [{system: static_mr}]");
  std::vector<Point> points;
  for (const Point& p : Expand(ParseSpec(swap))) {
    if (p.op == "swap" && p.seed == 1) points.push_back(p);
  }
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].params.at("lane_depth"), "1");
  EXPECT_EQ(points[1].params.at("lane_depth"), "16");
  EXPECT_EQ(points[1].id, "swap-static_mr-lane_depth_16-seed1");
  EXPECT_NE(points[0].hash, points[1].hash);
  const auto cmd = MicroCommand("dmb_micro", points[1], "out.json", "sim", {});
  const auto it = std::find(cmd.begin(), cmd.end(), "--lane-depth");
  ASSERT_NE(it, cmd.end());
  EXPECT_EQ(*(it + 1), "16");
  const std::string unset = Replace(swap, "grid: {lane_depth: [1, 16]}", "grid: {}");
  const auto plain = Expand(ParseSpec(unset));
  EXPECT_EQ(PointParams(plain.back()).count("lane_depth"), 0u);  // no default filled in
  const auto plain_cmd = MicroCommand("dmb_micro", plain.back(), "out.json", "sim", {});
  EXPECT_EQ(std::find(plain_cmd.begin(), plain_cmd.end(), "--lane-depth"), plain_cmd.end());
  // The hash this point had before lane_depth existed (results already run
  // stay valid).
  EXPECT_EQ(plain.back().id, "swap-static_mr-seed2");
  EXPECT_EQ(plain.back().hash, 0xab40236235cba88fu) << std::hex << plain.back().hash;
  EXPECT_EQ(ParseSpec(Replace(swap, "lane_depth: [1, 16]", "lane_depth: [016, 256]"))
                .runs[1]
                .grid.at("lane_depth")[0],
            "16");  // canonical spelling
  for (const char* bad : {"0", "257", "1.5", "-1", "deep"}) {
    EXPECT_EQ(
        ErrorOf(Replace(swap, "lane_depth: [1, 16]", std::string("lane_depth: [1, ") + bad + "]")),
        std::string("runs[1].grid.lane_depth[1]: expected an integer in 1..256 (4 KB "
                    "I/Os in flight per pager lane), got \"") +
            bad + "\"")
        << bad;
  }
  EXPECT_EQ(ErrorOf(Replace(kGood, "params: {io: read, size: 4KB, ops: 100}",
                            "params: {io: read, size: 4KB, ops: 100, lane_depth: 4}"))
                .rfind("runs[0].params.lane_depth: op access does not take it", 0),
            0u);
  // A paper value can be matched on it.
  EXPECT_EQ(ErrorOf(Replace(swap, "match: {system: static_mr, op: access, threads: 1}",
                            "match: {system: static_mr, op: swap, lane_depth: 1}")),
            "");
  const auto cols = CsvColumns();
  const auto skew = std::find(cols.begin(), cols.end(), "skew");
  ASSERT_NE(skew, cols.end());
  ASSERT_NE(skew + 1, cols.end());
  EXPECT_EQ(*(skew + 1), "lane_depth");
}

TEST(Spec, TwoRunsProducingTheSamePointAreRefused) {
  const std::string dup = Replace(kGood, "  - op: offload_read\n    grid: {offload_qps: [0, 96]}",
                                  "  - op: access\n    grid: {threads: [24]}\n    systems: "
                                  "[{system: static_mr}]");
  EXPECT_EQ(ErrorOf(dup),
            "runs[1]: point \"access-static_mr-threads_24-seed1\" is also produced by runs[0]; "
            "give one of them a different variant or grid");
}

// YAML keeps one value of a key given twice; a spec is refused instead, at
// every level where keys are read (knobs, params, grid, a run, the top).
TEST(Spec, AKeyGivenTwiceIsRefused) {
  EXPECT_EQ(ErrorOf(Replace(kGood, "knobs: {mw_type: 2}", "knobs: {mw_type: 1, mw_type: 2}")),
            "runs[0].systems[1].knobs.mw_type: given twice; give each key once");
  EXPECT_EQ(ErrorOf(Replace(kGood, "ops: 100}", "ops: 100, ops: 200}")),
            "runs[0].params.ops: given twice; give each key once");
  EXPECT_EQ(
      ErrorOf(Replace(kGood, "grid: {threads: [1, 24]}", "grid: {threads: [1], threads: [24]}")),
      "runs[0].grid.threads: given twice; give each key once");
  EXPECT_EQ(ErrorOf(Replace(kGood, "name: fig-x", "name: fig-x\nname: fig-y")),
            "spec.name: given twice; give each key once");
}

TEST(Spec, AnEmptyGridListIsCalledEmpty) {
  EXPECT_EQ(ErrorOf(Replace(kGood, "grid: {threads: [1, 24]}", "grid: {threads: []}")),
            "runs[0].grid.threads: expected a non-empty list like [1, 24], got an empty list");
}

TEST(Spec, NotYamlSaysWhere) {
  EXPECT_EQ(ErrorOf("name: [unclosed").rfind("not valid YAML (line ", 0), 0u);
  EXPECT_EQ(ErrorOf(""),
            "empty: expected a map with name, runs, ... (see experiments/figure-10.yaml)");
  EXPECT_THROW((void)LoadSpec("/nonexistent.yaml"), SpecError);
  try {
    (void)LoadSpec(std::filesystem::temp_directory_path().string());
    ADD_FAILURE() << "a directory was read as a spec";
  } catch (const SpecError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("a directory, not a spec file", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace dmb::runner
