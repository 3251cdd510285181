// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/native.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/history/history_builder.h"
#include "isowatch/v1/history.pb.h"

#include "tests/testing/canonical_history.h"
#include "tests/testing/source_dir.h"

namespace isowatch::formats {
namespace {

namespace pb = ::isowatch::v1;
using history::History;
using history::HistoryBuilder;
using history::OpKind;
using history::Timestamp;
using history::TxnStatus;
using history::Value;
using ::testing::HasSubstr;

std::string Dump(const History& h) { return isowatch::testing::CanonicalHistory(h); }

// Every op kind, status, bytes and int keys and values, absent and unknown reads, list reads,
// hybrid and plain timestamps, real-time intervals (one never completed), sequence numbers out of
// order, an initial state with registers and lists.
History BuildRichHistory() {
  HistoryBuilder b;
  b.set_time_unit("ns");
  using namespace std::string_view_literals;
  const KeyId k1 = b.IntKey(1);
  const KeyId k2 = b.IntKey(2);
  const KeyId kb = b.BytesKey("k\0x"sv);
  const KeyId kmin = b.IntKey(std::numeric_limits<int64_t>::min());
  const KeyId l100 = b.IntKey(100);
  const KeyId l101 = b.IntKey(101);
  const KeyId lb = b.BytesKey("L");
  const KeyId kbk = b.BytesKey("bk\xff");
  b.SetDefaultInitialValue(Value::Int(0));
  b.SetInitialRegister(k1, Value::Int(10));
  b.SetInitialRegister(kb, b.BytesValue("v\xff"));
  b.SetInitialRegister(k2, Value::Absent());
  b.SetInitialVersion(b.IntKey(3), Value::Int(30));
  const Value l100_init[] = {Value::Int(1), Value::Int(2)};
  b.SetInitialList(l100, l100_init);
  const Value lb_init[] = {b.BytesValue("a"), Value::Int(3)};
  b.SetInitialList(lb, lb_init);
  b.SetInitialList(l101, {});

  EXPECT_TRUE(b.BeginTxn({.id = "1",
                          .id_numeric = true,
                          .session = "1",
                          .session_numeric = true,
                          .seq = 20,
                          .start = Timestamp{10, 0},
                          .commit = Timestamp{20, 0},
                          .real_time = {{.invoke = -4, .complete = 9}}})
                  .ok());
  b.Write(k1, Value::Int(11));
  b.Read(kb, b.BytesValue("v\xff"));
  b.Append(l100, Value::Int(3));
  const Value l100_read[] = {Value::Int(1), Value::Int(2), Value::Int(3)};
  b.ListRead(l100, l100_read);
  b.EndTxn();

  EXPECT_TRUE(b.BeginTxn({.id = "a",
                          .session = "1",
                          .session_numeric = true,
                          .seq = 3,
                          .status = TxnStatus::kAborted,
                          .start = Timestamp{5, 3},
                          .commit = Timestamp{5, 7}})
                  .ok());
  b.Read(k2, Value::Absent());
  b.UnknownRead(k1);
  b.UnknownRead(l100);  // becomes an unknown read of the list
  b.Write(kbk, Value::Int(-5));
  b.EndTxn();

  EXPECT_TRUE(b.BeginTxn({.id = "-7",
                          .id_numeric = true,
                          .session = "1",
                          .session_numeric = true,
                          .seq = 7,
                          .status = TxnStatus::kUnknown,
                          .commit = Timestamp{30, 1},
                          .real_time = {{.invoke = 12}}})
                  .ok());
  b.Append(lb, b.BytesValue(""));
  b.ListRead(lb, {});
  b.Read(l101, Value::Absent());  // becomes a read of the empty list
  b.EndTxn();

  EXPECT_TRUE(b.BeginTxn({.id = "x y", .session = "s-str", .start = Timestamp{1, 0}}).ok());
  b.Write(kmin, Value::Int(std::numeric_limits<int64_t>::max()));
  b.Read(kmin, Value::Int(std::numeric_limits<int64_t>::max()));
  b.EndTxn();

  EXPECT_TRUE(b.BeginTxn({.id = "z\xc3\xa9", .session = ""}).ok());
  b.Read(kb, Value::Int(4));
  b.EndTxn();

  EXPECT_TRUE(b.BeginTxn({.id = "x y 2", .session = "s-str", .status = TxnStatus::kAborted}).ok());
  b.EndTxn();

  // PostgreSQL: an xid and a snapshot in place of the start; an xid alone.
  const std::vector<uint64_t> xip = {(uint64_t{1} << 40) + 3, (uint64_t{1} << 40) + 1};
  EXPECT_TRUE(b.BeginTxn({.id = "pg1",
                          .session = "pg",
                          .commit = Timestamp{4000, 0},
                          .xid = (uint64_t{1} << 40) + 9,
                          .snapshot = history::SnapshotView{uint64_t{1} << 40,
                                                            (uint64_t{1} << 40) + 5, xip}})
                  .ok());
  b.Read(k1, Value::Int(10));
  b.EndTxn();
  EXPECT_TRUE(b.BeginTxn({.id = "pg2",
                          .session = "pg",
                          .start = Timestamp{4001, 0},
                          .commit = Timestamp{4002, 0},
                          .xid = 77})
                  .ok());
  b.EndTxn();
  const std::vector<uint64_t> none;
  EXPECT_TRUE(b.BeginTxn({.id = "pg3",
                          .session = "pg",
                          .commit = Timestamp{4003, 0},
                          .snapshot = history::SnapshotView{5, 5, none}})
                  .ok());
  b.EndTxn();

  auto h = std::move(b).Finish();
  EXPECT_TRUE(h.ok()) << h.status();
  return std::move(h).value();
}

std::string Write(const History& h, NativeEncoding encoding) {
  std::ostringstream out;
  absl::Status status = WriteNative(h, encoding, out);
  EXPECT_TRUE(status.ok()) << status;
  return out.str();
}

History Read(std::string_view data, const ReadOptions& options = {}) {
  auto h = ReadNativeString(data, options, "test");
  EXPECT_TRUE(h.ok()) << h.status();
  if (!h.ok()) return History();
  return std::move(h).value();
}

std::string ReadError(std::string_view data, const ReadOptions& options = {}) {
  auto h = ReadNativeString(data, options, "in.hist");
  EXPECT_FALSE(h.ok()) << "read without error:\n" << Dump(*h);
  if (h.ok()) return "";
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << h.status();
  return std::string(h.status().message());
}

// One binary record: varint32 length, then the message.
std::string Frame(const pb::HistoryRecord& record) {
  std::string body = record.SerializeAsString();
  std::string out;
  uint64_t n = body.size();
  do {
    uint8_t byte = n & 0x7f;
    n >>= 7;
    out.push_back(static_cast<char>(n != 0 ? byte | 0x80 : byte));
  } while (n != 0);
  return out + body;
}

pb::HistoryRecord HeaderRecord() {
  pb::HistoryRecord r;
  r.mutable_header()->set_version(1);
  return r;
}

pb::HistoryRecord TxnRecord(int64_t id) {
  pb::HistoryRecord r;
  r.mutable_txn()->set_id_int(id);
  pb::Operation* op = r.mutable_txn()->add_ops();
  op->set_kind(pb::Operation::WRITE);
  op->mutable_key()->set_int_(1);
  op->mutable_value()->set_int_(id);
  return r;
}

TEST(NativeTest, RejectsMalformedSnapshots) {
  pb::HistoryRecord both = TxnRecord(1);
  both.mutable_txn()->mutable_start()->set_physical(1);
  both.mutable_txn()->mutable_snapshot()->set_xmax(3);
  EXPECT_THAT(ReadError(Frame(HeaderRecord()) + Frame(both)),
              ::testing::HasSubstr("both a start timestamp and a snapshot"));
  pb::HistoryRecord inverted = TxnRecord(2);
  inverted.mutable_txn()->mutable_snapshot()->set_xmin(4);
  inverted.mutable_txn()->mutable_snapshot()->set_xmax(3);
  EXPECT_THAT(ReadError(Frame(HeaderRecord()) + Frame(inverted)),
              ::testing::HasSubstr("xmin 4 is above its xmax 3"));
  pb::HistoryRecord outside = TxnRecord(3);
  outside.mutable_txn()->mutable_snapshot()->set_xmax(3);
  outside.mutable_txn()->mutable_snapshot()->add_xip(3);
  EXPECT_THAT(ReadError(Frame(HeaderRecord()) + Frame(outside)),
              ::testing::HasSubstr("in-progress xid 3 lies outside"));
}

TEST(NativeTest, RoundTripsBinary) {
  History h = BuildRichHistory();
  std::string first = Write(h, NativeEncoding::kBinary);
  History back = Read(first);
  EXPECT_EQ(Dump(back), Dump(h));
  EXPECT_EQ(back.info().time_unit, "ns");
  EXPECT_EQ(Write(back, NativeEncoding::kBinary), first);
}

TEST(NativeTest, RoundTripsJsonLines) {
  History h = BuildRichHistory();
  std::string first = Write(h, NativeEncoding::kJsonLines);
  EXPECT_EQ(first.front(), '{');
  EXPECT_EQ(std::count(first.begin(), first.end(), '\n'), 1 + static_cast<int>(h.size()));
  History back = Read(first);
  EXPECT_EQ(Dump(back), Dump(h));
  EXPECT_EQ(Write(back, NativeEncoding::kJsonLines), first);
  // Either encoding reads back the other's history.
  EXPECT_EQ(Write(back, NativeEncoding::kBinary), Write(h, NativeEncoding::kBinary));
}

TEST(NativeTest, RoundTripKeepsWhatTheModelSays) {
  History h = Read(Write(BuildRichHistory(), NativeEncoding::kBinary));
  ASSERT_EQ(h.size(), 9u);
  EXPECT_EQ(h.data_model(), history::DataModel::kMixed);
  TxnId one = h.FindTxn("1");
  ASSERT_TRUE(one.valid());
  EXPECT_TRUE(h.txn(one).ext_id_numeric);
  EXPECT_EQ(h.txn(one).seq, 2u);  // 20 after 3 and 7
  EXPECT_EQ(h.txn(h.FindTxn("a")).seq, 0u);
  EXPECT_EQ(h.txn(h.FindTxn("a")).status, TxnStatus::kAborted);
  EXPECT_EQ(h.txn(h.FindTxn("a")).start, (Timestamp{5, 3}));
  EXPECT_EQ(h.txn(h.FindTxn("-7")).status, TxnStatus::kUnknown);
  EXPECT_FALSE(h.txn(h.FindTxn("-7")).has_start);
  EXPECT_FALSE(h.txn(h.FindTxn("x y")).has_commit);
  auto a_ops = h.ops(h.FindTxn("a"));
  ASSERT_EQ(a_ops.size(), 4u);
  EXPECT_EQ(a_ops[0].kind(), OpKind::kRead);
  EXPECT_TRUE(a_ops[0].value().absent());
  EXPECT_FALSE(a_ops[0].unknown());
  EXPECT_TRUE(a_ops[1].unknown());
  EXPECT_EQ(a_ops[2].kind(), OpKind::kListRead);
  EXPECT_TRUE(a_ops[2].unknown());
  EXPECT_EQ(h.ValueToString(h.InitialValue(h.FindBytesKey(std::string_view("k\0x", 3)))),
            "\"v\\xff\"");
  EXPECT_TRUE(h.InitialValue(h.FindIntKey(2)).absent());
  EXPECT_EQ(h.InitialValue(h.FindIntKey(55)), Value::Int(0));
  // An installed version stays one: an absent read does not match it.
  EXPECT_EQ(h.InitialValue(h.FindIntKey(3)), Value::Int(30));
  EXPECT_FALSE(h.AbsentReadsInitial(h.FindIntKey(3)));
  EXPECT_TRUE(h.AbsentReadsInitial(h.FindIntKey(1)));
  EXPECT_EQ(h.ListToString(h.InitialList(h.FindBytesKey("L"))), "[\"a\", 3]");
  EXPECT_EQ(h.source(), "test");
}

TEST(NativeTest, WritesTheHeaderFirst) {
  HistoryBuilder b;
  b.SetDefaultInitialValue(Value::Int(0));
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(Write(*h, NativeEncoding::kJsonLines),
            "{\"header\":{\"version\":1,\"initial\":{\"default_value\":{\"int\":\"0\"}},"
            "\"metadata\":{\"producer\":\"isowatch\"}}}\n");
  std::string binary = Write(*h, NativeEncoding::kBinary);
  pb::HistoryRecord expected;
  expected.mutable_header()->set_version(1);
  expected.mutable_header()->mutable_initial()->mutable_default_value()->set_int_(0);
  (*expected.mutable_header()->mutable_metadata())["producer"] = "isowatch";
  EXPECT_EQ(binary, Frame(expected));
}

// A hand-written file using some of what the JSON mapping allows besides what the writer emits:
// lowerCamelCase names, numbers for int64, enum numbers, unknown fields, blank lines, CRLF.
constexpr std::string_view kHandWritten =
    // Line 1: the header.
    R"({"header": {"version": 1, "initial": {)"
    R"("registers": [{"key": {"int": "1"}, "value": {"int": "0"}}], )"
    R"("lists": [{"key": {"bytes": "bA=="}, "elements": [{"int": 7}]}]}, )"
    R"("metadata": {"producer": "by hand"}}})"
    "\n"
    // Line 2.
    R"({"txn": {"id_int": "1", "session_int": "1", "seq": "0", "status": "COMMITTED", )"
    R"("start": {"physical": "100"}, "commit": {"physical": "105"}, "ops": [)"
    R"({"kind": "WRITE", "key": {"int": "1"}, "value": {"int": "5"}}, )"
    R"({"kind": "APPEND", "key": {"bytes": "bA=="}, "value": {"bytes": "eA=="}}]}})"
    "\n"
    // Line 3: blank.
    "\n"
    // Line 4.
    R"({"txn": {"idStr": "t2", "sessionInt": 2, "status": "ABORTED", )"
    R"("commit": {"physical": 106, "logical": 2}, "ops": [)"
    R"({"kind": "READ", "key": {"int": 1}, "value": {"int": 5}}, )"
    R"({"kind": "LIST_READ", "key": {"bytes": "bA=="}, )"
    R"("list": {"elements": [{"int": 7}, {"bytes": "eA=="}]}}], "future_field": true}})"
    "\n"
    // Line 5.
    R"({"txn": {"id_int": 3, "session_int": 2, "status": 3, "ops": [)"
    R"({"kind": "READ", "key": {"int": 2}}, )"
    R"({"kind": "READ", "key": {"int": 1}, "unknown": true}]}})"
    "\n"
    // Line 6.
    R"({"txn": {"id_int": 4, "ops": [{"kind": "LIST_READ", "key": {"bytes": "bA=="}, )"
    R"("unknown": true}]}})"
    "\r\n";

TEST(NativeTest, ReadsHandWrittenJsonLines) {
  History h = Read(kHandWritten);
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h.data_model(), history::DataModel::kMixed);
  EXPECT_EQ(h.InitialValue(h.FindIntKey(1)), Value::Int(0));
  EXPECT_TRUE(h.InitialValue(h.FindIntKey(2)).absent());
  EXPECT_EQ(h.ListToString(h.InitialList(h.FindBytesKey("l"))), "[7]");

