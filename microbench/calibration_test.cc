// Every calibration primitive, measured on the simulator, is within 10% of
// its source. A profile change that breaks a primitive fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "microbench/primitives.h"

namespace dmb::microbench {
namespace {

TEST(Calibration, Cx5PrimitivesWithinTenPercentOfSources) {
  const auto results = RunCalibration(sim::Profile::Cx5());
  ASSERT_GE(results.size(), 9u);
  for (const auto& r : results) {
    std::printf("[ calib ] %-26s sim=%10.3f source=%10.3f %-5s ratio=%.3f\n", r.name.c_str(), r.sim,
                r.source, r.unit.c_str(), r.ratio());
    EXPECT_NEAR(r.ratio(), 1.0, 0.10) << r.name << " (" << r.source_ref << ")";
  }
}

TEST(Calibration, ManyWorkersSaturateTheNicNotTheLatency) {
  LoadSpec one;
  one.bytes = 4096;
  one.ops_per_qp = 100;
  LoadSpec many = one;
  many.qps_per_cn = 24;
  many.depth = 4;
  const auto a = RunLoad(sim::Profile::Cx5(), one);
  const auto b = RunLoad(sim::Profile::Cx5(), many);
  EXPECT_GT(b.mops(), 5 * a.mops()) << "parallel QPs overlap";
  EXPECT_GT(b.lat_us_p99, a.lat_us_p99) << "a loaded 100 Gbps link queues 4 KB READs";
}

}  // namespace
}  // namespace dmb::microbench
