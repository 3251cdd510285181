// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/timekiller.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/internal/timekiller_internal.h"
#include "isowatch/history/history_builder.h"

#include "tests/testing/canonical_history.h"
#include "tests/testing/source_dir.h"

namespace isowatch::formats {
namespace {

using history::DataModel;
using history::History;
using history::HistoryBuilder;
using history::Op;
using history::OpKind;
using history::Timestamp;
using history::TxnStatus;
using history::Value;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

std::string SamplePath(std::string_view name) {
  return fmt::format("{}/tests/histories/timekiller/{}", isowatch::testing::SourceDir(), name);
}

std::string ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Canonical(const History& h) { return isowatch::testing::CanonicalHistory(h); }

std::string Write(const History& h) {
  std::ostringstream out;
  absl::Status s = WriteTimeKiller(h, out);
  EXPECT_TRUE(s.ok()) << s;
  return out.str();
}

std::string WriteInitial(const History& h) {
  std::ostringstream out;
  absl::Status s = WriteTimeKillerInitial(h, out);
  EXPECT_TRUE(s.ok()) << s;
  return out.str();
}

absl::StatusOr<History> Read(std::string_view json, std::string_view initial = {},
                             ReadOptions options = {}) {
  return ReadTimeKillerString(json, options, "history.json", initial);
}

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

class TimeKillerTest : public ::testing::Test {
 protected:
  const std::string kv_sample_ = ReadFileToString(SamplePath("kv_sample.json"));
  const std::string list_sample_ = ReadFileToString(SamplePath("list_sample.json"));
  const std::string initial_ = ReadFileToString(SamplePath("initial_txn.json"));
};

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

TEST_F(TimeKillerTest, ReadsAndWritesTheSnapshotExtension) {
  const std::string json =
      R"([{"tid":1,"sid":1,"xid":101,"snapshot":"100:103:102,100","cts":{"p":10},"ops":[]},)"
      R"({"tid":2,"sid":1,"xid":7,"sts":{"p":11},"cts":{"p":12},"ops":[{"t":"w","k":1,"v":2}]}])";
  absl::StatusOr<History> h = Read(json);
  ASSERT_TRUE(h.ok()) << h.status();
  const history::Transaction& t1 = h->txn(TxnId(0));
  EXPECT_FALSE(t1.has_start);
  EXPECT_EQ(h->xid(t1), 101u);
  ASSERT_TRUE(h->has_snapshot(t1));
  EXPECT_EQ(history::FormatSnapshot(h->snapshot(t1)), "100:103:100,102");
  EXPECT_EQ(h->xid(h->txn(TxnId(1))), 7u);
  EXPECT_TRUE(h->txn(TxnId(1)).has_start);
  const std::string written = Write(*h);
  EXPECT_NE(written.find(R"("xid":101,"snapshot":"100:103:100,102","cts")"), std::string::npos)
      << written;
  absl::StatusOr<History> back = Read(written);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Write(*back), written);
  EXPECT_EQ(Canonical(*back), Canonical(*h));
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

TEST_F(TimeKillerTest, RoundTripIsIdentityAndByteStable) {
  for (const std::string* sample : {&kv_sample_, &list_sample_}) {
    absl::StatusOr<History> first = Read(*sample);
    ASSERT_TRUE(first.ok()) << first.status();
    const std::string text1 = Write(*first);
    absl::StatusOr<History> second = Read(text1);
    ASSERT_TRUE(second.ok()) << second.status() << "\n" << text1;
    EXPECT_EQ(Canonical(*first), Canonical(*second));
    EXPECT_EQ(Write(*second), text1);
  }
  absl::StatusOr<History> kv = Read(kv_sample_);
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(Write(*kv),
            "[\n"
            R"({"tid":1,"sid":0,"sts":{"p":100,"l":0},"cts":{"p":105,"l":2},"ops":[)"
            R"({"t":"w","k":3,"v":11},{"t":"r","k":4,"v":null}]},)"
            "\n"
            R"({"tid":"t2","sid":"s1","sts":{"p":105,"l":2},"cts":{"p":110,"l":0},"ops":[)"
            R"({"t":"r","k":3,"v":11},{"t":"w","k":4,"v":12}]})"
            "\n]\n");
  absl::StatusOr<History> list = Read(list_sample_);
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(Write(*list), HasSubstr(R"("ops":[{"t":"a","k":2,"v":40},{"t":"r","k":9,"v":[]}]})"));

  absl::StatusOr<History> empty = Read("[]");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(Write(*empty), "[\n]\n");
}

TEST_F(TimeKillerTest, RoundTripOfABuiltHistory) {
  // Ids that need escaping, extreme integers, session order, both data models and an initial
  // state; aborted transactions are not written.
  HistoryBuilder b;
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  KeyId reg = b.IntKey(kMin);
  KeyId list = b.IntKey(kMax);
  KeyId other = b.IntKey(-3);
  b.SetDefaultInitialValue(Value::Int(0));
  b.SetInitialRegister(reg, Value::Int(-1));
  const Value initial_list[] = {Value::Int(4), Value::Int(5)};
  b.SetInitialList(list, initial_list);
  ASSERT_TRUE(b.BeginTxn({.id = "a \"quoted\"\n\\ id \x01 \xc3\xa9",
                          .session = "s\t1",
                          .start = Timestamp{kMin, kMax},
                          .commit = Timestamp{kMax, 0}})
                  .ok());
  b.Write(reg, Value::Int(kMax));
  b.Read(other, Value::Absent());
  b.Append(list, Value::Int(kMin));
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "-12",
                          .id_numeric = true,
                          .session = "s\t1",
                          .start = Timestamp{1, 1},
                          .commit = Timestamp{2, 2}})
                  .ok());
  const Value seen[] = {Value::Int(4), Value::Int(5), Value::Int(kMin)};
  b.ListRead(list, seen);
  b.Read(reg, Value::Int(kMax));
  b.Write(other, Value::Absent());
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "gone",
                          .session = "7",
                          .session_numeric = true,
                          .status = TxnStatus::kAborted,
                          .start = Timestamp{1, 0},
                          .commit = Timestamp{1, 0}})
                  .ok());
  b.Write(reg, Value::Int(99));
  b.EndTxn();
  absl::StatusOr<History> built = std::move(b).Finish();
  ASSERT_TRUE(built.ok()) << built.status();

  const std::string text = Write(*built);
  const std::string initial_text = WriteInitial(*built);
  EXPECT_EQ(initial_text,
            "{\"ops\":[\n"
            R"({"t":"w","k":-9223372036854775808,"v":-1},)"
            "\n"
            R"({"t":"a","k":9223372036854775807,"v":4},)"
            "\n"
            R"({"t":"a","k":9223372036854775807,"v":5})"
            "\n]}\n");
  EXPECT_THAT(text, HasSubstr(R"({"tid":"a \"quoted\"\n\\ id \u0001 )"));
  EXPECT_THAT(text, HasSubstr(R"({"tid":-12,"sid":"s\t1",)"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("gone")));

  ReadOptions options;
  options.initial_value = 0;
  absl::StatusOr<History> again = ReadTimeKillerString(text, options, "again", initial_text);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
  // The aborted transaction is not representable; everything else is the same.
  HistoryBuilder expected_builder;
  std::string without_aborted = Canonical(*built);
  without_aborted.erase(without_aborted.find("session 7 numeric=true\n"),
                        std::string("session 7 numeric=true\n").size());
  without_aborted.erase(without_aborted.find("txn gone"));
  EXPECT_EQ(Canonical(*again), without_aborted);
  EXPECT_EQ(Write(*again), text);
  EXPECT_EQ(WriteInitial(*again), initial_text);
}