  TxnId t1 = h.FindTxn("1");
  ASSERT_TRUE(t1.valid());
  EXPECT_TRUE(h.txn(t1).ext_id_numeric);
  EXPECT_EQ(h.session_name(h.txn(t1).session), "1");
  EXPECT_TRUE(h.session_numeric(h.txn(t1).session));
  EXPECT_EQ(h.txn(t1).start, (Timestamp{100, 0}));
  EXPECT_EQ(h.txn(t1).commit, (Timestamp{105, 0}));
  EXPECT_EQ(h.txn(t1).source_offset, kHandWritten.find("{\"txn\""));
  auto ops1 = h.ops(t1);
  ASSERT_EQ(ops1.size(), 2u);
  EXPECT_EQ(ops1[1].kind(), OpKind::kAppend);
  EXPECT_EQ(h.ValueToString(ops1[1].value()), "\"x\"");

  TxnId t2 = h.FindTxn("t2");
  ASSERT_TRUE(t2.valid());
  EXPECT_FALSE(h.txn(t2).ext_id_numeric);
  EXPECT_EQ(h.txn(t2).status, TxnStatus::kAborted);
  EXPECT_FALSE(h.txn(t2).has_start);
  EXPECT_EQ(h.txn(t2).commit, (Timestamp{106, 2}));
  EXPECT_EQ(h.txn(t2).seq, 0u);
  EXPECT_EQ(h.ListToString(h.list_elements(h.ops(t2)[1])), "[7, \"x\"]");

