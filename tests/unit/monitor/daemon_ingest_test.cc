// SPDX-License-Identifier: Apache-2.0
// isowatchd in-process, at ingest: bad transactions are refused in the ack and the rest kept, and
// counted; a backward watermark is ignored, counted and logged; a restart still recognises
// re-sent batches and ids, and keeps the counts; a shutdown applies every acknowledged batch.
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "isowatch/config/config.h"
#include "isowatch/ingest/client.h"
#include "isowatch/ingest/validate.h"
#include "isowatch/monitor/daemon.h"
#include "isowatch/monitor/monitor.h"
#include "isowatch/server/status_source.h"
#include "isowatch/store/violation_record.h"
#include "isowatch/v1/history.pb.h"
#include "isowatch/v1/ingest.pb.h"

#include "tests/unit/monitor/daemon_fixture.h"

namespace isowatch::monitor {
namespace {

using ::testing::HasSubstr;

v1::Transaction Appender(int64_t id, int64_t key, int64_t value) {
  return OneOp(id, v1::Operation::APPEND, key, value);
}

// A value no transaction of these tests writes.
int64_t Unwritten(int64_t id) { return 1'000'000 + id; }

// The sum of every sample of the metric `name`, whatever its labels.
double Total(const std::string& text, std::string_view name) {
  std::istringstream in(text);
  std::string line;
  double total = 0;
  while (std::getline(in, line)) {
    if (line.rfind(std::string(name) + "{", 0) == 0 ||
        line.rfind(std::string(name) + " ", 0) == 0) {
      total += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return total;
}

struct ExpectedRefusal {
  uint32_t index;
  v1::RefusalReason reason;
  bool whole_batch = false;
};

TEST_F(DaemonTest, RefusesMalformedTransactionsAndKeepsTheRest) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.ingest.max_batch_transactions = 8;
  ASSERT_NO_FATAL_FAILURE(Start(config));
  const std::string s = "bad-input";

  struct Step {
    v1::IngestBatch batch;
    std::vector<ExpectedRefusal> refusals;
    uint64_t durable_seq;
  };
  std::vector<Step> steps;
  // The good transactions: writers of key 1 and 2, readers of what they wrote (no violation)
  // and readers of values nobody wrote (one EXT violation each).
  std::multiset<Brief> want;
  uint64_t good = 0;

  {  // 1: a transaction without an id.
    v1::Transaction no_id = Reader(900, 1, Unwritten(900));
    no_id.clear_id_int();
    steps.push_back({Batch(s, 1, {Writer(1, 1, 100), std::move(no_id), Reader(2, 1, Unwritten(2))}),
                     {{1, v1::MISSING_ID}},
                     1});
    want.insert(ExtNever(2, 1));
    good += 2;
  }
  {  // 2: committed without a commit timestamp.
    v1::Transaction no_commit = Reader(901, 1, Unwritten(901));
    no_commit.clear_commit();
    steps.push_back({Batch(s, 2, {Reader(3, 1, 100), std::move(no_commit)}),
                     {{1, v1::MISSING_COMMIT_TIMESTAMP}},
                     2});
    good += 1;
  }
  {  // 3: start after commit.
    v1::Transaction backwards = Reader(902, 1, Unwritten(902));
    backwards.mutable_start()->set_physical(backwards.commit().physical() + 1);
    steps.push_back({Batch(s, 3, {std::move(backwards), Reader(4, 1, Unwritten(4))}),
                     {{0, v1::START_AFTER_COMMIT}},
                     3});
    want.insert(ExtNever(4, 1));
    good += 1;
  }
  {  // 4: an operation without a kind.
    v1::Transaction no_kind = Reader(903, 1, Unwritten(903));
    no_kind.mutable_ops(0)->clear_kind();
    steps.push_back({Batch(s, 4, {Writer(5, 2, 200), Reader(6, 2, 200), std::move(no_kind)}),
                     {{2, v1::UNKNOWN_OPERATION_KIND}},
                     4});
    good += 2;
  }
  {  // 5: a write without a value.
    v1::Transaction no_value = Writer(904, 2, 999);
    no_value.mutable_ops(0)->clear_value();
    steps.push_back({Batch(s, 5, {std::move(no_value), Reader(7, 2, Unwritten(7))}),
                     {{0, v1::MISSING_VALUE}},
                     5});
    want.insert(ExtNever(7, 2));
    good += 1;
  }
  {  // 6: more transactions than max_batch_transactions: refused whole, its seq consumed. Had any
     // of them been applied, its unwritten read would show as a violation.
    std::vector<v1::Transaction> txns;
    for (int64_t id = 910; id < 919; ++id) txns.push_back(Reader(id, 1, Unwritten(id)));
    steps.push_back({Batch(s, 6, std::move(txns)), {{0, v1::BATCH_TOO_LARGE, true}}, 6});
  }
  {  // 7: id 1 again with other content (refused), id 2 again unchanged (a silent duplicate).
    steps.push_back({Batch(s, 7,
                           {Writer(1, 1, 101), Reader(2, 1, Unwritten(2)), Reader(8, 1, 100),
                            Reader(9, 2, Unwritten(9))}),
                     {{0, v1::ID_REUSED}},
                     7});
    want.insert(ExtNever(9, 2));
    good += 2;
  }
  {  // 8: key 1 is a register; an append to it is well formed, and refused in the ack: the
     // daemon knows, before it logs the batch, that the live history could not take it.
    steps.push_back({Batch(s, 8, {Appender(10, 1, 5), Reader(11, 1, Unwritten(11))}),
                     {{0, v1::KEY_KIND_CONFLICT}},
                     8});
    want.insert(ExtNever(11, 1));
    good += 1;
  }
  // 10 before 9: a gap, refused whole without taking the seq.
  steps.push_back(
      {Batch(s, 10, {Reader(920, 1, Unwritten(920))}), {{0, v1::SEQUENCE_GAP, true}}, 8});
  {  // 9: the last batch, closing the stream.
    v1::IngestBatch last = Batch(s, 9, {Reader(12, 2, 200), Reader(13, 1, Unwritten(13))});
    last.set_end_of_stream(true);
    steps.push_back({std::move(last), {}, 9});
    want.insert(ExtNever(13, 1));
    good += 2;
  }

  for (const Step& step : steps) {
    SCOPED_TRACE(fmt::format("batch {}", step.batch.seq()));
    absl::StatusOr<v1::IngestAck> ack = Push(step.batch);
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->stream(), s);
    EXPECT_EQ(ack->durable_seq(), step.durable_seq);
    EXPECT_FALSE(ack->duplicate());
    ASSERT_EQ(ack->refusals_size(), static_cast<int>(step.refusals.size()))
        << ack->ShortDebugString();
    for (size_t i = 0; i < step.refusals.size(); ++i) {
      const v1::Refusal& got = ack->refusals(static_cast<int>(i));
      EXPECT_EQ(got.seq(), step.batch.seq());
      EXPECT_EQ(got.index(), step.refusals[i].index);
      EXPECT_EQ(got.reason(), step.refusals[i].reason)
          << ingest::RefusalReasonName(got.reason()) << ": " << got.detail();
      EXPECT_EQ(got.whole_batch(), step.refusals[i].whole_batch);
      EXPECT_FALSE(got.detail().empty());
    }
  }

  ASSERT_TRUE(WaitChecked(s)) << "the stream was not checked completely";

  // Every reason counted once per transaction refused (a whole batch: each of its transactions),
  // all at ingest: none is left for the live history to refuse.
  const std::map<std::string, double> reasons = {
      {"missing_id", 1},         {"missing_commit_timestamp", 1},
      {"start_after_commit", 1}, {"unknown_operation_kind", 1},
      {"missing_value", 1},      {"batch_too_large", 9},
      {"id_reused", 1},          {"sequence_gap", 1},
      {"key_kind_conflict", 1}};
  double refused = 0;
  for (const auto& [reason, n] : reasons) refused += n;
  std::string metrics;
  const bool counted = WaitFor([&] {
    metrics = Metrics();
    for (const auto& [reason, n] : reasons) {
      auto v = Sample(metrics,
                      fmt::format("isowatch_refused_transactions_total{{reason=\"{}\"}}", reason));
      if (!v || *v != n) return false;
    }
    return true;
  });
  EXPECT_TRUE(counted) << metrics;
  for (const auto& [reason, n] : reasons) {
    EXPECT_EQ(Sample(metrics,
                     fmt::format("isowatch_refused_transactions_total{{reason=\"{}\"}}", reason)),
              n)
        << reason;
  }
  // Nothing else refused.
  EXPECT_EQ(Total(metrics, "isowatch_refused_transactions_total"), refused) << metrics;
  EXPECT_EQ(Sample(metrics, "isowatch_refused_batches_total"), 2.0) << metrics;
  EXPECT_EQ(
      Sample(metrics, fmt::format("isowatch_ingested_transactions_total{{stream=\"{}\"}}", s)),
      static_cast<double>(good));

  // The status agrees.
  auto stream = StreamStatus(s);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ((*stream)["ingested_transactions"], std::to_string(good));
  EXPECT_EQ((*stream)["acked_sequence"], "9");
  std::unique_ptr<rapidjson::Document> status = Status();
  ASSERT_TRUE(status->IsObject() && status->HasMember("counts"));
  const rapidjson::Value& counts = (*status)["counts"];
  ASSERT_TRUE(counts.HasMember("refused_transactions"));
  EXPECT_EQ(ToJson(counts["refused_transactions"]), fmt::format("{}", refused));
  EXPECT_EQ(ToJson(counts["violations"]), std::to_string(want.size()));

  // Still alive and ready, and the good transactions gave exactly the expected violations.
  auto ready = Get("/readyz");
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->status, 200) << ready->body;
  auto seen = Violations();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(Summary(*seen), want);
  EXPECT_EQ(Total(metrics, "isowatch_violations_total"), static_cast<double>(want.size()))
      << metrics;