TEST_F(TimeKillerTest, WriterErrors) {
  {
    HistoryBuilder b;
    ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s", .commit = Timestamp{1, 0}}).ok());
    b.EndTxn();
    absl::StatusOr<History> h = std::move(b).Finish();
    ASSERT_TRUE(h.ok());
    std::ostringstream out;
    absl::Status s = WriteTimeKiller(*h, out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(s), HasSubstr("transaction 1 has no start timestamp"));
  }
  {
    HistoryBuilder b;
    KeyId k = b.BytesKey("name");
    ASSERT_TRUE(
        b.BeginTxn({.id = "1", .session = "s", .start = Timestamp{1, 0}, .commit = Timestamp{1, 0}})
            .ok());
    b.Write(k, Value::Int(1));
    b.EndTxn();
    absl::StatusOr<History> h = std::move(b).Finish();
    ASSERT_TRUE(h.ok());
    std::ostringstream out;
    absl::Status s = WriteTimeKiller(*h, out);
    EXPECT_THAT(Message(s), HasSubstr("key \"name\" is not an integer"));
  }
  {
    HistoryBuilder b;
    KeyId k = b.IntKey(1);
    Value bytes = b.BytesValue("v");
    ASSERT_TRUE(
        b.BeginTxn({.id = "1", .session = "s", .start = Timestamp{1, 0}, .commit = Timestamp{1, 0}})
            .ok());
    b.Read(k, bytes);
    b.EndTxn();
    b.SetInitialRegister(k, bytes);
    absl::StatusOr<History> h = std::move(b).Finish();
    ASSERT_TRUE(h.ok());
    std::ostringstream out;
    EXPECT_THAT(Message(WriteTimeKiller(*h, out)), HasSubstr("value \"v\" is not an integer"));
    EXPECT_THAT(Message(WriteTimeKillerInitial(*h, out)),
                HasSubstr("value \"v\" is not an integer"));
  }
  {
    HistoryBuilder b;
    KeyId k = b.IntKey(1);
    ASSERT_TRUE(
        b.BeginTxn({.id = "1", .session = "s", .start = Timestamp{1, 0}, .commit = Timestamp{1, 0}})
            .ok());
    b.UnknownRead(k);
    b.EndTxn();
    absl::StatusOr<History> h = std::move(b).Finish();
    ASSERT_TRUE(h.ok());
    std::ostringstream out;
    EXPECT_THAT(Message(WriteTimeKiller(*h, out)), HasSubstr("unknown result"));
  }
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

// A generated kv/list history of `n` transactions, one per line, with an error in transaction
// `bad` (if it is < n). Unless `usual`, each transaction has a member that the reader ignores and
// a start timestamp written as a string.
std::string Generate(size_t n, size_t bad = SIZE_MAX, bool usual = false) {
  std::string out = "[\n";
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ",\n";
    const int64_t key = static_cast<int64_t>(i % 97);
    std::string ops = fmt::format(R"({{"t":"w","k":{},"v":{}}},{{"t":"r","k":{},"v":{}}},)"
                                  R"({{"t":"a","k":{},"v":{}}},{{"t":"r","k":{},"v":[{},{}]}})",
                                  key, i, key + 1000, i % 3 == 0 ? "null" : std::to_string(i - 1),
                                  key + 5000, i, key + 5000, i, i + 1);
    if (i == bad) ops += R"(,{"t":"x","k":1})";
    const std::string start = usual ? std::to_string(2 * i) : fmt::format("\"{}\"", 2 * i);
    out += fmt::format(R"({{"tid":{},"sid":"s{}","sts":{{"p":{},"l":{}}},"cts":{{"p":{},"l":0}},)"
                       "{}\n"
                       R"( "ops":[{}]}})",
                       i, i % 13, start, i % 5, 2 * i + 1, usual ? "" : R"("x":"\"\\{[",)", ops);
  }
  out += "\n]\n";
  return out;
}