  TxnId t3 = h.FindTxn("3");
  EXPECT_EQ(h.txn(t3).status, TxnStatus::kUnknown);
  EXPECT_EQ(h.txn(t3).seq, 1u);
  EXPECT_EQ(h.txn(t3).session_prev, t2);
  EXPECT_TRUE(h.ops(t3)[0].value().absent());
  EXPECT_FALSE(h.ops(t3)[0].unknown());
  EXPECT_TRUE(h.ops(t3)[1].unknown());

  TxnId t4 = h.FindTxn("4");
  EXPECT_EQ(h.session_name(h.txn(t4).session), "");
  EXPECT_FALSE(h.session_numeric(h.txn(t4).session));
  EXPECT_EQ(h.txn(t4).status, TxnStatus::kCommitted);
  EXPECT_EQ(h.ops(t4)[0].kind(), OpKind::kListRead);
  EXPECT_TRUE(h.ops(t4)[0].unknown());
}

TEST(NativeTest, HeaderIsOptionalAndInitialValueOptionFillsInTheDefault) {
  const std::string txn =
      "{\"txn\": {\"id_int\": 1, \"ops\": [{\"kind\": \"READ\", \"key\": "
      "{\"int\": 1}, \"value\": {\"int\": 7}}]}}\n";
  History plain = Read(txn);
  EXPECT_EQ(plain.size(), 1u);
  EXPECT_TRUE(plain.initial().default_value.absent());

  ReadOptions options;
  options.initial_value = 7;
  EXPECT_EQ(Read(txn, options).initial().default_value, Value::Int(7));
  // A header that says nothing of the default leaves the option's.
  EXPECT_EQ(Read("{\"header\": {\"version\": 1}}\n" + txn, options).initial().default_value,
            Value::Int(7));
  // A header's default wins.
  EXPECT_EQ(
      Read("{\"header\": {\"version\": 1, \"initial\": {\"default_value\": {\"int\": 3}}}}\n" + txn,
           options)
          .initial()
          .default_value,
      Value::Int(3));

  std::string binary = Frame(TxnRecord(1)) + Frame(TxnRecord(2));
  EXPECT_EQ(Read(binary).size(), 2u);
}

TEST(NativeTest, DetectsTheEncoding) {
  EXPECT_EQ(Read("").size(), 0u);
  EXPECT_EQ(Read(" \n\r\n\t").size(), 0u);
  EXPECT_EQ(Read("\n\n  {\"txn\": {\"id_int\": 1}}").size(), 1u);
  // Long leading whitespace: JSON lines, and every line counts.
  EXPECT_EQ(Read(std::string(100, '\n') + "{\"txn\": {\"id_int\": 1}}").size(), 1u);
  EXPECT_EQ(Read(std::string(200, ' ')).size(), 0u);
  EXPECT_THAT(ReadError(std::string(100, '\n') + "{\"txn\": {}}"),
              HasSubstr("in.hist: line 101: a transaction without an id"));
  EXPECT_THAT(ReadError(std::string(63, '\n') + "{\"txn\": {}}"),
              HasSubstr("in.hist: line 64: a transaction without an id"));
  EXPECT_THAT(ReadError(std::string(64, '\n') + "{\"txn\": {}}"),
              HasSubstr("in.hist: line 65: a transaction without an id"));

  // A binary file whose first record is 123 bytes long starts with '{' = 0x7b.
  pb::HistoryRecord r;
  r.mutable_txn()->set_id_str(std::string(119, 'i'));
  std::string binary = Frame(r);
  ASSERT_EQ(binary[0], '{');
  ASSERT_EQ(binary[1], 0x12);
  History h = Read(binary + Frame(TxnRecord(2)));
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h.txn_name(TxnId(0)), std::string(119, 'i'));