  // A later stream on the same daemon is checked as usual.
  v1::IngestBatch more =
      Batch("after-bad-input", 1, {Writer(20, 3, 300), Reader(21, 3, Unwritten(21))});
  more.set_end_of_stream(true);
  absl::StatusOr<v1::IngestAck> ack = Push(more);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->refusals_size(), 0);
  ASSERT_TRUE(WaitChecked("after-bad-input"));
  want.insert(ExtNever(21, 3));
  seen = Violations();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(Summary(*seen), want);
}

// The refusals of `ack`, as (index, reason) and in order, are `want`; each names the batch.
void ExpectRefusalList(const v1::IngestAck& ack, uint64_t seq,
                       const std::vector<ExpectedRefusal>& want) {
  ASSERT_EQ(ack.refusals_size(), static_cast<int>(want.size())) << ack.ShortDebugString();
  for (size_t i = 0; i < want.size(); ++i) {
    const v1::Refusal& got = ack.refusals(static_cast<int>(i));
    EXPECT_EQ(got.seq(), seq);
    EXPECT_EQ(got.index(), want[i].index);
    EXPECT_EQ(got.reason(), want[i].reason)
        << ingest::RefusalReasonName(got.reason()) << ": " << got.detail();
    EXPECT_FALSE(got.detail().empty());
  }
}

