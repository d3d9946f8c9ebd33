// The corpus on the simulator meets every spec expectation, and the comparer
// (which decides PASS / DEVIATION-ok / FAIL against rxe) really flags
// differences and holds declared deviations to their word.
#include <gtest/gtest.h>

#include <set>

#include "fabric/verbs_diff/scenario.h"

namespace dmb::verbs_diff {
namespace {

const BackendOptions kSim{.kind = "sim", .seed = 1};

}  // namespace

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.name; }

namespace {

class OnSim : public ::testing::TestWithParam<Scenario> {};

TEST_P(OnSim, MeetsTheSpec) {
  const Scenario& s = GetParam();
  const Transcript t = RunScenario(kSim, s);
  ASSERT_EQ(t.Find("exception"), nullptr) << t.detail << "\n" << t.Render();
  ASSERT_FALSE(t.lines().empty()) << "a scenario must observe something";
  for (const auto& m : t.SpecMismatches()) ADD_FAILURE() << m;
  int expectations = 0;
  for (const auto& l : t.lines()) expectations += l.expected.has_value();
  EXPECT_GT(expectations, 0) << "a scenario must state at least one spec expectation";
  // Each declared deviation names a line the sim records, where the sim keeps
  // the spec and differs from the deviating value.
  for (const auto& d : s.deviations) {
    const auto* line = t.Find(d.label);
    ASSERT_NE(line, nullptr) << "deviation names unknown label '" << d.label << "'";
    EXPECT_TRUE(line->expected.has_value()) << d.label << ": a deviation needs a spec value";
    EXPECT_TRUE(line->meets_spec()) << d.label;
    EXPECT_NE(line->value, d.value) << d.label << ": the sim must keep the spec";
    EXPECT_FALSE(d.reason.empty()) << d.label;
    EXPECT_FALSE(d.family.empty()) << d.label;
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, OnSim, ::testing::ValuesIn(AllScenarios()),
                         [](const ::testing::TestParamInfo<Scenario>& info) {
                           return info.param.name;
                         });

TEST(Corpus, IsLargeEnoughAndWellFormed) {
  const auto& all = AllScenarios();
  EXPECT_GE(all.size(), 45u);
  std::set<std::string> names;
  for (const auto& s : all) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_FALSE(s.checks.empty()) << s.name;
    EXPECT_NE(s.fn, nullptr) << s.name;
    for (char c : s.name) EXPECT_TRUE(std::isalnum(c) || c == '_') << s.name;
  }
}

TEST(Corpus, DeclaresTheKnownRxeWindowBoundsDeviation) {
  int n = 0;
  for (const auto& s : AllScenarios()) n += static_cast<int>(DeviationsFor(s, "rxe").size());
  EXPECT_GE(n, 2) << "type-1 and type-2 window bounds on rxe";
}

TEST(Corpus, SimIsDeterministic) {
  for (const auto& s : AllScenarios()) {
    if (s.name != "qp_error_flushes_later_wrs" && s.name != "mw2_send_with_inv_invalidates") {
      continue;
    }
    const Transcript x = RunScenario(kSim, s), y = RunScenario(kSim, s);
    EXPECT_TRUE(Compare(x, y, {}).empty()) << s.name;
  }
}

// ---- The runner notices a broken scenario -------------------------------------------

Task<void> ViolatesSpec(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  auto wc = co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 8, env.bbuf, 0x00abcd00u));
  t.Expect("READ with a made-up rkey", wc.status, WcStatus::kSuccess);  // wrong on purpose
}

Task<void> Throws(Env& env, Transcript& t) {
  t.Note("before", "x");
  env.A->memory().Alloc(1ull << 40);  // ENOMEM
  co_return;
}

Task<void> NeverCompletes(Env& env, Transcript& t) {
  auto [a, b] = env.AB();
  t.Note("waiting", "yes");
  co_await Env::NextRecv(b);  // nothing is ever sent
}

Task<void> RefusedPost(Env& env, Transcript& t) {
  Ep a = env.MakeEp(env.A, env.pa);  // RESET: PostSend is refused
  t.Note("before", "x");
  co_await env.Exec(a, ReadWr(env.abuf, env.amr->lkey(), 8, env.bbuf, env.bmr->rkey()));
  t.Note("after", "never");
}

