// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/edn.h"

#include "tests/testing/canonical_history.h"
#include "tests/unit/formats/format_samples.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::TxnStatus;
using history::Value;
using ::testing::HasSubstr;

std::string SamplePath(std::string_view name) { return samples::SamplePath("edn", name); }

std::string Canonical(const History& h) { return isowatch::testing::CanonicalHistory(h); }

History ReadOk(std::string_view json, ReadOptions options = {}) {
  return samples::Expect(ReadElleJsonString(json, options, "h.json"));
}

std::string ReadError(std::string_view json, ReadOptions options = {}) {
  return samples::ErrorOf(ReadElleJsonString(json, options, "h.json"));
}

uint64_t NoteCount(const History& h, std::string_view prefix) {
  uint64_t n = 0;
  for (const auto& note : h.info().notes) {
    if (note.kind.starts_with(prefix)) n += note.count;
  }
  return n;
}

TEST(ElleJsonTest, TwinOfTheEdnSampleGivesTheSameHistoryButForKeyTypes) {
  absl::StatusOr<History> json = ReadElleJsonFile(SamplePath("rw_register.json"), {});
  ASSERT_TRUE(json.ok()) << json.status();
  absl::StatusOr<History> edn = ReadEdnFile(SamplePath("rw_register.edn"), {});
  ASSERT_TRUE(edn.ok()) << edn.status();
  EXPECT_EQ(json->info().format, "elle-json");
  EXPECT_EQ(json->info().dialect, "rw-register");
  ASSERT_EQ(json->size(), 2u);
  // EDN's keyword :x is the bytes ":x"; JSON's string "x" is "x".
  const std::string from_edn =
      std::regex_replace(Canonical(*edn), std::regex("\":([a-z])\""), "\"$1\"");
  EXPECT_NE(from_edn, Canonical(*edn));
  EXPECT_EQ(Canonical(*json), from_edn);
  EXPECT_TRUE(json->FindBytesKey("x").valid());
  EXPECT_FALSE(json->FindBytesKey(":x").valid());
}

TEST(ElleJsonTest, JsonLinesWithColonsAndTrailingCommas) {
  History lines = ReadOk(
      "\xEF\xBB\xBF{\"type\":\":invoke\",\"f\":\":txn\",\"value\":[[\"append\",255,1],[\"r\",\"k\","
      "null]],"
      "\"process\":0,\"time\":1,\"index\":0},\r\n"
      "\n"
      "{\"type\":\"ok\",\"f\":\"txn\",\"value\":[[\":append\",255,1],[\"r\",\"k\",[]]],"
      "\"process\":0,\"time\":2,\"index\":1}\n");
  ASSERT_EQ(lines.size(), 1u);
  std::span<const Op> ops = lines.ops(lines.FindTxn("1"));
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(lines.KeyToString(ops[0].key()), "255");
  EXPECT_EQ(ops[1].kind(), OpKind::kListRead);
  EXPECT_EQ(lines.info().dialect, "list-append");
  EXPECT_EQ(lines.txn(lines.FindTxn("1")).invoke_time, 1);
}

TEST(ElleJsonTest, NemesisAndStatuses) {
  History h = ReadOk(
      "[{\"type\":\"info\",\"process\":\"nemesis\",\"f\":\"kill\",\"value\":{\"n1\":\"killed\"}},"
      " {\"type\":\"invoke\",\"f\":\"txn\",\"process\":1,\"index\":1,\"value\":[[\"r\",1,null]]},"
      " {\"type\":\"info\",\"f\":\"txn\",\"process\":1,\"index\":2,\"value\":[[\"r\",1,null]]},"
      " {\"type\":\"invoke\",\"f\":\"txn\",\"process\":2,\"index\":0,\"value\":[]},"
      " {\"type\":\"fail\",\"f\":\"txn\",\"process\":2,\"index\":3,\"value\":[[\"w\",1,5]]}]");
  EXPECT_EQ(NoteCount(h, "non-client operations"), 1u);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h.txn(h.FindTxn("2")).status, TxnStatus::kUnknown);
  EXPECT_TRUE(h.ops(h.FindTxn("2"))[0].unknown());
  EXPECT_EQ(h.txn(h.FindTxn("3")).status, TxnStatus::kAborted);
}