  pb::HistoryRecord header = HeaderRecord();
  (*header.mutable_header()->mutable_metadata())["m"] = std::string(112, 'm');
  binary = Frame(header);
  ASSERT_EQ(binary[0], '{');
  ASSERT_EQ(binary[1], '\n');
  EXPECT_EQ(Read(binary + Frame(TxnRecord(2))).size(), 1u);

  // A binary first record whose length byte is whitespace.
  pb::HistoryRecord ws;
  ws.mutable_txn()->set_id_str(std::string(6, 'w'));
  binary = Frame(ws);
  ASSERT_EQ(binary[0], '\n');
  EXPECT_EQ(Read(binary).txn_name(TxnId(0)), "wwwwww");
}

// The fenced blocks of `language` in docs/history-format.md.
std::vector<std::string> DocBlocks(std::string_view language) {
  std::ifstream in(isowatch::testing::SourceDir() + "/docs/history-format.md");
  std::vector<std::string> blocks;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line == fmt::format("```{}", language)) {
      inside = true;
      blocks.emplace_back();
    } else if (inside && line == "```") {
      inside = false;
    } else if (inside) {
      blocks.back() += line + "\n";
    }
  }
  return blocks;
}

TEST(NativeTest, DocumentedExampleIsWhatTheWriterWrites) {
  std::vector<std::string> blocks = DocBlocks("jsonl");
  ASSERT_EQ(blocks.size(), 2u);
  History h = Read(blocks[0]);
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(Write(h, NativeEncoding::kJsonLines), blocks[0]);

  // The hand-written line reads as the writer's second line.
  std::string loose = Write(Read(blocks[1]), NativeEncoding::kJsonLines);
  std::string second_line = blocks[0].substr(blocks[0].find('\n') + 1);
  second_line = second_line.substr(0, second_line.find('\n') + 1);
  EXPECT_EQ(loose.substr(loose.find('\n') + 1), second_line);

  // The bytes of the annotated hex dump.
  std::string binary = Write(h, NativeEncoding::kBinary);
  ASSERT_EQ(binary.size(), 204u);
  const uint8_t txn1[] = {0x2a, 0x12, 0x28, 0x08, 0x01, 0x18, 0x01, 0x28, 0x00, 0x30, 0x01,
                          0x3a, 0x02, 0x08, 0x64, 0x42, 0x02, 0x08, 0x69, 0x4a, 0x0a, 0x08,
                          0x02, 0x12, 0x02, 0x08, 0x01, 0x1a, 0x02, 0x08, 0x05, 0x4a, 0x0a,
                          0x08, 0x03, 0x12, 0x02, 0x08, 0x0a, 0x1a, 0x02, 0x08, 0x02};
  EXPECT_EQ(binary.substr(0x31, sizeof(txn1)),
            std::string(reinterpret_cast<const char*>(txn1), sizeof(txn1)));
  EXPECT_EQ(binary.substr(0, 5), "\x30\x0a\x2e\x08\x01");
  EXPECT_NE(binary.find("\x4a\x06\x08\x01\x12\x02\x08\x02"), std::string::npos);
  EXPECT_NE(binary.find("\x4a\x08\x08\x01\x12\x02\x08\x01\x28\x01"), std::string::npos);
}

