// SPDX-License-Identifier: Apache-2.0
// The TimeKiller reader: the composed samples, the spellings it accepts, list reads, the initial
// transaction, and where its errors point and what they say.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/internal/timekiller_internal.h"
#include "isowatch/formats/read_options.h"
#include "isowatch/formats/timekiller.h"
#include "isowatch/history/history.h"

#include "tests/unit/formats/timekiller_fixture.h"

namespace isowatch::formats {
namespace {

using history::DataModel;
using history::History;
using history::Op;
using history::OpKind;
using history::Timestamp;
using history::TxnStatus;
using history::Value;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Reads `json` and returns the error message (empty if it read fine).
std::string ReadError(std::string_view json, std::string_view initial = {}) {
  absl::StatusOr<History> h = Read(json, initial);
  if (h.ok()) return "";
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << h.status();
  return std::string(Message(h.status()));
}

// A transaction object with the given ops, on one line.
std::string Txn(std::string_view tid, std::string_view sid, int64_t sts, int64_t cts,
                std::string_view ops) {
  return fmt::format(
      R"({{"tid": {}, "sid": {}, "sts": {{"p": {}, "l": 0}}, "cts": {{"p": {}, "l": 0}}, )"
      R"("ops": [{}]}})",
      tid, sid, sts, cts, ops);
}

const Op& OpAt(const History& h, size_t txn, size_t op) {
  return h.ops(TxnId(static_cast<uint32_t>(txn)))[op];
}

TEST_F(TimeKillerTest, ReadsComposedKvSample) {
  absl::StatusOr<History> h = Read(kv_sample_);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->data_model(), DataModel::kKeyValue);
  EXPECT_EQ(h->source(), "history.json");

  ASSERT_EQ(h->size(), 2u);
  ASSERT_EQ(h->session_count(), 2u);
  EXPECT_EQ(h->session_name(SessionId(0)), "0");
  EXPECT_TRUE(h->session_numeric(SessionId(0)));
  EXPECT_EQ(h->session_name(SessionId(1)), "s1");
  EXPECT_FALSE(h->session_numeric(SessionId(1)));

  const history::Transaction& t1 = h->txn(TxnId(0));
  const history::Transaction& t2 = h->txn(TxnId(1));
  EXPECT_EQ(h->txn_name(TxnId(0)), "1");
  EXPECT_TRUE(t1.ext_id_numeric);
  EXPECT_EQ(h->txn_name(TxnId(1)), "t2");
  EXPECT_FALSE(t2.ext_id_numeric);
  EXPECT_EQ(h->FindTxn("t2"), TxnId(1));
  EXPECT_EQ(t1.status, TxnStatus::kCommitted);
  EXPECT_EQ(t2.status, TxnStatus::kCommitted);
  EXPECT_EQ(t1.session, SessionId(0));
  EXPECT_EQ(t2.session, SessionId(1));
  EXPECT_EQ(t1.seq, 0u);
  EXPECT_EQ(t2.seq, 0u);
  ASSERT_TRUE(t1.has_start && t1.has_commit && t2.has_start && t2.has_commit);
  EXPECT_EQ(t1.start, (Timestamp{100, 0}));
  EXPECT_EQ(t1.commit, (Timestamp{105, 2}));
  EXPECT_EQ(t2.start, (Timestamp{105, 2}));
  EXPECT_EQ(t2.start, t1.commit);
  EXPECT_EQ(t2.commit, (Timestamp{110, 0}));
  EXPECT_EQ(t1.source_offset, 4u);  // after "[\n  "

  // 2 writes and 2 reads.
  ASSERT_EQ(h->op_count(), 4u);
  int writes = 0;
  int reads = 0;
  for (size_t t = 0; t < 2; ++t) {
    for (const Op& op : h->ops(TxnId(static_cast<uint32_t>(t)))) {
      writes += op.kind() == OpKind::kWrite;
      reads += op.kind() == OpKind::kRead;
    }
  }
  EXPECT_EQ(writes, 2);
  EXPECT_EQ(reads, 2);

