// dmb_micro's contract with the experiment runner: run as a child process,
// Google Benchmark JSON on stdout with exactly one entry carrying the
// counters; bad input exits 2 with one line naming the problem.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

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

// Each bench is a subcommand; `--bench B` (what the runner and the commands
// recorded in results/ write) is the same run.
TEST(DmbMicro, SubcommandAndBenchFlagAreTheSameRun) {
  const Outcome sub = RunJson("alloc --system rpc_mw --set mw_type=2 --threads 2 --ops 20");
  const Outcome flag =
      RunJson("--ops 20 --bench alloc --threads 2 --system rpc_mw --set mw_type=2");
  const Outcome first = RunMicro(
      "--benchmark_format=json alloc --system rpc_mw --set mw_type=2 --threads 2 --ops 20");
  ASSERT_EQ(sub.exit_code, 0) << sub.out;
  ASSERT_EQ(flag.exit_code, 0) << flag.out;
  ASSERT_EQ(first.exit_code, 0) << first.out;
  for (const char* f : {"real_time", "lat_us_p50", "lat_us_p99", "free_lat_us_mean", "count"}) {
    EXPECT_EQ(Num(sub.out, f), Num(flag.out, f)) << f;
    EXPECT_EQ(Num(sub.out, f), Num(first.out, f)) << f;
  }
  EXPECT_NE(sub.out.find("bench=alloc,system=rpc_mw,threads=2"), std::string::npos) << sub.out;
}

