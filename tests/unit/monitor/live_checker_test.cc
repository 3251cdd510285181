// SPDX-License-Identifier: Apache-2.0
// The daemon's checking core on hand-built batches: refusals, session positions, late headers,
// pending counts, what a memory budget keeps, and a checkpoint written by hand.
#include "isowatch/monitor/live_checker.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/common/clock.h"
#include "isowatch/engine/version_spill.h"
#include "isowatch/history/history.h"
#include "isowatch/store/violation_record.h"
#include "isowatch/v1/checkpoint.pb.h"
#include "isowatch/v1/history.pb.h"
#include "isowatch/v1/ingest.pb.h"
#include "isowatch/windows/window_cutter.h"

#include "tests/testing/source_dir.h"
#include "tests/unit/monitor/live_checker_batches.h"

namespace isowatch::monitor {
namespace {

using history::History;

v1::Transaction Txn(int64_t id, int64_t start, int64_t commit) {
  v1::Transaction t;
  t.set_id_int(id);
  t.set_session_int(id);
  t.mutable_start()->set_physical(start);
  t.mutable_commit()->set_physical(commit);
  return t;
}

void AddOp(v1::Transaction* t, v1::Operation::Kind kind, int64_t key, int64_t value) {
  v1::Operation* op = t->add_ops();
  op->set_kind(kind);
  op->mutable_key()->set_int_(key);
  op->mutable_value()->set_int_(value);
}

TEST(LiveChecker, RefusesAKeyUsedAsRegisterAndListAndKeepsTheRest) {
  common::ManualClock clock;
  LiveChecker live(LiveOptions{.engine = {.clock = &clock}});
  v1::IngestBatch b;
  b.set_stream("s");
  b.set_seq(1);
  v1::Transaction* w = b.add_txns();
  *w = Txn(1, 1, 2);
  AddOp(w, v1::Operation::WRITE, 7, 10);
  v1::Transaction* a = b.add_txns();
  *a = Txn(2, 3, 4);
  AddOp(a, v1::Operation::APPEND, 7, 11);  // key 7 is a register
  v1::Transaction* r = b.add_txns();
  *r = Txn(3, 5, 6);
  AddOp(r, v1::Operation::READ, 7, 99);  // never written: EXT
  b.set_end_of_stream(true);
  std::vector<TxnRefusal> refused = live.Apply(b, All(b));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].index, 1u);
  EXPECT_EQ(refused[0].txn_id, "2");
  EXPECT_NE(refused[0].detail.find("both as a register and as a list"), std::string::npos);
  EXPECT_EQ(live.history().size(), 2u);
  auto violations = live.TakeViolations(5);
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].anomaly, "EXT");
  EXPECT_EQ(violations[0].ext_kind, "never");
  EXPECT_EQ(violations[0].streams, std::vector<std::string>{"s"});
  EXPECT_EQ(violations[0].finalised_unix_ms, 5);
  EXPECT_NE(violations[0].json.find("\"txns\":[3]"), std::string::npos) << violations[0].json;
}