TEST(ElleJsonTest, ErrorPositionLateInALongArray) {
  // Ops on lines of their own, several to a line, and spread over lines, so that the reader's
  // count of lines from one op's position to the next crosses each kind.
  constexpr int kPairs = 1500;
  constexpr int kBad = 1234;
  std::string json = "[";
  size_t bad_at = 0;
  for (int i = 0; i < kPairs; ++i) {
    const std::string sep = i % 3 == 0 ? ",\n" : (i % 3 == 1 ? ", " : ",\n\n  ");
    if (i > 0) json += sep;
    json += fmt::format(
        "{{\"type\":\"invoke\",\n \"f\":\"txn\",\"process\":{},\"value\":[[\"r\",1,null]]}}",
        i % 5);
    json += sep;
    if (i == kBad) bad_at = json.size();
    json += fmt::format(R"({{"type":"ok","f":"txn","process":{},"value":[["{}",1,[]]]}})", i % 5,
                        i == kBad ? "read" : "r");
  }
  json += "]\n";
  const auto line =
      1 + std::count(json.begin(), json.begin() + static_cast<ptrdiff_t>(bad_at), '\n');
  const size_t line_start = json.rfind('\n', bad_at) + 1;
  EXPECT_THAT(ReadError(json), HasSubstr(fmt::format("h.json:{}:{}: op #{}: unknown micro-op", line,
                                                     bad_at - line_start + 1, 2 * kBad + 1)));
}

TEST(ElleJsonTest, LargeFilesAreReadAsTheirText) {
  // Large enough to be mapped (kMapMinBytes), as an array and as JSON lines.
  std::string ops;    // JSON lines
  std::string array;  // the same ops in an array
  int n = 0;
  while (ops.size() < (size_t{5} << 20)) {
    for (const char* type : {"invoke", "ok"}) {
      const std::string op = fmt::format(R"({{"type":"{}","f":"txn","process":{},"time":{},)"
                                         R"("value":[["append",{},{}],["r",{},{}]]}})",
                                         type, n % 7, 2 * n + (type[0] == 'o'), n % 50, n,
                                         (n + 1) % 50, type[0] == 'o' ? "[]" : "null");
      ops += op + "\n";
      array += (array.empty() ? "[" : ",\n") + op;
    }
    ++n;
  }
  array += "]\n";
  const std::string dir = ::testing::TempDir();
  for (const auto& [name, text] : {std::pair{"array.json", array}, std::pair{"lines.json", ops}}) {
    SCOPED_TRACE(name);
    const std::string path = dir + "/elle_large_" + name;
    std::ofstream(path, std::ios::binary) << text;
    const History from_text = ReadOk(text);
    absl::StatusOr<History> from_file = ReadElleJsonFile(path, {});
    ASSERT_TRUE(from_file.ok()) << from_file.status();
    EXPECT_EQ(from_file->size(), static_cast<size_t>(n));
    EXPECT_EQ(Canonical(*from_file), Canonical(from_text));
    std::remove(path.c_str());
  }
  // An error late in the mapped array names its line as the text's does.
  std::string bad = array;
  bad.replace(bad.rfind("\"append\""), 8, "\"appendx\"");
  const std::string path = dir + "/elle_large_bad.json";
  std::ofstream(path, std::ios::binary) << bad;
  const std::string in_text = ReadError(bad);
  ASSERT_THAT(in_text, HasSubstr("h.json:"));
  EXPECT_EQ(samples::ErrorOf(ReadElleJsonFile(path, {})),
            path + in_text.substr(in_text.find("h.json") + 6));
  std::remove(path.c_str());
}