TEST(Runner, ARefusedPostEndsTheTranscriptWithAComparableLine) {
  const Transcript t = RunScenario(kSim, {"refused", "test", RefusedPost});
  ASSERT_EQ(t.lines().size(), 2u) << t.Render();
  EXPECT_EQ(t.lines()[1].label, "exception");
  EXPECT_EQ(t.lines()[1].value, "PostSend(READ) refused: EINVAL");
}

TEST(Runner, FlagsASpecViolation) {
  const Transcript t = RunScenario(kSim, {"violates", "test", ViolatesSpec});
  ASSERT_EQ(t.SpecMismatches().size(), 1u) << t.Render();
  EXPECT_NE(t.SpecMismatches()[0].find("REM_ACCESS_ERR"), std::string::npos);
}

TEST(Runner, RecordsAnEscapedExceptionAsALine) {
  const Transcript t = RunScenario(kSim, {"throws", "test", Throws});
  ASSERT_NE(t.Find("exception"), nullptr) << t.Render();
  EXPECT_EQ(t.Find("exception")->value, "VerbsError ENOMEM");
  EXPECT_FALSE(t.detail.empty());
}

TEST(Runner, AWaitThatNeverEndsIsCutByTheWatchdog) {
  const Transcript t = RunScenario(kSim, {"hangs", "test", NeverCompletes});
  ASSERT_NE(t.Find("exception"), nullptr) << t.Render();
  EXPECT_NE(t.detail.find("still blocked"), std::string::npos) << t.detail;
}

TEST(Runner, UnknownBackendIsAnExceptionLine) {
  const Transcript t = RunScenario({.kind = "nope"}, AllScenarios()[0]);
  ASSERT_NE(t.Find("exception"), nullptr);
  EXPECT_NE(t.detail.find("unknown backend"), std::string::npos);
}

// ---- Transcript ---------------------------------------------------------------------

TEST(Transcript, RepeatedLabelsGetSuffixes) {
  Transcript t;
  t.Note("x", 1);
  t.Note("x", 2);
  t.Expect("x", WcStatus::kSuccess, WcStatus::kRemAccessErr);
  ASSERT_EQ(t.lines().size(), 3u);
  EXPECT_EQ(t.lines()[1].label, "x #2");
  EXPECT_EQ(t.lines()[2].label, "x #3");
  ASSERT_EQ(t.SpecMismatches().size(), 1u);
  EXPECT_EQ(t.SpecMismatches()[0], "x #3: observed SUCCESS, spec says REM_ACCESS_ERR");
}

TEST(Transcript, ValuesAreBackendIndependentNames) {
  EXPECT_EQ(ToValue(Errno{0}), "0");
  EXPECT_EQ(ToValue(Errno{EINVAL}), "EINVAL");
  EXPECT_EQ(ToValue(Errno{EBUSY}), "EBUSY");
  EXPECT_EQ(ToValue(Errno{-22}), "errno -22");
  EXPECT_EQ(ToValue(QpState::kErr), "ERR");
  EXPECT_EQ(ToValue(true), "yes");
  EXPECT_EQ(ToValue(uint64_t{42}), "42");
  EXPECT_EQ(Hex64(255), "0xff");
  const uint8_t b[] = {0x01, 0xab};
  EXPECT_EQ(ShowBytes(b), "01ab");
  EXPECT_EQ(ShowBytes(std::vector<uint8_t>(33, 0)).substr(0, 8), "fnv1a64=");
  EXPECT_NE(ShowPattern(1, 16), ShowPattern(2, 16));
}

// ---- Compare ----------------------------------------------------------------------------

Transcript Make(std::initializer_list<std::pair<const char*, const char*>> lines) {
  Transcript t;
  for (const auto& [l, v] : lines) t.Note(l, v);
  return t;
}

const Deviation kDev{"rxe", "bounds", "SUCCESS", "rxe checks only the MR"};

TEST(Compare, EqualTranscriptsHaveNoDifferences) {
  const auto s = Make({{"a", "SUCCESS"}, {"b", "ERR"}});
  EXPECT_TRUE(Compare(s, s, {}).empty());
}