  const KeyId k3 = h->FindIntKey(3);
  const KeyId k4 = h->FindIntKey(4);
  ASSERT_TRUE(k3.valid() && k4.valid());
  EXPECT_EQ(OpAt(*h, 0, 0).kind(), OpKind::kWrite);
  EXPECT_EQ(OpAt(*h, 0, 0).key(), k3);
  EXPECT_EQ(OpAt(*h, 0, 0).value(), Value::Int(11));
  // The read of key 4 in txn 1 is absent (initial value null).
  EXPECT_EQ(OpAt(*h, 0, 1).kind(), OpKind::kRead);
  EXPECT_EQ(OpAt(*h, 0, 1).key(), k4);
  EXPECT_TRUE(OpAt(*h, 0, 1).value().absent());
  EXPECT_FALSE(OpAt(*h, 0, 1).unknown());
  EXPECT_TRUE(h->InitialValue(k4).absent());
  EXPECT_EQ(OpAt(*h, 1, 0).kind(), OpKind::kRead);
  EXPECT_EQ(OpAt(*h, 1, 0).key(), k3);
  EXPECT_EQ(OpAt(*h, 1, 0).value(), Value::Int(11));
  EXPECT_EQ(OpAt(*h, 1, 1).kind(), OpKind::kWrite);
  EXPECT_EQ(OpAt(*h, 1, 1).key(), k4);
  EXPECT_EQ(OpAt(*h, 1, 1).value(), Value::Int(12));
}

TEST_F(TimeKillerTest, NumericAndStringPGiveIdenticalHistories) {
  absl::StatusOr<History> strings = Read(kv_sample_);
  absl::StatusOr<History> numbers = Read(ReadFileToString(SamplePath("kv_sample_numeric_p.json")));
  ASSERT_TRUE(strings.ok()) << strings.status();
  ASSERT_TRUE(numbers.ok()) << numbers.status();
  EXPECT_EQ(Canonical(*strings), Canonical(*numbers));
  // And so do both encodings of "l", of ids, and negative parts.
  absl::StatusOr<History> a = Read(
      R"([{"tid": 5, "sid": 2, "sts": {"p": -7, "l": "3"}, "cts": {"p": "-7", "l": 4}, "ops": []}])");
  absl::StatusOr<History> b = Read(
      R"([{"tid": 5, "sid": 2, "sts": {"p": "-7", "l": 3}, "cts": {"p": -7, "l": "4"}, "ops": []}])");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Canonical(*a), Canonical(*b));
  EXPECT_EQ(a->txn(TxnId(0)).start, (Timestamp{-7, 3}));
}

TEST_F(TimeKillerTest, NumberAndStringIdsAreTheSameId) {
  absl::StatusOr<History> h =
      Read("[" + Txn("67", "\"s\"", 1, 2, "") + ",\n" + Txn("\"67\"", "\"s\"", 3, 4, "") + "]");
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(Message(h.status()), HasSubstr("transaction #1: duplicate transaction id 67"));
  EXPECT_THAT(Message(h.status()), StartsWith("history.json:2:1: "));

  absl::StatusOr<History> sessions =
      Read("[" + Txn("1", "4", 1, 2, "") + "," + Txn("2", "\"4\"", 3, 4, "") + "]");
  ASSERT_TRUE(sessions.ok()) << sessions.status();
  EXPECT_EQ(sessions->session_count(), 1u);
  EXPECT_EQ(sessions->txn(TxnId(1)).seq, 1u);
  EXPECT_EQ(sessions->txn(TxnId(1)).session_prev, TxnId(0));
}