TEST(NativeTest, LooksLikeNativeBinary) {
  pb::HistoryRecord r;
  r.mutable_txn()->set_id_str(std::string(87, 'i'));
  std::string framed = Frame(r);
  ASSERT_EQ(framed[0], '[');
  EXPECT_TRUE(LooksLikeNativeBinary(framed));
  EXPECT_EQ(Read(framed).size(), 1u);
  r.mutable_txn()->set_id_str(std::string(300, 'i'));  // two-byte lengths
  EXPECT_TRUE(LooksLikeNativeBinary(Frame(r)));
  EXPECT_FALSE(LooksLikeNativeBinary(Frame(r).substr(0, 2)));
  EXPECT_TRUE(LooksLikeNativeBinary(Write(BuildRichHistory(), NativeEncoding::kBinary)));
  EXPECT_FALSE(LooksLikeNativeBinary("[\n  {\"tid\": 1}]"));
  EXPECT_FALSE(LooksLikeNativeBinary("[]"));
  EXPECT_FALSE(LooksLikeNativeBinary("{\"header\": {}}"));
  EXPECT_FALSE(LooksLikeNativeBinary(Write(BuildRichHistory(), NativeEncoding::kJsonLines)));
}

TEST(NativeTest, BinaryErrorsNameRecordAndOffset) {
  const std::string header = Frame(HeaderRecord());
  const std::string txn1 = Frame(TxnRecord(1));
  const std::string at2 = fmt::format("in.hist: record 2 at byte {}: ", header.size());
  const std::string at3 =
      fmt::format("in.hist: record 3 at byte {}: ", header.size() + txn1.size());

  EXPECT_THAT(ReadError("\x80"), HasSubstr("in.hist: record 1 at byte 0: truncated length prefix"));
  EXPECT_THAT(ReadError(header + "\xff\xff"), HasSubstr(at2 + "truncated length prefix"));
  EXPECT_THAT(ReadError(header + "\xff\xff\xff\xff\xff\x01"),
              HasSubstr(at2 + "malformed length prefix"));
  EXPECT_THAT(ReadError(header + txn1 + "\x05\x12\x02"),
              HasSubstr(at3 + "the record length 5 runs past the end of the input (2 bytes "
                              "remain)"));
  // 64 MiB + 1 = 0x4000001.
  EXPECT_THAT(ReadError(header + "\x81\x80\x80\x20"),
              HasSubstr(at2 + "oversized record: 67108865 bytes, over the limit of 67108864"));
  EXPECT_THAT(ReadError(header + "\x02\x0a\x05"), HasSubstr(at2 + "unparsable record: 2 bytes"));
  EXPECT_THAT(ReadError(header + std::string(1, '\0')),
              HasSubstr(at2 + "expected a record holding a header or a txn"));

  pb::HistoryRecord bad_utf8;
  bad_utf8.mutable_txn()->set_id_str("\xff");
  EXPECT_THAT(ReadError(header + Frame(bad_utf8)), HasSubstr(at2 + "unparsable record"));

  pb::HistoryRecord no_id = TxnRecord(1);
  no_id.mutable_txn()->clear_id();
  EXPECT_THAT(ReadError(header + txn1 + Frame(no_id)),
              HasSubstr(at3 + "a transaction without an id (expected id_int or id_str)"));

  pb::HistoryRecord no_value = TxnRecord(2);
  no_value.mutable_txn()->mutable_ops(0)->clear_value();
  EXPECT_THAT(ReadError(header + txn1 + Frame(no_value)),
              HasSubstr(at3 + "transaction 2, ops[0]: a WRITE without a value"));

  EXPECT_THAT(ReadError(header + txn1 + txn1), HasSubstr(at3 + "duplicate transaction id 1"));

  pb::HistoryRecord v2 = HeaderRecord();
  v2.mutable_header()->set_version(2);
  EXPECT_THAT(ReadError(Frame(v2)),
              HasSubstr("in.hist: record 1 at byte 0: unsupported format version 2 (expected "
                        "version 1)"));
}