TEST(Compare, FlagsADifferingValue) {
  const auto s = Make({{"a", "SUCCESS"}, {"b", "ERR"}});
  const auto o = Make({{"a", "SUCCESS"}, {"b", "RTS"}});
  const auto d = Compare(s, o, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].label, "b");
  EXPECT_EQ(d[0].sim, "ERR");
  EXPECT_EQ(d[0].other, "RTS");
  EXPECT_FALSE(d[0].allowed);
}

TEST(Compare, FlagsMissingAndExtraLines) {
  const auto s = Make({{"a", "1"}, {"b", "2"}});
  const auto o = Make({{"a", "1"}, {"c", "3"}});
  const auto d = Compare(s, o, {});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].label, "b");
  EXPECT_EQ(d[0].other, "<absent>");
  EXPECT_EQ(d[1].label, "c");
  EXPECT_EQ(d[1].sim, "<absent>");
  EXPECT_FALSE(d[0].allowed || d[1].allowed);
}

TEST(Compare, HonoursADeclaredDeviation) {
  const auto s = Make({{"ok", "SUCCESS"}, {"bounds", "REM_ACCESS_ERR"}});
  const auto o = Make({{"ok", "SUCCESS"}, {"bounds", "SUCCESS"}});
  const auto d = Compare(s, o, std::span(&kDev, 1));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].allowed);
  EXPECT_NE(d[0].note.find("rxe checks only the MR"), std::string::npos);
}

TEST(Compare, ADeviationThatIsNoLongerObservedFails) {
  const auto s = Make({{"bounds", "REM_ACCESS_ERR"}});
  const auto d = Compare(s, s, std::span(&kDev, 1));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].allowed);
  EXPECT_NE(d[0].note.find("remove it"), std::string::npos);
}

TEST(Compare, ADeviationWithAnotherValueFails) {
  const auto s = Make({{"bounds", "REM_ACCESS_ERR"}});
  const auto o = Make({{"bounds", "REM_OP_ERR"}});
  const auto d = Compare(s, o, std::span(&kDev, 1));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].allowed);
}

TEST(Compare, ADeviationCoversOnlyItsLabel) {
  const auto s = Make({{"bounds", "REM_ACCESS_ERR"}, {"state", "ERR"}});
  const auto o = Make({{"bounds", "SUCCESS"}, {"state", "RTS"}});
  const auto d = Compare(s, o, std::span(&kDev, 1));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_TRUE(d[0].allowed);
  EXPECT_FALSE(d[1].allowed);
}

TEST(Compare, AnAbsentDeviationCoversALineTheBackendNeverRecords) {
  const Deviation refused{"rxe", "FAA status", kAbsent, "refused at post time"};
  const auto s = Make({{"post", "0"}, {"FAA status", "REM_INV_REQ_ERR"}});
  const auto o = Make({{"post", "EINVAL"}});
  const auto d = Compare(s, o, std::span(&refused, 1));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_FALSE(d[0].allowed) << "post differs and is not declared";
  EXPECT_TRUE(d[1].allowed);
}

TEST(Compare, ADeviationMayCoverALineOnlyTheBackendRecords) {
  const Deviation extra{"rxe", "extra", "1", "why"};
  const auto s = Make({{"a", "1"}});
  const auto o = Make({{"a", "1"}, {"extra", "1"}});
  const auto d = Compare(s, o, std::span(&extra, 1));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].allowed);
}

TEST(Compare, ADeviationNamingNoLineFails) {
  const auto s = Make({{"a", "1"}});
  const auto d = Compare(s, s, std::span(&kDev, 1));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].allowed);
}

TEST(Compare, DeviationsApplyPerFamily) {
  EXPECT_EQ(BackendFamily({.kind = "sim"}), "sim");
  EXPECT_EQ(BackendFamily({.kind = "ibv", .devices = {"rxe0", "rxe1"}}), "rxe");
  EXPECT_EQ(BackendFamily({.kind = "ibv", .devices = {"mlx5_0"}}), "mlx5");
  const Scenario s{"x", "y", nullptr, {kDev}};
  EXPECT_EQ(DeviationsFor(s, "rxe").size(), 1u);
  EXPECT_TRUE(DeviationsFor(s, "mlx5").empty());
  EXPECT_TRUE(DeviationsFor(s, "sim").empty());
}

}  // namespace
}  // namespace dmb::verbs_diff