TEST_F(TimeKillerTest, OpTypeSpellingsGiveTheSameOp) {
  for (std::string_view w : {"w", "W", "write", "Write", "WRITE"}) {
    absl::StatusOr<History> h =
        Read("[" + Txn("1", "1", 1, 2, fmt::format(R"({{"t": "{}", "k": 3, "v": 9}})", w)) + "]");
    ASSERT_TRUE(h.ok()) << w << ": " << h.status();
    EXPECT_EQ(OpAt(*h, 0, 0).kind(), OpKind::kWrite) << w;
    EXPECT_EQ(OpAt(*h, 0, 0).value(), Value::Int(9)) << w;
    EXPECT_EQ(Canonical(*h),
              Canonical(*Read("[" + Txn("1", "1", 1, 2, R"({"t":"w","k":3,"v":9})") + "]")));
  }
  for (std::string_view r : {"r", "R", "read", "Read", "rEAD"}) {
    absl::StatusOr<History> h =
        Read("[" + Txn("1", "1", 1, 2, fmt::format(R"({{"t": "{}", "k": 3, "v": 9}})", r)) + "]");
    ASSERT_TRUE(h.ok()) << r << ": " << h.status();
    EXPECT_EQ(OpAt(*h, 0, 0).kind(), OpKind::kRead) << r;
  }
  for (std::string_view a : {"a", "A", "append", "Append"}) {
    absl::StatusOr<History> h =
        Read("[" + Txn("1", "1", 1, 2, fmt::format(R"({{"t": "{}", "k": 3, "v": 9}})", a)) + "]");
    ASSERT_TRUE(h.ok()) << a << ": " << h.status();
    EXPECT_EQ(OpAt(*h, 0, 0).kind(), OpKind::kAppend) << a;
  }
}

TEST_F(TimeKillerTest, RejectsStartAfterCommitNamingTheIndex) {
  std::string json = "[\n" + Txn("1", "1", 1, 2, "") + ",\n" + Txn("2", "1", 9, 8, "") + "\n]";
  std::string error = ReadError(json);
  // The position is that of the "sts" member.
  EXPECT_EQ(error, "history.json:3:22: transaction #1: \"sts\" 9 is after \"cts\" 8");
  // Equal physical parts are ordered by the logical ones.
  error = ReadError(
      R"([{"tid": 1, "sid": 1, "sts": {"p": 5, "l": 2}, "cts": {"p": 5, "l": 1}, "ops": []}])");
  EXPECT_THAT(error, HasSubstr("transaction #0: \"sts\" (5,2) is after \"cts\" (5,1)"));
  EXPECT_EQ(ReadError(R"([{"tid": 1, "sid": 1, "sts": {"p": 5, "l": 1}, "cts": {"p": 5, "l": 1},
                          "ops": []}])"),
            "");
}

TEST_F(TimeKillerTest, RejectsUnknownOpTypeNamingTheIndex) {
  std::string json = "[" + Txn("1", "1", 1, 2, R"({"t":"w","k":1,"v":1})") + ",\n" +
                     Txn("2", "1", 3, 4, R"({"t":"r","k":1,"v":1}, {"t": "delete", "k": 1})") + "]";
  std::string error = ReadError(json);
  // The position is that of the op's "t" member.
  EXPECT_EQ(error,
            "history.json:2:104: transaction #1: op #1: unknown op type \"delete\" (expected w, "
            "write, r, read, a or append)");
}

TEST_F(TimeKillerTest, ReadsComposedListSample) {
  absl::StatusOr<History> h = Read(list_sample_);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->data_model(), DataModel::kList);
  ASSERT_EQ(h->size(), 2u);
  const KeyId k2 = h->FindIntKey(2);
  const KeyId k9 = h->FindIntKey(9);
  ASSERT_TRUE(k2.valid() && k9.valid());
  EXPECT_TRUE(h->key(k2).is_list);
  EXPECT_TRUE(h->key(k9).is_list);

  EXPECT_EQ(OpAt(*h, 0, 0).kind(), OpKind::kAppend);
  EXPECT_EQ(OpAt(*h, 0, 0).value(), Value::Int(40));
  // A missing "v" and "v": null are reads of the empty list.
  EXPECT_EQ(OpAt(*h, 0, 1).kind(), OpKind::kListRead);
  EXPECT_EQ(OpAt(*h, 0, 1).key(), k9);
  EXPECT_TRUE(h->list_elements(OpAt(*h, 0, 1)).empty());
  EXPECT_EQ(OpAt(*h, 1, 0).kind(), OpKind::kListRead);
  ASSERT_EQ(h->list_elements(OpAt(*h, 1, 0)).size(), 1u);
  EXPECT_EQ(h->list_elements(OpAt(*h, 1, 0))[0], Value::Int(40));
  EXPECT_EQ(OpAt(*h, 1, 1).kind(), OpKind::kListRead);
  EXPECT_TRUE(h->list_elements(OpAt(*h, 1, 1)).empty());
  // Txn 8 is read-only with sts == cts.
  EXPECT_EQ(h->txn(TxnId(1)).start, h->txn(TxnId(1)).commit);
  EXPECT_TRUE(h->InitialList(k9).empty());
}

