// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/viper.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/history/history_builder.h"

#include "tests/testing/canonical_history.h"
#include "tests/testing/source_dir.h"
#include "tests/testing/temp_dir.h"
#include "tests/unit/formats/format_samples.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::HistoryBuilder;
using history::KeyBound;
using history::KeyValue;
using history::OpKind;
using history::Value;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Dump(const History& h) { return isowatch::testing::CanonicalHistory(h); }

std::string DataDir(std::string_view name) {
  return isowatch::testing::SourceDir() + "/tests/histories/formats/viper/" + std::string(name);
}

uint64_t NoteCount(const History& h, std::string_view kind) {
  for (const history::SourceNote& n : h.info().notes) {
    if (n.kind == kind) return n.count;
  }
  return 0;
}

absl::StatusOr<History> Read(const ViperFiles& files, const ReadOptions& options = {}) {
  return ReadViperFiles(files, options, "mem");
}

// Reads one J1.log holding `lines`.
absl::StatusOr<History> ReadLines(std::string_view lines, const ReadOptions& options = {}) {
  return Read({{"J1.log", std::string(lines)}}, options);
}

std::string ErrorOf(const absl::StatusOr<History>& h) {
  EXPECT_FALSE(h.ok());
  return h.ok() ? std::string() : std::string(h.status().message());
}

History ReadDir(std::string_view name) {
  absl::StatusOr<History> h = ReadViperDir(DataDir(name), {});
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? std::move(*h) : History();
}

ViperFiles Encode(const History& h) {
  absl::StatusOr<ViperFiles> files = EncodeViper(h);
  EXPECT_TRUE(files.ok()) << files.status();
  return files.ok() ? *files : ViperFiles();
}

TEST(ViperTest, ComposedSample) {
  History h = ReadDir("sample");
  EXPECT_EQ(h.info().format, "viper");
  EXPECT_EQ(h.info().time_unit, "ms");
  ASSERT_EQ(h.session_count(), 2u);
  EXPECT_EQ(h.session_name(SessionId(0)), "J1");
  EXPECT_EQ(h.session_name(SessionId(1)), "J2");
  ASSERT_EQ(h.size(), 3u);
  for (const history::Transaction& t : h.txns()) EXPECT_TRUE(t.committed());
  EXPECT_TRUE(h.FindTxn("J1:1").valid());
  EXPECT_TRUE(h.FindTxn("J1:2").valid());
  EXPECT_EQ(h.txn(h.FindTxn("J1:2")).seq, 1u);
  const KeyId k7 = h.FindIntKey(7);
  const KeyId k8 = h.FindIntKey(8);
  EXPECT_EQ(h.initial().registers.size(), 2u);
  EXPECT_EQ(h.InitialValue(k7), Value::Int(500));
  EXPECT_EQ(h.InitialValue(k8), Value::Int(600));
  // The ineffective write is dropped, counted, and so no transaction writes 1002.
  EXPECT_EQ(NoteCount(h, "ineffective writes dropped (succ=false)"), 1u);
  auto ops = h.ops(h.FindTxn("J1:2"));
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind(), OpKind::kRead);
  // J2 reads 8's initial value: nobody writes (8, 600).
  const TxnId j2 = h.FindTxn("J2:1");
  ASSERT_EQ(h.ops(j2).size(), 1u);
  EXPECT_EQ(h.ops(j2)[0].value(), h.InitialValue(k8));
  for (const history::Transaction& t : h.txns()) {
    for (const history::Op& op : h.ops(t)) {
      EXPECT_FALSE(op.kind() == OpKind::kWrite && op.key() == k8 && op.value() == Value::Int(600));
    }
  }
  const history::Transaction& t2 = h.txn(j2);
  ASSERT_TRUE(t2.has_real_time);
  EXPECT_EQ(t2.invoke_time, 1700000000000);
  EXPECT_EQ(t2.complete_time, 1700000000007);
  EXPECT_FALSE(h.txn(h.FindTxn("J1:1")).has_real_time);
  EXPECT_EQ(NoteCount(h, "begin/commit response timestamps not kept (postBeginTS, preCommitTS)"),
            1u);
  // Jep1.log is not read as JSON (it would not parse), only noted.
  EXPECT_EQ(NoteCount(h, "Jep*.log files ignored (pseudo-EDN, not read)"), 1u);
}