TEST_F(TimeKillerTest, LargeFileAcrossChunkBoundaries) {
  constexpr size_t kTxns = 20000;
  const std::string json = Generate(kTxns);
  absl::StatusOr<History> h = Read(json);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), kTxns);
  EXPECT_EQ(h->op_count(), 4 * kTxns);
  EXPECT_EQ(h->session_count(), 13u);
  EXPECT_EQ(h->data_model(), DataModel::kMixed);
  for (size_t i : {size_t{0}, size_t{1}, size_t{12345}, kTxns - 1}) {
    const TxnId id(static_cast<uint32_t>(i));
    const history::Transaction& t = h->txn(id);
    EXPECT_EQ(h->txn_name(id), std::to_string(i));
    EXPECT_EQ(h->session_name(t.session), fmt::format("s{}", i % 13));
    EXPECT_EQ(t.seq, i / 13);
    EXPECT_EQ(t.start, (Timestamp{static_cast<int64_t>(2 * i), static_cast<int64_t>(i % 5)}));
    EXPECT_EQ(t.commit, (Timestamp{static_cast<int64_t>(2 * i + 1), 0}));
    EXPECT_EQ(t.source_offset, json.find(fmt::format("{{\"tid\":{},", i)));
    auto ops = h->ops(id);
    EXPECT_EQ(ops[0].value(), Value::Int(static_cast<int64_t>(i)));
    EXPECT_EQ(ops[1].value(),
              i % 3 == 0 ? Value::Absent() : Value::Int(static_cast<int64_t>(i) - 1));
    EXPECT_EQ(ops[2].kind(), OpKind::kAppend);
    EXPECT_THAT(h->list_elements(ops[3]),
                ::testing::ElementsAre(Value::Int(static_cast<int64_t>(i)),
                                       Value::Int(static_cast<int64_t>(i + 1))));
  }
  const std::string expected = Canonical(*h);
  for (size_t chunk : {size_t{1}, size_t{333}, size_t{4096}}) {
    absl::StatusOr<History> chunked =
        internal::ReadTimeKillerStringChunked(json, {}, "history.json", {}, chunk);
    ASSERT_TRUE(chunked.ok()) << "chunk " << chunk << ": " << chunked.status();
    EXPECT_EQ(Canonical(*chunked), expected) << "chunk " << chunk;
  }

  // Through a file, with a small chunk.
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / fmt::format("tk_large_{}.json", getpid()))
          .string();
  {
    std::ofstream out(path, std::ios::binary);
    out << json;
  }
  absl::StatusOr<History> from_file = internal::ReadTimeKillerFileChunked(path, {}, 1000);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(Canonical(*from_file), expected);
  std::filesystem::remove(path);

  // Round trip of the large history.
  const std::string text = Write(*h);
  absl::StatusOr<History> again = internal::ReadTimeKillerStringChunked(text, {}, "x", {}, 100);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Canonical(*again), expected);
  EXPECT_EQ(Write(*again), text);
}

