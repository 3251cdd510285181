// SPDX-License-Identifier: Apache-2.0
// The TimeKiller reader's chunked parser: large files read across chunk boundaries, errors late in
// them, and the parser of usual transactions against the general one.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/internal/timekiller_internal.h"
#include "isowatch/formats/timekiller.h"
#include "isowatch/history/history.h"

#include "tests/unit/formats/timekiller_fixture.h"

namespace isowatch::formats {
namespace {

using history::DataModel;
using history::History;
using history::OpKind;
using history::Timestamp;
using history::Value;
using ::testing::HasSubstr;

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
std::string Outcome(std::string_view json, size_t chunk, internal::TxnParsers parsers,
                    internal::Pipelining pipelining = internal::Pipelining::kOff) {
  absl::StatusOr<History> h = internal::ReadTimeKillerStringChunked(json, {}, "history.json", {},
                                                                    chunk, parsers, pipelining);
  return h.ok() ? Canonical(*h) : "error: " + Message(h.status());
}

TEST_F(TimeKillerTest, MappedFileReadsAsTheFileRead) {
  constexpr size_t kTxns = 5000;
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / fmt::format("tk_mapped_{}.json", getpid()))
          .string();
  auto write = [&](const std::string& json) { std::ofstream(path, std::ios::binary) << json; };
  for (bool usual : {true, false}) {
    const std::string json = Generate(kTxns, SIZE_MAX, usual);
    const std::string expected = Outcome(json, size_t{16} << 20, internal::TxnParsers::kUsualFirst);
    ASSERT_EQ(expected.rfind("error", 0), std::string::npos) << expected;
    write(json);
    for (internal::FileMapping mapping :
         {internal::FileMapping::kNever, internal::FileMapping::kAlways}) {
      for (size_t chunk : {size_t{1}, size_t{333}, size_t{4096}, size_t{16} << 20}) {
        for (internal::Pipelining pipelining :
             {internal::Pipelining::kOff, internal::Pipelining::kNoRetry}) {
          const std::string what = fmt::format("usual {} mapped {} chunk {} pipelined {}", usual,
                                               mapping == internal::FileMapping::kAlways, chunk,
                                               pipelining == internal::Pipelining::kNoRetry);
          absl::StatusOr<History> h = internal::ReadTimeKillerFileChunked(
              path, {}, chunk, internal::TxnParsers::kUsualFirst, pipelining, mapping);
          ASSERT_TRUE(h.ok()) << what << ": " << h.status();
          EXPECT_EQ(Canonical(*h), expected) << what;
          EXPECT_EQ(h->txn(TxnId(uint32_t{2345})).source_offset, json.find("{\"tid\":2345,"))
              << what;
        }
      }
    }
  }