TEST(ViperTest, SampleRoundTripsThroughTheWriter) {
  History h = ReadDir("sample");
  ViperFiles files = Encode(h);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].first, "J0.log");
  EXPECT_EQ(files[0].second,
            "{\"value\": [[\"w\", 7, 500, true], [\"w\", 8, 600, true]], \"isInitial\": true}\n");
  EXPECT_EQ(files[1].first, "J1.log");
  EXPECT_EQ(files[2].first, "J2.log");
  absl::StatusOr<History> back = Read(files);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Dump(*back), Dump(h));

  isowatch::testing::TempDir dir("viper");
  ASSERT_TRUE(WriteViperDir(h, dir.Path()).ok());
  absl::StatusOr<History> from_disk = ReadViperDir(dir.Path(), {});
  ASSERT_TRUE(from_disk.ok()) << from_disk.status();
  EXPECT_EQ(Dump(*from_disk), Dump(h));
  absl::Status again = WriteViperDir(h, dir.Path());
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(again.message()), HasSubstr("already holds J0.log"));
}

TEST(ViperTest, RangesInsertsDeletesAndObjectMops) {
  History h = ReadDir("ranges");
  const KeyId k1 = h.FindIntKey(1);
  const KeyId k2 = h.FindIntKey(2);
  const KeyId k3 = h.FindIntKey(3);
  const KeyId k4 = h.FindIntKey(4);
  // The initial state: an unbounded range, its dead record a tombstone.
  EXPECT_EQ(h.InitialValue(k1), Value::Int(11));
  EXPECT_EQ(h.InitialValue(k3), Value::Int(33));
  EXPECT_TRUE(h.IsTombstone(k3, Value::Int(33)));
  EXPECT_FALSE(h.IsTombstone(k1, Value::Int(11)));
  ASSERT_EQ(h.size(), 3u);

  // Insert = read then write; delete = read then write of a tombstone.
  const TxnId t1 = h.FindTxn("J1:1");
  auto ops = h.ops(t1);
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].kind(), OpKind::kRead);
  EXPECT_EQ(ops[0].value(), Value::Int(33));
  EXPECT_EQ(ops[1].kind(), OpKind::kWrite);
  EXPECT_EQ(ops[1].value(), Value::Int(301));
  EXPECT_EQ(ops[2].value(), Value::Int(11));
  EXPECT_EQ(ops[3].value(), Value::Int(102));
  EXPECT_TRUE(h.IsTombstone(k1, Value::Int(102)));
  EXPECT_FALSE(h.IsTombstone(k3, Value::Int(301)));
  ASSERT_EQ(h.range_reads(t1).size(), 1u);
  const history::RangeRead& bounded = h.range_reads(t1)[0];
  EXPECT_EQ(bounded.position, 4u);
  EXPECT_EQ(bounded.low, KeyBound::At(k1));
  EXPECT_EQ(bounded.high, KeyBound::At(k3));
  EXPECT_THAT(h.range_live(bounded),
              ElementsAre(KeyValue{k2, Value::Int(22)}, KeyValue{k3, Value::Int(301)}));
  EXPECT_THAT(h.range_dead(bounded), ElementsAre(KeyValue{k1, Value::Int(102)}));

  // Blank line 2 is skipped; failed insert and delete keep their reads only.
  const TxnId t2 = h.FindTxn("J1:3");
  ASSERT_TRUE(t2.valid());
  ops = h.ops(t2);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].value(), Value::Int(22));
  EXPECT_EQ(ops[1].key(), k4);
  EXPECT_TRUE(ops[1].value().absent());
  ASSERT_EQ(h.range_reads(t2).size(), 1u);
  EXPECT_TRUE(h.range_reads(t2)[0].low.unbounded);  // JSON null
  EXPECT_EQ(h.range_reads(t2)[0].position, 1u);
  EXPECT_EQ(NoteCount(h, "ineffective writes dropped (succ=false)"), 2u);
  EXPECT_EQ(NoteCount(h, "insert/delete trailing fields not kept (ready, actual_f)"), 1u);
  EXPECT_EQ(NoteCount(h, "range record sk fields not kept"), 1u);

  // The object form (no final newline): an upper-unbounded range, a delete, a read of the
  // tombstone it wrote.
  const TxnId t3 = h.FindTxn("J2:1");
  ASSERT_EQ(h.range_reads(t3).size(), 1u);
  EXPECT_TRUE(h.range_reads(t3)[0].high.unbounded);
  EXPECT_EQ(h.range_reads(t3)[0].position, 0u);
  EXPECT_THAT(h.range_dead(h.range_reads(t3)[0]), IsEmpty());
  ops = h.ops(t3);
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[2].value(), Value::Int(203));
  EXPECT_TRUE(h.IsTombstone(k2, ops[2].value()));
  EXPECT_EQ(NoteCount(h, "per-operation timestamps not kept (reqTS, resTS)"), 2u);
  EXPECT_EQ(NoteCount(h, "final-state transaction kept as an ordinary transaction"), 1u);
  EXPECT_EQ(h.tombstones().size(), 3u);
}