void ExpectRefusals(const absl::StatusOr<v1::IngestAck>& ack, uint64_t seq,
                    const std::vector<ExpectedRefusal>& want) {
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_FALSE(ack->duplicate());
  EXPECT_EQ(ack->durable_seq(), seq);
  ExpectRefusalList(*ack, seq, want);
}

// The ack of batch `seq` sent again while the stream's durable seq is `durable_seq`: a duplicate
// that repeats the refusals of the batch's first ack.
void ExpectRepeatedRefusals(const absl::StatusOr<v1::IngestAck>& ack, uint64_t durable_seq,
                            uint64_t seq, const std::vector<ExpectedRefusal>& want) {
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->duplicate());
  EXPECT_EQ(ack->durable_seq(), durable_seq);
  ExpectRefusalList(*ack, seq, want);
}

// A transaction of session `session` with session position `seq` (none if negative) that writes
// `value` to `key`.
v1::Transaction SessionWriter(int64_t id, int64_t key, const std::string& session, int64_t seq) {
  v1::Transaction t = Writer(id, key, 10 * id);
  t.set_session_str(session);
  if (seq >= 0) t.set_seq(seq);
  return t;
}

// Keys and sessions are shared by all streams: a transaction the live history could not take (a
// key used both as a register and as a list, a session that numbers only some of its
// transactions) is refused in its batch's ack, whichever stream used the key or the session
// first, and the rest of the batch is kept. The decisions survive a restart (they are rebuilt
// from the log), and a batch sent again is a duplicate, applied and counted once, whose ack
// repeats the refusals, before and after a restart.
TEST_F(DaemonTest, RefusesHistoryConflictsInTheAck) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  const config::DaemonConfig config = TestConfig(dir.Path());
  ASSERT_NO_FATAL_FAILURE(Start(config));

  // Key 1 becomes a register, key 2 a list; session "s" numbers its transactions.
  ExpectRefusals(
      Push(Batch("a", 1, {Writer(1, 1, 100), Appender(2, 2, 200), SessionWriter(7, 7, "s", 0)})), 1,
      {});
  // The same stream, a later batch: the append to register 1 is refused, the reader after it
  // kept.
  const v1::IngestBatch a2 = Batch("a", 2, {Appender(3, 1, 300), Reader(4, 1, 100)});
  ExpectRefusals(Push(a2), 2, {{0, v1::KEY_KIND_CONFLICT}});
  // Another stream meets the same keys.
  ExpectRefusals(
      Push(Batch("b", 1, {Writer(5, 2, 500), Reader(6, 1, Unwritten(6)), Appender(8, 1, 800)})), 1,
      {{0, v1::KEY_KIND_CONFLICT}, {2, v1::KEY_KIND_CONFLICT}});
  // Within one batch: key 3 is made a list, then written; transaction 10 uses key 4 both ways
  // itself, and being refused it leaves key 4 free for transaction 12.
  v1::Transaction both = Writer(10, 4, 1000);
  *both.add_ops() = Appender(10, 4, 1001).ops(0);
  ExpectRefusals(
      Push(Batch("b", 2, {Appender(9, 3, 900), Writer(11, 3, 1100), both, Writer(12, 4, 1200)})), 2,
      {{1, v1::KEY_KIND_CONFLICT}, {2, v1::KEY_KIND_CONFLICT}});
  // Session "s", numbered on stream a, gets a transaction without a seq on stream b; a session
  // position out of range is malformed.
  const v1::IngestBatch b3 = Batch("b", 3,
                                   {SessionWriter(13, 5, "s", -1), SessionWriter(14, 5, "s", 1),
                                    SessionWriter(15, 6, "t", 4294967295)});
  const std::vector<ExpectedRefusal> b3_refused = {{0, v1::SESSION_SEQ_CONFLICT},
                                                   {2, v1::MALFORMED_TRANSACTION}};
  ExpectRefusals(Push(b3), 3, b3_refused);
  // Batches a2 and b3 again, as after an ack lost with a connection: duplicates, whose acks
  // repeat the refusals of the first ones (the registry's and the validation's, in batch order)
  // without counting them again.
  ExpectRepeatedRefusals(Push(a2), 2, 2, {{0, v1::KEY_KIND_CONFLICT}});
  ExpectRepeatedRefusals(Push(b3), 3, 3, b3_refused);

  auto counted = [&](double key_kind, double session_seq) {
    std::string metrics;
    const bool ok = WaitFor([&] {
      metrics = Metrics();
      return Sample(metrics,
                    R"(isowatch_refused_transactions_total{reason="key_kind_conflict"})") ==
                 key_kind &&
             Sample(metrics,
                    R"(isowatch_refused_transactions_total{reason="session_seq_conflict"})") ==
                 session_seq &&
             Sample(metrics, "isowatch_duplicate_batches_total") >= 1.0;
    });
    EXPECT_TRUE(ok) << metrics;
    // The live history, which checks the same again, finds nothing to refuse.
    EXPECT_EQ(Sample(metrics, R"(isowatch_refused_transactions_total{reason="history_conflict"})")
                  .value_or(0),
              0.0)
        << metrics;
  };
  counted(5, 1);
  Stop();

  // After a restart the registry, rebuilt from the log, decides the same.
  ASSERT_NO_FATAL_FAILURE(Start(config));
  v1::IngestBatch c1 =
      Batch("c", 1,
            {Appender(16, 1, 1600), Writer(17, 2, 1700), SessionWriter(18, 8, "s", -1),
             Appender(19, 3, 1900), Writer(20, 4, 2000)});
  c1.set_end_of_stream(true);
  ExpectRefusals(
      Push(c1), 1,
      {{0, v1::KEY_KIND_CONFLICT}, {1, v1::KEY_KIND_CONFLICT}, {2, v1::SESSION_SEQ_CONFLICT}});
  ExpectRepeatedRefusals(Push(a2), 2, 2, {{0, v1::KEY_KIND_CONFLICT}});
  ExpectRepeatedRefusals(Push(b3), 3, 3, b3_refused);
  v1::IngestBatch a3 = Batch("a", 3, {});
  a3.set_end_of_stream(true);
  ExpectRefusals(Push(a3), 3, {});
  v1::IngestBatch b4 = Batch("b", 4, {});
  b4.set_end_of_stream(true);
  ExpectRefusals(Push(b4), 4, {});
  for (const char* stream : {"a", "b", "c"}) ASSERT_TRUE(WaitChecked(stream)) << stream;
  // The counts go on from those before the restart.
  counted(5 + 2, 1 + 1);

  // Exactly the kept transactions were checked: 1, 2, 7 and 4; 6, 9, 12 and 14; 19 and 20.
  for (const auto& [stream, delivered] :
       std::vector<std::pair<std::string, std::string>>{{"a", "4"}, {"b", "4"}, {"c", "2"}}) {
    auto st = StreamStatus(stream);
    ASSERT_TRUE(st.has_value()) << stream;
    EXPECT_EQ((*st)["ingested_transactions"], delivered) << stream;
  }
  auto seen = Violations();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(Summary(*seen), (std::multiset<Brief>{ExtNever(6, 1)}));
}

