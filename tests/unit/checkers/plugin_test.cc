// SPDX-License-Identifier: Apache-2.0
// The plug-in checker interface: the registry, the chronos and adya adapters against the
// checkers they wrap, what the polygraph counts, time limits, and the window trust rules.
#include "isowatch/checkers/plugin.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/adya/adya.h"
#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/checkers/registry.h"
#include "isowatch/formats/native.h"
#include "isowatch/formats/timekiller.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/sim/simulator.h"

#include "tests/testing/source_dir.h"
#include "tests/testing/test_history.h"

namespace isowatch::checkers {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using verdict::IsolationLevel;
using verdict::Violation;

fs::path Histories() { return fs::path(isowatch::testing::SourceDir()) / "tests/histories"; }

std::unique_ptr<Checker> Create(std::string_view name, const CheckerOptions& options = {}) {
  auto checker = CreateChecker(name, options);
  if (!checker.ok()) {
    ADD_FAILURE() << checker.status();
    return nullptr;
  }
  return *std::move(checker);
}

// "si EXT/before 2,0 k=1": the level, then testing::Summarize.
std::vector<std::string> WithLevels(const history::History& h, const std::vector<Violation>& vs) {
  std::vector<std::string> out;
  for (const Violation& v : vs) {
    out.push_back(fmt::format("{} {}", IsolationLevelName(v.level), testing::Summarize(h, v)));
  }
  return out;
}

TEST(PluginRegistryTest, ListsChronosAdyaPlumeAndPolygraph) {
  std::vector<std::string> names;
  for (const CheckerInfo& info : RegisteredCheckers()) names.push_back(info.name);
  EXPECT_THAT(names, ElementsAre("chronos", "adya", "plume", "polygraph"));
  ASSERT_NE(FindChecker("adya"), nullptr);
  EXPECT_THAT(FindChecker("adya")->levels,
              ElementsAre(IsolationLevel::kReadCommitted, IsolationLevel::kRepeatableRead,
                          IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable));
  ASSERT_NE(FindChecker("chronos"), nullptr);
  EXPECT_TRUE(FindChecker("chronos")->requirements.start_snapshots);
  EXPECT_EQ(FindChecker("elle"), nullptr);
}

TEST(PluginRegistryTest, UnknownCheckerIsNotFoundAndListsTheKnownOnes) {
  auto c = CreateChecker("elle", {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("chronos, adya, plume, polygraph"));
}

TEST(PluginRegistryTest, UnknownOptionNamesItAndTheKnownOnes) {
  auto c = CreateChecker("adya", {{"max_steps", "10"}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("adya.max_steps"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("levels, max_search_steps"));
  auto bad = CreateChecker("adya", {{"max_search_steps", "many"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("adya.max_search_steps"));
  EXPECT_NE(Create("adya", {{"max_search_steps", "1000"}}), nullptr);
}

TEST(PluginRegistryTest, IntegerOptionsAreCheckedAgainstTheirRange) {
  const std::vector<std::tuple<std::string, std::string, std::string, std::string>> bad = {
      {"adya", "max_search_steps", "0", "adya.max_search_steps: '0' is not a positive integer"},
      {"adya", "max_search_steps", "-1", "is not a positive integer"},
      {"adya", "max_search_steps", "18446744073709551616", "is not a positive integer"},
      {"plume", "max_explained_cycles", "4294967296",
       "plume.max_explained_cycles: '4294967296' is not an integer from 0 to 4294967295"},
      {"chronos", "threads", "65", "chronos.threads: '65' is not an integer from 0 to 64"},
      {"chronos", "threads", "2 ", "is not an integer from 0 to 64"},
      {"chronos", "threads", "", "is not an integer from 0 to 64"},
  };
  for (const auto& [checker, option, text, message] : bad) {
    auto c = CreateChecker(checker, {{option, text}});
    ASSERT_FALSE(c.ok()) << checker << "." << option << "=" << text;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(message));
  }
  EXPECT_NE(Create("plume", {{"max_explained_cycles", "0"}}), nullptr);
  EXPECT_NE(Create("chronos", {{"threads", "0"}}), nullptr);
  EXPECT_NE(Create("chronos", {{"threads", "64"}}), nullptr);
}

TEST(PluginRegistryTest, LevelsMustBeOnesThePluginJudges) {
  auto rc = CreateChecker("chronos", {{"levels", "rc"}});
  ASSERT_FALSE(rc.ok());
  EXPECT_EQ(rc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(rc.status().message()), HasSubstr("chronos.levels"));
  EXPECT_FALSE(CreateChecker("adya", {{"levels", "si,linearizable"}}).ok());
  EXPECT_FALSE(CreateChecker("adya", {{"levels", ""}}).ok());
}

TEST(PluginRegistryTest, LevelsRestrictInCanonicalOrder) {
  std::unique_ptr<Checker> adya = Create("adya", {{"levels", "ser, si,ser"}});
  ASSERT_NE(adya, nullptr);
  EXPECT_EQ(adya->name(), "adya");
  EXPECT_THAT(adya->levels(),
              ElementsAre(IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable));
  std::unique_ptr<Checker> chronos = Create("chronos");
  ASSERT_NE(chronos, nullptr);
  EXPECT_THAT(chronos->levels(),
              ElementsAre(IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable));
}

// Names of the plug-ins that judge `level` on `shape`, in the order they are picked.
std::vector<std::string> Fit(IsolationLevel level, const HistoryShape& shape) {
  std::vector<std::string> out;
  for (const CheckerInfo* info : CheckersFor(level, shape)) out.push_back(info->name);
  return out;
}

TEST(PluginRegistryTest, PicksByLevelAndShape) {
  const HistoryShape kv_timed{.commit_timestamps = true, .registers = true};
  const HistoryShape kv_untimed{.commit_timestamps = false, .registers = true};
  const HistoryShape lists_untimed{.commit_timestamps = false, .lists = true};
  EXPECT_THAT(Fit(IsolationLevel::kSnapshotIsolation, kv_timed),
              ElementsAre("chronos", "adya", "polygraph"));
  // On registers without timestamps, the polygraph decides every history and adya may not.
  EXPECT_THAT(Fit(IsolationLevel::kSnapshotIsolation, kv_untimed),
              ElementsAre("polygraph", "adya"));
  EXPECT_THAT(Fit(IsolationLevel::kSerializable, lists_untimed), ElementsAre("adya", "polygraph"));
  EXPECT_THAT(Fit(IsolationLevel::kReadCommitted, lists_untimed), ElementsAre("adya", "plume"));
  // On registers without timestamps, plume decides every history and adya may not.
  EXPECT_THAT(Fit(IsolationLevel::kReadCommitted, kv_untimed), ElementsAre("plume", "adya"));
  EXPECT_THAT(Fit(IsolationLevel::kReadCommitted, kv_timed), ElementsAre("adya", "plume"));
  EXPECT_THAT(Fit(IsolationLevel::kRepeatableRead, kv_untimed), ElementsAre("adya"));
  EXPECT_THAT(Fit(IsolationLevel::kReadAtomic, kv_timed), ElementsAre("plume"));
  EXPECT_THAT(Fit(IsolationLevel::kCausal, lists_untimed), ElementsAre("plume"));
  // A checker of registers only does not judge a history with lists.
  CheckerInfo registers_only{.name = "r", .levels = {IsolationLevel::kSerializable}};
  registers_only.requirements = {.commit_timestamps = false, .lists = false};
  EXPECT_TRUE(Judges(registers_only, IsolationLevel::kSerializable, kv_untimed));
  EXPECT_FALSE(Judges(registers_only, IsolationLevel::kSerializable, lists_untimed));
  EXPECT_FALSE(Judges(registers_only, IsolationLevel::kSnapshotIsolation, kv_untimed));
}

TEST(PluginRegistryTest, ShapeOfAHistory) {
  testing::TestHistory kv;
  kv.Txn("1", "s", 1, 2).W(1, 1).Txn("2", "s", 3, 4).R(1, 1);
  const HistoryShape a = HistoryShape::Of(kv.Build());
  EXPECT_TRUE(a.commit_timestamps && a.registers && !a.lists);
  EXPECT_EQ(a.Describe(), "registers with commit timestamps");
  testing::TestHistory lists;
  lists.Untimed("1", "s").A(1, 1).Untimed("2", "s").L(1, {1});
  const HistoryShape b = HistoryShape::Of(lists.Build());
  EXPECT_TRUE(!b.commit_timestamps && !b.registers && b.lists);
  EXPECT_EQ(b.Describe(), "lists without commit timestamps");
}

TEST(PluginRegistryTest, ParsesCheckerLists) {
  auto both = ParseCheckerList("adya,chronos");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_THAT(*both, ElementsAre("adya", "chronos"));
  EXPECT_EQ(ParseCheckerList("adya,elle").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseCheckerList("adya,adya").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseCheckerList("").ok());
  EXPECT_FALSE(ParseCheckerList("adya,").ok());
}

class AdyaPluginTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AdyaPluginTest, FindsWhatCheckAdyaFinds) {
  auto h = formats::ReadNativeFile((Histories() / "adya" / (GetParam() + ".jsonl")).string(), {});
  ASSERT_TRUE(h.ok()) << h.status();
  std::unique_ptr<Checker> plugin = Create("adya");
  ASSERT_NE(plugin, nullptr);
  CheckerResult r = plugin->Check(*h, nullptr, CheckLimits());
  adya::AdyaResult direct = adya::CheckAdya(*h);
  EXPECT_TRUE(r.complete);
  EXPECT_THAT(WithLevels(*h, r.violations), ElementsAreArray(WithLevels(*h, direct.violations)));
  EXPECT_FALSE(r.violations.empty());
  for (const Violation& v : r.violations) EXPECT_EQ(v.checker, "adya");
  EXPECT_EQ(r.transactions_checked + r.transactions_skipped, h->size());
  EXPECT_GT(r.transactions_checked, 0u);
  EXPECT_THAT(r.stats, ::testing::Contains(std::pair<std::string, uint64_t>{
                           "sccs", static_cast<uint64_t>(direct.stats.sccs)}));
}

INSTANTIATE_TEST_SUITE_P(Histories, AdyaPluginTest,
                         ::testing::Values("c_lost_update", "c_write_skew", "c_g1c",
                                           "g_sib_stale_read", "list_lost_update"));

class ChronosPluginTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChronosPluginTest, FindsWhatRunChronosFindsAtEachLevel) {
  auto h =
      formats::ReadTimeKillerFile((Histories() / "chronos" / (GetParam() + ".json")).string(), {});
  ASSERT_TRUE(h.ok()) << h.status();
  std::unique_ptr<Checker> plugin = Create("chronos");
  ASSERT_NE(plugin, nullptr);
  CheckerResult r = plugin->Check(*h, nullptr, CheckLimits());
  std::vector<Violation> direct =
      RunChronos(*h, {.level = IsolationLevel::kSnapshotIsolation}).violations;
  for (Violation& v : RunChronos(*h, {.level = IsolationLevel::kSerializable}).violations) {
    direct.push_back(std::move(v));
  }
  EXPECT_TRUE(r.complete);
  EXPECT_THAT(WithLevels(*h, r.violations), ElementsAreArray(WithLevels(*h, direct)));
  EXPECT_FALSE(r.violations.empty());
  for (const Violation& v : r.violations) EXPECT_EQ(v.checker, "chronos");
  EXPECT_EQ(r.transactions_checked + r.transactions_skipped, h->size());

  std::unique_ptr<Checker> ser = Create("chronos", {{"levels", "ser"}});
  ASSERT_NE(ser, nullptr);
  for (const Violation& v : ser->Check(*h, nullptr, CheckLimits()).violations) {
    EXPECT_EQ(v.level, IsolationLevel::kSerializable);
  }
}

INSTANTIATE_TEST_SUITE_P(Histories, ChronosPluginTest,
                         ::testing::Values("lost_update", "write_skew", "stale_and_future_reads",
                                           "session_order"));

TEST(LimitPollerTest, PollsEveryNthCallAndStaysExpired) {
  std::atomic<bool> cancel{false};
  CheckLimits limits(CheckLimits::Clock::time_point::max(), &cancel);
  LimitPoller poll(&limits, 4);
  EXPECT_FALSE(poll.Expired());
  cancel = true;
  EXPECT_FALSE(poll.Expired());  // calls 2 and 3 do not look
  EXPECT_FALSE(poll.Expired());
  EXPECT_TRUE(poll.Expired());  // call 4 does
  cancel = false;
  EXPECT_TRUE(poll.Expired());
  LimitPoller none(nullptr);
  EXPECT_FALSE(none.ExpiredNow());
}

// A large simulated history with lost updates, so that a complete check has violations.
const history::History& LargeHistory() {
  static const auto* const kHistory = [] {
    sim::WorkloadOptions o;
    o.txns = 20000;
    o.keys = 200;
    o.faults.push_back({.fault = sim::Fault::kLostUpdate, .rate = 0.05});
    auto r = sim::Simulate(o);
    if (!r.ok()) std::abort();
    return new history::History(std::move(r->history));
  }();
  return *kHistory;
}

TEST(PluginTimeLimitTest, PassedDeadlineGivesIncompleteAndNoViolations) {
  const history::History& h = LargeHistory();
  const CheckLimits passed(CheckLimits::Clock::now() - std::chrono::seconds(1));
  for (const CheckerInfo& info : RegisteredCheckers()) {
    std::unique_ptr<Checker> c = Create(info.name);
    ASSERT_NE(c, nullptr);
    const auto start = std::chrono::steady_clock::now();
    CheckerResult r = c->Check(h, nullptr, passed);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << info.name;
    EXPECT_FALSE(r.complete) << info.name;
    EXPECT_TRUE(r.violations.empty()) << info.name;
  }
  for (uint32_t threads : {1u, 2u}) {
    ChronosResult chronos = RunChronos(
        h, {.level = IsolationLevel::kSnapshotIsolation, .limits = &passed, .threads = threads});
    EXPECT_FALSE(chronos.complete);
    EXPECT_TRUE(chronos.violations.empty());
  }
  adya::AdyaResult adya = adya::CheckAdya(h, {.limits = &passed});
  EXPECT_FALSE(adya.complete);
  EXPECT_TRUE(adya.violations.empty());
}

TEST(PluginTimeLimitTest, CancelStopsAndNoLimitCompletes) {
  const history::History& h = LargeHistory();
  std::atomic<bool> cancel{true};
  const CheckLimits cancelled(CheckLimits::Clock::time_point::max(), &cancel);
  EXPECT_FALSE(Create("adya")->Check(h, nullptr, cancelled).complete);
  const CheckLimits generous(CheckLimits::Clock::now() + std::chrono::hours(1));
  CheckerResult r = Create("chronos")->Check(h, nullptr, generous);
  EXPECT_TRUE(r.complete);
  EXPECT_FALSE(r.violations.empty());
  // On two threads too, with the same findings.
  ChronosResult one = RunChronos(
      h, {.level = IsolationLevel::kSnapshotIsolation, .limits = &generous, .threads = 1});
  ChronosResult two = RunChronos(
      h, {.level = IsolationLevel::kSnapshotIsolation, .limits = &generous, .threads = 2});
  EXPECT_TRUE(two.complete);
  EXPECT_EQ(two.violations.size(), one.violations.size());
  EXPECT_FALSE(two.violations.empty());
}

TEST(KeepInScopeTest, DropsFindingsOfLeadInTransactionsOnly) {
  CheckerResult r;
  r.violations.resize(4);
  r.violations[0].txns = {TxnId(0), TxnId(1)};  // lead-in only
  r.violations[1].txns = {TxnId(1), TxnId(2)};  // reaches the window's own
  r.violations[2].txns = {TxnId(3)};
  r.violations[3].txns = {};
  CheckerResult unscoped = r;
  KeepInScope(nullptr, &unscoped);
  EXPECT_EQ(unscoped.violations.size(), 4u);
  const WindowScope scope{.index = 1, .first_proper = 2, .base = {10, 0}};
  KeepInScope(&scope, &r);
  ASSERT_EQ(r.violations.size(), 3u);
  EXPECT_THAT(r.violations[0].txns, ElementsAre(TxnId(1), TxnId(2)));
  EXPECT_EQ(r.findings_out_of_scope, 1u);
}

// Two writers of key 1, then a reader with a range read over keys 1 and 2. With `lost_update`
// the writers overlap and both read the key absent (a lost update); without, the second reads
// the first's write after it commits (valid).
history::History WithRangeRead(bool lost_update) {
  history::HistoryBuilder b;
  const KeyId k1 = b.IntKey(1);
  const KeyId k2 = b.IntKey(2);
  auto begin = [&b](std::string_view id, int64_t start, int64_t commit) {
    EXPECT_TRUE(b.BeginTxn({.id = id,
                            .session = id,
                            .start = history::Timestamp{start, 0},
                            .commit = history::Timestamp{commit, 0}})
                    .ok());
  };
  begin("a", 1, 3);
  b.Read(k1, history::Value::Absent());
  b.Write(k1, history::Value::Int(1));
  b.EndTxn();
  begin("b", lost_update ? 2 : 4, 5);
  b.Read(k1, lost_update ? history::Value::Absent() : history::Value::Int(1));
  b.Write(k1, history::Value::Int(2));
  b.EndTxn();
  begin("r", 6, 7);
  const history::KeyValue live[] = {{k1, history::Value::Int(2)}};
  b.RangeRead(history::KeyBound::At(k1), history::KeyBound::At(k2), live, {});
  b.EndTxn();
  absl::StatusOr<history::History> h = std::move(b).Finish();
  EXPECT_TRUE(h.ok()) << h.status();
  return *std::move(h);
}

// Range reads are evidence neither adya nor chronos weighs: what they find stands, but the
// result is never VALID, and says why.
TEST(RangeReadsTest, LeaveChronosAndAdyaUndecided) {
  const CheckLimits generous(CheckLimits::Clock::now() + std::chrono::hours(1));
  for (std::string_view name : {"chronos", "adya"}) {
    SCOPED_TRACE(name);
    for (bool lost_update : {false, true}) {
      const history::History h = WithRangeRead(lost_update);
      CheckerResult r = Create(name, {{"levels", "si"}})->Check(h, nullptr, generous);
      EXPECT_FALSE(r.complete);
      EXPECT_THAT(r.undecided, HasSubstr("1 range read is not judged"));
      EXPECT_EQ(r.violations.empty(), !lost_update);
      EXPECT_THAT(r.stats,
                  ::testing::Contains(std::pair<std::string, uint64_t>("range_reads_unjudged", 1)));
    }
  }
}

// A window whose base is 10 and whose own transactions start at index 2. Its initial state (2
// for every key) is the state at the base.
//   L1 (lead-in) starts after the base and overwrites key 1 with 3 at 12.
//   L2 (lead-in) reads 9 from key 5, which nobody wrote: a finding of lead-in only.
//   P1 (own, long) started at 4, before the base, and read 1 from key 1: what it saw at 4 is
//      not in the window, so its stale-looking read cannot be judged at SI.
//   P2 (own) starts at 13, after L1's commit, and reads the initial 2 from key 1: stale.
//   P3 (own) overlaps L1 and writes key 1 too: a lost update.
//   P4 (own, long) started at 5 and writes key 1 after L1: the later committer of a conflict
//      whose snapshot the window does not hold.
history::History WindowHistory() {
  testing::TestHistory t;
  t.DefaultInitial(2);
  t.Txn("L1", "a", 11, 12).W(1, 3);
  t.Txn("L2", "b", 11, 13).R(5, 9);
  t.Txn("P1", "c", 4, 14).R(1, 1);
  t.Txn("P2", "d", 13, 15).R(1, 2);
  t.Txn("P3", "e", 11, 16).W(1, 4);
  t.Txn("P4", "f", 5, 17).W(1, 5);
  return t.Build();
}

TEST(ChronosWindowRuleTest, TrustsSnapshotsTakenAtOrAfterTheBase) {
  history::History h = WindowHistory();
  const WindowScope scope{.index = 1, .first_proper = 2, .base = {10, 0}};
  std::unique_ptr<Checker> si = Create("chronos", {{"levels", "si"}});
  ASSERT_NE(si, nullptr);
  CheckerResult whole = si->Check(h, nullptr, CheckLimits());
  EXPECT_THAT(testing::SummarizeAll(h, whole.violations),
              ::testing::IsSupersetOf({"EXT/never L2 k=5", "EXT/never P1 k=1", "EXT/before P2 k=1",
                                       "NOCONFLICT L1,P3 k=1", "NOCONFLICT L1,P4 k=1"}));
  CheckerResult windowed = si->Check(h, &scope, CheckLimits());
  std::vector<std::string> kept = testing::SummarizeAll(h, windowed.violations);
  EXPECT_THAT(kept, ::testing::Contains("EXT/before P2 k=1"));
  EXPECT_THAT(kept, ::testing::Contains("NOCONFLICT L1,P3 k=1"));
  EXPECT_THAT(kept, ::testing::Not(::testing::Contains("EXT/never P1 k=1")));
  EXPECT_THAT(kept, ::testing::Not(::testing::Contains("EXT/never L2 k=5")));
  EXPECT_THAT(kept, ::testing::Not(::testing::Contains("NOCONFLICT L1,P4 k=1")));
  EXPECT_EQ(windowed.violations.size() + windowed.findings_out_of_scope, whole.violations.size());
  EXPECT_EQ(windowed.transactions_checked, 4u);
  EXPECT_EQ(windowed.transactions_skipped, 2u);

  // At SER a read is judged at its commit, never before the base: P1's read is kept.
  std::unique_ptr<Checker> ser = Create("chronos", {{"levels", "ser"}});
  ASSERT_NE(ser, nullptr);
  EXPECT_THAT(testing::SummarizeAll(h, ser->Check(h, &scope, CheckLimits()).violations),
              ::testing::Contains(::testing::StartsWith("EXT/never P1")));
}

TEST(AdyaWindowRuleTest, KeepsEveryFindingThatReachesTheWindow) {
  // T1 (lead-in) and T2 (lead-in) lose an update; T3 (own) and T4 (own) lose another.
  testing::TestHistory t;
  t.Txn("T1", "a", 1, 3).R(1, std::nullopt).W(1, 1);
  t.Txn("T2", "b", 2, 4).R(1, std::nullopt).W(1, 2);
  t.Txn("T3", "a", 5, 7).R(2, std::nullopt).W(2, 1);
  t.Txn("T4", "b", 6, 8).R(2, std::nullopt).W(2, 2);
  history::History h = t.Build();
  const WindowScope scope{.index = 1, .first_proper = 2, .base = {5, 0}};
  std::unique_ptr<Checker> adya = Create("adya");
  ASSERT_NE(adya, nullptr);
  CheckerResult whole = adya->Check(h, nullptr, CheckLimits());
  CheckerResult windowed = adya->Check(h, &scope, CheckLimits());
  EXPECT_GT(windowed.findings_out_of_scope, 0u);
  EXPECT_EQ(windowed.violations.size() + windowed.findings_out_of_scope, whole.violations.size());
  for (const Violation& v : windowed.violations) {
    EXPECT_THAT(testing::Summarize(h, v), HasSubstr("T3"));
  }
  EXPECT_FALSE(windowed.violations.empty());
}

// Judged and counted: the committed transactions and those of unknown outcome a read saw (and so
// judged committed), as plume counts them; not the lead-in of a window.
TEST(PolygraphPluginTest, CountsUnknownOutcomesJudgedCommitted) {
  testing::TestHistory t;
  t.DefaultInitial(0);
  t.Untimed("L", "a").W(2, 1);
  t.Untimed("U1", "b", history::TxnStatus::kUnknown).W(1, 1);
  t.Untimed("U2", "c", history::TxnStatus::kUnknown).W(1, 2);
  t.Untimed("R", "d").R(1, 1);
  history::History h = t.Build();
  std::unique_ptr<Checker> polygraph = Create("polygraph");
  ASSERT_NE(polygraph, nullptr);
  CheckerResult whole = polygraph->Check(h, nullptr, CheckLimits());
  EXPECT_TRUE(whole.complete) << whole.undecided;
  EXPECT_TRUE(whole.violations.empty());
  EXPECT_EQ(whole.transactions_checked, 3u);  // L, U1 (read by R) and R; not U2
  EXPECT_EQ(whole.transactions_skipped, 1u);
  const WindowScope scope{.index = 1, .first_proper = 1, .base = {0, 0}};
  CheckerResult windowed = polygraph->Check(h, &scope, CheckLimits());
  EXPECT_EQ(windowed.transactions_checked, 2u);  // U1 and R
  EXPECT_EQ(windowed.transactions_checked + windowed.transactions_skipped, h.size());
}

// polygraph.clock_drift is a duration, taken in the history's time unit and rounded down to it:
// a stale snapshot 10 ms late is a violation of strong SI up to a drift of 9.999 ms.
TEST(PolygraphPluginTest, ClockDriftIsADurationInTheHistorysUnit) {
  auto stale = [](std::string unit) {
    testing::TestHistory t;
    t.DefaultInitial(0).TimeUnit(std::move(unit));
    t.Untimed("T1", "s1").RealTime(0, 10).W(0, 1);
    t.Untimed("T2", "s2").RealTime(20, 25).R(0, 0);
    return t.Build();
  };
  const history::History ms = stale("ms");
  for (const auto& [drift, caught] : std::vector<std::pair<std::string, bool>>{
           {"0", true}, {"9ms", true}, {"9999us", true}, {"10ms", false}, {"10500us", false}}) {
    std::unique_ptr<Checker> c =
        Create("polygraph", {{"levels", "si"}, {"si_variant", "strong"}, {"clock_drift", drift}});
    ASSERT_NE(c, nullptr);
    const CheckerResult r = c->Check(ms, nullptr, CheckLimits());
    ASSERT_TRUE(r.complete) << r.undecided;
    EXPECT_EQ(!r.violations.empty(), caught) << "clock_drift " << drift;
  }
  // In nanoseconds the same drift is a million times as many ticks: 10 ns late is forgiven.
  std::unique_ptr<Checker> c =
      Create("polygraph", {{"levels", "si"}, {"si_variant", "strong"}, {"clock_drift", "1us"}});
  ASSERT_NE(c, nullptr);
  CheckerResult r = c->Check(stale("ns"), nullptr, CheckLimits());
  EXPECT_TRUE(r.complete && r.violations.empty()) << r.undecided;
  // A unit it does not know leaves a non-zero drift undecided, never judged in the wrong unit.
  r = c->Check(stale("ticks"), nullptr, CheckLimits());
  EXPECT_FALSE(r.complete);
  EXPECT_THAT(r.undecided, HasSubstr("real-time unit 'ticks'"));
  EXPECT_TRUE(r.violations.empty());
  // Adya SI has no real-time order to loosen.
  c = Create("polygraph", {{"levels", "si"}, {"clock_drift", "1us"}});
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->Check(stale("ticks"), nullptr, CheckLimits()).complete);
  for (const char* bad : {"-1ms", "soon", "inf"}) {
    auto made = CreateChecker("polygraph", {{"clock_drift", bad}});
    ASSERT_FALSE(made.ok()) << bad;
    EXPECT_THAT(std::string(made.status().message()), HasSubstr("polygraph.clock_drift"));
  }
}

}  // namespace
}  // namespace isowatch::checkers
