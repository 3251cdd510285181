// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/history_builder.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace isowatch::history {
namespace {

TEST(HistoryBuilderTest, BuildsSessionsInSequenceOrder) {
  HistoryBuilder b;
  KeyId x = b.IntKey(1);
  ASSERT_TRUE(b.BeginTxn({.id = "b", .session = "s", .seq = 2, .commit = Timestamp{5, 0}}).ok());
  b.Read(x, Value::Int(1));
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "a", .session = "s", .seq = 1, .commit = Timestamp{3, 0}}).ok());
  b.Write(x, Value::Int(1));
  b.EndTxn();
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->size(), 2u);
  EXPECT_EQ(h->txn(TxnId(0)).seq, 1u);
  EXPECT_EQ(h->txn(TxnId(1)).seq, 0u);
  EXPECT_EQ(h->txn(TxnId(0)).session_prev, TxnId(1));
  EXPECT_FALSE(h->txn(TxnId(1)).session_prev.valid());
  EXPECT_EQ(h->FindTxn("a"), TxnId(1));
  EXPECT_EQ(h->data_model(), DataModel::kKeyValue);
}

// Session order against sorting: random sessions whose transactions give no sequence numbers,
// increasing ones, shuffled ones, a repeated one, or numbers for some only. Finish numbers each
// session as sorting it by sequence number (else by transaction order) does, or refuses it.
TEST(HistoryBuilderTest, SessionOrderMatchesSortingBySequenceNumber) {
  enum Mode { kNone, kIncreasing, kShuffled, kRepeated, kSome, kModes };
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int n_sessions = 1 + static_cast<int>(rng() % 3);
    const int n_txns = static_cast<int>(rng() % 10);
    std::vector<int> session(n_txns);
    std::vector<std::vector<int>> members(n_sessions);
    for (int i = 0; i < n_txns; ++i) {
      session[i] = static_cast<int>(rng() % n_sessions);
      members[session[i]].push_back(i);
    }
    std::vector<std::optional<int64_t>> seq(n_txns);
    std::vector<Mode> mode(n_sessions);
    for (int s = 0; s < n_sessions; ++s) {
      const std::vector<int>& m = members[s];
      mode[s] = static_cast<Mode>(rng() % kModes);
      std::vector<int64_t> numbers;
      for (size_t j = 0; j < m.size(); ++j) numbers.push_back(10 * static_cast<int64_t>(j) + 5);
      if (mode[s] == kShuffled || mode[s] == kRepeated)
        std::shuffle(numbers.begin(), numbers.end(), rng);
      if (mode[s] == kRepeated && m.size() >= 2) numbers[rng() % m.size()] = numbers[0];
      for (size_t j = 0; j < m.size(); ++j) {
        if (mode[s] == kNone || (mode[s] == kSome && j % 2 == 1)) continue;
        seq[m[j]] = numbers[j];
      }
    }
    HistoryBuilder b;
    for (int i = 0; i < n_txns; ++i) {
      const std::string id = std::to_string(i);
      const std::string name = "s" + std::to_string(session[i]);
      ASSERT_TRUE(b.BeginTxn({.id = id, .session = name, .seq = seq[i]}).ok());
      b.EndTxn();
    }
    // What sorting gives: the sessions in order of first appearance, as the builder names them.
    std::vector<int> first_seen;
    for (int i = 0; i < n_txns; ++i) {
      if (std::find(first_seen.begin(), first_seen.end(), session[i]) == first_seen.end()) {
        first_seen.push_back(session[i]);
      }
    }
    std::string error;
    std::vector<uint32_t> want_seq(n_txns);
    std::vector<int> want_prev(n_txns, -1);
    for (int s : first_seen) {
      std::vector<int> m = members[s];
      const auto given =
          std::count_if(m.begin(), m.end(), [&](int i) { return seq[i].has_value(); });
      if (given != 0 && given != static_cast<ptrdiff_t>(m.size())) {
        error = "for some transactions but not all";
        break;
      }
      if (given != 0) {
        std::stable_sort(m.begin(), m.end(), [&](int a, int c) { return *seq[a] < *seq[c]; });
        if (std::adjacent_find(m.begin(), m.end(),
                               [&](int a, int c) { return *seq[a] == *seq[c]; }) != m.end()) {
          error = "repeats sequence number";
          break;
        }
      }
      for (size_t j = 0; j < m.size(); ++j) {
        want_seq[m[j]] = static_cast<uint32_t>(j);
        if (j > 0) want_prev[m[j]] = m[j - 1];
      }
    }
    auto h = std::move(b).Finish();
    if (!error.empty()) {
      ASSERT_FALSE(h.ok()) << "trial " << trial;
      EXPECT_THAT(h.status().message(), testing::HasSubstr(error)) << "trial " << trial;
      continue;
    }
    ASSERT_TRUE(h.ok()) << "trial " << trial << ": " << h.status();
    for (int i = 0; i < n_txns; ++i) {
      const Transaction& t = h->txn(TxnId(static_cast<uint64_t>(i)));
      EXPECT_EQ(t.seq, want_seq[i]) << "trial " << trial << " txn " << i;
      const TxnId prev =
          want_prev[i] < 0 ? TxnId::Invalid() : TxnId(static_cast<uint64_t>(want_prev[i]));
      EXPECT_EQ(t.session_prev, prev) << "trial " << trial << " txn " << i;
    }
  }
}