std::string JsonTxn(std::string_view body) { return fmt::format("{{\"txn\": {{{}}}}}\n", body); }

TEST(NativeTest, JsonLinesErrorsNameTheLine) {
  const std::string header = "{\"header\": {\"version\": 1}}\n";
  const std::string ok1 = JsonTxn(R"("id_int": 1, "commit": {"physical": 5})");
  auto at3 = [](std::string_view what) { return fmt::format("in.hist: line 3: {}", what); };

  EXPECT_THAT(ReadError(header + ok1 + "{\"txn\": }\n"),
              HasSubstr(at3("not an isowatch.v1.HistoryRecord in the protobuf JSON mapping")));
  EXPECT_THAT(ReadError(header + ok1 + "{\"txn\": {\"id_int\": 2}} trailing\n"),
              HasSubstr(at3("not an isowatch.v1.HistoryRecord")));
  EXPECT_THAT(ReadError(header + ok1 + "{}\n"),
              HasSubstr(at3("expected a record holding a header or a txn")));
  EXPECT_THAT(ReadError(header + ok1 + JsonTxn(R"("status": "ABORTED")")),
              HasSubstr(at3("a transaction without an id")));
  EXPECT_THAT(ReadError(header + ok1 + JsonTxn(R"("id_str": "")")),
              HasSubstr(at3("a transaction with an empty id")));
  EXPECT_THAT(
      ReadError(header + ok1 +
                JsonTxn(R"("id_int": 2, "ops": [{"kind": "WRITE", "key": {"int": 1}}])")),
      HasSubstr(at3("transaction 2, ops[0]: a WRITE without a value (expected int or bytes)")));
  EXPECT_THAT(
      ReadError(
          header + ok1 +
          JsonTxn(R"("id_int": 2, "ops": [{"kind": "APPEND", "key": {"int": 1}, "value": {}}])")),
      HasSubstr(at3("transaction 2, ops[0]: an APPEND without a value")));
  EXPECT_THAT(
      ReadError(
          header + ok1 +
          JsonTxn(
              R"("id_int": 2, "ops": [{"kind": "READ", "key": {"int": 1}}, {"key": {"int": 1}}])")),
      HasSubstr(at3("transaction 2, ops[1]: an operation without a kind")));
  EXPECT_THAT(ReadError(header + ok1 +
                        JsonTxn(R"("id_int": 2, "ops": [{"kind": "DELETE", "key": {"int": 1}}])")),
              HasSubstr(at3("transaction 2, ops[0]: an operation without a kind")));
  EXPECT_THAT(
      ReadError(header + ok1 + JsonTxn(R"("id_int": 2, "ops": [{"kind": 9, "key": {"int": 1}}])")),
      HasSubstr(at3("transaction 2, ops[0]: unknown operation kind 9")));
  EXPECT_THAT(ReadError(header + ok1 + JsonTxn(R"("id_int": 2, "ops": [{"kind": "READ"}])")),
              HasSubstr(at3("transaction 2, ops[0]: the operation has no key")));
  EXPECT_THAT(
      ReadError(header + ok1 +
                JsonTxn(R"("id_int": 2, "ops": [{"kind": "WRITE", "key": {"int": 1}, )"
                        R"("value": {"int": 1}, "unknown": true}])")),
      HasSubstr(at3("transaction 2, ops[0]: an unknown WRITE (only reads can be unknown)")));
  EXPECT_THAT(ReadError(header + ok1 +
                        JsonTxn(R"("id_int": 2, "ops": [{"kind": "LIST_READ", "key": {"int": 1}, )"
                                R"("list": {"elements": [{}]}}])")),
              HasSubstr(at3("transaction 2, ops[0]: list.elements[0] has no value")));
  EXPECT_THAT(ReadError(header + ok1 + JsonTxn(R"("id_int": 2, "status": "FROB", "x": 1)")),
              HasSubstr(at3("unknown transaction status \"FROB\"")));
  EXPECT_THAT(ReadError(header + ok1 + JsonTxn(R"("id_int": 2, "status": 9)")),
              HasSubstr(at3("transaction 2: unknown status 9")));
  EXPECT_THAT(ReadError(header + ok1 + JsonTxn(R"("id_int": 2, "seq": -1)")),
              HasSubstr(at3("transaction 2: negative sequence number -1")));
  EXPECT_THAT(ReadError(header + ok1 + JsonTxn(R"("id_int": 1)")),
              HasSubstr(at3("duplicate transaction id 1")));
  EXPECT_THAT(ReadError(header + ok1 + JsonTxn(R"("id_str": "1")")),
              HasSubstr(at3("duplicate transaction id 1")));
  EXPECT_THAT(ReadError(header + ok1 +
                        JsonTxn(R"("id_int": 2, "start": {"physical": 9}, )"
                                R"("commit": {"physical": 8, "logical": 5})")),
              HasSubstr(at3("transaction 2 starts at 9 after it commits at (8,5)")));
  EXPECT_THAT(ReadError(header + ok1 + header), HasSubstr(at3("a second header (the header is at "
                                                              "line 1); a file holds one")));
  EXPECT_THAT(ReadError(ok1 + "\n" + header),
              HasSubstr(at3("a header after transactions; the header must be the first record")));
  EXPECT_THAT(ReadError("{\"header\": {}}"),
              HasSubstr("in.hist: line 1: unsupported format version 0 (expected version 1)"));
  EXPECT_THAT(ReadError(header + "{\"header\": {\"version\": 1, \"initial\": {\"registers\": "
                                 "[{\"value\": {\"int\": 1}}]}}}\n"),
              HasSubstr("in.hist: line 2: a second header"));
  EXPECT_THAT(ReadError("{\"header\": {\"version\": 1, \"initial\": {\"registers\": "
                        "[{\"value\": {\"int\": 1}}]}}}\n"),
              HasSubstr("in.hist: line 1: initial.registers[0] has no key"));
  EXPECT_THAT(ReadError("{\"header\": {\"version\": 1, \"initial\": {\"registers\": "
                        "[{\"key\": {\"int\": 1}}, {\"key\": {\"int\": 1}}]}}}\n"),
              HasSubstr("in.hist: line 1: initial.registers[1] repeats the key of "
                        "initial.registers[0]"));
  EXPECT_THAT(ReadError("{\"header\": {\"version\": 1, \"initial\": {\"lists\": "
                        "[{\"key\": {\"int\": 1}, \"elements\": [{\"int\": 1}, {}]}]}}}\n"),
              HasSubstr("in.hist: line 1: initial.lists[0].elements[1] has no value"));
}

