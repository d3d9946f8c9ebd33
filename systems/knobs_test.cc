#include "systems/knobs.h"

#include <gtest/gtest.h>

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