TEST(ViperTest, RangesRoundTripThroughTheWriter) {
  History h = ReadDir("ranges");
  ViperFiles files = Encode(h);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].second,
            "{\"value\": [[\"range\", \"nil\", \"nil\", [{\"id\": 1, \"val\": 11}, {\"id\": 2, "
            "\"val\": 22}], [{\"id\": 3, \"val\": 33}]]], \"isInitial\": true}\n");
  EXPECT_THAT(files[1].second, HasSubstr("[\"i\", 3, 301, 33, true, true], [\"d\", 1, 102, 11, "
                                         "false, true], [\"range\", 1, 3, "));
  // The read of a tombstone alone: a delete that found the key deleted.
  EXPECT_THAT(files[2].second, HasSubstr("[\"d\", 2, 203, 203, true, false]"));
  absl::StatusOr<History> back = Read(files);
  ASSERT_TRUE(back.ok()) << back.status();
  // Identical but for the id of the transaction after J1's blank line, re-derived.
  std::string expected = Dump(h);
  expected.replace(expected.find("J1:3"), 4, "J1:2");
  EXPECT_EQ(Dump(*back), expected);
  EXPECT_EQ(Encode(*back), files);
}

TEST(ViperTest, BuiltHistoryRoundTrips) {
  HistoryBuilder b;
  b.set_time_unit("ms");
  const KeyId ka = b.BytesKey("a\"\\\n\xc3\xa9");
  const KeyId kb = b.BytesKey("b");
  b.SetInitialRegister(kb, Value::Int(-1));
  b.MarkTombstone(ka, Value::Int(9));
  ASSERT_TRUE(
      b.BeginTxn({.id = "J7:1", .session = "J7", .real_time = {{.invoke = 1, .complete = 1}}})
          .ok());
  b.Read(ka, Value::Absent());
  b.Write(ka, Value::Int(9));
  const KeyValue dead[] = {{ka, Value::Int(9)}};
  b.RangeRead(KeyBound::At(ka), KeyBound::Unbounded(), {}, dead);
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "J10:1", .session = "J10"}).ok());
  b.Write(kb, Value::Int(std::numeric_limits<int64_t>::min()));
  b.EndTxn();
  absl::StatusOr<History> h = std::move(b).Finish();
  ASSERT_TRUE(h.ok());
  ViperFiles files = Encode(*h);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[1].first, "J7.log");  // J7 before J10
  absl::StatusOr<History> back = Read(files);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Dump(*back), Dump(*h));
}

TEST(ViperTest, EmptyHistoryIsOneEmptyFile) {
  absl::StatusOr<History> h = Read({{"J5.log", "\n\n"}});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->size(), 0u);
  ViperFiles files = Encode(*h);
  EXPECT_EQ(files, (ViperFiles{{"J1.log", ""}}));
  absl::StatusOr<History> back = Read(files);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Dump(*back), Dump(*h));
}