TEST(NativeTest, FinishErrorsNameTheSource) {
  // Key 1 written as a register and appended to as a list.
  EXPECT_EQ(ReadError(JsonTxn(R"("id_int": 1, "ops": [{"kind": "WRITE", "key": {"int": 1}, )"
                              R"("value": {"int": 1}}])") +
                      JsonTxn(R"("id_int": 2, "ops": [{"kind": "APPEND", "key": {"int": 1}, )"
                              R"("value": {"int": 1}}])")),
            "in.hist: key 1 is used both as a register (read or written with a scalar) and as a "
            "list");
  EXPECT_THAT(ReadError(JsonTxn(R"("id_int": 1, "session_str": "s", "seq": 4)") +
                        JsonTxn(R"("id_int": 2, "session_str": "s")")),
              HasSubstr("in.hist: session s gives sequence numbers for some transactions but not "
                        "all"));
}

TEST(NativeTest, MissingFileIsNotFound) {
  auto h = ReadNativeFile("/nonexistent/dir/file.hist", {});
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(h.status().message()), HasSubstr("/nonexistent/dir/file.hist"));
  // A directory opens but cannot be read.
  auto dir = ReadNativeFile(::testing::TempDir(), {});
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(std::string(dir.status().message()), HasSubstr("read failed at byte 0"));
}

