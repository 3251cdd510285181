// SPDX-License-Identifier: Apache-2.0
// The pipelined TimeKiller read's copy of the key lists as text (ListTexts): how it resolves list
// reads, and that a pipelined read holds every list read as the sequential read does.
#include "isowatch/formats/internal/timekiller_list_texts.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/internal/timekiller_internal.h"
#include "isowatch/formats/internal/timekiller_txn.h"
#include "isowatch/history/history.h"

#include "tests/testing/canonical_history.h"
#include "tests/testing/scratch_file.h"
#include "tests/unit/formats/timekiller_fixture.h"

namespace isowatch::formats::internal {
namespace {

using history::History;
using ::testing::ElementsAre;

TEST(ParseListTextTest, ReadsListsOfIntegers) {
  std::vector<int64_t> got;
  ASSERT_TRUE(ParseListText("0", &got));
  ASSERT_TRUE(ParseListText("7,10,123456789012345678", &got));
  // 19 digits: as much as an int64 holds.
  ASSERT_TRUE(ParseListText("9223372036854775807", &got));
  EXPECT_THAT(got, ElementsAre(0, 7, 10, 123456789012345678, INT64_MAX));
  uint32_t count = 0;
  ASSERT_TRUE(CheckListText("1,2,3", &count));
  EXPECT_EQ(count, 3u);
}

TEST(ParseListTextTest, RefusesWhatIsNoListOfIntegers) {
  for (std::string_view bad : {"", ",", "1,", ",1", "1,,2", "01", "1,00", "9223372036854775808",
                               "99999999999999999999", "1,a"}) {
    std::vector<int64_t> got;
    EXPECT_FALSE(ParseListText(bad, &got)) << bad;
    uint32_t count = 0;
    EXPECT_FALSE(CheckListText(bad, &count)) << bad;
  }
}

// A transaction of list reads, all of key id `key_id`, given as text (as ParseUsualTxn leaves
// them), and then `elements` read as elements (a list read the usual parser parsed).
ParsedTxn Reads(uint32_t key_id, const std::vector<std::string>& texts,
                const std::vector<int64_t>& elements = {}, bool with_elements = false) {
  ParsedTxn txn;
  for (const std::string& text : texts) {
    PendingOp& op = txn.ops.emplace_back();
    op.type = OpType::kRead;
    op.form = ValueForm::kList;
    op.key_id = key_id;
    op.list_form = ListForm::kText;
    op.list_begin = static_cast<uint32_t>(txn.list_text.size());
    op.list_size = static_cast<uint32_t>(text.size());
    txn.list_text.insert(txn.list_text.end(), text.begin(), text.end());
  }
  if (with_elements) {
    PendingOp& op = txn.ops.emplace_back();
    op.type = OpType::kRead;
    op.form = ValueForm::kList;
    op.key_id = key_id;
    op.list_form = ListForm::kElements;
    op.list_begin = 0;
    op.list_size = static_cast<uint32_t>(elements.size());
    txn.elements = elements;
  }
  return txn;
}

// What an op was resolved to, as "prefix N" or "elements [..]" (and the list before them).
std::string Form(const ParsedTxn& txn, const PendingOp& op) {
  switch (op.list_form) {
    case ListForm::kPrefix:
      return fmt::format("prefix {}", op.list_size);
    case ListForm::kElements:
    case ListForm::kApart:
    case ListForm::kElementsAfterList: {
      std::vector<int64_t> e(txn.elements.begin() + op.list_begin,
                             txn.elements.begin() + op.list_begin + op.list_size);
      if (op.list_form != ListForm::kElementsAfterList) {
        return fmt::format("{} [{}]", op.list_form == ListForm::kApart ? "apart" : "elements",
                           fmt::join(e, ","));
      }
      const auto list = static_cast<size_t>(op.value);
      return fmt::format("list [{}] elements [{}]",
                         fmt::join(std::vector<int64_t>(e.begin(), e.begin() + list), ","),
                         fmt::join(std::vector<int64_t>(e.begin() + list, e.end()), ","));
    }
    case ListForm::kText:
    case ListForm::kTextInPlace:
      break;
  }
  return "text";
}

std::vector<std::string> Forms(const ParsedTxn& txn) {
  std::vector<std::string> out;
  for (const PendingOp& op : txn.ops) out.push_back(Form(txn, op));
  return out;
}

TEST(ListTextsTest, ResolvesPrefixesExtensionsAndOthers) {
  ListTexts texts;
  ParsedTxn a = Reads(0, {"5", "5,17", "5", "5,17,3", "5,17"});
  ASSERT_TRUE(texts.Resolve(a));
  // The first read extends the empty list; a read equal to the list has its count.
  EXPECT_THAT(Forms(a), ElementsAre("prefix 1", "prefix 2", "prefix 1", "prefix 3", "prefix 2"));
  // Not prefixes at element boundaries, or different elements: parsed whole and held apart, the
  // list unchanged.
  ParsedTxn b = Reads(0, {"5,1", "5,177", "51", "6,17,3,4", "5,17,3,9", "5,17,3"});
  ASSERT_TRUE(texts.Resolve(b));
  EXPECT_THAT(Forms(b), ElementsAre("apart [5,1]", "apart [5,177]", "apart [51]",
                                    "apart [6,17,3,4]", "prefix 4", "prefix 3"));
  // Another key starts empty.
  ParsedTxn c = Reads(3, {"9,8"});
  ASSERT_TRUE(texts.Resolve(c));
  EXPECT_THAT(Forms(c), ElementsAre("prefix 2"));

  // A key read as a list the usual parser parsed: its list goes with that read, once, and its
  // later reads are parsed.
  ParsedTxn d = Reads(0, {"5"}, {5, 17, 3, 9, 1}, /*with_elements=*/true);
  ASSERT_TRUE(texts.Resolve(d));
  EXPECT_THAT(Forms(d), ElementsAre("prefix 1", "list [5,17,3,9] elements [5,17,3,9,1]"));
  ParsedTxn e = Reads(0, {"5,17"}, {4}, /*with_elements=*/true);
  ASSERT_TRUE(texts.Resolve(e));
  EXPECT_THAT(Forms(e), ElementsAre("elements [5,17]", "elements [4]"));
  // An empty read of a key, parsed, leaves the copy as it is.
  ParsedTxn f = Reads(3, {"9,8,7"}, {}, /*with_elements=*/true);
  ASSERT_TRUE(texts.Resolve(f));
  EXPECT_THAT(Forms(f), ElementsAre("prefix 3", "elements []"));

  // What a malformed extension or other read does: false.
  ParsedTxn g = Reads(3, {"9,8,7,01"});
  EXPECT_FALSE(texts.Resolve(g));
  ParsedTxn h = Reads(5, {"1,,2"});
  EXPECT_FALSE(texts.Resolve(h));

  std::vector<std::pair<uint32_t, std::vector<int64_t>>> lists;
  texts.TakeLists([&](KeyId key, const std::vector<history::Value>& list) {
    std::vector<int64_t> ints(list.size());
    for (size_t i = 0; i < list.size(); ++i) ints[i] = list[i].as_int();
    lists.emplace_back(key.value(), std::move(ints));
  });
  // Key 0 went to the builder; key 3's list is the longest read of it.
  ASSERT_EQ(lists.size(), 1u);
  EXPECT_EQ(lists[0].first, 3u);
  EXPECT_THAT(lists[0].second, ElementsAre(9, 8, 7));
}

// Enough keys that TakeLists parses them on two threads: each key's list comes once, whole.
TEST(ListTextsTest, TakesTheListsOfManyKeys) {
  constexpr uint32_t kKeys = 50'000;
  ListTexts texts;
  std::vector<std::string> reads;
  for (uint32_t k = 0; k < kKeys; ++k) reads.push_back(fmt::format("{},{}", k, k + 7));
  for (uint32_t k = 0; k < kKeys; ++k) {
    ParsedTxn txn = Reads(k, {reads[k]});
    ASSERT_TRUE(texts.Resolve(txn));
  }
  std::vector<int> seen(kKeys, 0);
  texts.TakeLists([&](KeyId key, const std::vector<history::Value>& list) {
    ASSERT_LT(key.value(), kKeys);
    ++seen[key.value()];
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[0], history::Value::Int(key.value()));
    EXPECT_EQ(list[1], history::Value::Int(key.value() + 7));
  });
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kKeys);
}