TEST(ViperTest, SessionsNotNamedJnGetFileNames) {
  HistoryBuilder b;
  ASSERT_TRUE(b.BeginTxn({.id = "x", .session = "alice"}).ok());
  b.Write(b.IntKey(1), Value::Int(1));
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "y", .session = "bob"}).ok());
  b.Read(b.IntKey(1), Value::Int(1));
  b.EndTxn();
  ViperFiles files = Encode(*std::move(b).Finish());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], (std::pair<std::string, std::string>(
                          "J1.log", "{\"value\": [[\"w\", 1, 1, true]]}\n")));
  EXPECT_EQ(files[1].first, "J2.log");
}

TEST(ViperTest, WriterRefusesWhatViperBenchCannotExpress) {
  struct Case {
    std::string_view error;
    void (*build)(HistoryBuilder&);
  };
  const Case cases[] = {
      {"it is aborted",
       [](HistoryBuilder& b) {
         ASSERT_TRUE(
             b.BeginTxn({.id = "t", .session = "s", .status = history::TxnStatus::kAborted}).ok());
         b.EndTxn();
       }},
      {"database timestamps",
       [](HistoryBuilder& b) {
         ASSERT_TRUE(b.BeginTxn({.id = "t", .session = "s", .commit = {{1, 0}}}).ok());
         b.EndTxn();
       }},
      {"is a list",
       [](HistoryBuilder& b) {
         ASSERT_TRUE(b.BeginTxn({.id = "t", .session = "s"}).ok());
         b.Append(b.IntKey(1), Value::Int(1));
         b.EndTxn();
       }},
      {"the value 0",
       [](HistoryBuilder& b) {
         ASSERT_TRUE(b.BeginTxn({.id = "t", .session = "s"}).ok());
         b.Write(b.IntKey(1), Value::Int(0));
         b.EndTxn();
       }},
      {"is bytes",
       [](HistoryBuilder& b) {
         ASSERT_TRUE(b.BeginTxn({.id = "t", .session = "s"}).ok());
         b.Read(b.IntKey(1), b.BytesValue("v"));
         b.EndTxn();
       }},
      {"an unknown read",
       [](HistoryBuilder& b) {
         ASSERT_TRUE(b.BeginTxn({.id = "t", .session = "s"}).ok());
         b.UnknownRead(b.IntKey(1));
         b.EndTxn();
       }},
      {"integer and bytes keys",
       [](HistoryBuilder& b) {
         ASSERT_TRUE(b.BeginTxn({.id = "t", .session = "s"}).ok());
         b.Write(b.IntKey(1), Value::Int(1));
         b.Write(b.BytesKey("1"), Value::Int(1));
         b.EndTxn();
       }},
      {"ViperBench's are in ms",
       [](HistoryBuilder& b) {
         b.set_time_unit("ns");
         ASSERT_TRUE(
             b.BeginTxn({.id = "t", .session = "s", .real_time = {{.invoke = 1, .complete = 2}}})
                 .ok());
         b.EndTxn();
       }},
      {"never completed",
       [](HistoryBuilder& b) {
         ASSERT_TRUE(b.BeginTxn({.id = "t", .session = "s", .real_time = {{.invoke = 1}}}).ok());
         b.EndTxn();
       }},
      {"the default initial value is 0",
       [](HistoryBuilder& b) { b.SetDefaultInitialValue(Value::Int(0)); }},
      {"ViperBench cannot say it is one",
       [](HistoryBuilder& b) {
         b.MarkTombstone(b.IntKey(1), Value::Int(5));
         ASSERT_TRUE(b.BeginTxn({.id = "t", .session = "s"}).ok());
         b.Write(b.IntKey(1), Value::Int(5));
         b.EndTxn();
       }},
      {"the key \"nil\"",
       [](HistoryBuilder& b) {
         ASSERT_TRUE(b.BeginTxn({.id = "t", .session = "s"}).ok());
         b.RangeRead(KeyBound::At(b.BytesKey("nil")), KeyBound::Unbounded(), {}, {});
         b.EndTxn();
       }},
  };
  for (const Case& c : cases) {
    HistoryBuilder b;
    c.build(b);
    absl::StatusOr<History> h = std::move(b).Finish();
    ASSERT_TRUE(h.ok()) << c.error;
    absl::StatusOr<ViperFiles> files = EncodeViper(*h);
    ASSERT_FALSE(files.ok()) << c.error;
    EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(files.status().message()), HasSubstr(c.error));
  }
}