// As with the hand-written parser it replaced: a repeated flag takes its
// last value, every --set adds a knob, and a number means what it says
// ("010" is ten, not CLI11's octal eight).
TEST(DmbMicro, RepeatedFlagsAndNumbersMeanWhatTheyDid) {
  const Outcome o = RunJson(
      "alloc --system rpc_mw --set mw_type=2 --set granularity=64KB --threads 3 --threads 010 "
      "--ops 5");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_NE(o.out.find("threads=10,"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("granularity=64KB"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("mw_type=2"), std::string::npos) << o.out;
  EXPECT_EQ(Num(o.out, "count"), 50);
}

// Every bad flag or value: exit 2, one line on stderr naming the flag.
TEST(DmbMicro, BadFlagOrValueNamesTheFlag) {
  const std::pair<const char*, const char*> cases[] = {
      {"alloc --threads x", "--threads: expected an integer in [1, 4096], got \"x\""},
      {"alloc --threads 0", "--threads: expected an integer in [1, 4096], got \"0\""},
      {"access --ops 1.5", "--ops: expected an integer in [1, 100000000], got \"1.5\""},
      {"access --seed 0x10", "--seed: expected an integer"},
      {"access --mn-cores some", "--mn-cores: expected an integer in [1, 512], got \"some\""},
      {"access --pool 12QB", "--pool: expected a size like 64B, 4KB, 1MB, 1GB"},
      {"access --op rw", "--op: expected read or write, got \"rw\""},
      {"access --profile cx9", "--profile: unknown calibration profile 'cx9'"},
      {"mw_bind --mw-type 3", "--mw-type: expected 1 or 2, got \"3\""},
      {"mr_reg --page 1GB", "--page: expected 4KB or 2MB, got \"1GB\""},
      {"swap --scale 2", "--scale: expected a number in (0, 1], got \"2\""},
      {"swap --swap-gb -1", "--swap-gb: expected a number > 0, got \"-1\""},
      {"swap --threads 2", "--threads does not apply to swap (only to access, alloc, kv)"},
      {"--bench swap --threads 2", "--threads does not apply to --bench swap"},
      {"access --frobnicate=1", "unknown flag '--frobnicate'"},
      {"access --system", "--system"},
      {"access 24", "unexpected argument \"24\""},
      {"access alloc", "unexpected argument \"alloc\""},
      {"", "a bench is required"},
      {"--system rpc_mw alloc", "--system comes after the bench: dmb_micro alloc --system"},
      {"--system rpc_mw", "a bench is required before --system: dmb_micro BENCH [options]"},
      {"--bench", "--bench needs a value"},
      {"acces", "unknown bench 'acces'; known benches: access, alloc"},
  };
  for (const auto& [args, says] : cases) {
    const Outcome o = RunMicro(args, true);
    EXPECT_EQ(o.exit_code, 2) << args << ": " << o.out;
    EXPECT_NE(o.out.find(std::string("dmb_micro: error: ")), std::string::npos) << args << o.out;
    EXPECT_NE(o.out.find(says), std::string::npos) << args << ": " << o.out;
    EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << args << ": one line: " << o.out;
  }
}

// Google Benchmark's own flags are its to check.
TEST(DmbMicro, UnknownBenchmarkFlagIsGoogleBenchmarks) {
  const Outcome o = RunMicro("access --ops 10 --benchmark_nope=1", true);
  EXPECT_EQ(o.exit_code, 2) << o.out;
  EXPECT_NE(o.out.find("--benchmark_nope=1"), std::string::npos) << o.out;
}

TEST(DmbMicro, BenchHelpListsItsOptionsOnly) {
  const Outcome o = RunMicro("alloc --help");
  EXPECT_EQ(o.exit_code, 0) << o.out;
  for (const char* f : {"--system", "--set", "--threads", "--batch", "--pool", "--seed"}) {
    EXPECT_NE(o.out.find(f), std::string::npos) << f << " in\n" << o.out;
  }
  EXPECT_EQ(o.out.find("--workload"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("--offload-qps"), std::string::npos) << o.out;
}

TEST(DmbMicro, HelpExplainsEachBench) {
  const Outcome o = RunMicro("--help");
  EXPECT_EQ(o.exit_code, 0);
  for (const char* b : {"access", "alloc", "offload_read", "mr_reg", "mw_bind", "kv"}) {
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

// --bench kv: the OneSidedMW paper's KV-store workloads (§6.1, Figures 6, 7).
constexpr const char* kKvSmall = "--bench kv --threads 2 --keys 400 ";

TEST(DmbMicroKv, FillsyncOnStaticMrGivesNothingBack) {
  const Outcome o = RunJson(std::string(kKvSmall) + "--value 256B --system static_mr");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_EQ(CountEntries(o.out), 1) << o.out;
  EXPECT_NE(o.out.find("bench=kv,system=static_mr,threads=2"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("workload=fillsync"), std::string::npos) << o.out;
  EXPECT_GT(Num(o.out, "tput_mops"), 0);
  EXPECT_GE(Num(o.out, "lat_us_p99"), Num(o.out, "lat_us_p50"));
  EXPECT_GT(Num(o.out, "insert_lat_us_p99"), 0);
  EXPECT_GT(Num(o.out, "delete_tput_mops"), 0);
  EXPECT_EQ(Num(o.out, "count"), 400);
  EXPECT_EQ(Num(o.out, "failures"), 0);
  EXPECT_EQ(Num(o.out, "threads_total"), 2);
  EXPECT_EQ(Num(o.out, "value_bytes"), 256);
  EXPECT_EQ(Num(o.out, "alloc_bytes"), 16 << 20);
  // The 10% of keys left keep every 16 MB region (and the index) in use.
  EXPECT_EQ(Num(o.out, "dealloc_rate"), 0);
  EXPECT_GE(Num(o.out, "peak_mn_bytes"), 2.0 * 2 * (16 << 20));  // index + slab per thread
  // Manual time = phase 1: 400 inserts over 2 threads at ~lat_us_mean each.
  EXPECT_NEAR(Num(o.out, "real_time") * Num(o.out, "tput_mops"), 400, 4);
}

TEST(DmbMicroKv, OneSidedMwFreesMostAndSparesTheMnCpu) {
  // 1 KB values: two 2 KB blocks per 4 KB chunk, so most chunks empty.
  const Outcome os =
      RunJson(std::string(kKvSmall) + "--system onesided_mw --set granularity=4KB --value 1KB");
  ASSERT_EQ(os.exit_code, 0) << os.out;
  EXPECT_EQ(Num(os.out, "failures"), 0);
  EXPECT_GT(Num(os.out, "dealloc_rate"), 0.5);
  EXPECT_LT(Num(os.out, "dealloc_rate"), 1);
  EXPECT_EQ(Num(os.out, "mn_cpu_peak"), 0);
  EXPECT_EQ(Num(os.out, "mn_cpu_mean"), 0);
  EXPECT_EQ(Num(os.out, "alloc_bytes"), 4096);
  const Outcome rpc = RunJson(std::string(kKvSmall) + "--system rpc_mw --value 1KB");
  ASSERT_EQ(rpc.exit_code, 0) << rpc.out;
  EXPECT_EQ(Num(rpc.out, "failures"), 0);
  const double peak = Num(rpc.out, "mn_cpu_peak");
  EXPECT_GT(peak, 0);
  EXPECT_LE(peak, 1.0 + 1e-9);  // one MN core
  EXPECT_GE(peak, Num(rpc.out, "mn_cpu_mean"));
  // Same keys and blocks: the same footprint and the same chunks emptied.
  EXPECT_EQ(Num(rpc.out, "dealloc_rate"), Num(os.out, "dealloc_rate"));
  EXPECT_EQ(Num(rpc.out, "peak_mn_bytes"), Num(os.out, "peak_mn_bytes"));
}

TEST(DmbMicroKv, YcsbdReadsAndInsertOnlyKeepsEverything) {
  const Outcome y =
      RunJson(std::string(kKvSmall) + "--value 256B --system rpc_mw --workload ycsbd");
  ASSERT_EQ(y.exit_code, 0) << y.out;
  EXPECT_EQ(Num(y.out, "count"), 400);
  EXPECT_EQ(Num(y.out, "failures"), 0);
  EXPECT_GT(Num(y.out, "get_lat_us_p99"), 0);
  EXPECT_LT(Num(y.out, "get_lat_us_p99"), Num(y.out, "insert_lat_us_p99"));  // one READ pair
  EXPECT_GT(Num(y.out, "delete_tput_mops"), 0);
  const Outcome i =
      RunJson(std::string(kKvSmall) + "--value 256B --system onesided_mw --workload insert");
  ASSERT_EQ(i.exit_code, 0) << i.out;
  EXPECT_EQ(Num(i.out, "count"), 400);
  EXPECT_EQ(Num(i.out, "failures"), 0);
  EXPECT_EQ(Num(i.out, "dealloc_rate"), 0);
  EXPECT_FALSE(Field(i.out, "delete_tput_mops").has_value()) << i.out;
  EXPECT_FALSE(Field(i.out, "get_lat_us_p99").has_value()) << i.out;
}

TEST(DmbMicroKv, SameSeedSameNumbers) {
  const std::string args = std::string(kKvSmall) + "--value 256B --system rpc_mw --workload ycsbd";
  const Outcome a = RunJson(args + " --seed 3");
  const Outcome b = RunJson(args + " --seed 3");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  for (const char* f : {"real_time", "tput_mops", "lat_us_p99", "get_lat_us_p99", "dealloc_rate",
                        "mn_cpu_peak", "peak_mn_bytes"}) {
    EXPECT_EQ(Num(a.out, f), Num(b.out, f)) << f;
  }
}

TEST(DmbMicroKv, RefusedApproachOrValueExits2WithTheFix) {
  Outcome o = RunMicro(std::string(kKvSmall) + "--system odrp", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("dmb_micro: error: odrp: fixed 4KB"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << "one line: " << o.out;
  o = RunMicro(std::string(kKvSmall) + "--system rpc_mw --set granularity=512B --value 1KB", true);
  EXPECT_EQ(o.exit_code, 2);  // a 1 KB block
  EXPECT_NE(o.out.find("use a granularity >= 1KB"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << "one line: " << o.out;
  o = RunMicro(
      std::string(kKvSmall) + "--system rpc_mw --set granularity=1KB --value 1KB --kv-size value",
      true);
  EXPECT_EQ(o.exit_code, 2);  // a 1 KB value: 8 B + 16 B key + 1 KB, the 2 KB class
  EXPECT_NE(o.out.find("use a granularity >= 2KB"), std::string::npos) << o.out;
  o = RunMicro(std::string(kKvSmall) + "--kv-size bytes", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("--kv-size: expected block or value"), std::string::npos) << o.out;
  o = RunMicro("--bench kv --ops 10", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("--ops does not apply to --bench kv"), std::string::npos) << o.out;
  o = RunMicro("--bench access --workload ycsbd", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("--workload does not apply to --bench access"), std::string::npos) << o.out;
  o = RunMicro("--bench kv --workload ycsbe", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("--workload: expected fillsync, ycsbd or insert"), std::string::npos)
      << o.out;
}

// kv over real verbs (--backend ibv), checked without a device: the options
// parse, in the runner's spelling (ansible/figure.yml backend=ibv), up to the
// device lookup; the ibv flags need --backend ibv; --help says what ibv
// omits. The run itself is the rxe tier's (tests/rxe/kv-over-rxe.sh).
TEST(DmbMicroKv, IbvOptionsParseUpToTheDevice) {
  // What the runner writes for a figure-6 point, plus its --micro-args.
  Outcome o = RunMicro(
      "--bench kv --backend ibv --mn=127.0.0.1:1 --devices=dmb_no_such_dev --system rpc_mw "
      "--set granularity=2KB --set mw_type=2 --keys 100000 --kv-size block --mn-cores 1 "
      "--pool 1GB --threads 24 --value 1KB --workload fillsync --seed 1 "
      "--benchmark_format=json",
      true);
  EXPECT_EQ(o.exit_code, 2) << o.out;
  const bool no_dev = o.out.find("no RDMA device 'dmb_no_such_dev'") != std::string::npos;
  const bool no_ibv = o.out.find("built without libibverbs") != std::string::npos;
  EXPECT_TRUE(no_dev || no_ibv) << o.out;
  EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << "one line: " << o.out;
  o = RunMicro("kv --backend ibv --mn spawn --devices dmb_no_such_dev --keys 10", true);
  EXPECT_EQ(o.exit_code, 2) << o.out;
  EXPECT_TRUE(o.out.find("dmb_no_such_dev") != std::string::npos || no_ibv) << o.out;
}

TEST(DmbMicroKv, IbvFlagsNeedBackendIbv) {
  for (const char* args : {"--bench kv --mn mn1:18515 --keys 10", "kv --devices rxe1 --keys 10",
                           "kv --backend sim --mn spawn --keys 10"}) {
    const Outcome o = RunMicro(args, true);
    EXPECT_EQ(o.exit_code, 2) << args << ": " << o.out;
    EXPECT_NE(o.out.find("--mn and --devices need --backend ibv"), std::string::npos)
        << args << ": " << o.out;
  }
  const Outcome o = RunMicro("kv --backend rdma", true);
  EXPECT_EQ(o.exit_code, 2) << o.out;
  EXPECT_NE(o.out.find("--backend: expected sim or ibv, got \"rdma\""), std::string::npos) << o.out;
}

TEST(DmbMicroKv, HelpSaysWhatIbvMeasuresAndOmits) {
  const Outcome o = RunMicro("kv --help");
  EXPECT_EQ(o.exit_code, 0) << o.out;
  for (const char* f : {"--backend", "--devices", "--mn", "wall clock", "omits them"}) {
    EXPECT_NE(o.out.find(f), std::string::npos) << f << " in\n" << o.out;
  }
}

// A small swap run: 2 Kmeans tasks of 1 MB on 2 CNs.
constexpr const char* kSwapSmall =
    "--bench swap --cns 2 --tasks 2 --scale 0.00048828125 --trace-dir /tmp/dmb_micro_test_traces ";

TEST(DmbMicroSwap, ReportsItsCountersAndNoCorruption) {
  const Outcome o = RunJson(std::string(kSwapSmall) + "--system onesided_mw --set granularity=1MB");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_NE(o.out.find("bench=swap,system=onesided_mw"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("app=kmeans,tasks=2"), std::string::npos) << o.out;
  EXPECT_EQ(Num(o.out, "stamp_mismatches"), 0);
  EXPECT_EQ(Num(o.out, "failures"), 0);
  EXPECT_GT(Num(o.out, "major_faults"), 0);
  EXPECT_GT(Num(o.out, "swap_writes"), 0);
  EXPECT_GT(Num(o.out, "segment_allocs"), 0);
  EXPECT_GT(Num(o.out, "mem_util"), 0);
  EXPECT_LE(Num(o.out, "mem_util"), 1);
  EXPECT_GE(Num(o.out, "job_s_max"), Num(o.out, "job_s_mean"));
  EXPECT_GE(Num(o.out, "sync_lat_us_p99"), Num(o.out, "sync_lat_us_mean") * 0.5);
  EXPECT_EQ(Num(o.out, "alloc_bytes"), 1 << 20);
  EXPECT_EQ(Num(o.out, "threads_total"), 2);
  // Manual time = the run: the slowest task's time.
  EXPECT_NEAR(Num(o.out, "real_time") * 1e-6, Num(o.out, "job_s_max"), 1e-6);
}

TEST(DmbMicroSwap, CoarseGranularityShrinksWithTheSwapArea) {
  // 1 GB is 1/32 of the 32 GB area; at 1/512 scale 2 MB, at 1/2048 the 1 MB floor.
  Outcome o = RunJson(std::string(kSwapSmall) + "--system static_mr --set granularity=1GB");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_EQ(Num(o.out, "alloc_bytes"), 1 << 20);
  o = RunJson(
      "--bench swap --tasks 1 --local 1 --scale 0.001953125 --trace-dir /tmp/dmb_micro_test_traces "
      "--system static_mr --set granularity=1GB");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_EQ(Num(o.out, "alloc_bytes"), 2 << 20);
}

TEST(DmbMicroSwap, BadInputExits2WithTheFix) {
  Outcome o = RunMicro(std::string(kSwapSmall) + "--app quicksort", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("unknown workload \"quicksort\"; known: kmeans"), std::string::npos)
      << o.out;
  o = RunMicro(std::string(kSwapSmall) + "--local 0", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("--local: expected a number in (0, 1]"), std::string::npos) << o.out;
  o = RunMicro(std::string(kSwapSmall) + "--cover sometimes", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("--cover: expected lazy, keep or whole"), std::string::npos) << o.out;
  o = RunMicro(std::string(kSwapSmall) + "--tasks 64", true);  // 64 x 0.5 MB > a 16 MB area
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("raise swap_gb"), std::string::npos) << o.out;
  o = RunMicro("--bench kv --tasks 2", true);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.out.find("--tasks does not apply to --bench kv"), std::string::npos) << o.out;
}

// A pool too small for the swapped-out pages: allocations fail, swap-outs are
// lost, and the point fails naming the refused allocation (never numbers).
TEST(DmbMicroSwap, AFailedAllocationFailsThePointNamingIt) {
  const Outcome o = RunMicro(
      std::string(kSwapSmall) + "--system onesided_mw --set granularity=1MB --pool 1MB", true);
  EXPECT_NE(o.exit_code, 0) << o.out;
  EXPECT_NE(o.out.find("swap operations failed, first: alloc of segment"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("--pool"), std::string::npos) << o.out;
}

}  // namespace
