// SPDX-License-Identifier: Apache-2.0
// The window cutter: windows by commit time or by count, their lead-ins, bases and initial states,
// on hand-written histories and on simulated streams that arrive with jitter.
#include "isowatch/windows/window_cutter.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/history/history.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/sim/simulator.h"

#include "tests/testing/test_history.h"
#include "tests/unit/windows/simulated_arrivals.h"

namespace isowatch::windows {
namespace {

using history::History;
using history::HistoryBuilder;
using history::OpKind;
using history::Timestamp;
using history::TxnStatus;
using history::Value;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Source ids of a window's transactions: the lead-in ones, then its own.
std::vector<std::string> LeadIn(const Window& w) {
  std::vector<std::string> out;
  for (uint32_t i = 0; i < w.scope.first_proper; ++i) {
    out.emplace_back(w.history.txn_name(TxnId(i)));
  }
  return out;
}
std::vector<std::string> Own(const Window& w) {
  std::vector<std::string> out;
  for (size_t i = w.scope.first_proper; i < w.history.size(); ++i) {
    out.emplace_back(w.history.txn_name(TxnId(static_cast<uint32_t>(i))));
  }
  return out;
}

// The window's initial value (or list) of integer key `k`, as text; "-" if the window does not
// hold the key.
std::string Initial(const Window& w, int64_t k) {
  const History& h = w.history;
  const KeyId key = h.FindIntKey(k);
  if (!key.valid()) return "-";
  return h.key(key).is_list ? h.ListToString(h.InitialList(key))
                            : h.ValueToString(h.InitialValue(key));
}

// Adds every transaction of `src` whose id is in `ids` (source ids), in that order.
void AddByName(WindowCutter& cutter, const History& src, const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    const TxnId t = src.FindTxn(id);
    ASSERT_TRUE(t.valid()) << id;
    cutter.Add(src, t);
  }
}

// The placement key of each transaction of `src`, when they are added in `order`.
absl::flat_hash_map<uint32_t, Timestamp> PlacementKeys(const History& src,
                                                       const std::vector<TxnId>& order) {
  absl::flat_hash_map<uint32_t, Timestamp> keys;
  std::optional<Timestamp> max_key;
  for (TxnId id : order) {
    const history::Transaction& t = src.txn(id);
    Timestamp key = t.has_commit  ? t.commit
                    : t.has_start ? t.start
                                  : max_key.value_or(Timestamp::Min());
    max_key = max_key ? std::max(*max_key, key) : key;
    keys[id.value()] = key;
  }
  return keys;
}

// Brute force: replays every committed transaction of `src` placed before the window's base, in
// placement order (ties in the order they were added, `order`), and compares the state with the
// window's initial state for every key the window holds.
void ExpectInitialStateIsReplay(const History& src, const std::vector<TxnId>& order,
                                const Window& w) {
  const absl::flat_hash_map<uint32_t, Timestamp> placed = PlacementKeys(src, order);
  std::vector<std::pair<Timestamp, size_t>> replay;
  for (size_t i = 0; i < order.size(); ++i) {
    const Timestamp key = placed.at(order[i].value());
    if (src.txn(order[i]).committed() && key < w.scope.base) replay.emplace_back(key, i);
  }
  std::sort(replay.begin(), replay.end());
  std::map<uint32_t, Value> registers;
  std::map<uint32_t, std::vector<Value>> lists;
  for (const auto& [key, i] : replay) {
    for (const history::Op& op : src.ops(order[i])) {
      if (op.kind() == OpKind::kWrite) {
        registers[op.key().value()] = op.value();
      } else if (op.kind() == OpKind::kAppend) {
        auto [it, inserted] = lists.try_emplace(op.key().value());
        if (inserted) {
          auto initial = src.InitialList(op.key());
          it->second.assign(initial.begin(), initial.end());
        }
        it->second.push_back(op.value());
      }
    }
  }
  const History& h = w.history;
  for (uint32_t k = 0; k < h.key_count(); ++k) {
    const KeyId wk(k);
    const KeyId sk = h.key(wk).is_int
                         ? src.FindIntKey(h.key(wk).payload)
                         : src.FindBytesKey(h.bytes(static_cast<uint32_t>(h.key(wk).payload)));
    ASSERT_TRUE(sk.valid());
    if (h.key(wk).is_list) {
      std::string expected;
      if (auto it = lists.find(sk.value()); it != lists.end()) {
        expected = src.ListToString(it->second);
      } else {
        expected = src.ListToString(src.InitialList(sk));
      }
      EXPECT_EQ(h.ListToString(h.InitialList(wk)), expected)
          << "window " << w.scope.index << " key " << src.KeyToString(sk);
    } else {
      auto it = registers.find(sk.value());
      const Value expected = it != registers.end() ? it->second : src.InitialValue(sk);
      EXPECT_EQ(h.ValueToString(h.InitialValue(wk)), src.ValueToString(expected))
          << "window " << w.scope.index << " key " << src.KeyToString(sk);
    }
  }
}

void Append(std::vector<Window>& all, std::vector<Window> more) {
  for (Window& w : more) all.push_back(std::move(w));
}

TEST(WindowCutterTest, SpanWindowsComeOutWhenSealedInOrder) {
  testing::TestHistory t;
  t.Txn("a", "s1", 1, 3).W(1, 1);
  t.Txn("b", "s2", 10, 15).W(1, 2);
  t.Txn("c", "s3", 6, 7).W(2, 1);
  t.Txn("d", "s1", 20, 25).R(1, 2);
  t.Txn("e", "s2", 11, 12).R(2, 1);
  t.Txn("f", "s3", 30, 31).W(2, 3);
  const History src = t.Build();
  WindowCutter cutter(WindowOptions{.span = 10});
  AddByName(cutter, src, {"b", "a", "e", "c"});
  EXPECT_EQ(cutter.stats().staged, 4u);

  std::vector<Window> w = cutter.Seal(src, Ts(9));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].scope.index, 0u);
  EXPECT_THAT(Own(w[0]), ElementsAre("a", "c"));
  EXPECT_EQ(w[0].own, 2u);
  EXPECT_EQ(w[0].lead_in, 0u);
  EXPECT_EQ(w[0].first_commit, Ts(3));
  EXPECT_EQ(w[0].last_commit, Ts(7));
  EXPECT_EQ(w[0].history.source(), "window 0");

  EXPECT_THAT(cutter.Seal(src, Ts(18)), IsEmpty());  // window 1 ends at 19
  AddByName(cutter, src, {"f", "d"});
  w = cutter.Seal(src, Ts(19));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].scope.index, 1u);
  EXPECT_THAT(Own(w[0]), ElementsAre("e", "b"));
  EXPECT_EQ(w[0].scope.base, Ts(10));  // b started at the window's beginning
  EXPECT_THAT(LeadIn(w[0]), IsEmpty());
  EXPECT_EQ(Initial(w[0], 1), "1");  // a's write
  EXPECT_EQ(Initial(w[0], 2), "1");  // c's write

  w = cutter.Seal(src, Ts(45));
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].scope.index, 2u);
  EXPECT_THAT(Own(w[0]), ElementsAre("d"));
  EXPECT_EQ(w[1].scope.index, 3u);
  EXPECT_THAT(Own(w[1]), ElementsAre("f"));
  EXPECT_EQ(Initial(w[1], 2), "1");  // c's write; e only read
  EXPECT_EQ(cutter.stats().sealed, 4u);
  EXPECT_EQ(cutter.stats().staged, 0u);
  EXPECT_EQ(cutter.stats().added, 6u);
  EXPECT_EQ(cutter.stats().late, 0u);
}