TEST_F(TimeKillerTest, EmptyArrayNullAndMissingValueAreTheSameEmptyListRead) {
  const std::string forms[] = {R"({"t":"r","k":5,"v":[]})", R"({"t":"r","k":5,"v":null})",
                               R"({"t":"r","k":5})"};
  std::vector<std::string> canonical;
  for (const std::string& read : forms) {
    absl::StatusOr<History> h =
        Read("[" + Txn("1", "1", 1, 2, read + R"(, {"t":"a","k":5,"v":1})") + "]");
    ASSERT_TRUE(h.ok()) << read << ": " << h.status();
    EXPECT_EQ(OpAt(*h, 0, 0).kind(), OpKind::kListRead) << read;
    EXPECT_TRUE(h->list_elements(OpAt(*h, 0, 0)).empty()) << read;
    canonical.push_back(Canonical(*h));
  }
  EXPECT_EQ(canonical[0], canonical[1]);
  EXPECT_EQ(canonical[0], canonical[2]);
}

TEST_F(TimeKillerTest, ListShapeErrors) {
  // A scalar read of a list key.
  EXPECT_THAT(ReadError("[" + Txn("1", "1", 1, 2, R"({"t":"a","k":5,"v":1})") + ",\n" +
                        Txn("2", "1", 3, 4, R"({"t":"r","k":5,"v":1})") + "]"),
              HasSubstr("transaction #1: op #0: key 5 is used as a register here"));
  // A list read of a register key.
  EXPECT_THAT(ReadError("[" + Txn("1", "1", 1, 2, R"({"t":"w","k":5,"v":1})") + ",\n" +
                        Txn("2", "1", 3, 4, R"({"t":"r","k":5,"v":[1]})") + "]"),
              HasSubstr("transaction #1: op #0: key 5 is used as a list here"));
  // An append of an array.
  EXPECT_THAT(ReadError("[" + Txn("1", "1", 1, 2, R"({"t":"a","k":5,"v":[1]})") + "]"),
              HasSubstr("transaction #0: op #0: the \"v\" of an append must be one integer, not "
                        "an array"));
  EXPECT_THAT(ReadError("[" + Txn("1", "1", 1, 2, R"({"t":"a","k":5,"v":null})") + "]"),
              HasSubstr("op #0: the \"v\" of an append must be an integer, not null"));
  EXPECT_THAT(ReadError("[" + Txn("1", "1", 1, 2, R"({"t":"r","k":5,"v":[1, "x"]})") + "]"),
              HasSubstr("op #0: expected element 1 of \"v\" to be a 64-bit integer, found \"x\""));
  EXPECT_THAT(ReadError("[" + Txn("1", "1", 1, 2, R"({"t":"r","k":5,"v":[1, [2]]})") + "]"),
              HasSubstr("op #0: expected element 1 of \"v\" to be a 64-bit integer"));
}

TEST_F(TimeKillerTest, NullReadStaysAbsentUnderAnIntegerInitialValue) {
  ReadOptions options;
  options.initial_value = 0;
  absl::StatusOr<History> h = ReadTimeKillerString(kv_sample_, options, "history.json");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(OpAt(*h, 0, 1).value().absent());
  EXPECT_EQ(h->initial().default_value, Value::Int(0));
  EXPECT_EQ(h->InitialValue(h->FindIntKey(4)), Value::Int(0));
}