// Under a memory budget the live history forgets byte values nothing holds (here those of 50 keys
// written over and over) and hands their pool indices to new values. A key written once, early,
// goes cold: its writer is released and its last version and state move to the spill, which then
// alone holds the value. Much later a read of that value must still match it, and a read of
// another must not.
TEST(LiveChecker, AValueOnlyTheSpillHoldsIsNotForgotten) {
  common::ManualClock clock;
  engine::MemoryVersionSpill spill;
  LiveOptions options{.engine = {.clock = &clock}};
  options.engine.spill = &spill;
  options.engine.memory_budget = 1;
  options.history.min_release = 16;
  options.history.min_bytes_collect = 0;
  uint64_t collections = 0;
  uint64_t forgotten = 0;
  options.history.on_byte_collection = [&](double seconds, uint64_t n) {
    EXPECT_GE(seconds, 0.0);
    ++collections;
    forgotten += n;
  };
  LiveChecker live(options);
  auto write = [](v1::Transaction* t, int64_t key, const std::string& value) {
    v1::Operation* op = t->add_ops();
    op->set_kind(v1::Operation::WRITE);
    op->mutable_key()->set_int_(key);
    op->mutable_value()->set_bytes(value);
  };
  auto read = [](v1::Transaction* t, int64_t key, const std::string& value) {
    v1::Operation* op = t->add_ops();
    op->set_kind(v1::Operation::READ);
    op->mutable_key()->set_int_(key);
    op->mutable_value()->set_bytes(value);
  };
  int64_t id = 0;
  uint64_t seq = 0;
  auto batch = [&](int txns, bool last) {
    v1::IngestBatch b;
    b.set_stream("s");
    b.set_seq(++seq);
    for (int i = 0; i < txns; ++i) {
      ++id;
      v1::Transaction* t = b.add_txns();
      *t = Txn(id, 10 * id, 10 * id + 5);
      t->set_session_int(id % 4);
      if (id == 1) {
        write(t, 1, "the old value");
      } else if (last && i == txns - 2) {
        read(t, 1, "the old value");
      } else if (last && i == txns - 1) {
        read(t, 1, fmt::format("w{}", id - 1000));  // a value of another key: EXT
      } else {
        write(t, 1000 + id % 50, fmt::format("w{}", id));
      }
    }
    b.mutable_watermark()->set_physical(10 * id + 5);
    b.set_end_of_stream(last);
    EXPECT_TRUE(live.Apply(b, All(b)).empty());
  };
  for (int i = 0; i < 200; ++i) batch(20, false);
  EXPECT_TRUE(live.TakeViolations(1).empty());
  // Key 1 went to the spill, its writer left the history, and the history forgot byte values
  // and gave their indices out again.
  EXPECT_GT(live.stats().evicted_keys, 0u);
  EXPECT_LT(live.history().txns().size() + live.history().retired_count(), 2000u);
  EXPECT_FALSE(live.history().has_txn(TxnId(0)));
  EXPECT_GT(live.history_stats().bytes_forgotten, 1000u);
  EXPECT_EQ(forgotten, live.history_stats().bytes_forgotten);
  EXPECT_EQ(collections, live.history_stats().byte_collections);
  EXPECT_LT(live.history().byte_strings_held(), 2000u);
  batch(20, true);
  EXPECT_GT(live.stats().restored_keys, 0u);
  std::vector<store::ViolationRecord> found = live.TakeViolations(2);
  std::string all;
  for (const auto& r : found) all += r.json + "\n";
  ASSERT_EQ(found.size(), 1u) << all;
  EXPECT_EQ(found[0].anomaly, "EXT");
  EXPECT_NE(found[0].json.find(fmt::format("\"txns\":[{}", id)), std::string::npos)
      << found[0].json;
}

// A session position far past the first one of its session not delivered yet (a bad seq, or a
// collector that skips positions) is left out of its session and counted; the engine does not
// make room for every position in between, and the transaction's other checks are made.
TEST(LiveChecker, AFarSessionPositionIsLeftOutOfItsSessionAndCounted) {
  common::ManualClock clock;
  LiveChecker live(LiveOptions{.engine = {.clock = &clock}});
  v1::IngestBatch b;
  b.set_stream("s");
  b.set_seq(1);
  auto add = [&](int64_t id, const char* session, int64_t seq, int64_t start, int64_t commit) {
    v1::Transaction* t = b.add_txns();
    *t = Txn(id, start, commit);
    t->set_session_str(session);
    t->set_seq(seq);
    return t;
  };
  // Session a: the second transaction starts before the first commits (SESSION).
  AddOp(add(1, "a", 0, 1, 2), v1::Operation::WRITE, 1, 1);
  AddOp(add(2, "a", 1, 1, 3), v1::Operation::WRITE, 2, 1);
  // Session b: the same, but at the greatest position the protocol allows, and 16,384
  // positions on from the first missing one: left out of the session. Its read of a value never
  // written is still an EXT violation.
  AddOp(add(3, "b", 0, 4, 5), v1::Operation::WRITE, 3, 1);
  v1::Transaction* far = add(4, "b", 4294967294, 4, 6);
  AddOp(far, v1::Operation::WRITE, 4, 1);
  AddOp(far, v1::Operation::READ, 5, 7);
  AddOp(add(5, "b", 16385, 4, 7), v1::Operation::WRITE, 6, 1);
  // Just inside the bound: kept in the window (its pair waits for the positions between).
  AddOp(add(6, "c", 0, 10, 11), v1::Operation::WRITE, 7, 1);
  AddOp(add(7, "c", 16384, 10, 12), v1::Operation::WRITE, 8, 1);
  b.set_end_of_stream(true);
  ASSERT_TRUE(live.Apply(b, All(b)).empty());
  EXPECT_EQ(live.stats().session_unjudged, 2u);
  // Session c's window holds its 16,385 positions; nothing holds 4 billion.
  EXPECT_LT(live.stats().memory_bytes, uint64_t{64} << 20);
  std::multiset<std::string> anomalies;
  for (const auto& v : live.TakeViolations(5)) {
    anomalies.insert(v.anomaly);
    if (v.anomaly == "SESSION") {
      EXPECT_NE(v.json.find("\"txns\":[2,1]"), std::string::npos) << v.json;
    }
    if (v.anomaly == "EXT") {
      EXPECT_NE(v.json.find("\"txns\":[4]"), std::string::npos) << v.json;
    }
  }
  EXPECT_EQ(anomalies, (std::multiset<std::string>{"EXT", "SESSION"}));
}

