// dmb_micro's contract with the experiment runner: run as a child process,
// Google Benchmark JSON on stdout with exactly one entry carrying the
// counters; bad input exits 2 with one line naming the problem.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <optional>
#include <string>

namespace {

struct Outcome {
  int exit_code = -1;
  std::string out;  // stdout (stderr too with merge_stderr)
};

Outcome RunMicro(const std::string& args, bool merge_stderr = false) {
  const std::string cmd =
      std::string(DMB_MICRO_PATH) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  Outcome o;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  const int st = pclose(p);
  o.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

Outcome RunJson(const std::string& args) { return RunMicro(args + " --benchmark_format=json"); }

// Entries of the "benchmarks" array (each has exactly one "run_name").
int CountEntries(const std::string& json) {
  const size_t at = json.find("\"benchmarks\"");
  if (at == std::string::npos) return -1;
  int n = 0;
  for (size_t i = json.find("\"run_name\"", at); i != std::string::npos;
       i = json.find("\"run_name\"", i + 1)) {
    ++n;
  }
  return n;
}

// The number after `"name": ` (no std::regex: GCC 12 warns inside it under -Werror).
std::optional<double> Field(const std::string& json, const std::string& name) {
  const std::string key = "\"" + name + "\": ";
  const size_t at = json.find(key);
  if (at == std::string::npos) return std::nullopt;
  try {
    return std::stod(json.substr(at + key.size(), 32));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

double Num(const std::string& json, const std::string& name) {
  const auto v = Field(json, name);
  EXPECT_TRUE(v.has_value()) << "no numeric field \"" << name << "\" in\n" << json;
  return v.value_or(-1);
}

TEST(DmbMicro, AccessReportsOneEntryInVirtualMicroseconds) {
  const Outcome o = RunJson("--bench access --system static_mr --threads 1 --ops 200");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_EQ(CountEntries(o.out), 1) << o.out;
  EXPECT_NE(o.out.find("\"time_unit\": \"us\""), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("system=static_mr"), std::string::npos) << o.out;
  const double p50 = Num(o.out, "lat_us_p50");
  EXPECT_GT(p50, 1);
  EXPECT_LT(p50, 10);
  EXPECT_GE(Num(o.out, "lat_us_p99"), p50 * 0.98);
  EXPECT_EQ(Num(o.out, "count"), 200);
  EXPECT_GT(Num(o.out, "mops"), 0);
  // Manual time = the measured phase: 200 sequential ops of ~p50 each.
  const double real_us = Num(o.out, "real_time");
  EXPECT_GT(real_us, 200 * p50 * 0.9);
  EXPECT_LT(real_us, 200 * p50 * 1.5);
}

TEST(DmbMicro, UnknownBenchExits2NamingIt) {
  const Outcome o = RunMicro("--bench nope", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("'nope'"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("known benches: access"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << "one line: " << o.out;
}

TEST(DmbMicro, BadInputExits2WithTheFix) {
  Outcome o = RunMicro("--bench access --system rpc_mx", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("unknown system 'rpc_mx'; known systems:"), std::string::npos) << o.out;
  o = RunMicro("--bench alloc --system rpc_mw --set mw_typ=2", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("rpc_mw: unknown knob 'mw_typ'"), std::string::npos) << o.out;
  o = RunMicro("--bench mr_reg --size 3MB", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("--size: expected a size like"), std::string::npos) << o.out;
  o = RunMicro("--bench mr_reg --offload-qps 4", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("--offload-qps does not apply to --bench mr_reg"), std::string::npos)
      << o.out;
  o = RunMicro("--bench access --frobnicate 1", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("unknown flag '--frobnicate'"), std::string::npos) << o.out;
}

TEST(DmbMicro, HelpExplainsEachBench) {
  const Outcome o = RunMicro("--help");
  EXPECT_EQ(o.exit_code, 0);
  for (const char* b : {"access", "alloc", "offload_read", "mr_reg", "mw_bind"}) {
    EXPECT_NE(o.out.find(std::string("  ") + b + " "), std::string::npos) << b;
  }
}

TEST(DmbMicro, AllocReportsAllocFreeAndMnCpu) {
  const Outcome o = RunJson("--bench alloc --system onesided_mw --threads 2 --ops 20");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_EQ(CountEntries(o.out), 1) << o.out;
  EXPECT_GT(Num(o.out, "lat_us_p50"), 0);
  EXPECT_GT(Num(o.out, "lat_us_p99"), 0);
  EXPECT_GT(Num(o.out, "free_lat_us_mean"), 0);
  EXPECT_EQ(Num(o.out, "count"), 40);
  EXPECT_EQ(Num(o.out, "failures"), 0);
  const double busy = Num(o.out, "mn_cpu_busy_frac");
  EXPECT_GE(busy, 0);
  EXPECT_LE(busy, 1);
  EXPECT_NE(o.out.find("system=onesided_mw,threads=2"), std::string::npos) << o.out;
}

TEST(DmbMicro, OffloadedQpsSlowReads) {
  const Outcome idle = RunJson("--bench offload_read --ops 100 --offload-qps 0");
  const Outcome busy = RunJson("--bench offload_read --ops 100 --offload-qps 96");
  ASSERT_EQ(idle.exit_code, 0) << idle.out;
  ASSERT_EQ(busy.exit_code, 0) << busy.out;
  EXPECT_EQ(CountEntries(busy.out), 1);
  const double a = Num(idle.out, "lat_us_mean");
  const double b = Num(busy.out, "lat_us_mean");
  EXPECT_GT(b, a);
  EXPECT_NEAR(b / a, 1.126, 0.02);  // OneSidedMW §3.2
  EXPECT_EQ(Num(busy.out, "offload_qps"), 96);
  EXPECT_EQ(Num(busy.out, "count"), 100);
}

TEST(DmbMicro, LargerMrsTakeLongerToRegister) {
  const Outcome small = RunJson("--bench mr_reg --size 4KB --ops 2");
  const Outcome large = RunJson("--bench mr_reg --size 1GB --ops 2");
  ASSERT_EQ(small.exit_code, 0) << small.out;
  ASSERT_EQ(large.exit_code, 0) << large.out;
  EXPECT_NEAR(Num(small.out, "lat_us_mean"), 80, 1);  // ODRP §2.2
  EXPECT_GT(Num(large.out, "lat_us_mean"), 1000 * Num(small.out, "lat_us_mean"));
  EXPECT_GT(Num(large.out, "dereg_lat_us_mean"), 0);
  EXPECT_EQ(Num(large.out, "size_bytes"), 1073741824.0);
}

TEST(DmbMicro, MwBindType2) {
  const Outcome o = RunJson("--bench mw_bind --mw-type 2 --ops 20");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_EQ(CountEntries(o.out), 1) << o.out;
  const double bind = Num(o.out, "lat_us_mean");
  EXPECT_GT(bind, 0.5);
  EXPECT_LT(bind, 5);
  EXPECT_GT(Num(o.out, "rebind_lat_us_mean"), bind);  // LOCAL_INV + BIND_MW
  EXPECT_EQ(Num(o.out, "mw_type"), 2);
}

}  // namespace