TEST(WindowCutterTest, SpanWindowsFloorNegativeTimestampsAndSkipEmptyOnes) {
  testing::TestHistory t;
  t.Txn("a", "s", -16, -15).W(1, 1);  // window -2: [-20, -10)
  t.Txn("b", "s", -6, -5).W(1, 2);    // window -1: [-10, 0)
  t.Txn("c", "s", 34, 35).W(1, 3);    // window 3
  const History src = t.Build();
  WindowCutter cutter(WindowOptions{.span = 10});
  AddByName(cutter, src, {"c", "b", "a"});
  EXPECT_THAT(cutter.Seal(src, Ts(-12)), IsEmpty());
  std::vector<Window> w = cutter.Seal(src, Ts(-11));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(Own(w[0]), ElementsAre("a"));
  w = cutter.Seal(src, Ts(38));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(Own(w[0]), ElementsAre("b"));
  EXPECT_EQ(w[0].scope.index, 1u);
  w = cutter.Seal(src, Ts(39));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(Own(w[0]), ElementsAre("c"));
  EXPECT_EQ(w[0].scope.index, 2u);  // windows 0, 1 and 2 of time were empty
  EXPECT_EQ(Initial(w[0], 1), "2");
}

TEST(WindowCutterTest, CountWindowsTakeTransactionsInPlacementOrder) {
  testing::TestHistory t;
  for (int64_t i = 1; i <= 7; ++i) t.Txn(fmt::format("t{}", i), "s", i * 10 - 1, i * 10).W(1, i);
  const History src = t.Build();
  WindowCutter cutter(WindowOptions{.transactions = 3});
  AddByName(cutter, src, {"t2", "t4", "t1", "t5"});
  std::vector<Window> w = cutter.Seal(src, Ts(35));  // t1, t2: the window stays open
  EXPECT_THAT(w, IsEmpty());
  EXPECT_EQ(cutter.stats().staged, 4u);
  AddByName(cutter, src, {"t3", "t7"});  // t3 is placed at 30, at or below the seal point: late
  EXPECT_EQ(cutter.stats().late, 1u);
  w = cutter.Seal(src, Ts(50));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(Own(w[0]), ElementsAre("t1", "t2", "t4"));
  EXPECT_EQ(w[0].scope.base, Ts(9));  // t1's start
  AddByName(cutter, src, {"t6"});
  w = cutter.Flush(src);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(Own(w[0]), ElementsAre("t5", "t6", "t7"));
  EXPECT_EQ(w[0].scope.index, 1u);
  EXPECT_EQ(w[0].scope.base, Ts(49));  // t5's start
  EXPECT_THAT(LeadIn(w[0]), IsEmpty());
  EXPECT_EQ(Initial(w[0], 1), "4");
  EXPECT_EQ(cutter.stats().staged, 0u);
}