TEST(HistoryBuilderTest, RejectsDuplicateIdsAndStartAfterCommit) {
  HistoryBuilder b;
  ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  b.EndTxn();
  EXPECT_FALSE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  EXPECT_FALSE(
      b.BeginTxn({.id = "2", .session = "s", .start = Timestamp{9, 0}, .commit = Timestamp{8, 5}})
          .ok());
  EXPECT_TRUE(
      b.BeginTxn({.id = "3", .session = "s", .start = Timestamp{8, 5}, .commit = Timestamp{8, 5}})
          .ok());
}

// Ids the reader says are new are not looked up, yet found as any other, and an id given later
// without that word is checked against them.
TEST(HistoryBuilderTest, NewIdsAreFoundAndCheckedAgainst) {
  HistoryBuilder b;
  ASSERT_TRUE(b.BeginTxn({.id = "1:0", .id_new = true, .session = "1"}).ok());
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "1:1", .id_new = true, .session = "1"}).ok());
  b.EndTxn();
  EXPECT_FALSE(b.BeginTxn({.id = "1:0", .session = "1"}).ok());
  ASSERT_TRUE(b.BeginTxn({.id = "2:0", .session = "2"}).ok());
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "7", .id_new = true, .session = "2"}).ok());
  b.EndTxn();
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->FindTxn("1:0"), TxnId(0));
  EXPECT_EQ(h->FindTxn("1:1"), TxnId(1));
  EXPECT_EQ(h->FindTxn("2:0"), TxnId(2));
  EXPECT_EQ(h->FindTxn("7"), TxnId(3));
  EXPECT_EQ(h->txn_name(TxnId(3)), "7");
  EXPECT_FALSE(h->FindTxn("1:2").valid());
}

TEST(HistoryBuilderTest, RealTimeIntervalsAndWhatTheHistoryHas) {
  HistoryBuilder b;
  EXPECT_FALSE(
      b.BeginTxn({.id = "0", .session = "s", .real_time = {{.invoke = 9, .complete = 8}}}).ok());
  ASSERT_TRUE(
      b.BeginTxn({.id = "1", .session = "s", .real_time = {{.invoke = 3, .complete = 8}}}).ok());
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "2", .session = "s", .real_time = {{.invoke = 4}}}).ok());
  b.EndTxn();
  // An abandoned transaction leaves no count behind.
  ASSERT_TRUE(b.BeginTxn({.id = "3", .session = "s", .commit = Timestamp{1, 0}}).ok());
  b.AbandonTxn();
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->has_real_time());
  EXPECT_FALSE(h->has_commit_timestamps());
  EXPECT_FALSE(h->has_start_timestamps());
  const Transaction& t1 = h->txn(TxnId(0));
  EXPECT_TRUE(t1.has_real_time);
  EXPECT_EQ(t1.invoke_time, 3);
  EXPECT_EQ(t1.complete_time, 8);
  EXPECT_EQ(h->txn(TxnId(1)).complete_time, Transaction::kNeverCompleted);
}