TEST_F(TimeKillerTest, ErrorPositionLateInALargeFile) {
  constexpr size_t kBad = 8000;
  const std::string json = Generate(kBad + 10, kBad);
  // Transaction i takes lines 2i + 2 and 2i + 3; its ops are on the second of them. The error
  // points at the bad op's "t" member.
  const size_t line_start = json.rfind('\n', json.find(fmt::format("{{\"tid\":{},", kBad)));
  const size_t op = json.find(R"({"t":"x")", line_start);
  const size_t ops_line_start = json.rfind('\n', op) + 1;
  const std::string expected = fmt::format(
      "history.json:{}:{}: transaction #{}: op #4: unknown op type \"x\" (expected w, "
      "write, r, read, a or append)",
      2 * kBad + 3, op + 1 - ops_line_start + 1, kBad);
  for (size_t chunk : {size_t{5}, size_t{4096}, size_t{16} << 20}) {
    absl::StatusOr<History> h =
        internal::ReadTimeKillerStringChunked(json, {}, "history.json", {}, chunk);
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(Message(h.status()), expected) << "chunk " << chunk;
  }
}

TEST_F(TimeKillerTest, UsualTransactionsAcrossChunkBoundaries) {
  constexpr size_t kTxns = 5000;
  const std::string json = Generate(kTxns, SIZE_MAX, /*usual=*/true);
  absl::StatusOr<History> general = internal::ReadTimeKillerStringChunked(
      json, {}, "history.json", {}, size_t{16} << 20, internal::TxnParsers::kGeneralOnly);
  ASSERT_TRUE(general.ok()) << general.status();
  ASSERT_EQ(general->size(), kTxns);
  const std::string expected = Canonical(*general);
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{333}, size_t{4096}, size_t{16} << 20}) {
    absl::StatusOr<History> h =
        internal::ReadTimeKillerStringChunked(json, {}, "history.json", {}, chunk);
    ASSERT_TRUE(h.ok()) << "chunk " << chunk << ": " << h.status();
    EXPECT_EQ(Canonical(*h), expected) << "chunk " << chunk;
    for (size_t i : {size_t{0}, size_t{1}, size_t{2345}, kTxns - 1}) {
      EXPECT_EQ(h->txn(TxnId(static_cast<uint32_t>(i))).source_offset,
                json.find(fmt::format("{{\"tid\":{},", i)))
          << "chunk " << chunk;
    }
  }

  // An error late in the file, found by the general parser after the usual one gave up.
  const std::string bad = Generate(kTxns, 4000, /*usual=*/true);
  absl::StatusOr<History> general_error = internal::ReadTimeKillerStringChunked(
      bad, {}, "history.json", {}, size_t{16} << 20, internal::TxnParsers::kGeneralOnly);
  ASSERT_FALSE(general_error.ok());
  EXPECT_THAT(Message(general_error.status()), HasSubstr("transaction #4000: op #4: unknown"));
  for (size_t chunk : {size_t{1}, size_t{333}, size_t{16} << 20}) {
    absl::StatusOr<History> h =
        internal::ReadTimeKillerStringChunked(bad, {}, "history.json", {}, chunk);
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(Message(h.status()), Message(general_error.status())) << "chunk " << chunk;
  }
}