TEST_F(DaemonTest, RestartKeepsViolationsAndRecognisesResentBatches) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  const config::DaemonConfig config = TestConfig(dir.Path());
  const std::string s = "restart";
  const v1::IngestBatch first =
      Batch(s, 1, {Writer(1, 1, 100), Reader(2, 1, Unwritten(2)), Reader(3, 1, 100)});
  v1::IngestBatch second = Batch(s, 2, {Reader(4, 1, Unwritten(4)), Reader(5, 1, Unwritten(5))});
  second.set_end_of_stream(true);
  const std::multiset<Brief> want = {ExtNever(2, 1), ExtNever(4, 1), ExtNever(5, 1)};

  ASSERT_NO_FATAL_FAILURE(Start(config));
  ASSERT_NO_FATAL_FAILURE(PushAllAndWait({first, second}, s));
  auto before = Violations();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(Summary(*before), want);
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  auto ready = Get("/readyz");
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->status, 200) << ready->body;
  // Served once each, with the same ids.
  auto after = Violations();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(Summary(*after), want);
  std::set<std::string> ids_before, ids_after;
  for (const Seen& v : *before) ids_before.insert(v.id);
  for (const Seen& v : *after) ids_after.insert(v.id);
  EXPECT_EQ(ids_after, ids_before);
  // Counted as before the restart, and as the status and the store count them.
  std::string restored = Metrics();
  EXPECT_EQ(Total(restored, "isowatch_violations_total"), 3.0) << restored;
  EXPECT_EQ(
      Sample(restored, R"(isowatch_violations_total{anomaly="EXT",checker="online",level="si"})"),
      3.0);
  EXPECT_EQ(ToJson((*Status())["counts"]["violations"]), "3");

  // The first batch again: a duplicate, not applied again.
  absl::StatusOr<v1::IngestAck> ack = Push(first);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->duplicate());
  EXPECT_EQ(ack->durable_seq(), 2u);
  EXPECT_EQ(ack->refusals_size(), 0);
  // A batch on another stream is applied after anything the duplicate could have caused, since
  // the engine applies batches in the order of the log: once it is checked, the first stream's
  // state is final.
  v1::IngestBatch barrier = Batch("barrier", 1, {Reader(30, 1, Unwritten(30))});
  barrier.set_end_of_stream(true);
  ack = Push(barrier);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_TRUE(WaitChecked("barrier"));
  auto stream = StreamStatus(s);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ((*stream)["ingested_transactions"], "5");
  EXPECT_EQ((*stream)["acked_sequence"], "2");
  auto all = Violations();
  ASSERT_TRUE(all.has_value());
  auto want_all = want;
  want_all.insert(ExtNever(30, 1));
  EXPECT_EQ(Summary(*all), want_all);
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, "isowatch_duplicate_batches_total") == 1.0 &&
           Total(metrics, "isowatch_violations_total") == 4.0;
  })) << metrics;
}