TEST(WindowCutterTest, CountWindowsKeepTransactionsOfOneTimestampTogether) {
  testing::TestHistory t;
  // t2, t3 and t4 commit at 20: a window of two takes all three.
  t.Txn("t1", "a", 9, 10).W(1, 1);
  t.Txn("t2", "b", 19, 20).W(1, 2);
  t.Txn("t3", "c", 19, 20).W(2, 3);
  t.Txn("t4", "d", 19, 20).W(3, 4);
  t.Txn("t5", "e", 20, 30).R(2, 3);
  const History src = t.Build();
  WindowCutter cutter(WindowOptions{.transactions = 2});
  AddByName(cutter, src, {"t4", "t1", "t3", "t2", "t5"});
  std::vector<Window> w = cutter.Flush(src);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_THAT(Own(w[0]), ElementsAre("t1", "t4", "t3", "t2"));  // ties in arrival order
  EXPECT_THAT(Own(w[1]), ElementsAre("t5"));
  // t5 starts at 20: what committed at 20 is in its snapshot, so in its window's lead-in.
  EXPECT_EQ(w[1].scope.base, Ts(20));
  EXPECT_THAT(LeadIn(w[1]), ElementsAre("t4", "t3", "t2"));
}

TEST(WindowCutterTest, CountWindowFlushSealsAShortLastWindow) {
  testing::TestHistory t;
  for (int64_t i = 1; i <= 5; ++i) t.Txn(fmt::format("t{}", i), "s", i * 10, i * 10).W(1, i);
  const History src = t.Build();
  WindowCutter cutter(WindowOptions{.transactions = 2});
  AddByName(cutter, src, {"t5", "t4", "t3", "t2", "t1"});
  std::vector<Window> w = cutter.Flush(src);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_THAT(Own(w[0]), ElementsAre("t1", "t2"));
  EXPECT_THAT(Own(w[1]), ElementsAre("t3", "t4"));
  EXPECT_THAT(Own(w[2]), ElementsAre("t5"));
  EXPECT_EQ(Initial(w[2], 1), "4");
  // Flush ends the input: what comes after is late.
  cutter.Add(src, src.FindTxn("t5"));
  EXPECT_EQ(cutter.stats().late, 1u);
  EXPECT_THAT(cutter.Flush(src), IsEmpty());
}