TEST(HistoryBuilderTest, NotesCountByKindAndKeepTheFirstExample) {
  HistoryBuilder b;
  b.set_format("edn", "list-append");
  b.set_time_unit("ns");
  b.Note("nemesis operations skipped", "line 4");
  b.Note("ops without :index", "line 7");
  b.Note("nemesis operations skipped", "line 9");
  EXPECT_EQ(b.NoteCount("nemesis operations skipped"), 2u);
  EXPECT_EQ(b.NoteCount("something else"), 0u);
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->info().format, "edn");
  EXPECT_EQ(h->info().dialect, "list-append");
  EXPECT_EQ(h->info().time_unit, "ns");
  ASSERT_EQ(h->info().notes.size(), 2u);
  EXPECT_EQ(h->info().notes[0].kind, "nemesis operations skipped");
  EXPECT_EQ(h->info().notes[0].count, 2u);
  EXPECT_EQ(h->info().notes[0].example, "line 4");
  EXPECT_EQ(h->info().notes[1].count, 1u);
}

TEST(HistoryBuilderTest, AbsentReadOfListKeyBecomesEmptyList) {
  HistoryBuilder b;
  KeyId l = b.IntKey(7);
  ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  b.Read(l, Value::Absent());
  b.Append(l, Value::Int(3));
  b.EndTxn();
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->data_model(), DataModel::kList);
  auto ops = h->ops(TxnId(0));
  EXPECT_EQ(ops[0].kind(), OpKind::kListRead);
  EXPECT_EQ(h->list_elements(ops[0]).size(), 0u);
}

TEST(HistoryBuilderTest, RejectsKeyUsedAsRegisterAndList) {
  HistoryBuilder b;
  KeyId k = b.IntKey(7);
  ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  b.Write(k, Value::Int(1));
  b.Append(k, Value::Int(3));
  b.EndTxn();
  EXPECT_FALSE(std::move(b).Finish().ok());
}

// Live mode refuses the same, whether the two uses are in two transactions or in one, and a
// refused transaction marks no key.
TEST(HistoryBuilderTest, LiveRefusesKeyUsedAsRegisterAndList) {
  HistoryBuilder b;
  b.StartLive(DataModel::kMixed);
  const KeyId k = b.IntKey(7);
  const KeyId other = b.IntKey(8);
  ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  b.Write(other, Value::Int(1));
  b.Write(k, Value::Int(1));
  b.Append(k, Value::Int(3));
  absl::StatusOr<TxnId> id = b.EndLiveTxn();
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(std::string(id.status().message()),
              ::testing::HasSubstr("both as a register and as a list"));
  // An absent read after an append reads the list, in the same transaction too.
  ASSERT_TRUE(b.BeginTxn({.id = "2", .session = "s"}).ok());
  b.Append(other, Value::Int(3));
  b.Append(k, Value::Int(3));
  b.Read(k, Value::Absent());
  ASSERT_TRUE(b.EndLiveTxn().ok());
  EXPECT_EQ(b.live_history().ops(TxnId(0))[2].kind(), OpKind::kListRead);
  ASSERT_TRUE(b.BeginTxn({.id = "3", .session = "s"}).ok());
  b.Write(k, Value::Int(1));
  EXPECT_FALSE(b.EndLiveTxn().ok());
  EXPECT_EQ(b.txn_count(), 1u);
}

// Integer keys intern to one id each, whatever their range: small non-negative ones go through
// the builder's dense cache, the others (negative, large) through the history's table only, and
// both agree with History::FindIntKey.
TEST(HistoryBuilderTest, IntKeysInternOnceWhateverTheirRange) {
  HistoryBuilder b;
  const std::vector<int64_t> keys = {0,
                                     1,
                                     7,
                                     1023,
                                     (int64_t{1} << 20) - 1,
                                     int64_t{1} << 20,
                                     -1,
                                     -7,
                                     std::numeric_limits<int64_t>::min(),
                                     std::numeric_limits<int64_t>::max()};
  std::vector<KeyId> ids;
  ids.reserve(keys.size());
  for (const int64_t k : keys) ids.push_back(b.IntKey(k));
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(b.IntKey(keys[i]), ids[i]) << keys[i];
    for (size_t j = 0; j < i; ++j) EXPECT_NE(ids[i], ids[j]) << keys[i] << " " << keys[j];
  }
  ASSERT_TRUE(b.BeginTxn({.id = "t", .session = "s"}).ok());
  for (const KeyId id : ids) b.Write(id, Value::Int(1));
  b.EndTxn();
  absl::StatusOr<History> h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->key_count(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(h->FindIntKey(keys[i]), ids[i]) << keys[i];
}

