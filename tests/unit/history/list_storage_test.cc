// SPDX-License-Identifier: Apache-2.0
// List reads are held once per key where they can be (docs/engine.md, "List storage"):
// a read that is a prefix of its key's longest list is a length into it, a read that extends it
// adds only its new elements, any other read is held whole. Whatever the storage,
// History::list_elements gives back exactly what each read observed, in batch and live mode,
// across AbandonTxn, ReleaseLive, CollectBytes and a checkpoint.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/history/history_builder.h"
#include "isowatch/v1/history_checkpoint.pb.h"

namespace isowatch::history {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

std::vector<Value> Ints(std::initializer_list<int64_t> xs) {
  std::vector<Value> out;
  for (const int64_t x : xs) out.push_back(Value::Int(x));
  return out;
}

std::vector<Value> Elements(const History& h, const Op& op) {
  const std::span<const Value> s = h.list_elements(op);
  return std::vector<Value>(s.begin(), s.end());
}

// Every list read of `h`'s transactions held, in order.
std::vector<Op> ListReads(const History& h) {
  std::vector<Op> out;
  for (const TxnId id : h.HeldTxns()) {
    for (const Op& op : h.ops(id)) {
      if (op.kind() == OpKind::kListRead && !op.unknown()) out.push_back(op);
    }
  }
  return out;
}

// One transaction per read: reads[i] of key keys[i].
struct Read {
  int64_t key;
  std::vector<Value> elements;
};

void AddReads(HistoryBuilder& b, const std::vector<Read>& reads, int first_id, bool live) {
  for (size_t i = 0; i < reads.size(); ++i) {
    const std::string id = fmt::format("t{}", first_id + static_cast<int>(i));
    ASSERT_TRUE(b.BeginTxn({.id = id, .session = "s"}).ok());
    b.ListRead(b.IntKey(reads[i].key), reads[i].elements);
    if (live) {
      ASSERT_TRUE(b.EndLiveTxn().ok());
    } else {
      b.EndTxn();
    }
  }
}

// Reads of two interleaved keys: prefixes, extensions, empty reads, a read that diverges from
// its key's list, and a read that extends that list after it.
std::vector<Read> MixedReads() {
  return {
      {1, Ints({1})},           // starts key 1's list
      {2, Ints({7, 8})},        // starts key 2's list
      {1, Ints({1, 2, 3})},     // extends
      {1, Ints({1, 2})},        // a prefix
      {2, Ints({})},            // empty
      {1, Ints({1, 9})},        // diverges at 1: held whole
      {2, Ints({7, 8, 6})},     // extends key 2
      {1, Ints({5})},           // diverges at 0
      {1, Ints({1, 2, 3, 4})},  // extends key 1 past the divergent reads
      {1, Ints({1, 2, 3, 4})},  // the same again
  };
}

TEST(ListStorageTest, EveryReadIsWhatWasGivenInBatchMode) {
  HistoryBuilder b;
  const std::vector<Read> reads = MixedReads();
  ASSERT_NO_FATAL_FAILURE(AddReads(b, reads, 0, false));
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  const std::vector<Op> ops = ListReads(*h);
  ASSERT_EQ(ops.size(), reads.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    EXPECT_EQ(Elements(*h, ops[i]), reads[i].elements) << "read " << i;
    EXPECT_EQ(ops[i].key(), h->FindIntKey(reads[i].key));
  }
  // Held in the key's list: the prefixes and extensions; whole: the divergent and empty ones.
  const std::vector<bool> shares = {true, true, true, true, false, false, true, false, true, true};
  for (size_t i = 0; i < reads.size(); ++i) {
    EXPECT_EQ(History::SharesKeyList(ops[i]), shares[i]) << "read " << i;
  }
  EXPECT_THAT(h->key_list(h->FindIntKey(1)), ElementsAreArray(Ints({1, 2, 3, 4})));
  EXPECT_THAT(h->key_list(h->FindIntKey(2)), ElementsAreArray(Ints({7, 8, 6})));
  EXPECT_THAT(h->key_list(KeyId(1000)), IsEmpty());
  EXPECT_EQ(h->data_model(), DataModel::kList);
}

TEST(ListStorageTest, StreamedAndIntegerReadsAreStoredAsWholeOnes) {
  HistoryBuilder whole;
  HistoryBuilder streamed;
  HistoryBuilder ints;
  const std::vector<Read> reads = MixedReads();
  ASSERT_NO_FATAL_FAILURE(AddReads(whole, reads, 0, false));
  for (size_t i = 0; i < reads.size(); ++i) {
    ASSERT_TRUE(streamed.BeginTxn({.id = fmt::format("t{}", i), .session = "s"}).ok());
    streamed.ListReadBegin(streamed.IntKey(reads[i].key));
    for (const Value v : reads[i].elements) streamed.ListReadElement(v);
    streamed.ListReadEnd();
    streamed.EndTxn();
    ASSERT_TRUE(ints.BeginTxn({.id = fmt::format("t{}", i), .session = "s"}).ok());
    std::vector<int64_t> elements;
    for (const Value v : reads[i].elements) elements.push_back(v.as_int());
    ints.ListReadInts(ints.IntKey(reads[i].key), elements);
    ints.EndTxn();
  }
  auto a = std::move(whole).Finish();
  ASSERT_TRUE(a.ok());
  const std::vector<Op> ops_a = ListReads(*a);
  for (HistoryBuilder* other : {&streamed, &ints}) {
    auto b = std::move(*other).Finish();
    ASSERT_TRUE(b.ok());
    const std::vector<Op> ops_b = ListReads(*b);
    ASSERT_EQ(ops_a.size(), ops_b.size());
    for (size_t i = 0; i < ops_a.size(); ++i) {
      EXPECT_EQ(ops_a[i].list_offset(), ops_b[i].list_offset()) << i;
      EXPECT_EQ(ops_a[i].list_size(), ops_b[i].list_size()) << i;
      EXPECT_EQ(History::SharesKeyList(ops_a[i]), History::SharesKeyList(ops_b[i])) << i;
      EXPECT_EQ(Elements(*a, ops_a[i]), Elements(*b, ops_b[i])) << i;
    }
    EXPECT_EQ(a->MemoryUsage(), b->MemoryUsage());
  }
}

TEST(ListStorageTest, MemoryGrowsWithTheNewElementsOnly) {
  // n reads of one list, each one element longer: n (n + 1) / 2 elements read, n new ones.
  // Against the same history without the reads.
  constexpr int kReads = 2000;
  HistoryBuilder with_reads;
  HistoryBuilder without;
  std::vector<Value> list;
  for (int i = 0; i < kReads; ++i) {
    list.push_back(Value::Int(i));
    for (HistoryBuilder* b : {&with_reads, &without}) {
      ASSERT_TRUE(b->BeginTxn({.id = fmt::format("t{}", i), .session = "s"}).ok());
      b->Append(b->IntKey(1), Value::Int(i));
      if (b == &with_reads) {
        b->ListRead(b->IntKey(1), list);
      } else {
        b->UnknownRead(b->IntKey(1));
      }
      b->EndTxn();
    }
  }
  auto h = std::move(with_reads).Finish();
  auto base = std::move(without).Finish();
  ASSERT_TRUE(h.ok() && base.ok());
  const size_t read_bytes = sizeof(Value) * kReads * (kReads + 1) / 2;
  EXPECT_GE(h->MemoryUsage(), base->MemoryUsage() + kReads * sizeof(Value));
  EXPECT_LT(h->MemoryUsage(), base->MemoryUsage() + 2 * kReads * sizeof(Value) + 1024)
      << "of " << read_bytes << " bytes read";
  const std::vector<Op> ops = ListReads(*h);
  ASSERT_EQ(ops.size(), static_cast<size_t>(kReads));
  for (int i = 0; i < kReads; ++i) {
    ASSERT_EQ(ops[i].list_size(), static_cast<uint32_t>(i + 1));
    ASSERT_EQ(h->list_elements(ops[i]).back(), Value::Int(i));
  }
}

TEST(ListStorageTest, EveryReadIsWhatWasGivenInLiveMode) {
  HistoryBuilder b;
  b.StartLive(DataModel::kList);
  const std::vector<Read> reads = MixedReads();
  const History& h = b.live_history();
  for (size_t i = 0; i < reads.size(); ++i) {
    ASSERT_NO_FATAL_FAILURE(AddReads(b, {reads[i]}, static_cast<int>(i), true));
    // Every read so far, after each transaction.
    const std::vector<Op> ops = ListReads(h);
    ASSERT_EQ(ops.size(), i + 1);
    for (size_t j = 0; j <= i; ++j) EXPECT_EQ(Elements(h, ops[j]), reads[j].elements) << j;
  }
}

TEST(ListStorageTest, AbandonedReadsGiveBackWhatTheyAdded) {
  HistoryBuilder b;
  b.StartLive(DataModel::kMixed);
  ASSERT_NO_FATAL_FAILURE(AddReads(b, {{1, Ints({1, 2})}, {2, Ints({4})}}, 0, true));
  const History& h = b.live_history();
  const size_t bytes = h.MemoryUsage();

  // Extends key 1 twice and key 2 once, reads key 3 divergently: all dropped.
  ASSERT_TRUE(b.BeginTxn({.id = "x", .session = "s"}).ok());
  b.ListRead(b.IntKey(1), Ints({1, 2, 3}));
  b.ListRead(b.IntKey(1), Ints({1, 2, 3, 4, 5}));
  b.ListRead(b.IntKey(2), Ints({4, 4}));
  b.ListRead(b.IntKey(2), Ints({5}));
  b.ListReadBegin(b.IntKey(1));  // left unfinished
  b.ListReadElement(Value::Int(1));
  b.ListReadElement(Value::Int(7));
  b.AbandonTxn();
  EXPECT_THAT(h.key_list(b.IntKey(1)), ElementsAreArray(Ints({1, 2})));
  EXPECT_THAT(h.key_list(b.IntKey(2)), ElementsAreArray(Ints({4})));

  // A transaction EndLiveTxn refuses (key 9 a register and a list) goes the same way.
  ASSERT_TRUE(b.BeginTxn({.id = "y", .session = "s"}).ok());
  b.ListRead(b.IntKey(1), Ints({1, 2, 8}));
  b.Write(b.IntKey(9), Value::Int(1));
  b.Append(b.IntKey(9), Value::Int(1));
  EXPECT_FALSE(b.EndLiveTxn().ok());
  EXPECT_THAT(h.key_list(b.IntKey(1)), ElementsAreArray(Ints({1, 2})));

  // What comes next is stored as if they had never been.
  ASSERT_NO_FATAL_FAILURE(AddReads(b, {{1, Ints({1, 2, 6})}, {1, Ints({1, 2})}}, 10, true));
  const std::vector<Op> ops = ListReads(h);
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(Elements(h, ops[2]), Ints({1, 2, 6}));
  EXPECT_TRUE(History::SharesKeyList(ops[2]));
  EXPECT_EQ(Elements(h, ops[3]), Ints({1, 2}));
  EXPECT_THAT(h.key_list(b.IntKey(1)), ElementsAreArray(Ints({1, 2, 6})));
  EXPECT_LE(h.MemoryUsage(), bytes + 1024);
}

TEST(ListStorageTest, ReleaseKeepsRetiredReadsAndFreesUnsharedKeyLists) {
  HistoryBuilder b;
  b.StartLive(DataModel::kList);
  // Transactions 2i and 2i + 1 read keys 1 and 2, each one element longer than before.
  std::vector<Read> reads;
  std::vector<Value> one;
  std::vector<Value> two;
  for (int i = 0; i < 300; ++i) {
    one.push_back(Value::Int(i));
    two.push_back(Value::Int(-i));
    reads.push_back({1, one});
    reads.push_back({2, two});
  }
  ASSERT_NO_FATAL_FAILURE(AddReads(b, reads, 0, true));
  // Then key 1 alone, short reads.
  std::vector<Read> later = {{1, Ints({0, 1})}, {1, Ints({0})}};
  ASSERT_NO_FATAL_FAILURE(AddReads(b, later, 600, true));
  const History& h = b.live_history();
  const size_t bytes_before = h.MemoryUsage();

  // Release the first 600, keeping 11 (key 2's read of 6 elements) and 598 (key 1's of 300).
  b.ReleaseLive(TxnId(600), [](TxnId id) { return id.value() == 11 || id.value() == 598; });
  EXPECT_EQ(h.retired_count(), 2u);
  auto only_read = [&](uint32_t id) {
    for (const Op& op : h.ops(TxnId(id))) return op;
    return Op();
  };
  EXPECT_EQ(Elements(h, only_read(11)), reads[11].elements);
  EXPECT_EQ(Elements(h, only_read(598)), reads[598].elements);
  EXPECT_FALSE(History::SharesKeyList(only_read(598)));
  EXPECT_EQ(Elements(h, only_read(600)), Ints({0, 1}));
  EXPECT_EQ(Elements(h, only_read(601)), Ints({0}));
  // Key 2's list is shared by no read held: gone; key 1's is cut to what the held reads share.
  EXPECT_THAT(h.key_list(b.IntKey(2)), IsEmpty());
  EXPECT_THAT(h.key_list(b.IntKey(1)), ElementsAreArray(Ints({0, 1})));
  EXPECT_LT(h.MemoryUsage() + 300 * sizeof(Value), bytes_before);

  // Reads after the release start the lists again.
  ASSERT_NO_FATAL_FAILURE(
      AddReads(b, {{2, Ints({0, -1, -2})}, {1, Ints({0, 1, 2})}, {2, Ints({0, -1})}}, 700, true));
  EXPECT_EQ(Elements(h, only_read(602)), Ints({0, -1, -2}));
  EXPECT_EQ(Elements(h, only_read(603)), Ints({0, 1, 2}));
  EXPECT_EQ(Elements(h, only_read(604)), Ints({0, -1}));
  EXPECT_TRUE(History::SharesKeyList(only_read(604)));
  EXPECT_EQ(Elements(h, only_read(600)), Ints({0, 1}));
  EXPECT_EQ(Elements(h, only_read(11)), reads[11].elements);
}

TEST(ListStorageTest, CollectBytesKeepsTheElementsOfKeyLists) {
  HistoryBuilder b;
  b.StartLive(DataModel::kList);
  const KeyId list = b.IntKey(1);
  ASSERT_TRUE(b.BeginTxn({.id = "a", .session = "s"}).ok());
  b.ListRead(list, std::vector<Value>{b.BytesValue("x"), b.BytesValue("y")});
  ASSERT_TRUE(b.EndLiveTxn().ok());
  ASSERT_TRUE(b.BeginTxn({.id = "b", .session = "s"}).ok());
  b.ListRead(list, std::vector<Value>{b.BytesValue("x")});
  b.ListRead(b.IntKey(2), std::vector<Value>{b.BytesValue("gone")});
  ASSERT_TRUE(b.EndLiveTxn().ok());
  // Only "b" stays, whose read of key 1 shares the key's list; "y" is in the list past it.
  b.ReleaseLive(TxnId(1), [](TxnId) { return false; });
  std::vector<uint64_t> marks;
  EXPECT_EQ(b.CollectBytes(marks), 0u) << "every string is in a key list still held";
  const History& h = b.live_history();
  const std::vector<Op> ops = ListReads(h);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(h.ListToString(h.list_elements(ops[0])), "[\"x\"]");
  EXPECT_EQ(h.ListToString(h.list_elements(ops[1])), "[\"gone\"]");
  // Once no read holds "y", it goes.
  ASSERT_TRUE(b.BeginTxn({.id = "c", .session = "s"}).ok());
  b.Append(list, Value::Int(1));
  ASSERT_TRUE(b.EndLiveTxn().ok());
  b.ReleaseLive(TxnId(2), [](TxnId) { return false; });
  std::vector<uint64_t> none;
  EXPECT_EQ(b.CollectBytes(none), 3u);  // x, y and gone
}

TEST(ListStorageTest, CheckpointRestoresSharedLists) {
  HistoryBuilder b;
  b.StartLive(DataModel::kList);
  std::vector<Read> reads = MixedReads();
  ASSERT_NO_FATAL_FAILURE(AddReads(b, reads, 0, true));
  b.ReleaseLive(TxnId(3), [](TxnId id) { return id.value() == 2; });
  v1::HistoryCheckpoint saved;
  b.SaveLive(&saved);
  EXPECT_EQ(saved.version(), 2u);
  EXPECT_THAT(saved.key_list_keys(), ElementsAre(0, 1));
  EXPECT_THAT(saved.key_list_sizes(), ElementsAre(4, 3));

  HistoryBuilder restored;
  ASSERT_TRUE(restored.RestoreLive(saved).ok());
  const History& a = b.live_history();
  const History& r = restored.live_history();
  auto same = [&]() {
    const std::vector<Op> ops_a = ListReads(a);
    const std::vector<Op> ops_r = ListReads(r);
    ASSERT_EQ(ops_a.size(), ops_r.size());
    for (size_t i = 0; i < ops_a.size(); ++i) {
      EXPECT_EQ(ops_a[i].list_offset(), ops_r[i].list_offset()) << i;
      EXPECT_EQ(Elements(a, ops_a[i]), Elements(r, ops_r[i])) << i;
    }
    for (const int64_t k : {1, 2}) {
      EXPECT_THAT(r.key_list(r.FindIntKey(k)), ElementsAreArray(a.key_list(a.FindIntKey(k))));
    }
  };
  ASSERT_NO_FATAL_FAILURE(same());
  EXPECT_EQ(Elements(r, ListReads(r).back()), Ints({1, 2, 3, 4}));
  // Both go on alike.
  const std::vector<Read> more = {{1, Ints({1, 2, 3, 4, 5})}, {2, Ints({7})}, {1, Ints({2})}};
  ASSERT_NO_FATAL_FAILURE(AddReads(b, more, 100, true));
  ASSERT_NO_FATAL_FAILURE(AddReads(restored, more, 100, true));
  ASSERT_NO_FATAL_FAILURE(same());
}

TEST(ListStorageTest, CheckpointKeyListsAreChecked) {
  HistoryBuilder b;
  b.StartLive(DataModel::kList);
  ASSERT_NO_FATAL_FAILURE(AddReads(b, {{1, Ints({1, 2})}, {2, Ints({3})}}, 0, true));
  v1::HistoryCheckpoint good;
  b.SaveLive(&good);
  const std::vector<std::pair<const char*, void (*)(v1::HistoryCheckpoint&)>> corruptions = {
      {"a read past its key's list",
       [](v1::HistoryCheckpoint& c) {
         v1::CheckpointOps& ops = *c.mutable_held()->mutable_ops();
         for (int i = 0; i < ops.payloads_size(); ++i) {
           if (ops.payloads(i) == int64_t{1} << 60) ops.set_list_sizes(i, 3);
         }
       }},
      {"sizes past the elements", [](v1::HistoryCheckpoint& c) { c.set_key_list_sizes(1, 5); }},
      {"elements left over",
       [](v1::HistoryCheckpoint& c) {
         c.mutable_key_list_elements()->mutable_kinds()->push_back(1);
         c.mutable_key_list_elements()->add_payloads(9);
       }},
      {"keys out of order", [](v1::HistoryCheckpoint& c) { c.set_key_list_keys(1, 0); }},
      {"a key out of range", [](v1::HistoryCheckpoint& c) { c.set_key_list_keys(1, 77); }},
      {"an empty list", [](v1::HistoryCheckpoint& c) { c.set_key_list_sizes(1, 0); }},
      {"no key lists",
       [](v1::HistoryCheckpoint& c) {
         c.clear_key_list_keys();
         c.clear_key_list_sizes();
         c.clear_key_list_elements();
       }},
      {"key lists in version 1", [](v1::HistoryCheckpoint& c) { c.set_version(1); }},
  };
  for (const auto& [name, apply] : corruptions) {
    v1::HistoryCheckpoint bad = good;
    apply(bad);
    HistoryBuilder fresh;
    EXPECT_EQ(fresh.RestoreLive(bad).code(), absl::StatusCode::kDataLoss) << name;
  }
}

TEST(ListStorageTest, VersionOneCheckpointsStillRestore) {
  // A version 1 checkpoint is a version 2 one without key lists: every read in the pools.
  HistoryBuilder b;
  b.StartLive(DataModel::kList);
  ASSERT_TRUE(b.BeginTxn({.id = "a", .session = "s"}).ok());
  b.Append(b.IntKey(1), Value::Int(5));
  b.ListRead(b.IntKey(1), {});
  ASSERT_TRUE(b.EndLiveTxn().ok());
  v1::HistoryCheckpoint saved;
  b.SaveLive(&saved);
  saved.set_version(1);
  HistoryBuilder restored;
  ASSERT_TRUE(restored.RestoreLive(saved).ok());
  ASSERT_NO_FATAL_FAILURE(AddReads(restored, {{1, Ints({5})}}, 1, true));
  EXPECT_EQ(Elements(restored.live_history(), ListReads(restored.live_history()).back()),
            Ints({5}));
}

}  // namespace
}  // namespace isowatch::history