TEST(WindowCutterTest, SpanOverlapCarriesTheEndOfThePreviousWindow) {
  testing::TestHistory t;
  t.Txn("a", "s1", 1, 2).W(1, 1);
  t.Txn("b", "s2", 4, 5).W(1, 2);
  t.Txn("c", "s3", 7, 8).W(1, 3);
  t.Txn("d", "s1", 11, 12).R(1, 3);
  const History src = t.Build();
  WindowCutter cutter(WindowOptions{.span = 10, .overlap = 3});
  AddByName(cutter, src, {"a", "b", "c", "d"});
  std::vector<Window> w = cutter.Flush(src);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[1].scope.base, Ts(7));
  EXPECT_THAT(LeadIn(w[1]), ElementsAre("c"));
  EXPECT_THAT(Own(w[1]), ElementsAre("d"));
  EXPECT_EQ(w[1].scope.first_proper, 1u);
  EXPECT_EQ(w[1].lead_in, 1u);
  EXPECT_EQ(w[1].own_beyond_base, 0u);
  EXPECT_EQ(Initial(w[1], 1), "2");  // b's write; c's is in the window
  EXPECT_THAT(w[1].origins, ElementsAre(0, 0));
}

TEST(WindowCutterTest, LongTransactionMovesTheBaseBack) {
  testing::TestHistory t;
  t.Txn("a", "s1", 1, 2).W(1, 1).A(5, 10);
  t.Txn("b", "s2", 4, 5).W(1, 2).A(5, 20);
  t.Txn("c", "s3", 7, 8).W(1, 3).A(5, 30);
  t.Txn("long", "s1", 4, 15).R(1, 2).L(5, {10, 20});
  const History src = t.Build();
  WindowCutter cutter(WindowOptions{.span = 10, .overlap = 1});
  AddByName(cutter, src, {"long", "c", "b", "a"});
  std::vector<Window> w = cutter.Flush(src);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[1].scope.base, Ts(4));
  EXPECT_THAT(LeadIn(w[1]), ElementsAre("b", "c"));
  EXPECT_THAT(Own(w[1]), ElementsAre("long"));
  EXPECT_EQ(w[1].own_beyond_base, 0u);
  EXPECT_EQ(Initial(w[1], 1), "1");
  EXPECT_EQ(Initial(w[1], 5), "[10]");
}

TEST(WindowCutterTest, LeadInReachesBackOneWindowAtMost) {
  testing::TestHistory t;
  t.Txn("a", "s1", 1, 2).W(1, 1);
  t.Txn("b", "s2", 11, 12).W(1, 2);
  t.Txn("c", "s3", 14, 15).W(1, 3);
  t.Txn("long", "s4", 0, 25).R(1, 0);
  t.Txn("d", "s1", 21, 22).R(1, 3);
  const History src = t.Build();
  WindowCutter cutter(WindowOptions{.span = 10});
  AddByName(cutter, src, {"a", "b", "c", "long", "d"});
  std::vector<Window> w = cutter.Flush(src);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[2].scope.base, Ts(12));  // long started at 0: clamped to b's commit
  EXPECT_THAT(LeadIn(w[2]), ElementsAre("b", "c"));
  EXPECT_THAT(Own(w[2]), ElementsAre("d", "long"));
  EXPECT_EQ(w[2].own_beyond_base, 1u);
  EXPECT_EQ(Initial(w[2], 1), "1");  // a's write: the window cannot show what long saw
  ExpectInitialStateIsReplay(
      src,
      {src.FindTxn("a"), src.FindTxn("b"), src.FindTxn("c"), src.FindTxn("long"), src.FindTxn("d")},
      w[2]);
}