TEST(NativeTest, WriterRejectsWhatTheFormatCannotHold) {
  {
    HistoryBuilder b;
    KeyId k = b.IntKey(1);
    ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s"}).ok());
    b.Write(k, Value::Absent());
    b.EndTxn();
    auto h = std::move(b).Finish();
    ASSERT_TRUE(h.ok());
    std::ostringstream out;
    absl::Status status = WriteNative(*h, NativeEncoding::kBinary, out);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("transaction 1, ops[0]"));
  }
  {
    HistoryBuilder b;
    ASSERT_TRUE(b.BeginTxn({.id = "\xff", .session = "s"}).ok());
    b.EndTxn();
    auto h = std::move(b).Finish();
    ASSERT_TRUE(h.ok());
    std::ostringstream out;
    absl::Status status = WriteNative(*h, NativeEncoding::kJsonLines, out);
    EXPECT_THAT(std::string(status.message()), HasSubstr("not UTF-8"));
  }
}

TEST(NativeTest, NonCanonicalNumericIdsAreWrittenAsStrings) {
  HistoryBuilder b;
  ASSERT_TRUE(b.BeginTxn({.id = "007", .id_numeric = true, .session = "s"}).ok());
  b.EndTxn();
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok());
  History back = Read(Write(*h, NativeEncoding::kJsonLines));
  EXPECT_EQ(back.txn_name(TxnId(0)), "007");
}

History BuildLargeHistory(size_t n) {
  HistoryBuilder b;
  std::vector<std::string> ids;
  for (size_t i = 0; i < n; ++i) {
    std::string id = fmt::format("{}", i * 3 + 1);
    std::string session = fmt::format("{}", i % 37);
    std::optional<Timestamp> start = Timestamp{static_cast<int64_t>(i * 10), 0};
    std::optional<Timestamp> commit =
        Timestamp{static_cast<int64_t>(i * 10 + 5), static_cast<int64_t>(i % 3)};
    EXPECT_TRUE(b.BeginTxn({.id = id,
                            .id_numeric = true,
                            .session = session,
                            .session_numeric = true,
                            .status = i % 11 == 0 ? TxnStatus::kAborted : TxnStatus::kCommitted,
                            .start = start,
                            .commit = commit})
                    .ok());
    KeyId reg = b.IntKey(static_cast<int64_t>(i % 101));
    KeyId list = b.BytesKey(fmt::format("list-{}", i % 53));
    b.Read(reg, i % 7 == 0 ? Value::Absent() : Value::Int(static_cast<int64_t>(i - 1)));
    b.Write(reg, Value::Int(static_cast<int64_t>(i)));
    b.Append(list, b.BytesValue(fmt::format("e{}", i)));
    std::vector<Value> seen;
    for (size_t j = 0; j < i % 5; ++j) seen.push_back(Value::Int(static_cast<int64_t>(j)));
    b.ListRead(list, seen);
    b.EndTxn();
  }
  auto h = std::move(b).Finish();
  EXPECT_TRUE(h.ok()) << h.status();
  return std::move(h).value();
}

void RoundTripThroughFile(NativeEncoding encoding, const std::string& name) {
  History h = BuildLargeHistory(20000);
  // Unique per process: builds in other directories may run the same test at the same time.
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / fmt::format("{}_{}", getpid(), name)).string();
  {
    std::ofstream out(path, std::ios::binary);
    ASSERT_TRUE(WriteNative(h, encoding, out).ok());
  }
  EXPECT_GT(std::filesystem::file_size(path), size_t{1} << 20);
  auto back = ReadNativeFile(path, {});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->size(), 20000u);
  EXPECT_EQ(back->source(), path);
  EXPECT_EQ(Dump(*back), Dump(h));
  std::filesystem::remove(path);
}

TEST(NativeTest, LargeHistoryRoundTripsThroughBinaryFile) {
  RoundTripThroughFile(NativeEncoding::kBinary, "native_large.bin");
}

TEST(NativeTest, LargeHistoryRoundTripsThroughJsonLinesFile) {
  RoundTripThroughFile(NativeEncoding::kJsonLines, "native_large.jsonl");
}

}  // namespace
}  // namespace isowatch::formats