TEST(LiveChecker, HeaderAfterTransactionsIsIgnoredAndCounted) {
  common::ManualClock clock;
  LiveChecker live(LiveOptions{.engine = {.clock = &clock}});
  v1::IngestBatch first;
  first.set_stream("a");
  first.set_seq(1);
  first.mutable_header()->mutable_initial()->mutable_default_value()->set_int_(0);
  *first.add_txns() = Txn(1, 1, 2);
  AddOp(first.mutable_txns(0), v1::Operation::READ, 1, 0);  // the initial value: fine
  EXPECT_TRUE(live.Apply(first, All(first)).empty());
  v1::IngestBatch second;
  second.set_stream("b");
  second.set_seq(1);
  second.mutable_header()->mutable_initial()->mutable_default_value()->set_int_(5);
  *second.add_txns() = Txn(2, 3, 4);
  AddOp(second.mutable_txns(0), v1::Operation::READ, 2, 0);  // still 0: the second header is out
  second.set_end_of_stream(true);
  EXPECT_TRUE(live.Apply(second, All(second)).empty());
  EXPECT_EQ(live.ignored_headers(), 1u);
  // Stream "a" is open without a watermark: nothing is final until its timeout.
  EXPECT_TRUE(live.TakeViolations(1).empty());
  clock.Advance(6000);
  live.Tick();
  EXPECT_TRUE(live.TakeViolations(2).empty());
  // The timeout covers what stream "a" delivered (up to commit 2), not later commits of "b".
  for (const LiveStreamStatus& s : live.Streams()) {
    EXPECT_EQ(s.pending, s.name == "a" ? 0u : 1u) << s.name;
  }
}