TEST(ViperTest, InitialTransactionRules) {
  // Not alone in its file: still the initial state, with a note.
  absl::StatusOr<History> h = ReadLines(
      "{\"value\": [[\"r\", 1, 5, false]]}\n{\"value\": [[\"w\", 1, 5, true]], \"isInitial\": "
      "true}\n");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->size(), 1u);
  EXPECT_EQ(h->InitialValue(h->FindIntKey(1)), Value::Int(5));
  EXPECT_EQ(NoteCount(*h, "initial transaction not alone in its file"), 1u);

  // Two: an error naming both.
  EXPECT_THAT(ErrorOf(Read({{"J0.log", "{\"value\": [], \"isInitial\": true}"},
                            {"J1.log", "{\"value\": [], \"isInitial\": true}"}})),
              HasSubstr("mem/J1.log:1: a second initial transaction (the first is at J0.log:1)"));
  // Reads have no place in it; a key set twice neither.
  EXPECT_THAT(ErrorOf(ReadLines("{\"value\": [[\"r\", 1, 5, false]], \"isInitial\": true}")),
              HasSubstr("J1.log:1: value[0]: the initial transaction may hold only writes"));
  EXPECT_THAT(ErrorOf(ReadLines("{\"value\": [[\"w\", 1, 5, true], [\"w\", 1, 6, true]], "
                                "\"isInitial\": true}")),
              HasSubstr("sets key 1 twice"));

  // The init_txn option names one by id.
  ReadOptions options;
  options.init_txn = "J1:2";
  h = ReadLines("{\"value\": [[\"r\", 1, 5, false]]}\n{\"value\": [[\"w\", 1, 5, true]]}\n",
                options);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->size(), 1u);
  EXPECT_EQ(h->InitialValue(h->FindIntKey(1)), Value::Int(5));
  options.init_txn = "J1:9";
  EXPECT_THAT(ErrorOf(ReadLines("{\"value\": []}", options)), HasSubstr("no transaction J1:9"));
}

TEST(ViperTest, FinalTransactionAndOptions) {
  EXPECT_THAT(ErrorOf(ReadLines("{\"value\": [], \"isFinal\": true}\n{\"value\": [], "
                                "\"isFinal\": true}")),
              HasSubstr("J1.log:2: a second final-state transaction"));
  EXPECT_THAT(ErrorOf(ReadLines("{\"value\": [], \"isFinal\": true, \"isInitial\": true}")),
              HasSubstr("both initial and final"));
  ReadOptions options;
  options.initial_value = 3;
  absl::StatusOr<History> h = ReadLines("{\"value\": [[\"r\", 1, 0, false]]}", options);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->initial().default_value, Value::Int(3));
  EXPECT_TRUE(h->ops(TxnId(0))[0].value().absent());  // 0 is null, whatever the default
  options = {};
  options.dialect = "edn";
  EXPECT_THAT(ErrorOf(ReadLines("{\"value\": []}", options)),
              HasSubstr("unknown ViperBench dialect"));
}

TEST(ViperTest, ToleratesBlankLinesCrlfBomAndNoFinalNewline) {
  absl::StatusOr<History> h =
      ReadLines("\xEF\xBB\xBF{\"value\": [[\"w\", 1, 2, true]]}  \r\n\r\n   \n{\"value\": []}");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ(h->txn_name(TxnId(1)), "J1:4");
  EXPECT_EQ(h->txn(TxnId(1)).source_offset, 4u);
}