TEST(WindowCutterTest, CountOverlapKeepsTheLastTransactions) {
  testing::TestHistory t;
  for (int64_t i = 1; i <= 6; ++i) t.Txn(fmt::format("t{}", i), "s", i * 10, i * 10).W(1, i);
  const History src = t.Build();
  WindowCutter cutter(WindowOptions{.transactions = 3, .overlap = 2});
  std::vector<TxnId> order;
  for (uint32_t i = 0; i < src.size(); ++i) order.push_back(TxnId(i));
  for (TxnId id : order) cutter.Add(src, id);
  std::vector<Window> w = cutter.Flush(src);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_THAT(LeadIn(w[1]), ElementsAre("t2", "t3"));
  EXPECT_THAT(Own(w[1]), ElementsAre("t4", "t5", "t6"));
  EXPECT_EQ(w[1].scope.base, Ts(20));
  EXPECT_EQ(Initial(w[1], 1), "1");
  ExpectInitialStateIsReplay(src, order, w[1]);
}

// A source history with aborted, unknown and untimed transactions and an initial state.
History MixedStatusHistory() {
  HistoryBuilder b;
  b.SetDefaultInitialValue(Value::Int(-1));
  const KeyId x = b.IntKey(1);
  const KeyId y = b.IntKey(2);
  const KeyId list = b.IntKey(3);
  const KeyId named = b.BytesKey("name");
  b.SetInitialRegister(y, Value::Int(100));
  const Value seven = Value::Int(7);
  b.SetInitialList(list, std::span<const Value>(&seven, 1));
  auto begin = [&](std::string_view id, TxnStatus status, std::optional<int64_t> start,
                   std::optional<int64_t> commit) {
    const absl::Status st = b.BeginTxn(history::TxnHeader{
        .id = id,
        .session = id,
        .status = status,
        .start = start ? std::optional<Timestamp>(Ts(*start)) : std::nullopt,
        .commit = commit ? std::optional<Timestamp>(Ts(*commit)) : std::nullopt});
    EXPECT_TRUE(st.ok()) << st;
  };
  begin("w1", TxnStatus::kCommitted, 1, 2);
  b.Write(x, Value::Int(1));
  b.Append(list, Value::Int(8));
  b.Write(named, b.BytesValue("alice"));
  b.EndTxn();
  begin("ab", TxnStatus::kAborted, 3, std::nullopt);
  b.Write(x, Value::Int(99));
  b.Write(y, Value::Int(99));
  b.Append(list, Value::Int(99));
  b.EndTxn();
  begin("unk", TxnStatus::kUnknown, 4, std::nullopt);
  b.Write(x, Value::Int(98));
  b.EndTxn();
  begin("untimed", TxnStatus::kAborted, std::nullopt, std::nullopt);
  b.Write(x, Value::Int(97));
  b.EndTxn();
  begin("w2", TxnStatus::kCommitted, 5, 6);
  b.Write(x, Value::Int(2));
  b.Write(x, Value::Int(3));  // the final write counts
  b.EndTxn();
  begin("r", TxnStatus::kCommitted, 12, 13);
  b.Read(x, Value::Int(3));
  b.Read(y, Value::Int(100));
  b.ListRead(list, std::vector<Value>{Value::Int(7), Value::Int(8)});
  b.Read(named, b.BytesValue("alice"));
  b.Read(b.IntKey(4), Value::Int(-1));
  b.EndTxn();
  absl::StatusOr<History> h = std::move(b).Finish();
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? *std::move(h) : History();
}