TEST_F(DaemonTest, ABackwardWatermarkIsIgnoredCountedAndLogged) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  // The daemon's log, captured.
  std::ostringstream log;
  const std::shared_ptr<spdlog::logger> before = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  ASSERT_NO_FATAL_FAILURE(Start(TestConfig(dir.Path())));
  const std::string s = "back";
  v1::IngestBatch first = Batch(s, 1, {Writer(1, 1, 100)});
  first.mutable_watermark()->set_physical(100);
  v1::IngestBatch second = Batch(s, 2, {Writer(2, 2, 200)});
  second.mutable_watermark()->set_physical(50);
  for (const v1::IngestBatch& b : {first, second}) {
    absl::StatusOr<v1::IngestAck> ack = Push(b);
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_EQ(ack->refusals_size(), 0);
  }
  Tick();
  const std::string metrics = Metrics();
  EXPECT_EQ(Sample(metrics, "isowatch_watermark_regressions_total"), 1.0) << metrics;
  EXPECT_EQ(Sample(metrics, R"(isowatch_stream_watermark{stream="back"})"), 100.0) << metrics;
  Stop();
  spdlog::default_logger()->flush();
  spdlog::set_default_logger(before);
  EXPECT_THAT(log.str(),
              HasSubstr("stream back: batch 2: watermark (50, 0) is below the stream's (100, 0)"));
}

