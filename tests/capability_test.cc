// Skipping by capability: every approach declares what the MN's RNIC must
// offer (SystemInfo::needs), the suites skip on what a device lacks, and the
// declaration is honest: an MN without one of the declared capabilities
// refuses to start, naming it.
#include <gtest/gtest.h>

#include <string>

#include "harness/testbed.h"
#include "systems/registry.h"
#include "tests/suite_util.h"

namespace dmb::suite {
namespace {

bool* CapField(fabric::DeviceCaps* c, const std::string& name) {
  if (name == "mw_type1") return &c->mw_type1;
  if (name == "mw_type2") return &c->mw_type2;
  if (name == "atomics") return &c->atomics;
  if (name == "masked_atomics") return &c->masked_atomics;
  if (name == "cross_channel") return &c->cross_channel;
  if (name == "qpn_in_bind") return &c->qpn_in_bind;
  return nullptr;
}

TEST(Capabilities, TheSuitesSkipOnWhatTheMnLacks) {
  harness::TestbedSpec s = SuiteSpec("onesided_mw");
  EXPECT_TRUE(harness::MissingMnCaps(s).empty());
  s.mn_caps.cross_channel = false;
  EXPECT_EQ(harness::MissingMnCaps(s), std::vector<std::string>{"cross_channel"});
  harness::TestbedSpec r = SuiteSpec("rpc_mw:type2");
  r.mn_caps.mw_type2 = false;
  EXPECT_EQ(harness::MissingMnCaps(r), std::vector<std::string>{"mw_type2"});
  r = SuiteSpec("rpc_mw");  // type-1 needs no type-2 windows
  r.mn_caps.mw_type2 = false;
  EXPECT_TRUE(harness::MissingMnCaps(r).empty());
  harness::TestbedSpec st = SuiteSpec("static_mr");
  st.mn_caps = fabric::DeviceCaps{false, false, false, false, false, false};
  EXPECT_TRUE(harness::MissingMnCaps(st).empty());
}

// For every approach and suite variant, every capability it declares: an MN
// without it fails to start and the error names it.
TEST(Capabilities, EveryDeclaredNeedIsOneTheMnChecks) {
  int checked = 0;
  for (const std::string& param : AllSystems()) {
    const harness::TestbedSpec base = SuiteSpec(param);
    const auto& info = systems::Registry::Get(base.system);
    const auto needs = info.Needs(systems::ValidateKnobs(info.name, info.knobs, base.knobs));
    for (const std::string& cap : needs) {
      harness::TestbedSpec s = base;
      bool* field = CapField(&s.mn_caps, cap);
      ASSERT_NE(field, nullptr) << param << " declares an unknown capability " << cap;
      *field = false;
      try {
        harness::Testbed tb(s);
        ADD_FAILURE() << param << " started without " << cap << ", which it declares";
      } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find(cap), std::string::npos)
            << param << " without " << cap << ": " << e.what();
      }
      ++checked;
    }
  }
  std::cout << checked << " declared capabilities checked\n";
  EXPECT_GT(checked, 10);
}

}  // namespace
}  // namespace dmb::suite