// A list-append history whose reads are prefixes of the key's longest list, extensions of it,
// and reads that are neither, in the texts the usual parser leaves as text and in others it
// parses (spaces, negative elements) or leaves to the general parser (an ignored member with an
// escape).
std::string ListHistory(size_t txns, uint64_t seed) {
  std::mt19937_64 rng(seed);
  constexpr int kKeys = 6;
  std::vector<std::vector<int64_t>> lists(kKeys);
  std::string json = "[\n";
  int64_t next = 1;
  for (size_t i = 0; i < txns; ++i) {
    if (i > 0) json += ",\n";
    std::vector<std::string> ops;
    for (int n = 0; n < 4; ++n) {
      const auto k = static_cast<size_t>(rng() % kKeys);
      std::vector<int64_t>& list = lists[k];
      const uint64_t kind = rng() % 16;
      if (kind < 5) {
        // Keys 4 and 5 get a negative element now and then (a list the usual parser parses).
        const int64_t v = k >= 4 && rng() % 40 == 0 ? -next : next;
        ++next;
        list.push_back(v);
        ops.push_back(fmt::format(R"({{"t":"a","k":{},"v":{}}})", k, v));
        continue;
      }
      // A read: a prefix of the list, sometimes all of it; or another list.
      std::vector<int64_t> read(list.begin(),
                                list.begin() + static_cast<ptrdiff_t>(rng() % (list.size() + 1)));
      if (kind == 5 && !read.empty()) read.back() += 1000;  // neither prefix nor extension
      if (kind == 6) read = list;
      const bool spaced = k == 3 && rng() % 30 == 0;
      ops.push_back(
          fmt::format(R"({{"t":"r","k":{},"v":[{}]}})", k, fmt::join(read, spaced ? ", " : ",")));
    }
    const bool general = rng() % 200 == 0;
    json +=
        fmt::format(R"({{"tid":{},"sid":{},{}"sts":{{"p":{},"l":0}},"cts":{{"p":{},"l":0}},)"
                    R"("ops":[{}]}})",
                    i, i % 5, general ? R"("x":"\"",)" : "", 2 * i, 2 * i + 1, fmt::join(ops, ","));
  }
  json += "\n]\n";
  return json;
}