TEST_F(DaemonTest, RestartKeepsTheIdsOfAnOpenStream) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  const config::DaemonConfig config = TestConfig(dir.Path());
  const std::string s = "open";
  ASSERT_NO_FATAL_FAILURE(Start(config));
  absl::StatusOr<v1::IngestAck> ack =
      Push(Batch(s, 1, {Writer(1, 1, 100), Reader(2, 1, Unwritten(2))}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->refusals_size(), 0);
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  // Batch 1 again: a duplicate. Batch 2 reuses id 1 with other content and resends id 2.
  ack = Push(Batch(s, 1, {Writer(1, 1, 100), Reader(2, 1, Unwritten(2))}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->duplicate());
  EXPECT_EQ(ack->durable_seq(), 1u);
  v1::IngestBatch next =
      Batch(s, 2, {Writer(1, 1, 555), Reader(2, 1, Unwritten(2)), Reader(3, 1, Unwritten(3))});
  next.set_end_of_stream(true);
  ack = Push(next);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->durable_seq(), 2u);
  ASSERT_EQ(ack->refusals_size(), 1) << ack->ShortDebugString();
  EXPECT_EQ(ack->refusals(0).index(), 0u);
  EXPECT_EQ(ack->refusals(0).reason(), v1::ID_REUSED);
  ASSERT_TRUE(WaitChecked(s));
  auto stream = StreamStatus(s);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ((*stream)["ingested_transactions"], "3");
  auto seen = Violations();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(Summary(*seen), (std::multiset<Brief>{ExtNever(2, 1), ExtNever(3, 1)}));
}

// With ingest.remembered_ids = 2 a stream remembers its newest 2 to 4 ids, in two generations.
// The registry rebuilt from the log at a restart holds the same generations: here {1, 2} and
// {3, 4} before and after; one more id then drops {1, 2}. Id 1 is then new again at ingest (the
// live history, which still holds transaction 1, refuses it after the ack: the one refusal left
// after the ack, history_conflict), id 3 with other content is still refused and id 4 resent is
// still a duplicate.
TEST_F(DaemonTest, RestartRebuildsTheBoundedIdsTheSame) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  config.ingest.remembered_ids = 2;
  const std::string s = "bounded";
  auto remembered = [&](double want) {
    std::string metrics;
    EXPECT_TRUE(WaitFor([&] {
      metrics = Metrics();
      return Sample(metrics, "isowatch_ingest_remembered_ids") == want;
    })) << metrics;
  };
  ASSERT_NO_FATAL_FAILURE(Start(config));
  absl::StatusOr<v1::IngestAck> ack =
      Push(Batch(s, 1, {Writer(1, 1, 100), Writer(2, 2, 200), Writer(3, 3, 300)}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  ack = Push(Batch(s, 2, {Writer(4, 4, 400)}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->refusals_size(), 0);
  remembered(4);
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(config));
  remembered(4);
  ack = Push(Batch(s, 3, {Writer(5, 5, 500)}));
  ASSERT_TRUE(ack.ok()) << ack.status();
  remembered(3);
  v1::IngestBatch last = Batch(s, 4, {Writer(1, 1, 111), Writer(3, 3, 333), Writer(4, 4, 400)});
  last.set_end_of_stream(true);
  ack = Push(last);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_EQ(ack->refusals_size(), 1) << ack->ShortDebugString();
  EXPECT_EQ(ack->refusals(0).index(), 1u);
  EXPECT_EQ(ack->refusals(0).reason(), v1::ID_REUSED);
  ASSERT_TRUE(WaitChecked(s));
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics();
    return Sample(metrics, R"(isowatch_refused_transactions_total{reason="history_conflict"})") ==
           1.0;
  })) << metrics;
  auto stream = StreamStatus(s);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ((*stream)["ingested_transactions"], "5");
}