TEST(ViperTest, FilesAreSelectedAndOrderedByNumber) {
  absl::StatusOr<History> h = Read({{"J10.log", "{\"value\": []}"},
                                    {"J2.log", "{\"value\": []}"},
                                    {"J02.log", "{\"value\": []}"},
                                    {"Jx.log", "junk"},
                                    {"README", "junk"},
                                    {"J3.log.bak", "junk"},
                                    {"Jep2.log", "{:value: []}"}});
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->session_count(), 3u);
  EXPECT_EQ(h->session_name(SessionId(0)), "J02");
  EXPECT_EQ(h->session_name(SessionId(1)), "J2");
  EXPECT_EQ(h->session_name(SessionId(2)), "J10");
  EXPECT_EQ(NoteCount(*h, "other files ignored (not J<digits>.log)"), 3u);
  EXPECT_EQ(NoteCount(*h, "Jep*.log files ignored (pseudo-EDN, not read)"), 1u);
  EXPECT_THAT(ErrorOf(Read({{"T1.log", "S"}})), HasSubstr("mem: no J<digits>.log file"));
}

TEST(ViperTest, MalformedLinesNameFileAndLine) {
  struct Case {
    std::string_view line;
    std::string_view error;
  };
  const Case cases[] = {
      {"{\"value\": [", "J1.log:2: not JSON"},
      {"[1]", "J1.log:2: expected a JSON object"},
      {"{\"values\": []}", "J1.log:2: expected \"value\": [mop, ...]"},
      {"{\"value\": [], \"value\": []}", "\"value\" twice"},
      {"{\"value\": [[\"x\", 1, 2, true]]}", "value[0]: unknown mop type \"x\""},
      {"{\"value\": [[\"r\", 1, 2]]}", "value[0]: expected [\"r\", key, value, is_dead], got 3"},
      {"{\"value\": [[\"w\", 1, 2, 1]]}", "value[0], element 3: expected true or false"},
      {"{\"value\": [[\"r\", 1, 9223372036854775808, false]]}", "out of the int64 range"},
      {"{\"value\": [[\"r\", 1, 2.5, false]]}", "value[0], value: expected an integer, not 2.5"},
      {"{\"value\": [[\"r\", \"k\", 2, false]]}",
       "value[0], key: a string key \"k\", but J1.log:1 has integer keys"},
      {"{\"value\": [[\"w\", 1, 0, true]]}", "writes 0, the value ViperBench reserves for null"},
      {"{\"value\": [[\"range\", 1, 2, [{\"id\": 1}], []]]}",
       "value[0], live[0]: a record needs \"id\" and \"val\""},
      {"{\"value\": [[\"range\", 1, 2, {}, []]]}", "value[0], live: expected an array"},
      {"{\"value\": [[\"i\", 1, 2, 3, false]]}", "expected [\"i\", key, value, read_value"},
      {"{\"value\": [{\"opType\": \"w\", \"key\": 1, \"value\": 2}]}",
       "value[0]: a \"w\" mop needs \"succ\""},
      {"{\"value\": [7]}", "value[0]: expected a mop"},
      {"{\"preBeginTS\": 5, \"value\": []}", "preBeginTS without postCommitTS"},
      {"{\"preBeginTS\": 5, \"postCommitTS\": 4, \"value\": []}", "completes at 4 before"},
      {"{\"preBeginTS\": 5, \"postCommitTS\": 9223372036854775807, \"value\": []}",
       "postCommitTS 9223372036854775807 is out of range"},
  };
  for (const Case& c : cases) {
    const std::string text = "{\"value\": [[\"r\", 1, 2, false]]}\n" + std::string(c.line) + "\n";
    EXPECT_THAT(ErrorOf(ReadLines(text)), HasSubstr(c.error)) << c.line;
    // Lenient: the line is dropped with a note, the rest is read.
    ReadOptions lenient;
    lenient.lenient = true;
    absl::StatusOr<History> h = ReadLines(text, lenient);
    ASSERT_TRUE(h.ok()) << c.line << ": " << h.status();
    EXPECT_EQ(h->size(), 1u) << c.line;
    EXPECT_EQ(NoteCount(*h, "malformed transactions dropped"), 1u) << c.line;
  }
}

