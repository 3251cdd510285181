// SPDX-License-Identifier: Apache-2.0
// A live history forgets final transactions (HistoryBuilder::ReleaseLive): what it keeps stays
// readable exactly as before, what it forgets is gone, and transaction ids are never reused.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/history/history_builder.h"

namespace isowatch::history {
namespace {

// Transaction i (id "t<i>", session "s<i % 3>") appends i to list 100 + i % 4, reads that list
// as [i - 1, i], writes register i % 5 := i and reads register 9 = i. Every third has an xid and
// a snapshot instead of a start, every fifth an xid alone.
void AddTxn(HistoryBuilder& b, int i) {
  const auto x = static_cast<uint64_t>(1000 + i);
  const std::vector<uint64_t> xip = {x - 1, x - 2 - static_cast<uint64_t>(i % 2)};
  const bool snapshot = i % 3 == 1;
  const std::string name = fmt::format("t{}", i);
  const std::string session = fmt::format("s{}", i % 3);
  TxnHeader header{.id = name,
                   .session = session,
                   .start = Timestamp{10 * i, 0},
                   .commit = Timestamp{10 * i + 5, 0},
                   .xid = snapshot || i % 5 == 0 ? x : 0};
  if (snapshot) {
    header.start.reset();
    header.snapshot = SnapshotView{x - 3, x, xip};
  }
  ASSERT_TRUE(b.BeginTxn(header).ok());
  const KeyId list = b.IntKey(100 + i % 4);
  b.Append(list, Value::Int(i));
  const std::vector<Value> elements = {Value::Int(i - 1), Value::Int(i)};
  b.ListRead(list, elements);
  b.Write(b.IntKey(i % 5), Value::Int(i));
  b.Read(b.IntKey(9), Value::Int(i));
  auto id = b.EndLiveTxn();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->value(), static_cast<uint32_t>(i));
  b.SetOrigin(*id, static_cast<uint16_t>(i % 2));
}

// What a transaction looks like through every accessor.
std::string Render(const History& h, TxnId id) {
  const Transaction& t = h.txn(id);
  std::string out = fmt::format("{} {} {} {}/{} o{}:", h.txn_name(id), h.session_name(t.session),
                                t.seq, t.start.ToString(), t.commit.ToString(), t.origin);
  out += fmt::format(" xid {}", h.xid(t));
  if (h.has_snapshot(t)) out += fmt::format(" snapshot {}", FormatSnapshot(h.snapshot(t)));
  for (const Op& op : h.ops(id)) {
    out += fmt::format(" {}{}", OpKindName(op.kind()), h.KeyToString(op.key()));
    out += op.kind() == OpKind::kListRead ? h.ListToString(h.list_elements(op))
                                          : h.ValueToString(op.value());
  }
  return out;
}

TEST(LiveRelease, KeepsWhatIsAskedAndForgetsTheRest) {
  HistoryBuilder b;
  b.StartLive(DataModel::kMixed);
  b.SetInitialList(b.IntKey(100), std::vector<Value>{Value::Int(-7)});
  for (int i = 0; i < 40; ++i) AddTxn(b, i);
  const History& h = b.live_history();
  std::vector<std::string> before;
  for (uint32_t i = 0; i < 40; ++i) before.push_back(Render(h, TxnId(i)));
  EXPECT_EQ(before[4].substr(before[4].find(" xid"), 38), " xid 1004 snapshot 1001:1004:1002,1003");
  EXPECT_TRUE(h.has_snapshots());
  const size_t bytes_before = h.MemoryUsage();

  // Release [0, 30), keeping every seventh.
  std::vector<uint32_t> asked;
  b.ReleaseLive(TxnId(30), [&](TxnId id) {
    asked.push_back(id.value());
    return id.value() % 7 == 0;
  });
  ASSERT_EQ(asked.size(), 30u);
  EXPECT_EQ(h.size(), 40u);
  EXPECT_EQ(h.first_txn(), 30u);
  EXPECT_EQ(h.retired_count(), 5u);  // 0, 7, 14, 21, 28
  for (uint32_t i = 0; i < 40; ++i) {
    const bool held = i >= 30 || i % 7 == 0;
    EXPECT_EQ(h.has_txn(TxnId(i)), held) << i;
    if (held) {
      EXPECT_EQ(Render(h, TxnId(i)), before[i]);
      EXPECT_EQ(h.TxnLabel(TxnId(i)), fmt::format("t{}", i));
    } else {
      EXPECT_TRUE(h.ops(TxnId(i)).empty()) << i;
      EXPECT_TRUE(h.txn_name(TxnId(i)).empty()) << i;
      EXPECT_EQ(h.TxnLabel(TxnId(i)), fmt::format("#{}", i));
      EXPECT_EQ(h.txn(TxnId(i)).status, TxnStatus::kUnknown);
    }
  }
  EXPECT_EQ(h.FindTxn("t35"), TxnId(35));
  EXPECT_FALSE(h.FindTxn("t3").valid());
  EXPECT_EQ(h.ListToString(h.InitialList(b.IntKey(100))), "[-7]");
  EXPECT_LT(h.MemoryUsage(), bytes_before + 4096);

  // New transactions get new ids; a forgotten source id may come back.
  for (int i = 40; i < 60; ++i) AddTxn(b, i);
  ASSERT_TRUE(b.BeginTxn({.id = "t3", .session = "s0"}).ok());
  ASSERT_TRUE(b.EndLiveTxn().ok());
  EXPECT_EQ(h.FindTxn("t3"), TxnId(60));
  EXPECT_FALSE(b.BeginTxn({.id = "t45", .session = "s0"}).ok()) << "t45 is still held";

  // A second release asks again about the retired ones; those no longer wanted go. Each id is
  // announced to `ahead` once, four questions before `keep` is asked about it (the first four
  // at once).
  asked.clear();
  std::vector<uint32_t> announced;
  std::vector<size_t> announced_by;  // how many questions had been asked at each announcement
  b.ReleaseLive(
      TxnId(50),
      [&](TxnId id) {
        asked.push_back(id.value());
        return id.value() == 14 || id.value() == 42;
      },
      [&](TxnId id) {
        announced.push_back(static_cast<uint32_t>(id.value()));
        announced_by.push_back(asked.size());
      });
  EXPECT_EQ(asked.size(), 5u + 20u);
  EXPECT_EQ(announced, asked);
  for (size_t i = 0; i < announced_by.size(); ++i) {
    EXPECT_EQ(announced_by[i], i < 4 ? 0 : i - 4) << i;
  }
  EXPECT_EQ(h.retired_count(), 2u);
  EXPECT_EQ(Render(h, TxnId(14)), before[14]);
  EXPECT_FALSE(h.has_txn(TxnId(7)));
  EXPECT_FALSE(h.has_txn(TxnId(41)));
  EXPECT_EQ(Render(h, TxnId(42)).substr(0, 4), "t42 ");
  for (uint32_t i = 50; i < 61; ++i) EXPECT_TRUE(h.has_txn(TxnId(i))) << i;
  EXPECT_EQ(h.FindTxn("t55"), TxnId(55));
  EXPECT_EQ(Render(h, TxnId(55)).substr(0, 4), "t55 ");

  // Releasing everything leaves only the retired.
  b.ReleaseLive(TxnId(61), [](TxnId) { return false; });
  EXPECT_EQ(h.retired_count(), 0u);
  EXPECT_EQ(h.txns().size(), 0u);
  EXPECT_EQ(h.size(), 61u);
  AddTxn(b, 61);
  EXPECT_EQ(Render(h, TxnId(61)).substr(0, 4), "t61 ");
}

}  // namespace
}  // namespace isowatch::history