TEST(WindowCutterTest, OnlyCommittedTransactionsChangeTheState) {
  const History src = MixedStatusHistory();
  ASSERT_EQ(src.size(), 6u);
  WindowCutter cutter(WindowOptions{.span = 10});
  std::vector<TxnId> order;
  for (const char* id : {"w1", "ab", "w2", "unk", "untimed", "r"}) order.push_back(src.FindTxn(id));
  for (TxnId id : order) cutter.Add(src, id);
  std::vector<Window> w = cutter.Seal(src, Ts(9));
  ASSERT_EQ(w.size(), 1u);
  // Placed by commit, else start, else at the largest key so far (w2's commit), after it.
  EXPECT_THAT(Own(w[0]), ElementsAre("w1", "ab", "unk", "w2", "untimed"));
  EXPECT_EQ(w[0].history.txn(w[0].history.FindTxn("ab")).status, TxnStatus::kAborted);
  EXPECT_EQ(w[0].history.txn(w[0].history.FindTxn("unk")).status, TxnStatus::kUnknown);
  EXPECT_FALSE(w[0].history.txn(w[0].history.FindTxn("untimed")).has_start);
  EXPECT_EQ(Initial(w[0], 1), "-1");  // the source's default
  EXPECT_EQ(Initial(w[0], 2), "100");
  EXPECT_EQ(Initial(w[0], 3), "[7]");
  w = cutter.Flush(src);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(Own(w[0]), ElementsAre("r"));
  EXPECT_EQ(Initial(w[0], 1), "3");
  EXPECT_EQ(Initial(w[0], 2), "100");
  EXPECT_EQ(Initial(w[0], 3), "[7, 8]");
  EXPECT_EQ(Initial(w[0], 4), "-1");  // never written: the default, which the window keeps
  EXPECT_EQ(w[0].history.initial().default_value, Value::Int(-1));
  const KeyId named = w[0].history.FindBytesKey("name");
  ASSERT_TRUE(named.valid());
  EXPECT_EQ(w[0].history.ValueToString(w[0].history.InitialValue(named)), "\"alice\"");
  ExpectInitialStateIsReplay(src, order, w[0]);
}

TEST(WindowCutterTest, LateTransactionsAreCountedAndLeftOut) {
  testing::TestHistory t;
  t.Txn("a", "s", 1, 2).W(1, 1);
  t.Txn("late", "s", 3, 4).W(1, 9);
  t.Txn("b", "s", 11, 12).R(1, 1);
  const History src = t.Build();
  WindowCutter cutter(WindowOptions{.span = 10});
  AddByName(cutter, src, {"a", "b"});
  ASSERT_EQ(cutter.Seal(src, Ts(9)).size(), 1u);
  AddByName(cutter, src, {"late"});
  EXPECT_EQ(cutter.stats().late, 1u);
  EXPECT_EQ(cutter.stats().added, 3u);
  EXPECT_EQ(cutter.stats().staged, 1u);
  std::vector<Window> w = cutter.Flush(src);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(Own(w[0]), ElementsAre("b"));
  EXPECT_EQ(Initial(w[0], 1), "1");  // the late write is in no window and not in the state
}

// A live source, as the daemon builds it.
class LiveSource {
 public:
  LiveSource() { b_.StartLive(history::DataModel::kMixed); }

  TxnId Add(std::string_view id, std::string_view session, int64_t start, int64_t commit,
            int64_t key, std::optional<int64_t> write, uint16_t origin = 0) {
    const absl::Status st = b_.BeginTxn(
        history::TxnHeader{.id = id, .session = session, .start = Ts(start), .commit = Ts(commit)});
    EXPECT_TRUE(st.ok()) << st;
    if (write) {
      b_.Write(b_.IntKey(key), Value::Int(*write));
    } else {
      b_.Append(b_.IntKey(key), Value::Int(commit));
    }
    absl::StatusOr<TxnId> t = b_.EndLiveTxn();
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return TxnId::Invalid();
    b_.SetOrigin(*t, origin);
    return *t;
  }
  void ReleaseAll() {
    b_.ReleaseLive(TxnId(static_cast<uint32_t>(b_.txn_count())), [](TxnId) { return false; });
  }
  const History& history() const { return b_.live_history(); }

 private:
  HistoryBuilder b_;
};

TEST(WindowCutterTest, CopiesOutliveTheLiveHistoryAndRenameRepeatedIds) {
  LiveSource live;
  WindowCutter cutter(WindowOptions{.span = 10});
  cutter.Add(live.history(), live.Add("x", "s1", 1, 2, 1, 5, /*origin=*/3));
  cutter.Add(live.history(), live.Add("y", "s2", 2, 3, 2, std::nullopt, /*origin=*/1));
  live.ReleaseAll();  // the source forgets them; their ids may be used again
  cutter.Add(live.history(), live.Add("x", "s2", 4, 5, 2, std::nullopt, /*origin=*/2));
  std::vector<Window> w = cutter.Seal(live.history(), Ts(9));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(Own(w[0]), ElementsAre("x", "y", "x#dup1"));
  EXPECT_THAT(w[0].origins, ElementsAre(3, 1, 2));
  EXPECT_EQ(cutter.stats().renamed, 1u);
  const History& h = w[0].history;
  ASSERT_EQ(h.ops(TxnId(0)).size(), 1u);
  EXPECT_EQ(h.ops(TxnId(0))[0].kind(), OpKind::kWrite);
  EXPECT_EQ(h.ops(TxnId(0))[0].value(), Value::Int(5));
  EXPECT_EQ(h.ops(TxnId(2))[0].kind(), OpKind::kAppend);
  EXPECT_EQ(h.ops(TxnId(2))[0].value(), Value::Int(5));
  EXPECT_TRUE(h.key(h.FindIntKey(2)).is_list);
}