TEST(ElleJsonTest, Errors) {
  EXPECT_THAT(
      ReadError("[{\"type\":\"ok\",\"f\":\"txn\",\"process\":0,\"value\":[[\"read\",1,2]]}]"),
      HasSubstr("h.json:1:2: op #0: unknown micro-op \"read\" (expected r, w or append)"));
  EXPECT_THAT(ReadError("[{\"type\":\"ok\",\"process\":0,\"value\":[[\"r\",1.5,2]]}]"),
              HasSubstr("a key must be an integer or a string"));
  EXPECT_THAT(
      ReadError("[{\"type\":\"ok\",\"process\":0,\"value\":[[\"w\",1,18446744073709551615]]}]"),
      HasSubstr("a value does not fit in 64 bits"));
  EXPECT_THAT(ReadError("[{\"type\":\"done\"}]"), HasSubstr("\"type\" must be invoke"));
  EXPECT_THAT(ReadError("[{\"type\":\"info\",\"process\":\"n\"},\n {\"type\": }]"),
              HasSubstr("h.json:2:2: op #1"));
  EXPECT_THAT(ReadError("{\"process\":0}\n"), HasSubstr("h.json:1:1: op #0: an operation without"));
  EXPECT_THAT(
      ReadError("[{\"type\":\"invoke\",\"f\":\"txn\",\"process\":0,\"index\":0,\"value\":[]},"
                "{\"type\":\"invoke\",\"f\":\"txn\",\"process\":0,\"index\":1,\"value\":[]}]"),
      HasSubstr("process 0 invokes again"));
  ReadOptions lenient;
  lenient.lenient = true;
  History h = ReadOk(
      "[{\"type\":\"ok\",\"process\":0,\"index\":0,\"value\":[[\"cas\",1,2]]},"
      " {\"type\":\"ok\",\"process\":0,\"index\":1,\"value\":[[\"w\",1,2]]}]",
      lenient);
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(NoteCount(h, "malformed operations dropped"), 1u);
}

TEST(ElleJsonTest, SniffAcceptsElleJsonAndRejectsOtherFormats) {
  EXPECT_TRUE(SniffElleJson(samples::FileContents(SamplePath("rw_register.json"))).ok());
  EXPECT_TRUE(
      SniffElleJson("{\"index\": 0, \"type\": \"invoke\", \"value\": [[\"r\", 1, null]]}\n").ok());
  EXPECT_TRUE(SniffElleJson("[{\"value\": [[\"r\", 1, [1, 2, 3").ok() == false);
  const std::pair<const char*, const char*> others[] = {
      {"[\n  {\"tid\": 1, \"sid\": 0, \"sts\": {\"p\": 100, \"l\": 0}, \"cts\": {\"p\": 105, "
       "\"l\": 2},\n   \"ops\": [{\"t\": \"w\", \"k\": 3, \"v\": 11}]}\n]",
       "TimeKiller"},
      {"w(1,10,0,100)\nw(2,20,0,100)\n", "expected an object"},
      {"{\"params\": {\"id\": 0, \"n_node\": 2}, \"info\": \"composed\", \"data\": []}", "dbcop"},
      {"[[{\"events\": []}]]", "array of arrays"},
      {"{\"value\": [[\"w\", 7, 1001, true], [\"r\", 8, 600, false]]}", "no \"type\""},
      {"{:type :invoke, :f :txn, :value [[:w :x 1]], :process 0}", "expected a quoted member"},
  };
  for (const auto& [text, why] : others) {
    absl::Status s = SniffElleJson(text);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_THAT(std::string(s.message()), HasSubstr(why)) << text;
  }
  // And the EDN sniffer rejects elle-cli JSON.
  EXPECT_FALSE(SniffEdn(samples::FileContents(SamplePath("rw_register.json"))).ok());
}

}  // namespace
}  // namespace isowatch::formats