std::string ListStorage(const History& h) { return isowatch::testing::CanonicalListStorage(h); }

// From a string the texts are copied; from a mapped file they are left in place, and the pages
// behind the reader given back (small chunks: often) are read again for them.
TEST(ListTextsTest, PipelinedReadHoldsListReadsAsTheSequentialRead) {
  const isowatch::testing::ScratchFile file("isowatch-list-texts");
  for (uint64_t seed : {1, 2, 3}) {
    const std::string json = ListHistory(3000, seed);  // several batches
    absl::StatusOr<History> sequential = ReadTimeKillerStringChunked(
        json, {}, "history.json", {}, size_t{16} << 20, TxnParsers::kUsualFirst, Pipelining::kOff);
    ASSERT_TRUE(sequential.ok()) << sequential.status();
    file.Write(json);
    for (size_t chunk : {size_t{333}, size_t{16} << 20}) {
      absl::StatusOr<History> pipelined = ReadTimeKillerStringChunked(
          json, {}, "history.json", {}, chunk, TxnParsers::kUsualFirst, Pipelining::kNoRetry);
      ASSERT_TRUE(pipelined.ok()) << pipelined.status();
      EXPECT_EQ(Canonical(*pipelined), Canonical(*sequential)) << "seed " << seed;
      EXPECT_EQ(ListStorage(*pipelined), ListStorage(*sequential)) << "seed " << seed;
      absl::StatusOr<History> mapped =
          ReadTimeKillerFileChunked(file.path(), {}, chunk, TxnParsers::kUsualFirst,
                                    Pipelining::kNoRetry, FileMapping::kAlways);
      ASSERT_TRUE(mapped.ok()) << mapped.status();
      EXPECT_EQ(Canonical(*mapped), Canonical(*sequential)) << "seed " << seed;
      EXPECT_EQ(ListStorage(*mapped), ListStorage(*sequential)) << "seed " << seed;
    }
  }
}

