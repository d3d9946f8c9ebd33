#include "systems/knobs.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "systems/registry.h"

namespace dmb::systems {
namespace {

TEST(Knobs, SizesParseInEverySpelling) {
  EXPECT_EQ(ParseSize("512B"), 512u);
  EXPECT_EQ(ParseSize("4KB"), 4096u);
  EXPECT_EQ(ParseSize("1MB"), 1u << 20);
  EXPECT_EQ(ParseSize("1GB"), 1u << 30);
  EXPECT_EQ(ParseSize("4096"), 4096u);
  EXPECT_EQ(ParseSize("3000"), 3000u);  // plain bytes need not be a power of two
  EXPECT_FALSE(ParseSize("3KB"));       // units take powers of two
  EXPECT_FALSE(ParseSize("4kb"));
  EXPECT_FALSE(ParseSize("4 KB"));
  EXPECT_FALSE(ParseSize("KB"));
  EXPECT_FALSE(ParseSize("-4KB"));
  EXPECT_FALSE(ParseSize("0"));
  EXPECT_EQ(FormatSize(16u << 20), "16MB");
  EXPECT_EQ(FormatSize(1536), "1536");
}

std::string ErrorOf(const Config& c) {
  try {
    Registry::Get(c.system);
    ValidateKnobs(c.system, Registry::Get(c.system).knobs, c.knobs);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Knobs, ErrorsNameTheProblemAndTheFix) {
  EXPECT_EQ(ErrorOf({"rpc_mx", {}}),
            "unknown system 'rpc_mx'; known systems: static_mr, fine_mr, rpc_mw, finemem, "
            "onesided_mw, odrp");
  EXPECT_EQ(ErrorOf({"rpc_mw", {{"mwtype", "2"}}}),
            "rpc_mw: unknown knob 'mwtype'; known knobs: granularity, mw_type, leases, lease_us, "
            "delayed_unbind, spare_qps");
  EXPECT_EQ(ErrorOf({"rpc_mw", {{"mw_type", "3"}}}),
            "rpc_mw.mw_type: expected an integer in [1, 2], got \"3\"");
  EXPECT_EQ(ErrorOf({"static_mr", {{"granularity", "16MiB"}}}),
            "static_mr.granularity: expected a size like 512B, 4KB, 1MB, 1GB (a power of two) or "
            "a plain byte count, at least 4KB, got \"16MiB\"");
  // A size out of the knob's range says the range.
  EXPECT_EQ(ErrorOf({"finemem", {{"granularity", "1MB"}}}),
            "finemem.granularity: expected a size like 512B, 4KB, 1MB, 1GB (a power of two) or a "
            "plain byte count, from 4KB to 128KB, got \"1MB\"");
  EXPECT_EQ(ErrorOf({"rpc_mw", {{"leases", "yes"}}}),
            "rpc_mw.leases: expected true or false, got \"yes\"");
  EXPECT_EQ(ErrorOf({"rpc_mw", {{"mw_type", "2"}, {"leases", "true"}}}), "");
}

TEST(Knobs, DefaultsAreFilledAndPrintedInNameOrder) {
  const Knobs k = ValidateKnobs("fine_mr", Registry::Get("fine_mr").knobs, {});
  EXPECT_EQ(k.Size("granularity"), 1u << 20);
  EXPECT_EQ(k.ToString(), "granularity=1MB");
  EXPECT_THROW(k.Str("nope"), ConfigError);
}

TEST(Knobs, SetArgumentsSplit) {
  EXPECT_EQ(SplitAssignment("mw_type=2"), (std::pair<std::string, std::string>{"mw_type", "2"}));
  EXPECT_THROW(SplitAssignment("mw_type"), ConfigError);
  EXPECT_THROW(SplitAssignment("=2"), ConfigError);
}

// Two --set of one knob: an error naming both, not the first (or the last)
// silently winning; the map keeps what it had.
TEST(Knobs, ASecondSetOfOneKnobIsRefused) {
  std::map<std::string, std::string> knobs;
  AddAssignment("mw_type=1", &knobs);
  AddAssignment("granularity=4KB", &knobs);
  try {
    AddAssignment("mw_type=2", &knobs);
    FAIL() << "a second mw_type was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("mw_type=1 and mw_type=2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(knobs, (std::map<std::string, std::string>{{"granularity", "4KB"}, {"mw_type", "1"}}));
  EXPECT_THROW(AddAssignment("mw_type", &knobs), ConfigError);
}

// An MN that runs out of memory or keys while it is set up is a
// configuration the user can fix: the error says which knob and pool.
TEST(Registry, SetupExhaustionNamesThePoolTheGranularityAndTheFix) {
  const fabric::VerbsError keys(ENOMEM, "node 'mn0': out of MR/MW keys (16777216)");
  const SystemInfo& rpc = Registry::Get("rpc_mw");
  const std::string msg =
      SetupExhausted("rpc_mw", ValidateKnobs("rpc_mw", rpc.knobs, {{"granularity", "4KB"}}),
                     64ull << 30, keys)
          .what();
  EXPECT_NE(msg.find("rpc_mw could not set up its MN for a 64GB pool at granularity=4KB "
                     "(16777216 chunks): node 'mn0': out of MR/MW keys (16777216)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("give a larger granularity"), std::string::npos) << msg;
  // Without a granularity knob (ODRP's pages are fixed), only the pool is named.
  const SystemInfo& odrp = Registry::Get("odrp");
  const std::string fixed =
      SetupExhausted("odrp", ValidateKnobs("odrp", odrp.knobs, {}), 1ull << 30, keys).what();
  EXPECT_NE(fixed.find("odrp could not set up its MN for a 1GB pool: node"), std::string::npos)
      << fixed;
  EXPECT_EQ(fixed.find("granularity"), std::string::npos) << fixed;
  EXPECT_NE(fixed.find("give a smaller pool"), std::string::npos) << fixed;
}

// What the knobs need of the pool is checked before an MN is built (and by
// `dmbench run` before any point runs): each refusal names the knob, the pool
// and the fix; the largest pool or chunk that works is accepted.
TEST(Registry, APoolTheKnobsCannotUseIsRefusedNamingTheFix) {
  struct Case {
    std::string system;
    std::map<std::string, std::string> knobs;
    uint64_t pool_bytes;
    std::string refusal;  // empty: accepted
  };
  constexpr uint64_t kMB = 1ull << 20;
  const std::vector<Case> cases = {
      {"static_mr", {{"granularity", "16MB"}}, 16 * kMB, ""},
      {"static_mr",
       {{"granularity", "16MB"}},
       8 * kMB,
       "static_mr.granularity: 16MB is larger than the 8MB MN pool; use a smaller granularity or "
       "a larger pool"},
      {"fine_mr", {{"granularity", "4MB"}}, 1 * kMB, "fine_mr.granularity: 4MB is larger"},
      {"rpc_mw", {{"granularity", "2MB"}}, 1 * kMB, "rpc_mw.granularity: 2MB is larger"},
      {"finemem", {{"granularity", "64KB"}}, 32 << 10, "finemem.granularity: 64KB is larger"},
      {"finemem", {{"granularity", "12288"}}, 1024 * kMB, "expected a power of two"},
      {"onesided_mw", {{"granularity", "4KB"}}, 64ull << 30, ""},  // 16M chunks
      {"onesided_mw",
       {{"granularity", "4KB"}},
       128ull << 30,
       "onesided_mw: 128GB of MN memory in 4KB chunks gives 33554432 chunks; use 1..16M chunks "
       "(change granularity or the pool size)"},
      {"onesided_mw", {{"granularity", "4MB"}}, 1 * kMB, "gives 0 chunks"},
      {"odrp", {}, 4096, ""},
      {"odrp", {}, 2048, "odrp: the 2KB MN pool holds no 4 KB page; use a larger pool"},
  };
  for (const Case& c : cases) {
    const SystemInfo& info = Registry::Get(c.system);
    const Knobs k = ValidateKnobs(c.system, info.knobs, c.knobs);
    if (c.refusal.empty()) {
      EXPECT_NO_THROW(info.CheckPool(k, c.pool_bytes)) << c.system << " " << k.ToString();
      continue;
    }
    try {
      info.CheckPool(k, c.pool_bytes);
      ADD_FAILURE() << c.system << " " << k.ToString() << " accepted a " << c.pool_bytes
                    << " B pool";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.refusal), std::string::npos) << e.what();
    }
  }
}

TEST(Registry, EveryApproachHasAFactoryAndDocumentedKnobs) {
  for (const SystemInfo* s : Registry::All()) {
    EXPECT_TRUE(s->make) << s->name;
    EXPECT_FALSE(s->summary.empty()) << s->name;
    for (const auto& k : s->knobs) {
      EXPECT_FALSE(k.help.empty()) << s->name << "." << k.name;
      // Every default passes its own validation.
      EXPECT_NO_THROW(ValidateKnobs(s->name, s->knobs, {{k.name, k.default_value}}))
          << s->name << "." << k.name;
    }
  }
}

}  // namespace
}  // namespace dmb::systems