TEST(WindowCutterTest, SessionOrderIsKeptWithinAWindow) {
  LiveSource live;
  WindowCutter cutter(WindowOptions{.span = 10, .overlap = 5});
  std::vector<TxnId> ids;
  ids.push_back(live.Add("t1", "s", 1, 7, 1, 1));
  ids.push_back(live.Add("u1", "u", 1, 8, 2, 1));
  ids.push_back(live.Add("t2", "s", 11, 12, 1, 2));
  ids.push_back(live.Add("t3", "s", 13, 14, 1, 3));
  ids.push_back(live.Add("u2", "u", 21, 22, 2, 2));
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) cutter.Add(live.history(), *it);
  std::vector<Window> w = cutter.Flush(live.history());
  ASSERT_EQ(w.size(), 3u);

  const History& h1 = w[1].history;
  EXPECT_THAT(LeadIn(w[1]), ElementsAre("t1", "u1"));
  EXPECT_THAT(Own(w[1]), ElementsAre("t2", "t3"));
  const TxnId t1 = h1.FindTxn("t1");
  const TxnId t2 = h1.FindTxn("t2");
  const TxnId t3 = h1.FindTxn("t3");
  EXPECT_EQ(h1.txn(t2).session_prev, t1);
  EXPECT_EQ(h1.txn(t3).session_prev, t2);
  EXPECT_EQ(h1.txn(t3).seq, 2u);
  EXPECT_EQ(h1.session_name(h1.txn(t3).session), "s");

  // u2's predecessor u1 is two windows back: the window does not hold it.
  const History& h2 = w[2].history;
  EXPECT_THAT(LeadIn(w[2]), IsEmpty());
  const TxnId u2 = h2.FindTxn("u2");
  EXPECT_FALSE(h2.txn(u2).session_prev.valid());
  EXPECT_EQ(h2.txn(u2).seq, 0u);
}

TEST(WindowCutterTest, MemoryIsAccountedAndReleased) {
  testing::TestHistory t;
  for (int i = 1; i <= 40; ++i) t.Txn(fmt::format("t{}", i), "s", i, i).W(i % 5, i).A(100, i);
  const History src = t.Build();
  WindowCutter cutter(WindowOptions{.span = 10});
  EXPECT_EQ(cutter.stats().memory_bytes, 0u);
  for (uint32_t i = 0; i < src.size(); ++i) cutter.Add(src, TxnId(i));
  const size_t staged = cutter.stats().memory_bytes;
  EXPECT_GT(staged, sizeof(history::Op) * 80);
  EXPECT_EQ(cutter.Flush(src).size(), 5u);
  // What stays: the last window's transactions and the state (5 registers, a list of 39).
  EXPECT_LT(cutter.stats().memory_bytes, staged);
  EXPECT_GT(cutter.stats().memory_bytes, 30 * sizeof(Value));
}