TEST(ViperTest, NotesWhatItDoesNotKeep) {
  absl::StatusOr<History> h = ReadLines(
      "{\"value\": [[\"w\", 1, 2, true]], \"extra\": 1}\n{\"value\": [[\"w\", 1, 2, true]]}\n");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(NoteCount(*h, "unknown members ignored"), 1u);
  EXPECT_EQ(NoteCount(*h, "duplicate writes of one (key, value)"), 1u);
  EXPECT_EQ(h->info().notes[0].example, "J1.log:1: extra");
}

TEST(ViperTest, StringKeys) {
  absl::StatusOr<History> h = ReadLines(
      "{\"value\": [[\"w\", \"a\\u00e9\", 2, true], [\"range\", \"nil\", \"b\", [{\"id\": "
      "\"a\\u00e9\", \"val\": 2}], []]]}");
  ASSERT_TRUE(h.ok()) << h.status();
  const KeyId k = h->FindBytesKey("a\xc3\xa9");
  ASSERT_TRUE(k.valid());
  EXPECT_EQ(h->range_reads(TxnId(0))[0].high, KeyBound::At(h->FindBytesKey("b")));
  absl::StatusOr<History> back = Read(Encode(*h));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Dump(*back), Dump(*h));
}

TEST(ViperTest, SnifferAcceptsViperDirectoriesOnly) {
  EXPECT_TRUE(SniffViperDir(DataDir("sample")).ok());
  EXPECT_TRUE(SniffViperDir(DataDir("ranges")).ok());

  isowatch::testing::TempDir empty("viper-empty");
  absl::Status s = SniffViperDir(empty.Path());
  EXPECT_THAT(std::string(s.message()), HasSubstr("no J<digits>.log file"));

  // Cobra: T<n>.log binary client logs.
  isowatch::testing::TempDir cobra("viper-cobra");
  std::ofstream(std::filesystem::path(cobra.Path()) / "T1.log", std::ios::binary)
      << std::string("S\x01\x00\x00\x00\x00\x00\x00\x00", 9);
  s = SniffViperDir(cobra.Path());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("no J<digits>.log file"));

  // A J<n>.log that is not JSON lines (binary, a TimeKiller array).
  isowatch::testing::TempDir binary("viper-binary");
  std::ofstream(std::filesystem::path(binary.Path()) / "J1.log") << "[{\"tid\": 1}]";
  s = SniffViperDir(binary.Path());
  EXPECT_THAT(std::string(s.message()), HasSubstr("J1.log does not start with '{'"));

  s = SniffViperDir(DataDir("sample") + "/J1.log");
  EXPECT_THAT(std::string(s.message()), HasSubstr("not a directory"));
}

TEST(ViperTest, SnifferRejectsTheOtherFormatsSamples) {
  const std::vector<std::string>& foreign = samples::ForeignTextSamples();
  for (size_t i = 0; i < foreign.size(); ++i) {
    isowatch::testing::TempDir dir("viper-foreign");
    std::ofstream(std::filesystem::path(dir.Path()) / "J1.log", std::ios::binary) << foreign[i];
    const bool viper = foreign[i].starts_with("{\"value\"");
    EXPECT_EQ(SniffViperDir(dir.Path()).ok(), viper) << foreign[i];
  }
  // Native JSON lines: "value" holds a Datum, not mops.
  isowatch::testing::TempDir native("viper-native");
  std::ofstream(std::filesystem::path(native.Path()) / "J1.log")
      << R"({"txn": {"id_int": 1, "ops": [{"kind": "READ", "key": {"int": 1}, "value": {"int": 2}}]}})";
  EXPECT_THAT(std::string(SniffViperDir(native.Path()).message()),
              HasSubstr("J1.log's first line has no \"value\": [...]"));
  // A first line longer than what is sniffed is judged by its first byte.
  isowatch::testing::TempDir long_line("viper-long");
  std::ofstream(std::filesystem::path(long_line.Path()) / "J1.log")
      << "{\"preBeginTS\": " << std::string(5000, '1') << "}";
  EXPECT_TRUE(SniffViperDir(long_line.Path()).ok());
}

}  // namespace
}  // namespace isowatch::formats