TEST_F(TimeKillerTest, InitialTransactionSetsInitialValues) {
  ReadOptions options;
  options.initial_value = 7;
  absl::StatusOr<History> h = ReadTimeKillerString(kv_sample_, options, "history.json", initial_);
  ASSERT_TRUE(h.ok()) << h.status();
  // Listed keys get the file's values, the others the option's default.
  EXPECT_EQ(h->InitialValue(h->FindIntKey(0)), Value::Int(500));
  EXPECT_EQ(h->InitialValue(h->FindIntKey(1)), Value::Int(0));
  EXPECT_EQ(h->InitialValue(h->FindIntKey(3)), Value::Int(7));
  EXPECT_EQ(h->InitialValue(h->FindIntKey(4)), Value::Int(7));
  EXPECT_EQ(h->initial().registers.size(), 2u);
  EXPECT_EQ(h->size(), 2u);

  // The same through ReadOptions::initial_txn_path and ReadTimeKillerFile.
  options.initial_txn_path = SamplePath("initial_txn.json");
  absl::StatusOr<History> from_files = ReadTimeKillerFile(SamplePath("kv_sample.json"), options);
  ASSERT_TRUE(from_files.ok()) << from_files.status();
  EXPECT_EQ(Canonical(*from_files), Canonical(*h));
  EXPECT_EQ(from_files->source(), SamplePath("kv_sample.json"));
}

TEST_F(TimeKillerTest, InitialTransactionSemantics) {
  // The last write of a key wins; reads are ignored; tid, sid and timestamps are ignored.
  absl::StatusOr<History> h =
      Read(kv_sample_, R"({"tid": 0, "sid": 0, "sts": {"p": 0, "l": 0}, "cts": {"p": 0, "l": 0},
                     "ops": [{"t": "W", "k": 3, "v": 1}, {"t": "r", "k": 3, "v": 1},
                             {"t": "write", "k": 3, "v": 2}, {"t": "read", "k": 77},
                             {"t": "w", "k": 4, "v": null}]})");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->InitialValue(h->FindIntKey(3)), Value::Int(2));
  EXPECT_TRUE(h->InitialValue(h->FindIntKey(4)).absent());
  EXPECT_FALSE(h->FindIntKey(77).valid());

  // Appends give initial lists, in order.
  absl::StatusOr<History> lists =
      Read(list_sample_, R"({"ops": [{"t": "a", "k": 2, "v": 10}, {"t": "append", "k": 2,
                                      "v": 20}, {"t": "a", "k": 6, "v": 1}]})");
  ASSERT_TRUE(lists.ok()) << lists.status();
  EXPECT_THAT(lists->InitialList(lists->FindIntKey(2)),
              ::testing::ElementsAre(Value::Int(10), Value::Int(20)));
  EXPECT_THAT(lists->InitialList(lists->FindIntKey(6)), ::testing::ElementsAre(Value::Int(1)));
  EXPECT_TRUE(lists->InitialList(lists->FindIntKey(9)).empty());

  // An op that is neither a write nor a read is an error naming the op.
  absl::StatusOr<History> bad =
      Read(kv_sample_,
           "{\"ops\": [{\"t\": \"w\", \"k\": 0, \"v\": 1},\n {\"t\": \"cas\", \"k\": 1, "
           "\"v\": 2}]}");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(Message(bad.status()),
            "history.json (initial transaction):2:3: initial transaction: op #1: unknown op type "
            "\"cas\" (expected w, write, r, read, a or append)");

  // Not an object; no "ops"; a register in the initial state appended to in the history.
  EXPECT_THAT(ReadError(kv_sample_, "[]"), HasSubstr("expected a JSON object with \"ops\""));
  EXPECT_THAT(ReadError(kv_sample_, R"({"tid": 1})"), HasSubstr("missing \"ops\""));
  EXPECT_THAT(ReadError(kv_sample_, R"({"ops": []} [])"), HasSubstr("invalid JSON"));
  EXPECT_THAT(ReadError(kv_sample_, R"({"ops": []} 5)"), HasSubstr("invalid JSON"));
  EXPECT_THAT(ReadError(list_sample_, R"({"ops": [{"t": "w", "k": 2, "v": 1}]})"),
              HasSubstr("transaction #0: op #0: key 2 is used as a list here"));

  ReadOptions missing;
  missing.initial_txn_path = SamplePath("no_such_initial.json");
  absl::StatusOr<History> no_file = ReadTimeKillerFile(SamplePath("kv_sample.json"), missing);
  ASSERT_FALSE(no_file.ok());
  EXPECT_EQ(no_file.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TimeKillerTest, RejectsMalformedSnapshots) {
  auto txn = [](std::string_view members) {
    return fmt::format(R"([{{"tid":1,"sid":1,{},"cts":{{"p":10}},"ops":[]}}])", members);
  };
  EXPECT_THAT(ReadError(txn(R"("sts":{"p":1},"snapshot":"1:2:")")),
              HasSubstr("both \"sts\" and \"snapshot\""));
  EXPECT_THAT(ReadError(txn(R"("snapshot":"3:2:")")), HasSubstr("xmin 3 is above its xmax 2"));
  EXPECT_THAT(ReadError(txn(R"("snapshot":"1:3:3")")), HasSubstr("lies outside"));
  EXPECT_THAT(ReadError(txn(R"("snapshot":"1-3")")), HasSubstr("expected xmin:xmax:xip"));
  EXPECT_THAT(ReadError(txn(R"("snapshot":5)")), HasSubstr("\"snapshot\" to be a string"));
  EXPECT_THAT(ReadError(txn(R"("xid":-1,"sts":{"p":1})")), HasSubstr("positive 64-bit integer"));
  EXPECT_THAT(ReadError(txn(R"("xid":5)")), HasSubstr("missing \"sts\""));
}

