// What Figures 6 and 7 report must not depend on how long the run is: the
// throughput ratios to Static-MR, the deallocation rate and the peak MN CPU
// move less than 5% when the number of keys changes 4x (issue 14 #5: a fixed
// 100 us peak window caught the start-up burst of first allocations, so the
// peak fell from 0.51 to 0.20 cores when the run got 4x longer).
//
// Label `scale`: ten simulated runs per test, 29 s on the release build and
// 185 s under the sanitizers, so `make test` runs them on the release build
// (make scale-tests). What they check is numbers; every path they take runs
// under the sanitizers in kv_workload_test and the conformance suite.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <string>

#include "apps/kvstore/kv_workload.h"

namespace dmb::apps::kv {
namespace {

struct Point {
  double tput_mops = 0, dealloc_rate = 0, mn_cpu_peak = 0, mn_cpu_mean = 0;
};

Point Run(const std::string& system, const std::string& granularity, int cns, int threads,
          const std::string& workload, uint64_t keys, const std::string& profile = "cx5") {
  harness::TestbedSpec t;
  t.system = system;
  t.cns = cns;
  t.pool_bytes = system == "static_mr" ? 4ull << 30 : 256ull << 20;
  t.knobs = {{"granularity", granularity}};
  t.profile = profile;
  harness::Testbed tb(t);
  KvWorkloadSpec s;
  s.workload = workload;
  s.threads = threads;
  s.keys = keys;
  const KvWorkloadResult r = RunKvWorkload(tb, s);
  EXPECT_EQ(r.failures, 0u) << system << ": " << r.first_failure;
  EXPECT_TRUE(r.mn_cpu_measured) << "the simulator's MN CPU is sampled";
  return {r.tput_mops(), r.dealloc_rate, r.mn_cpu_peak, r.mn_cpu_mean};
}

// |a/b - 1| < 5%, or both within 0.01 of zero (a CPU that stays idle).
void ExpectClose(double small, double large, const std::string& what) {
  if (std::fabs(small) < 0.01 && std::fabs(large) < 0.01) return;
  EXPECT_LT(std::fabs(large / small - 1), 0.05) << what << ": " << small << " -> " << large;
}

// `steady`: the clients' allocations are out of step, so RPC-MW at 16 KB
// keeps the MN CPU evenly busy and its peak stays near its mean (a 100 us
// window reported a saturated core, 1.0, at a 0.40 mean).
// RPC-MW at 16 KB (MN core not saturated) is checked for its peak under the
// +mn_poll reading, on Figure 7's shape: with the default interrupt-driven MN, its CPU time per
// request depends on how in step the requests come (one wake-up for a burst,
// one per request when they are spread), and our clients, released together
// by the start barrier, drift apart only slowly: its mean grows with the run
// (figure-7's 6 x 4 point: 0.25, 0.27, 0.31 cores at 24k, 96k, 384k keys).
// That is the model's arrival dependence, not the sampling's. Its
// deallocation rate (0.9^16 of ~1,500 chunks, a binomial sd of about 5%) is
// left to the 4 KB approaches.
void CheckScale(const std::string& name, int cns, int threads, const std::string& workload,
                uint64_t keys, bool steady) {
  std::map<uint64_t, std::map<std::string, Point>> at;
  for (uint64_t k : {keys, 4 * keys}) {
    at[k]["static_mr"] = Run("static_mr", "16MB", cns, threads, workload, k);
    at[k]["onesided_mw"] = Run("onesided_mw", "4KB", cns, threads, workload, k);
    at[k]["rpc_mw"] = Run("rpc_mw", "4KB", cns, threads, workload, k);        // MN CPU saturated
    at[k]["rpc_mw 16KB"] = Run("rpc_mw", "16KB", cns, threads, workload, k);  // not saturated
    at[k]["rpc_mw 16KB poll"] =
        Run("rpc_mw", "16KB", cns, threads, workload, k, "cx5+mn_poll");  // not saturated
  }
  for (const char* sys : {"onesided_mw", "rpc_mw", "rpc_mw 16KB", "rpc_mw 16KB poll"}) {
    const Point& a = at[keys][sys];
    const Point& b = at[4 * keys][sys];
    const double ra = a.tput_mops / at[keys]["static_mr"].tput_mops;
    const double rb = b.tput_mops / at[4 * keys]["static_mr"].tput_mops;
    std::cout << name << " " << sys << ": / Static-MR " << ra << " -> " << rb << ", dealloc "
              << a.dealloc_rate << " -> " << b.dealloc_rate << ", peak MN CPU " << a.mn_cpu_peak
              << " -> " << b.mn_cpu_peak << " cores (mean " << a.mn_cpu_mean << " -> "
              << b.mn_cpu_mean << ")\n";
    ExpectClose(ra, rb, name + " " + sys + " throughput / Static-MR");
    const bool at_16kb = std::string(sys).starts_with("rpc_mw 16KB");
    if (!at_16kb) ExpectClose(a.dealloc_rate, b.dealloc_rate, name + " " + sys + " dealloc_rate");
    // Figure 6's one CN: its 24 clients stay in step, so the unsaturated
    // core's peak is a burst of their chunk allocations (checked on Figure
    // 7's 6 CNs, which drift apart: `steady`).
    if (!at_16kb || (steady && std::string(sys) == "rpc_mw 16KB poll")) {
      ExpectClose(a.mn_cpu_peak, b.mn_cpu_peak, name + " " + sys + " peak MN CPU");
    }
  }
  ExpectClose(at[keys]["static_mr"].mn_cpu_peak, at[4 * keys]["static_mr"].mn_cpu_peak,
              name + " static_mr peak MN CPU");
  if (steady) {
    const Point& p = at[4 * keys]["rpc_mw 16KB poll"];
    EXPECT_LT(p.mn_cpu_peak, 1.25 * p.mn_cpu_mean)
        << name << ": peak " << p.mn_cpu_peak << " at a mean of " << p.mn_cpu_mean;
  }
}

TEST(KvScale, Figure6NumbersDoNotDependOnTheNumberOfKeys) {
  CheckScale("figure-6 (1 CN x 24 threads, fillsync)", 1, 24, "fillsync", 24000, false);
}

TEST(KvScale, Figure7NumbersDoNotDependOnTheNumberOfKeys) {
  // 1,000 keys per client: with fewer, the clients' chunk allocations stay in
  // step and the busiest interval depends on where their bursts fall.
  CheckScale("figure-7 (6 CNs x 4 threads, insert)", 6, 4, "insert", 48000, true);
}

}  // namespace
}  // namespace dmb::apps::kv