// A malformed list the parsing thread left as text fails the pipelined read; read again, without
// the pipeline, it is the error it is.
TEST(ListTextsTest, MalformedListTextIsFoundAgainWithoutThePipeline) {
  std::string json = ListHistory(2000, 4);
  const std::string at = R"({"t":"r","k":1,"v":[)";
  const size_t where = json.find(at, json.size() / 2);
  ASSERT_NE(where, std::string::npos);
  json.insert(where + at.size(), "007,");
  absl::StatusOr<History> sequential = ReadTimeKillerStringChunked(
      json, {}, "history.json", {}, size_t{16} << 20, TxnParsers::kUsualFirst, Pipelining::kOff);
  ASSERT_FALSE(sequential.ok());
  absl::StatusOr<History> no_retry =
      ReadTimeKillerStringChunked(json, {}, "history.json", {}, size_t{16} << 20,
                                  TxnParsers::kUsualFirst, Pipelining::kNoRetry);
  ASSERT_FALSE(no_retry.ok());
  EXPECT_EQ(Message(no_retry.status()), "the pipelined read failed");
  absl::StatusOr<History> retried = ReadTimeKillerStringChunked(
      json, {}, "history.json", {}, size_t{16} << 20, TxnParsers::kUsualFirst, Pipelining::kAlways);
  ASSERT_FALSE(retried.ok());
  EXPECT_EQ(Message(retried.status()), Message(sequential.status()));
}

// An element of 19 digits: the usual parser gives the transaction that appends it to the general
// parser; the read of it, left as text, extends the key's empty list.
TEST(ListTextsTest, NineteenDigitElementsReadAlike) {
  const std::string json = R"([{"tid":1,"sid":1,"sts":{"p":0,"l":0},"cts":{"p":1,"l":0},"ops":[)"
                           R"({"t":"a","k":1,"v":1000000000000000000},{"t":"a","k":1,"v":5}]},)"
                           R"({"tid":2,"sid":1,"sts":{"p":2,"l":0},"cts":{"p":3,"l":0},"ops":[)"
                           R"({"t":"r","k":1,"v":[1000000000000000000,5]},{"t":"r","k":2,"v":[]},)"
                           R"({"t":"r","k":1,"v":[1000000000000000000]}]}])";
  std::string expected;
  for (Pipelining pipelining : {Pipelining::kOff, Pipelining::kNoRetry}) {
    absl::StatusOr<History> h = ReadTimeKillerStringChunked(
        json, {}, "history.json", {}, size_t{16} << 20, TxnParsers::kUsualFirst, pipelining);
    ASSERT_TRUE(h.ok()) << h.status();
    const std::string got = Canonical(*h) + ListStorage(*h);
    if (expected.empty()) expected = got;
    EXPECT_EQ(got, expected);
    ASSERT_EQ(h->key_list(KeyId(0)).size(), 2u);
    EXPECT_EQ(h->key_list(KeyId(0))[0], history::Value::Int(1000000000000000000));
  }
}

}  // namespace
}  // namespace isowatch::formats::internal