  // An error late in the file: its line and column count the lines of the pages given back.
  const std::string bad = Generate(kTxns, 4000);
  const std::string in_string = Outcome(bad, size_t{16} << 20, internal::TxnParsers::kUsualFirst);
  const std::string prefix = "error: history.json:";
  ASSERT_EQ(in_string.rfind(prefix, 0), 0U) << in_string;
  write(bad);
  for (internal::FileMapping mapping :
       {internal::FileMapping::kNever, internal::FileMapping::kAlways}) {
    for (size_t chunk : {size_t{5}, size_t{4096}, size_t{16} << 20}) {
      absl::StatusOr<History> h =
          internal::ReadTimeKillerFileChunked(path, {}, chunk, internal::TxnParsers::kUsualFirst,
                                              internal::Pipelining::kAlways, mapping);
      ASSERT_FALSE(h.ok());
      EXPECT_EQ(Message(h.status()), path + ":" + in_string.substr(prefix.size()))
          << "mapped " << (mapping == internal::FileMapping::kAlways) << " chunk " << chunk;
    }
  }
  std::filesystem::remove(path);
}

TEST_F(TimeKillerTest, PipelinedReadGivesTheSameHistory) {
  constexpr size_t kTxns = 5000;  // several batches
  for (bool usual : {false, true}) {
    const std::string json = Generate(kTxns, SIZE_MAX, usual);
    const std::string expected = Outcome(json, size_t{16} << 20, internal::TxnParsers::kUsualFirst);
    ASSERT_EQ(expected.rfind("error", 0), std::string::npos) << expected;
    for (internal::TxnParsers parsers :
         {internal::TxnParsers::kUsualFirst, internal::TxnParsers::kGeneralOnly}) {
      for (size_t chunk : {size_t{333}, size_t{16} << 20}) {
        absl::StatusOr<History> h = internal::ReadTimeKillerStringChunked(
            json, {}, "history.json", {}, chunk, parsers, internal::Pipelining::kNoRetry);
        ASSERT_TRUE(h.ok()) << h.status();
        EXPECT_EQ(Canonical(*h), expected) << "chunk " << chunk << " usual " << usual;
        for (size_t i : {size_t{0}, size_t{1023}, size_t{1024}, kTxns - 1}) {
          EXPECT_EQ(h->txn(TxnId(static_cast<uint32_t>(i))).source_offset,
                    json.find(fmt::format("{{\"tid\":{},", i)))
              << "chunk " << chunk;
        }
      }
    }
  }
}

// The parsing thread of a pipelined read numbers the keys as the builder will: keys in the dense
// range, keys past it and negative ones, after the keys of an initial transaction (some used again
// by the history, one not). A numbering the builder disagrees with fails the pipelined read,
// which kNoRetry reports.
TEST_F(TimeKillerTest, PipelinedReadNumbersKeysAsTheBuilderDoes) {
  constexpr size_t kTxns = 3000;  // several batches
  std::string json = "[\n";
  for (size_t i = 0; i < kTxns; ++i) {
    if (i > 0) json += ",\n";
    const int64_t dense = static_cast<int64_t>(i % 50);
    const int64_t negative = -1 - static_cast<int64_t>(i % 30);
    const int64_t big = int64_t{5'000'000'000} + static_cast<int64_t>(i % 40);
    json +=
        fmt::format(R"({{"tid":{},"sid":{},"sts":{{"p":{},"l":0}},"cts":{{"p":{},"l":0}},"ops":[)"
                    R"({{"t":"w","k":{},"v":{}}},{{"t":"r","k":{},"v":{}}},)"
                    R"({{"t":"a","k":{},"v":{}}},{{"t":"r","k":{},"v":[{}]}}]}})",
                    i, i % 7, 2 * i, 2 * i + 1, dense, i, negative, i, big, i, big + 1, i);
  }
  json += "\n]\n";
  const std::string initial =
      R"({"ops":[{"t":"w","k":-7,"v":1},{"t":"a","k":5000000003,"v":2},{"t":"w","k":99999,"v":3}]})";
  auto read = [&](internal::Pipelining pipelining) {
    absl::StatusOr<History> h =
        internal::ReadTimeKillerStringChunked(json, {}, "history.json", initial, size_t{16} << 20,
                                              internal::TxnParsers::kUsualFirst, pipelining);
    return h.ok() ? Canonical(*h) : "error: " + Message(h.status());
  };
  const std::string expected = read(internal::Pipelining::kOff);
  ASSERT_EQ(expected.rfind("error", 0), std::string::npos) << expected;
  EXPECT_EQ(read(internal::Pipelining::kNoRetry), expected);
}

TEST_F(TimeKillerTest, PipelinedReadGivesTheSameErrors) {
  constexpr size_t kTxns = 3000;
  const std::string good = Generate(kTxns, SIZE_MAX, /*usual=*/true);
  // Errors found while parsing (early, late, in the last transaction) and while building (a
  // repeated transaction id; a key appended to after being written).
  std::vector<std::string> bad = {Generate(kTxns, 5, true), Generate(kTxns, 2500, true),
                                  Generate(kTxns, kTxns - 1, true), Generate(kTxns, 2000, false)};
  {
    std::string repeated = good;
    const std::string later = fmt::format("{{\"tid\":{},", 2100);
    repeated.replace(repeated.find(later), later.size(), "{\"tid\":7,");
    bad.push_back(repeated);
    std::string mixed = good;
    const std::string append = R"({"t":"a","k":5001,)";
    mixed.replace(mixed.rfind(append), append.size(), R"({"t":"w","k":5001,)");
    bad.push_back(mixed);
    bad.push_back(good.substr(0, good.size() - 3));  // no closing ']'
  }
  for (const std::string& json : bad) {
    const std::string expected = Outcome(json, size_t{16} << 20, internal::TxnParsers::kUsualFirst);
    ASSERT_EQ(expected.rfind("error: ", 0), 0u) << expected.substr(0, 200);
    for (size_t chunk : {size_t{333}, size_t{16} << 20}) {
      EXPECT_EQ(
          Outcome(json, chunk, internal::TxnParsers::kUsualFirst, internal::Pipelining::kAlways),
          expected)
          << "chunk " << chunk;
      // The pipeline saw the error too; the read again gave its message.
      EXPECT_EQ(
          Outcome(json, chunk, internal::TxnParsers::kUsualFirst, internal::Pipelining::kNoRetry),
          "error: the pipelined read failed")
          << "chunk " << chunk;
    }
  }

  // From a file, which is opened again for the read that finds the error.
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / fmt::format("tk_pipe_{}.json", getpid()))
          .string();
  {
    std::ofstream out(path, std::ios::binary);
    out << bad[1];
  }
  absl::StatusOr<History> from_file = internal::ReadTimeKillerFileChunked(
      path, {}, 1000, internal::TxnParsers::kUsualFirst, internal::Pipelining::kAlways);
  ASSERT_FALSE(from_file.ok());
  EXPECT_THAT(Message(from_file.status()), HasSubstr("transaction #2500: op #4: unknown"));
  EXPECT_THAT(Message(from_file.status()), HasSubstr(path + ":"));
  std::filesystem::remove(path);
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
      EXPECT_EQ(Outcome(json, 64, internal::TxnParsers::kUsualFirst, internal::Pipelining::kAlways),
                expected)
          << "pipelined: " << json;
    }
  }
}

}  // namespace
}  // namespace isowatch::formats
