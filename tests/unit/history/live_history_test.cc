// SPDX-License-Identifier: Apache-2.0
// A live history forgets only what every registered holder lets go of, in the order the protocol
// says (history::LiveHistory): final for all, rendered before, kept while read, keys unless
// pinned, byte strings unless marked.
#include "isowatch/history/live_history.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::history {
namespace {

// A holder that records what it is asked and answers as the test sets it up.
class TestHolder final : public HistoryHolder {
 public:
  explicit TestHolder(const History& h) : h_(h) {}

  bool IsFinal(TxnId id) const override { return id.value() < final_below; }
  bool Release(TxnId id) override {
    released.push_back(id.value());
    return keep.contains(id.value());
  }
  void WillRelease(TxnId id) override { hinted.push_back(id.value()); }
  void BeforeRelease() override {
    ++before_release;
    // Every transaction the release will forget is still there.
    for (uint32_t i = h_.first_txn(); i < std::min<uint32_t>(final_below, h_.size()); ++i) {
      EXPECT_TRUE(h_.has_txn(TxnId(i))) << i;
    }
  }
  void MarkBytes(std::vector<uint64_t>& marks) override {
    for (const Value v : marked_values) history::MarkBytes(v, marks);
  }
  bool PinsKeys() const override { return pins_keys; }
  void MarkKeys(std::vector<uint64_t>& marks) const override {
    for (const KeyId k : marked_keys) {
      if (marks.size() <= k.value() / 64) marks.resize(k.value() / 64 + 1);
      marks[k.value() / 64] |= uint64_t{1} << (k.value() % 64);
    }
  }
  void ForgetKeys(std::span<const KeyId> keys) override {
    for (KeyId k : keys) forgotten_keys.push_back(k.value());
  }

  uint32_t final_below = 0;
  absl::flat_hash_set<uint32_t> keep;
  bool pins_keys = false;
  std::vector<Value> marked_values;
  std::vector<KeyId> marked_keys;

  std::vector<uint32_t> released;
  std::vector<uint32_t> hinted;
  int before_release = 0;
  std::vector<uint32_t> forgotten_keys;