TEST_F(TimeKillerTest, TolerancesAndExtraMembers) {
  // A byte order mark, CRLF line ends, extra members (rtts, unknown nested data), members in any
  // order, a missing "l", escaped member names.
  std::string json =
      "\xEF\xBB\xBF  [\r\n"
      R"({"ops": [{"v": 3, "extra": {"a": [1, {"b": "}]"}]}, "k": 1, "t": "w"}], "rtts": 1717000000123,)"
      R"( "cts": {"p": 9, "x": "y"}, "sts": {"l": 0, "p": 8}, "s\u0069d": "s", "tid": "t\"1"})"
      "\r\n]\r\n\r\n";
  absl::StatusOr<History> h = Read(json);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->txn_name(TxnId(0)), "t\"1");
  EXPECT_EQ(h->session_name(SessionId(0)), "s");
  EXPECT_EQ(h->txn(TxnId(0)).commit, (Timestamp{9, 0}));
  EXPECT_EQ(h->txn(TxnId(0)).start, (Timestamp{8, 0}));
  EXPECT_EQ(OpAt(*h, 0, 0).value(), Value::Int(3));
  EXPECT_EQ(h->txn(TxnId(0)).source_offset, 8u);

  // A write of null is kept as a write of the absent value; negative keys are fine.
  absl::StatusOr<History> null_write =
      Read("[" + Txn("1", "1", 1, 2, R"({"t":"w","k":-5,"v":null})") + "]");
  ASSERT_TRUE(null_write.ok()) << null_write.status();
  EXPECT_EQ(OpAt(*null_write, 0, 0).kind(), OpKind::kWrite);
  EXPECT_TRUE(OpAt(*null_write, 0, 0).value().absent());
  EXPECT_TRUE(h->FindIntKey(1).valid());

  // Empty array: a valid, empty history.
  absl::StatusOr<History> empty = Read(" [ ] \n");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->size(), 0u);
}