TEST(HistoryBuilderTest, BytesInterningIsExact) {
  HistoryBuilder b;
  Value v1 = b.BytesValue("abc");
  Value v2 = b.BytesValue(std::string("ab") + "c");
  Value v3 = b.BytesValue("abd");
  EXPECT_EQ(v1, v2);
  EXPECT_NE(v1, v3);
  EXPECT_EQ(b.BytesKey("k"), b.BytesKey("k"));
  EXPECT_NE(b.BytesKey("k"), b.IntKey(0));
}

TEST(HistoryBuilderTest, XidsAndSnapshots) {
  HistoryBuilder b;
  const std::vector<uint64_t> xip = {104, 102, 104};
  ASSERT_TRUE(b.BeginTxn({.id = "w", .session = "s", .commit = Timestamp{10, 0}, .xid = 102}).ok());
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "r",
                          .session = "s",
                          .commit = Timestamp{20, 0},
                          .xid = 105,
                          .snapshot = SnapshotView{100, 105, xip}})
                  .ok());
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "p", .session = "s", .start = Timestamp{1, 0}}).ok());
  b.EndTxn();
  // Refused: a start with a snapshot, xmin > xmax, an xip outside [xmin, xmax).
  const absl::Status both = b.BeginTxn(
      {.id = "bad1", .session = "s", .start = Timestamp{1, 0}, .snapshot = SnapshotView{1, 2, {}}});
  EXPECT_THAT(std::string(both.message()), ::testing::HasSubstr("both a start timestamp"));
  EXPECT_FALSE(b.BeginTxn({.id = "bad2", .session = "s", .snapshot = SnapshotView{3, 2, {}}}).ok());
  const std::vector<uint64_t> outside = {2};
  EXPECT_FALSE(
      b.BeginTxn({.id = "bad3", .session = "s", .snapshot = SnapshotView{1, 2, outside}}).ok());
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  const Transaction& w = h->txn(TxnId(0));
  const Transaction& r = h->txn(TxnId(1));
  EXPECT_EQ(h->xid(w), 102u);
  EXPECT_FALSE(h->has_snapshot(w));
  ASSERT_TRUE(h->has_snapshot(r));
  EXPECT_EQ(FormatSnapshot(h->snapshot(r)), "100:105:102,104");  // sorted, distinct
  EXPECT_FALSE(r.has_start);
  EXPECT_EQ(h->xid(h->txn(TxnId(2))), 0u);
  EXPECT_EQ(h->Visible(TxnId(0), TxnId(1)), Visibility::kInvisible);  // 102 is in progress
  EXPECT_EQ(h->Visible(TxnId(1), TxnId(1)), Visibility::kInvisible);  // never itself
  EXPECT_EQ(h->Visible(TxnId(2), TxnId(1)), Visibility::kUnknown);    // no xid
  EXPECT_EQ(h->Visible(TxnId(0), TxnId(2)), Visibility::kInvisible);  // commit 10 > start 1
}

TEST(HistoryBuilderTest, SnapshotText) {
  uint64_t xmin = 0;
  uint64_t xmax = 0;
  std::vector<uint64_t> xip;
  ASSERT_TRUE(ParseSnapshot("10:20:12,15", &xmin, &xmax, &xip).ok());
  EXPECT_EQ(xmin, 10u);
  EXPECT_EQ(xmax, 20u);
  EXPECT_EQ(xip, (std::vector<uint64_t>{12, 15}));
  EXPECT_EQ(FormatSnapshot(SnapshotView{xmin, xmax, xip}), "10:20:12,15");
  ASSERT_TRUE(ParseSnapshot("7:7:", &xmin, &xmax, &xip).ok());
  EXPECT_TRUE(xip.empty());
  for (const char* bad : {"", "1:2", "1:2:3", "2:1:", "a:2:", "1:2:1,", "1:x:", "1:3:1,,2"}) {
    EXPECT_FALSE(ParseSnapshot(bad, &xmin, &xmax, &xip).ok()) << bad;
  }
  xip = {12, 15};
  const SnapshotView s{10, 20, xip};
  EXPECT_TRUE(s.Sees(9));
  EXPECT_TRUE(s.Sees(10));
  EXPECT_FALSE(s.Sees(12));
  EXPECT_TRUE(s.Sees(19));
  EXPECT_FALSE(s.Sees(20));
}

}  // namespace
}  // namespace isowatch::history