TEST_F(DaemonTest, ShutdownAppliesEveryAcknowledgedBatch) {
  TempDir dir;
  ASSERT_FALSE(dir.Path().empty());
  config::DaemonConfig config = TestConfig(dir.Path());
  // A fast log and a deep queue, so that acknowledged batches are likely still queued when the
  // shutdown starts; verdicts become final only at the end of the stream.
  config.store.sync_writes = false;
  config.ingest.queue_batches = 4096;
  config.engine.finality_timeout = std::chrono::milliseconds(600'000);
  ASSERT_NO_FATAL_FAILURE(Start(config));

  constexpr int kBatches = 200;
  constexpr int kPerBatch = 50;
  ingest::ClientOptions options = ClientOptions();
  options.max_in_flight = 256;
  ingest::IngestClient client(fmt::format("127.0.0.1:{}", daemon_->grpc_port()), "drain", options);
  int64_t id = 0;
  int64_t expected = 0;
  for (int b = 0; b < kBatches; ++b) {
    v1::IngestBatch batch;
    const int64_t key = b;
    const int64_t written = ++id;
    *batch.add_txns() = Writer(written, key, written);
    for (int i = 1; i < kPerBatch; ++i) {
      ++id;
      if (i % 7 == 0) {
        *batch.add_txns() = Reader(id, key, Unwritten(id));
        ++expected;
      } else {
        *batch.add_txns() = Reader(id, key, written);
      }
    }
    ASSERT_TRUE(client.Send(std::move(batch)).ok());
  }
  absl::StatusOr<std::vector<v1::Refusal>> refusals = client.Close();
  ASSERT_TRUE(refusals.ok()) << refusals.status();
  EXPECT_TRUE(refusals->empty());
  EXPECT_EQ(client.durable_seq(), static_cast<uint64_t>(kBatches + 1));

  // Every batch is acknowledged, so durable; the shutdown must apply those still queued.
  Monitor& monitor = daemon_->monitor();
  absl::StatusOr<store::ViolationPage> early = monitor.Query({}, 1'000'000, "");
  ASSERT_TRUE(early.ok()) << early.status();
  daemon_->Shutdown();
  std::cout << "violations stored when the shutdown started: " << early->violations.size() << " of "
            << expected << "\n";

  absl::StatusOr<store::ViolationPage> page = monitor.Query({}, 1'000'000, "");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->violations.size(), static_cast<size_t>(expected));
  std::set<std::string> readers;
  for (const store::ViolationRecord& r : page->violations) {
    EXPECT_EQ(r.anomaly, "EXT");
    EXPECT_EQ(r.ext_kind, "never");
    readers.insert(r.json);
  }
  EXPECT_EQ(readers.size(), static_cast<size_t>(expected));
  absl::StatusOr<server::DaemonStatus> status = monitor.GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->streams.size(), 1u);
  EXPECT_TRUE(status->streams[0].closed);
  EXPECT_EQ(status->streams[0].pending_transactions, 0u);
  EXPECT_EQ(status->streams[0].ingested_transactions, static_cast<uint64_t>(id));
  EXPECT_EQ(status->counts.queued_batches, 0u);
}

}  // namespace
}  // namespace isowatch::monitor