TEST_F(TimeKillerTest, MalformedDocumentsGivePositionedErrors) {
  struct Case {
    std::string json;
    std::string error;
  };
  const std::string t0 = Txn("1", "1", 1, 2, R"({"t":"w","k":1,"v":1})");
  ASSERT_EQ(t0.size(), 102u);
  const std::vector<Case> cases = {
      {"", "history.json:1:1: empty input: expected '[' starting an array of transactions"},
      {"  \n ", "history.json:2:2: empty input: expected '[' starting an array of transactions"},
      {"{}", "history.json:1:1: expected '[' starting an array of transactions, found '{'"},
      {"\n 17", "history.json:2:2: expected '[' starting an array of transactions, found '1'"},
      {"[", "history.json:1:2: truncated: the input ends before transaction #0 or the closing ']'"},
      {"[\n" + t0,
       "history.json:2:103: truncated: the input ends after transaction 0 without the closing ']'"},
      {"[\n" + t0 + ",",
       "history.json:2:104: truncated: the input ends before transaction #1 or the "
       "closing ']'"},
      {"[\n" + t0 + ",\n" + t0.substr(0, 50),
       "history.json:3:1: transaction #1: truncated: the input ends inside it"},
      {"[\n" + t0.substr(0, 70) + "\"",
       "history.json:2:1: transaction #0: truncated: the input "
       "ends inside it"},
      {"[" + t0 + "] x", "history.json:1:106: unexpected 'x' after the closing ']' of the array"},
      {"[" + t0 + "]\n]", "history.json:2:1: unexpected ']' after the closing ']' of the array"},
      {"[" + t0 + " " + t0 + "]",
       "history.json:1:105: expected ',' or ']' after transaction #0, found '{'"},
      {"[" + t0 + ",]",
       "history.json:1:105: expected transaction #1 after ',', found ']' (a "
       "trailing comma)"},
      {"[1]", "history.json:1:2: transaction #0: expected an object, found '1'"},
      {"[[1]]", "history.json:1:2: transaction #0: expected an object, found an array"},
      {"[\n{\"tid\": [}]",
       "history.json:2:1: transaction #0: invalid JSON while reading a transaction object: JSON "
       "document ended early in the middle of an object or array."},
      {"[" + std::string(2000, '[') + std::string(2000, ']') + "]",
       "history.json:1:1026: transaction #0: nested deeper than 1024 levels"},
      {"[{\"tid\": \"a\xff\", \"sid\": 1}]", "history.json:1:12: transaction #0: invalid UTF-8"},
      {"[{\"tid\": \"a\xe2\x82\"}]", "history.json:1:12: transaction #0: invalid UTF-8"},
      {"[{\"tid\": \"a\tb\"}]",
       "history.json:1:12: transaction #0: unescaped control character in a string"},
      {"[\n{\"tid\": 1, \"sid\": 1, \"sts\": 5, \"cts\": {\"p\": 1}, \"ops\": []}]",
       "history.json:2:22: transaction #0: expected \"sts\" to be an object {\"p\", \"l\"}, "
       "found 5"},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": 1.5}, "cts": {"p": 1}, "ops": []}])",
       "history.json:1:31: transaction #0: expected \"sts.p\" to be a 64-bit integer or a decimal "
       "string, found 1.5"},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": "12a"}, "cts": {"p": 1}, "ops": []}])",
       "history.json:1:31: transaction #0: expected \"sts.p\" to be a 64-bit integer or a decimal "
       "string, found \"12a\""},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": "1.0"}, "cts": {"p": 1}, "ops": []}])",
       "history.json:1:31: transaction #0: expected \"sts.p\" to be a 64-bit integer or a decimal "
       "string, found \"1.0\""},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": 1, "l": "+1"}, "cts": {"p": 1}, "ops": []}])",
       "history.json:1:39: transaction #0: expected \"sts.l\" to be a 64-bit integer or a decimal "
       "string, found \"+1\""},
      {R"([{"tid": 1, "sid": 1, "sts": {"l": 1}, "cts": {"p": 1}, "ops": []}])",
       "history.json:1:23: transaction #0: \"sts\" has no \"p\""},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}}])",
       "history.json:1:2: transaction #0: missing \"ops\""},
      {R"([{"sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": []}])",
       "history.json:1:2: transaction #0: missing \"tid\""},
      {R"([{"tid": 1.5, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": []}])",
       "history.json:1:3: transaction #0: expected \"tid\" to be an integer or a string, found "
       "1.5"},
      {R"([{"tid": true, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": []}])",
       "history.json:1:3: transaction #0: expected \"tid\" to be an integer or a string, found "
       "true"},
      {R"([{"tid": 1, "tid": 2, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": []}])",
       "history.json:1:13: transaction #0: two members \"tid\""},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": {}}])",
       "history.json:1:57: transaction #0: expected \"ops\" to be an array, found {"},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": [{"t": "w", "k": 9223372036854775808, "v": 1}]}])",
       "history.json:1:76: transaction #0: op #0: expected \"k\" to be a 64-bit integer, found "
       "9223372036854775808"},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": [{"t": "w", "k": 1, "v": -9223372036854775809}]}])",
       "history.json:1:84: transaction #0: op #0: expected \"v\" to be a 64-bit integer, found "
       "-9223372036854775809"},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": [{"t": "w", "k": 1}]}])",
       "history.json:1:65: transaction #0: op #0: a write needs \"v\""},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": [{"k": 1}]}])",
       "history.json:1:65: transaction #0: op #0: missing \"t\""},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": [{"t": 1, "k": 1}]}])",
       "history.json:1:66: transaction #0: op #0: expected \"t\" to be a string, found 1"},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": [7]}])",
       "history.json:1:65: transaction #0: op #0: expected an object {\"t\", \"k\", \"v\"}, found "
       "7"},
      {R"([{"tid": 1, "sid": 1, "sts": {"p": 1}, "cts": {"p": 1}, "ops": [{"t": "r", "k": 1, "v": "3"}]}])",
       "history.json:1:84: transaction #0: op #0: expected \"v\" to be an integer, null or an "
       "array of integers, found \"3\""},
      // A member without a value: the parser must not see past the element (what follows it
      // depends on where the chunk ends).
      {"[{\"tid\": 8, \"sid\": 1, \"sts\": {\"p\": 6, \"lp\": 8, \"sid\": 2, \"sts\":}}}}}, "
       "\"c\"v\": n}}}}]}]\n",
       "history.json:1:2: transaction #0: invalid JSON while reading a transaction object: The "
       "JSON "
       "document has an improper structure: missing or superfluous commas, braces, missing keys, "
       "etc."},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ReadError(c.json), c.error) << c.json;
    // The same error whatever the chunk size.
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{16}}) {
      absl::StatusOr<History> h =
          internal::ReadTimeKillerStringChunked(c.json, {}, "history.json", {}, chunk);
      ASSERT_FALSE(h.ok()) << c.json;
      EXPECT_EQ(Message(h.status()), c.error) << "chunk " << chunk << ": " << c.json;
    }
  }
}