// What reading `json` gives: the history, or the error.
std::string Outcome(std::string_view json, size_t chunk, internal::TxnParsers parsers) {
  absl::StatusOr<History> h =
      internal::ReadTimeKillerStringChunked(json, {}, "history.json", {}, chunk, parsers);
  return h.ok() ? Canonical(*h) : "error: " + Message(h.status());
}

TEST_F(TimeKillerTest, UsualAndGeneralParsersAgree) {
  // Transactions of the usual shape, and near misses, which the general parser reads (or
  // rejects) alone.
  const std::string ops = R"("ops":[{"t":"r","k":7,"v":null},{"t":"w","k":8,"v":9}])";
  const std::string hlc = R"("sts":{"p":3,"l":4},"cts":{"p":5,"l":6})";
  auto txn = [&](std::string_view id, std::string_view op) {
    return fmt::format(R"({{"tid":{},"sid":2,{},"ops":[{}]}})", id, hlc, op);
  };
  std::vector<std::string> cases = {
      // Usual.
      fmt::format(R"({{"tid":1,"sid":2,{},{}}})", hlc, ops),
      fmt::format(R"({{{},"cts":{{"l":6,"p":5}},"sid":"s 2","sts":{{"p":3}},"tid":"t-1"}})", ops),
      " {\t\"tid\" : 1 ,\r\n \"sid\":2 , \"sts\" : { \"p\" : 3 , \"l\" : 4 } , \"cts\":{\"p\":5} "
      ", \"ops\" : [ { \"t\" : \"r\" , \"k\" : 1 , \"v\" : [ 1 , -2 ] } , {\"v\":null,\"k\":2,"
      "\"t\":\"R\"} ] } ",
      R"({"tid":0,"sid":0,"sts":{"p":0},"cts":{"p":0},"ops":[]})",
      R"({"tid":-5,"sid":-0,"sts":{"p":-3},"cts":{"p":-3,"l":1},"ops":[]})",
      txn("123456789012345678901234567890", R"({"t":"r","k":1})"),
      txn("\"0\"", R"({"t":"r","k":0,"v":[]})"),
      txn("\"007\"", R"({"t":"r","k":-1,"v":[999999999999999999,-999999999999999999]})"),
      txn("1", R"({"t":"w","k":1,"v":999999999999999999})"),
      txn("1", R"({"t":"w","k":7,"v":12}, {"t":"w","k":654,"v":-1234567}, {"t":"w","k":12345678,)"
               R"("v":87654321},{"t":"w","k":-1000000,"v":1000000},{"t":"r","k":90,"v":[1,22,)"
               R"(333,4444,55555,666666,7777777,88888888,-999999999]})"),
      txn("1", R"({"t":"w","k":1,"v":-999999999999999999})"),
      txn("1", R"({"t":"w","k":1,"v":1000000000000000000})"),
      txn("1", R"({"t":"w","k":1,"v":9223372036854775807})"),
      txn("1", R"({"t":"w","k":1,"v":-9223372036854775808})"),
      txn("1", R"({"t":"w","k":1,"v":9223372036854775808})"),
      txn("1", R"({"t":"r","k":1,"v":[1,10000000000000000000]})"),
      // Ids.
      txn("-0", R"({"t":"r","k":1})"),
      txn("00", R"({"t":"r","k":1})"),
      txn("01", R"({"t":"r","k":1})"),
      txn("1.0", R"({"t":"r","k":1})"),
      txn("1e3", R"({"t":"r","k":1})"),
      txn("-", R"({"t":"r","k":1})"),
      txn("\"a\\\"b\"", R"({"t":"r","k":1})"),
      txn("\"\\u0031\"", R"({"t":"r","k":1})"),
      txn("\"\xc3\xa9\"", R"({"t":"r","k":1})"),
      txn("\"\xff\"", R"({"t":"r","k":1})"),
      txn("\"a\tb\"", R"({"t":"r","k":1})"),
      txn("\"\"", R"({"t":"r","k":1})"),
      txn("null", R"({"t":"r","k":1})"),
      txn("true", R"({"t":"r","k":1})"),
      // Op types and values.
      txn("1", R"({"t":"W","k":1,"v":1})"),
      txn("1", R"({"t":"Write","k":1,"v":1})"),
      txn("1", R"({"t":"READ","k":1,"v":1})"),
      txn("1", R"({"t":"a","k":1,"v":1})"),
      txn("1", R"({"t":"Append","k":1,"v":1})"),
      txn("1", R"({"t":"x","k":1,"v":1})"),
      txn("1", R"({"t":"","k":1,"v":1})"),
      txn("1", R"({"t":"ww","k":1,"v":1})"),
      txn("1", R"({"t":"\u0077","k":1,"v":1})"),
      txn("1", R"({"t":7,"k":1,"v":1})"),
      txn("1", R"({"t":"w","k":1})"),
      txn("1", R"({"t":"w","k":1,"v":null})"),
      txn("1", R"({"t":"a","k":1,"v":null})"),
      txn("1", R"({"t":"a","k":1,"v":[1]})"),
      txn("1", R"({"t":"w","k":1,"v":[]})"),
      txn("1", R"({"t":"r","v":1})"),
      txn("1", R"({"k":1,"v":1})"),
      txn("1", R"({})"),
      txn("1", R"(7)"),
      txn("1", R"({"t":"r","k":-0})"),
      txn("1", R"({"t":"r","k":01})"),
      txn("1", R"({"t":"r","k":1.0})"),
      txn("1", R"({"t":"r","k":1e3})"),
      txn("1", R"({"t":"r","k":"1"})"),
      txn("1", R"({"t":"r","k":1,"v":"1"})"),
      txn("1", R"({"t":"r","k":1,"v":true})"),
      txn("1", R"({"t":"r","k":1,"v":nul})"),
      txn("1", R"({"t":"r","k":1,"v":nulll})"),
      txn("1", R"({"t":"r","k":1,"v":[1,]})"),
      txn("1", R"({"t":"r","k":1,"v":[,1]})"),
      txn("1", R"({"t":"r","k":1,"v":[1 2]})"),
      txn("1", R"({"t":"r","k":1,"v":[[1]]})"),
      txn("1", R"({"t":"r","k":1,"v":[null]})"),
      txn("1", R"({"t":"r","k":1,})"),
      txn("1", R"({"t":"r","k":1}, )"),
      txn("1", R"({"t":"r" "k":1})"),
      txn("1", R"({"t":"r","k"1})"),
      txn("1", R"({"t":"r","t":"r","k":1})"),
      txn("1", R"({"t":"r","k":1,"k":1})"),
      txn("1", R"({"t":"r","k":1,"v":1,"v":null})"),
      txn("1", R"({"t":"r","k":1,"x":1})"),
      txn("1", R"({"t":"r","k":1,"v":null })"),
      txn("1", R"({"t":"r","k":1,"v":null,"x":1})"),
      txn("1", R"({"t":"r","k":1 ,"v":null})"),
      txn("1", R"({"t":"r","k":1,"v":[1,2]},{"t":"r","k":1,"v":[1,2,3] })"),
      txn("1", R"({"t":"r","k":1,"v":[1,2})"),
      txn("1", R"({"t":"w","k":1,"v":[1]})"),
      txn("1", R"({"t":"rr","k":1})"),
      txn("1", R"({"t":""","k":1})"),
      txn("1", R"({"t":"\","k":1})"),
      txn("1", R"({"t":"r","k":-,"v":1})"),
      txn("1", R"({"t":"r","k":1,"v":-})"),
      txn("1", R"({"t":"r","k":1,"v":})"),
      txn("1", R"({"t":"r","k":1,"v":nul})"),
      txn("1", R"({"x":-0.5e+3,"t":"r","yy":"z","k":1,"w":true,"v":null,"":false,"t2":null})"),
      txn("1", R"({"t":"r","k":1,"x":1.})"),
      txn("1", R"({"t":"r","k":1,"x":.5})"),
      txn("1", R"({"t":"r","k":1,"x":1e})"),
      txn("1", R"({"t":"r","k":1,"x":01})"),
      txn("1", R"({"t":"r","k":1,"x":-})"),
      txn("1", R"({"t":"r","k":1,"x":tru})"),
      txn("1", R"({"t":"r","k":1,"x":fals})"),
      txn("1", R"({"t":"r","k":1,"x":"\""})"),
      txn("1", R"({"t":"r","k":1,"x":[]})"),
      txn("1", R"({"t":"r","k":1,"x":{}})"),
      txn("1", R"({"t":"r","k":1,"\u0078":1})"),
      txn("1", R"({"t":"r","k":1,"\u0076":1})"),
      txn("1", R"({"t":"r","k":1,"vv":1})"),
      txn("1", R"({"t":"r","k":1,"":1})"),
      txn("1", R"({"t":"r","k":1} {"t":"r","k":2})"),
      // Members of the transaction.
      R"({"tid":1,"tid":2,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[],"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[],"x":[{"y":"}"}]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[],"tidy":1})",
      R"({"rtts":1717000000123,"tid":1,"sid":2,"sts":{"p":3,"x":1e5},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[],"status":"ok","tidx":null})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[],"x":"a\u0062"})",
      "{\"tid\":1,\"sid\":2,\"sts\":{\"p\":3},\"cts\":{\"p\":5},\"ops\":[],\"x\":\"\xc3\xa9\"}",
      "{\"tid\":1,\"sid\":2,\"sts\":{\"p\":3},\"cts\":{\"p\":5},\"ops\":[],\"x\":\"\xc3\"}",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[],"o\u0070s":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[],"x":1 2})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[],"x"})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[],"ti":1})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[],})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5}})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"ops":[]})",
      R"({"tid":1,"sts":{"p":3},"cts":{"p":5},"ops":[]})",
      R"({"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":6},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":5,"l":1},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":5},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":"3"},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":3,"l":"007"},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":"-3","l":"-0"},"cts":{"p":"123456789012345678"},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":"0000000000000000003"},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":"9223372036854775808"},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":""},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":"-"},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":"+3"},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":" 3"},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":"3 "},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":"3\u0030"},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":"7"},"cts":{"p":"5"},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"l":3},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":1,"l":2},"cts":{"p":1,"l":2,"x":3},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":1,"l":2 },"cts":{"p":1 ,"l":2},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":"1","l":"2"},"cts":{"p":1,"l":2,"l":3},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":1,"l":2}},"cts":{"p":1,"l":2},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":1,"l":},"cts":{"p":1,"l":2},"ops":[]})",
      R"({"ti"":1,"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[]})",
      R"({"t"d":1,"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[]})",
      R"({"\q":1,"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[]})",
      R"({"tid" :1,"sid"  :  2,"sts":{"p":3},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":3,"p":3},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":3,"x":3},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":3,},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":1.5},"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":3,"cts":{"p":5},"ops":[]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":{}})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[,]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[{"t":"r","k":1},]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[]}})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[]]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[])",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[{"t":"r","k":1])",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[{"t":"r","k":1,"v":[1}]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[{"t":"r","k":1,"v":"]"}]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[{"t":"r}","k":1}]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[{"t":"r","k":1}]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[{"t":"r","k":1}]} )",
      R"({"t\u0069d":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[]})",
      R"({"tid":"1","sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[]})",
      R"({"tid"  :  1  ,  "sid"  :  2  ,  "sts"  :  {"p"  :  3  }  ,  "cts":{"p":5},"ops":[  ]  })",
      R"([{"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[]}])",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[{"t":"r","k":1,"v":[1]},{"t":"w","k":1,"v":2}]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[{"t":"a","k":1,"v":1},{"t":"r","k":1,"v":2}]})",
      R"({"tid":1,"sid":2,"sts":{"p":3},"cts":{"p":5},"ops":[{"t":"r","k":1,"v":null},{"t":"a","k":1,"v":2}]})",
  };
  // Every case alone, and between two usual transactions, with the same outcome from both
  // parsers whatever the chunk size.
  const std::string before = fmt::format(R"({{"tid":100,"sid":2,{},{}}})", hlc, ops);
  const std::string after = fmt::format(R"({{"tid":101,"sid":3,{},{}}})", hlc, ops);
  for (const std::string& c : cases) {
    for (const std::string& json :
         {"[" + c + "]", "[\n" + before + ",\n" + c + "\n,\t" + after + "]\n"}) {
      const std::string expected =
          Outcome(json, size_t{16} << 20, internal::TxnParsers::kGeneralOnly);
      for (size_t chunk : {size_t{1}, size_t{5}, size_t{64}, size_t{16} << 20}) {
        EXPECT_EQ(Outcome(json, chunk, internal::TxnParsers::kUsualFirst), expected)
            << "chunk " << chunk << ": " << json;
      }
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