// A header's metadata "timestamp_clock" says the stream's timestamps are a Unix time (for its
// lag), a later header may change it, an unknown value leaves it, and a checkpoint keeps it.
TEST(LiveChecker, KeepsWhatClockAStreamsTimestampsAre) {
  common::ManualClock clock;
  LiveChecker live(LiveOptions{.engine = {.clock = &clock}});
  auto apply = [&](const std::string& stream, uint64_t seq, const std::string& value) {
    v1::IngestBatch b;
    b.set_stream(stream);
    b.set_seq(seq);
    if (!value.empty()) (*b.mutable_header()->mutable_metadata())["timestamp_clock"] = value;
    *b.add_txns() = Txn(static_cast<int64_t>(seq) * 10 + (stream == "a" ? 1 : 2), 1, 2);
    EXPECT_TRUE(live.Apply(b, All(b)).empty());
  };
  auto clocks = [](const LiveChecker& l) {
    std::map<std::string, int64_t> out;
    for (const LiveStreamStatus& s : l.Streams()) out[s.name] = s.clock_ns;
    return out;
  };
  apply("a", 1, "unix_ms");
  apply("b", 1, "");
  EXPECT_EQ(clocks(live), (std::map<std::string, int64_t>{{"a", 1'000'000}, {"b", 0}}));
  apply("a", 2, "lsn");  // not a clock this daemon knows: ignored
  apply("b", 2, "unix_us");
  EXPECT_EQ(clocks(live), (std::map<std::string, int64_t>{{"a", 1'000'000}, {"b", 1'000}}));
  v1::LiveCheckpoint c;
  ASSERT_TRUE(live.SaveCheckpoint(&c).ok());
  LiveChecker restored(LiveOptions{.engine = {.clock = &clock}});
  ASSERT_TRUE(restored.RestoreCheckpoint(c, 0).ok());
  EXPECT_EQ(clocks(restored), clocks(live));
}

TEST(LiveChecker, PendingCountsTransactionsHeldBackByAnOpenStream) {
  common::ManualClock clock;
  LiveChecker live(LiveOptions{.engine = {.clock = &clock}});
  v1::IngestBatch a;
  a.set_stream("a");
  a.set_seq(1);
  a.mutable_watermark()->set_physical(1);
  *a.add_txns() = Txn(1, 1, 1);
  EXPECT_TRUE(live.Apply(a, All(a)).empty());
  v1::IngestBatch b;
  b.set_stream("b");
  b.set_seq(1);
  b.mutable_watermark()->set_physical(50);
  *b.add_txns() = Txn(2, 10, 20);
  *b.add_txns() = Txn(3, 30, 40);
  b.set_end_of_stream(true);
  EXPECT_TRUE(live.Apply(b, All(b)).empty());
  auto find = [&](const std::string& name) {
    for (const LiveStreamStatus& s : live.Streams()) {
      if (s.name == name) return s;
    }
    return LiveStreamStatus{};
  };
  EXPECT_TRUE(find("b").closed);
  EXPECT_EQ(find("b").delivered, 2u);
  EXPECT_EQ(find("b").pending, 2u);  // stream "a" promises only up to 1
  ASSERT_TRUE(find("a").watermark.has_value());
  EXPECT_EQ(find("a").watermark->physical, 1);
  v1::IngestBatch a2;
  a2.set_stream("a");
  a2.set_seq(2);
  a2.mutable_watermark()->set_physical(30);
  EXPECT_TRUE(live.Apply(a2, All(a2)).empty());
  EXPECT_EQ(find("b").pending, 1u);
  v1::IngestBatch end;
  end.set_stream("a");
  end.set_seq(3);
  end.set_end_of_stream(true);
  EXPECT_TRUE(live.Apply(end, All(end)).empty());
  EXPECT_EQ(find("b").pending, 0u);
}

// Under a memory budget the live history forgets final transactions, but not the ones the
// engine still reads: the newest version of a key and a session's last transaction, written
// long before, are still there (named, with their timestamps) when a late writer and a late
// session successor arrive.
TEST(LiveChecker, BudgetReleaseKeepsWhatLaterChecksRead) {
  common::ManualClock clock;
  engine::MemoryVersionSpill spill;
  LiveChecker live(LiveOptions{.engine = {.clock = &clock, .spill = &spill, .memory_budget = 1},
                               .history = {.min_release = 8}});
  uint64_t seq = 0;
  auto batch = [&](int64_t watermark) {
    v1::IngestBatch b;
    b.set_stream("s");
    b.set_seq(++seq);
    b.mutable_watermark()->set_physical(watermark);
    return b;
  };
  v1::IngestBatch first = batch(1000);
  *first.add_txns() = Txn(1, 1, 3);  // writes x; its own session 1
  AddOp(first.mutable_txns(0), v1::Operation::WRITE, 7, 70);
  for (int i = 0; i < 100; ++i) {  // others: one session, five other keys
    *first.add_txns() = Txn(100 + i, 10 + 5 * i, 12 + 5 * i);
    first.mutable_txns(i + 1)->set_session_int(500);
    AddOp(first.mutable_txns(i + 1), v1::Operation::WRITE, 1000 + i % 5, i);
  }
  ASSERT_TRUE(live.Apply(first, All(first)).empty());
  ASSERT_TRUE(live.TakeViolations(1).empty());
  const History& h = live.history();
  ASSERT_GT(live.history_stats().releases, 0u);
  EXPECT_GT(h.first_txn(), 50u);
  EXPECT_TRUE(h.has_txn(TxnId(0))) << "transaction 1 wrote the newest version of x";
  EXPECT_FALSE(h.has_txn(TxnId(5))) << "released: its key has a newer version";

  v1::IngestBatch late = batch(3000);
  *late.add_txns() = Txn(2, 2, 2000);  // overlaps transaction 1 and writes x: NOCONFLICT
  AddOp(late.mutable_txns(0), v1::Operation::WRITE, 7, 71);
  v1::Transaction* next = late.add_txns();
  *next = Txn(3, 2, 2500);  // session 1 after transaction 1, but starts before it committed
  next->set_session_int(1);
  late.mutable_txns(0)->set_session_int(50);
  late.set_end_of_stream(true);
  ASSERT_TRUE(live.Apply(late, All(late)).empty());
  std::vector<store::ViolationRecord> found = live.TakeViolations(2);
  std::set<std::string> kinds;
  for (const auto& r : found) {
    kinds.insert(r.anomaly);
    if (r.anomaly == "NOCONFLICT") {
      EXPECT_NE(r.json.find("\"txns\":[1,2]"), std::string::npos) << r.json;
      EXPECT_NE(r.json.find("1 (session 1, start 1, commit 3)"), std::string::npos) << r.json;
    }
    if (r.anomaly == "SESSION") {
      EXPECT_NE(r.json.find("\"txns\":[3,1]"), std::string::npos) << r.json;
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"NOCONFLICT", "SESSION"}));
}

// The fuzzer's seed checkpoint (tests/fuzz/corpus/checkpoint_fuzz/small, written by hand in the
// protobuf text format): stream "a" at watermark 20 has delivered t1 (key 1 := 5, committed at
// 15) and t2 (key 1 := 7, committed at 40, not final yet). Restored, the checker goes on from
// there: a read of key 1 after 40 sees 7, one between 15 and 40 sees t1's 5.
TEST(LiveChecker, RestoresAHandWrittenCheckpoint) {
  std::ifstream in(std::filesystem::path(isowatch::testing::SourceDir()) /
                       "tests/fuzz/corpus/checkpoint_fuzz/small",
                   std::ios::binary);
  ASSERT_TRUE(in.good());
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  v1::LiveCheckpoint c;
  ASSERT_TRUE(c.ParseFromString(bytes));
  common::ManualClock clock;
  LiveChecker live(LiveOptions{.engine = {.clock = &clock}});
  const absl::Status s = live.RestoreCheckpoint(c, 0);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(live.history().size(), 2u);
  ASSERT_EQ(live.Streams().size(), 1u);
  EXPECT_EQ(live.Streams()[0].delivered, 2u);
  EXPECT_EQ(live.Streams()[0].pending, 1u);  // t2

  v1::IngestBatch b;
  b.set_stream("a");
  b.set_seq(3);
  v1::Transaction right = Txn(3, 50, 55);
  AddOp(&right, v1::Operation::READ, 1, 7);
  v1::Transaction wrong = Txn(4, 20, 56);  // reads at 20: sees t1's 5, not 7
  AddOp(&wrong, v1::Operation::READ, 1, 7);
  *b.add_txns() = right;
  *b.add_txns() = wrong;
  b.mutable_watermark()->set_physical(60);
  b.set_end_of_stream(true);
  EXPECT_TRUE(live.Apply(b, All(b)).empty());
  std::vector<std::string> found;
  for (const store::ViolationRecord& r : live.TakeViolations(1)) found.push_back(r.json);
  ASSERT_EQ(found.size(), 1u);
  // A checker that cuts windows cannot start from a checkpoint (taken without windows).
  LiveOptions with_windows{.engine = {.clock = &clock}};
  with_windows.windows = windows::WindowOptions{.transactions = 10};
  LiveChecker windowed(with_windows);
  EXPECT_EQ(windowed.RestoreCheckpoint(c, 0).code(), absl::StatusCode::kFailedPrecondition);

  // Judged against the restored chain, and explained with the restored writers.
  EXPECT_NE(found[0].find(R"("anomaly":"EXT","ext_kind":"after","txns":[4,"t2"])"),
            std::string::npos)
      << found[0];
  EXPECT_NE(found[0].find("(written by t1)"), std::string::npos) << found[0];
}

}  // namespace
}  // namespace isowatch::monitor