 private:
  const History& h_;
};

// Transaction i writes register key "k<i>" := "v<i>" (a bytes key and value of its own) and
// int key 7 := i.
void AddTxn(HistoryBuilder& b, int i) {
  const std::string name = fmt::format("t{}", i);
  ASSERT_TRUE(b.BeginTxn(TxnHeader{.id = name,
                                   .session = "s",
                                   .start = Timestamp{10 * i, 0},
                                   .commit = Timestamp{10 * i + 5, 0}})
                  .ok());
  b.Write(b.BytesKey(fmt::format("k{}", i)), b.BytesValue(fmt::format("v{}", i)));
  b.Write(b.IntKey(7), Value::Int(i));
  ASSERT_TRUE(b.EndLiveTxn().ok());
}

LiveHistoryOptions EveryTime() {
  return {.min_release = 1, .min_bytes_collect = 0, .min_keys_collect = 0};
}

// A live history of key-value transactions 0 .. `txns` - 1 (AddTxn).
std::unique_ptr<LiveHistory> Started(int txns, LiveHistoryOptions options = EveryTime()) {
  auto live = std::make_unique<LiveHistory>(std::move(options), common::SystemClock::Get());
  live->Start(DataModel::kKeyValue);
  for (int i = 0; i < txns; ++i) AddTxn(live->builder(), i);
  return live;
}

TEST(LiveHistory, ReleasesOnlyWhatEveryHolderCallsFinal) {
  std::unique_ptr<LiveHistory> started = Started(100);
  LiveHistory& live = *started;
  TestHolder a(live.history());
  TestHolder b(live.history());
  for (TestHolder* x : {&a, &b}) live.Register(x);
  a.final_below = 90;
  b.final_below = 80;
  EXPECT_TRUE(live.MaybeForget());
  const History& h = live.history();
  EXPECT_EQ(h.first_txn(), 80u);
  EXPECT_FALSE(h.has_txn(TxnId(79)));
  EXPECT_TRUE(h.has_txn(TxnId(80)));
  EXPECT_EQ(live.stats().releases, 1u);
  // Both holders were asked about each transaction (so each drops what it may), and warned.
  EXPECT_EQ(a.released.size(), 80u);
  EXPECT_EQ(b.released.size(), 80u);
  EXPECT_EQ(a.hinted.size(), 80u);
  EXPECT_EQ(a.before_release, 1);
  EXPECT_EQ(b.before_release, 1);
}

TEST(LiveHistory, WaitsUntilAReleaseIsWorthItsCost) {
  std::unique_ptr<LiveHistory> started = Started(100, {.min_release = 50});
  LiveHistory& live = *started;
  TestHolder a(live.history());
  live.Register(&a);
  a.final_below = 49;  // below min_release
  EXPECT_FALSE(live.MaybeForget());
  a.final_below = 60;  // 60 final, 40 held: not twice as many
  EXPECT_FALSE(live.MaybeForget());
  EXPECT_EQ(a.before_release, 0);
  EXPECT_EQ(live.history().first_txn(), 0u);
  a.final_below = 70;  // 70 >= 2 * 30
  EXPECT_TRUE(live.MaybeForget());
  EXPECT_EQ(live.history().first_txn(), 70u);
}

TEST(LiveHistory, KeepsWhatAHolderStillReadsAndAsksAgain) {
  std::unique_ptr<LiveHistory> started = Started(100);
  LiveHistory& live = *started;
  TestHolder a(live.history());
  TestHolder b(live.history());
  for (TestHolder* x : {&a, &b}) live.Register(x);
  a.final_below = b.final_below = 80;
  b.keep = {3, 41};
  EXPECT_TRUE(live.MaybeForget());
  const History& h = live.history();
  EXPECT_EQ(h.retired_count(), 2u);
  EXPECT_TRUE(h.has_txn(TxnId(3)));
  EXPECT_TRUE(h.has_txn(TxnId(41)));
  EXPECT_FALSE(h.has_txn(TxnId(4)));
  // Kept transactions keep their bytes and keys.
  EXPECT_EQ(h.bytes(h.ops(TxnId(41))[0].value().bytes_index()), "v41");

  // At the next release both are asked again; once no one reads them they go.
  for (int i = 100; i < 200; ++i) AddTxn(live.builder(), i);
  a.final_below = b.final_below = 190;
  b.keep.clear();
  a.released.clear();
  EXPECT_TRUE(live.MaybeForget());
  EXPECT_EQ(h.retired_count(), 0u);
  EXPECT_FALSE(h.has_txn(TxnId(3)));
  EXPECT_EQ(std::count(a.released.begin(), a.released.end(), 3u), 1);
  EXPECT_EQ(std::count(a.released.begin(), a.released.end(), 41u), 1);
}

TEST(LiveHistory, ForgetsKeysUnlessMarkedOrPinned) {
  std::unique_ptr<LiveHistory> started = Started(100);
  LiveHistory& live = *started;
  TestHolder a(live.history());
  live.Register(&a);
  const History& h = live.history();
  const size_t keys = h.keys_held();
  ASSERT_EQ(keys, 101u);  // "k0".."k99" and 7
  const KeyId k60 = h.ops(TxnId(60))[0].key();
  const KeyId k70 = h.ops(TxnId(70))[0].key();

  // Pinned: nothing is forgotten.
  a.pins_keys = true;
  a.final_below = 70;
  EXPECT_TRUE(live.MaybeForget());
  EXPECT_EQ(h.keys_held(), keys);
  EXPECT_TRUE(a.forgotten_keys.empty());
  EXPECT_EQ(live.stats().key_collections, 0u);

  // Unpinned: the keys of released transactions go, but a marked one, and those still held.
  a.pins_keys = false;
  a.final_below = 100;
  a.marked_keys = {k60};
  for (int i = 100; i < 110; ++i) AddTxn(live.builder(), i);
  EXPECT_TRUE(live.MaybeForget());
  EXPECT_EQ(live.stats().key_collections, 1u);
  // "k0".."k99" but k60 go: k0..k69 were released at the first release, k70..k99 now.
  EXPECT_EQ(a.forgotten_keys.size(), 99u);
  EXPECT_EQ(live.stats().keys_forgotten, 99u);
  EXPECT_EQ(std::count(a.forgotten_keys.begin(), a.forgotten_keys.end(), k60.value()), 0);
  EXPECT_EQ(std::count(a.forgotten_keys.begin(), a.forgotten_keys.end(), k70.value()), 1);
  EXPECT_FALSE(h.key(k60).forgotten);
  EXPECT_TRUE(h.key(k70).forgotten);
  EXPECT_EQ(h.keys_held(), 12u);  // k60, 7, k100..k109
}

TEST(LiveHistory, ForgetsByteStringsUnlessMarked) {
  std::unique_ptr<LiveHistory> started = Started(100);
  LiveHistory& live = *started;
  TestHolder a(live.history());
  live.Register(&a);
  a.pins_keys = true;  // keys keep their bytes: count values alone
  const History& h = live.history();
  const size_t before = h.byte_strings_held();
  const Value v10 = h.ops(TxnId(10))[0].value();
  a.marked_values = {v10};
  a.final_below = 100;
  for (int i = 100; i < 110; ++i) AddTxn(live.builder(), i);
  EXPECT_TRUE(live.MaybeForget());
  EXPECT_EQ(live.stats().byte_collections, 1u);
  // "v0".."v99" go but the marked "v10".
  EXPECT_EQ(live.stats().bytes_forgotten, 99u);
  EXPECT_EQ(h.byte_strings_held(), before + 20 - 99);
  EXPECT_EQ(h.bytes(v10.bytes_index()), "v10");
}

TEST(LiveHistory, UnregisteredHoldersAreNotAsked) {
  std::unique_ptr<LiveHistory> started = Started(10);
  LiveHistory& live = *started;
  TestHolder a(live.history());
  TestHolder b(live.history());
  for (TestHolder* x : {&a, &b}) live.Register(x);
  live.Unregister(&b);
  a.final_below = 10;  // b would hold everything back
  EXPECT_TRUE(live.MaybeForget());
  EXPECT_TRUE(b.released.empty());
  EXPECT_EQ(live.history().first_txn(), 10u);
}

TEST(LiveHistory, CheckpointKeepsWhereReleasesStand) {
  std::unique_ptr<LiveHistory> started = Started(100);
  LiveHistory& live = *started;
  TestHolder a(live.history());
  live.Register(&a);
  a.final_below = 70;
  ASSERT_TRUE(live.MaybeForget());
  v1::HistoryCheckpoint saved;
  uint64_t release_end = 0;
  uint64_t releases = 0;
  live.Save(&saved, &release_end, &releases);
  EXPECT_EQ(release_end, 70u);
  EXPECT_EQ(releases, 1u);

  LiveHistory restored(EveryTime(), common::SystemClock::Get());
  ASSERT_TRUE(restored.Restore(saved, release_end, releases).ok());
  EXPECT_EQ(restored.stats().releases, 1u);
  EXPECT_EQ(restored.history().first_txn(), 70u);
  EXPECT_EQ(restored.history().size(), 100u);
  TestHolder b(restored.history());
  restored.Register(&b);
  b.final_below = 100;
  EXPECT_TRUE(restored.MaybeForget());
  // Only what the restored history still held was asked about.
  EXPECT_EQ(b.released.size(), 30u);
  EXPECT_EQ(restored.stats().releases, 2u);
}

}  // namespace
}  // namespace isowatch::history