// Cuts a simulated history delivered with jitter, sealing as it goes, and checks that the windows
// partition the stream and that each one's initial state is a replay of what came before.
void CheckSimulatedStream(history::DataModel data, WindowOptions options, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Arrivals a = SimulatedArrivals(data, seed, rng);
  const sim::SimResult* r = &a.sim;
  const History& src = a.sim.history;
  const auto& arrivals = a.order;
  ASSERT_GT(src.size(), 0u);

  WindowCutter cutter(options);
  std::vector<Window> windows;
  std::vector<TxnId> order;
  for (const auto& [at, id] : arrivals) {
    cutter.Add(src, id);
    order.push_back(id);
    if (rng() % 8 == 0) Append(windows, cutter.Seal(src, Ts(at - kJitter - 1)));
  }
  Append(windows, cutter.Flush(src));
  EXPECT_EQ(cutter.stats().late, 0u);
  EXPECT_EQ(cutter.stats().staged, 0u);
  EXPECT_EQ(cutter.stats().renamed, 0u);
  ASSERT_GT(windows.size(), 3u);
  EXPECT_EQ(cutter.stats().sealed, windows.size());

  std::map<std::string, int> own_count;
  std::map<std::string, size_t> own_window;
  size_t beyond = 0;
  for (size_t i = 0; i < windows.size(); ++i) {
    const Window& w = windows[i];
    EXPECT_EQ(w.scope.index, i);
    EXPECT_EQ(w.history.size(), w.lead_in + w.own);
    EXPECT_EQ(w.origins.size(), w.history.size());
    if (options.transactions > 0 && i + 1 < windows.size()) {
      // Full, and more only to keep the transactions of its last timestamp together.
      EXPECT_GE(w.own, options.transactions);
      // The placement key: commit, else start (the simulator gives every transaction a start).
      auto key = [](const history::Transaction& t) { return t.has_commit ? t.commit : t.start; };
      const History& wh = w.history;
      if (w.own > options.transactions) {
        EXPECT_EQ(key(wh.txn(TxnId(wh.size() - 1 - (w.own - options.transactions)))),
                  key(wh.txn(TxnId(wh.size() - 1))));
      }
      const Window& next = windows[i + 1];
      if (next.own > 0 && w.own > 0) {
        EXPECT_LT(key(wh.txn(TxnId(wh.size() - 1))),
                  key(next.history.txn(TxnId(next.scope.first_proper))))
            << "a timestamp split across windows";
      }
    }
    for (const std::string& name : Own(w)) {
      ++own_count[name];
      own_window[name] = i;
    }
    // Lead-in: the previous window's own transactions placed at or after the base.
    for (const std::string& name : LeadIn(w)) {
      ASSERT_TRUE(own_window.contains(name)) << name;
      EXPECT_EQ(own_window[name], i - 1) << name;
    }
    for (size_t j = w.scope.first_proper; j < w.history.size(); ++j) {
      const history::Transaction& t = w.history.txn(TxnId(static_cast<uint32_t>(j)));
      const history::Transaction& s =
          src.txn(src.FindTxn(w.history.txn_name(TxnId(static_cast<uint32_t>(j)))));
      EXPECT_EQ(t.status, s.status);
      EXPECT_EQ(t.has_commit, s.has_commit);
      EXPECT_EQ(w.history.ops(t).size(), src.ops(s).size());
      if (t.has_start && t.start < w.scope.base) ++beyond;
    }
    ExpectInitialStateIsReplay(src, order, w);
  }
  size_t total_beyond = 0;
  size_t total_lead_in = 0;
  for (const Window& w : windows) {
    total_beyond += w.own_beyond_base;
    total_lead_in += w.lead_in;
  }
  EXPECT_EQ(total_beyond, beyond);
  // Transactions span window boundaries, so windows carry lead-ins even without overlap.
  EXPECT_GT(total_lead_in, 0u);
  EXPECT_GT(r->aborted, 0u);
  EXPECT_EQ(own_count.size(), src.size());
  for (const auto& [name, count] : own_count) EXPECT_EQ(count, 1) << name;
}

TEST(WindowCutterTest, SimulatedKeyValueStreamBySpan) {
  CheckSimulatedStream(history::DataModel::kKeyValue, WindowOptions{.span = 40, .overlap = 10}, 1);
}

TEST(WindowCutterTest, SimulatedListStreamBySpan) {
  CheckSimulatedStream(history::DataModel::kList, WindowOptions{.span = 25}, 2);
}

TEST(WindowCutterTest, SimulatedKeyValueStreamByCount) {
  CheckSimulatedStream(history::DataModel::kKeyValue,
                       WindowOptions{.transactions = 50, .overlap = 8}, 3);
}

TEST(WindowCutterTest, SimulatedListStreamByCount) {
  CheckSimulatedStream(history::DataModel::kList, WindowOptions{.transactions = 37, .overlap = 5},
                       4);
}

}  // namespace
}  // namespace isowatch::windows