TEST_F(TimeKillerTest, IdsAreInternedByTheirText) {
  // Ids spelled as decimals are interned densely while they stay small; a large one seen before
  // them stays findable, and a repeat of it is still a duplicate, once the small ones have grown
  // past it.
  std::string json = "[" + Txn("5000", "1", 1, 2, "");
  for (int i = 1; i <= 3000; ++i) json += ",\n" + Txn(std::to_string(i), "1", 1, 2, "");
  json += ",\n" + Txn("\"05000\"", "1", 1, 2, "");
  absl::StatusOr<History> h = Read(json + "]");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->FindTxn("5000"), TxnId(0));
  EXPECT_EQ(h->FindTxn("1"), TxnId(1));
  EXPECT_EQ(h->FindTxn("3000"), TxnId(3000));
  EXPECT_EQ(h->FindTxn("05000"), TxnId(3001));
  EXPECT_FALSE(h->FindTxn("3001").valid());
  EXPECT_FALSE(h->FindTxn("0").valid());
  EXPECT_FALSE(h->FindTxn("").valid());

  json += ",\n" + Txn("\"5000\"", "1", 1, 2, "") + "]";
  absl::StatusOr<History> dup = Read(json);
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(Message(dup.status()), HasSubstr("transaction #3002: duplicate transaction id 5000"));
}

TEST_F(TimeKillerTest, MissingFile) {
  absl::StatusOr<History> h = ReadTimeKillerFile(SamplePath("does_not_exist.json"), {});
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(h.status()), HasSubstr("does_not_exist.json"));
}

}  // namespace
}  // namespace isowatch::formats
