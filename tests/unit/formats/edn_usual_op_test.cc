// SPDX-License-Identifier: Apache-2.0
// ReadUsualEdnOp, the EDN reader's path for operation maps of the usual shape: what it reads,
// what it leaves to the general parser, and that a history reads the same either way.
#include "isowatch/formats/internal/edn_usual_op.h"

#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/formats/edn.h"
#include "isowatch/formats/internal/edn_internal.h"
#include "isowatch/formats/internal/edn_parser.h"

#include "tests/testing/canonical_history.h"
#include "tests/testing/source_dir.h"
#include "tests/unit/formats/format_samples.h"

namespace isowatch::formats::internal {
namespace {

using history::History;

size_t Read(std::string_view text, ElleOp* op) { return ReadUsualEdnOp(text, op); }

TEST(EdnUsualOpTest, ReadsAnOkMapWhole) {
  const std::string line =
      "{:index 7, :type :ok, :process 3, :f :txn, :time 1200, :value [[:r 1 nil] [:w :k 5] "
      "[:append 2 -3] [:r 4 [1 2 3]] [:r 5 []]], :ts {:cts 9 :rts 4}, :node \"n1\"}\n";
  ElleOp op;
  ASSERT_EQ(Read(line, &op), line.size() - 1);
  EXPECT_EQ(op.type, ElleType::kOk);
  EXPECT_EQ(op.process_kind, ElleOp::Process::kInt);
  EXPECT_EQ(op.process, 3);
  EXPECT_EQ(op.f, ElleOp::F::kTxn);
  EXPECT_EQ(op.index, 7);
  EXPECT_EQ(op.time, 1200);
  EXPECT_TRUE(op.has_ts);
  EXPECT_EQ(op.rts, 4);
  EXPECT_EQ(op.cts, 9);
  ASSERT_EQ(op.ops.ops.size(), 5u);
  const ElleMicroOp& r = op.ops.ops[0];
  EXPECT_EQ(r.kind, ElleMicroOp::Kind::kRead);
  EXPECT_FALSE(r.list);
  EXPECT_EQ(r.key.type, ElleScalar::Type::kInt);
  EXPECT_EQ(r.key.i, 1);
  EXPECT_EQ(r.value.type, ElleScalar::Type::kNil);
  const ElleMicroOp& w = op.ops.ops[1];
  EXPECT_EQ(w.kind, ElleMicroOp::Kind::kWrite);
  EXPECT_EQ(w.key.type, ElleScalar::Type::kKeyword);
  EXPECT_EQ(op.ops.Bytes(w.key), ":k");
  EXPECT_EQ(w.value.i, 5);
  EXPECT_EQ(op.ops.ops[2].kind, ElleMicroOp::Kind::kAppend);
  EXPECT_EQ(op.ops.ops[2].value.i, -3);
  const ElleMicroOp& list = op.ops.ops[3];
  EXPECT_TRUE(list.list);
  ASSERT_EQ(list.list_size, 3u);
  EXPECT_EQ(op.ops.elements[list.list_begin + 2].i, 3);
  EXPECT_TRUE(op.ops.ops[4].list);
  EXPECT_EQ(op.ops.ops[4].list_size, 0u);
}

TEST(EdnUsualOpTest, ReadsInvokeAndInfoMapsWithoutOptionalKeys) {
  ElleOp op;
  op.index = 3;  // left over from an earlier map: must be reset
  op.ops.ops.push_back({});
  ASSERT_GT(Read("{:type :invoke, :value []}", &op), 0u);
  EXPECT_EQ(op.type, ElleType::kInvoke);
  EXPECT_EQ(op.process_kind, ElleOp::Process::kMissing);
  EXPECT_EQ(op.f, ElleOp::F::kNil);
  EXPECT_FALSE(op.index.has_value());
  EXPECT_FALSE(op.has_ts);
  EXPECT_TRUE(op.ops.ops.empty());
  ASSERT_GT(Read("{:type :info,:process nil,:f nil,:time nil,:ts nil,:value [[:w 1 nil]]}", &op),
            0u);
  EXPECT_EQ(op.type, ElleType::kInfo);
  EXPECT_FALSE(op.time.has_value());
  EXPECT_EQ(op.ops.ops.size(), 1u);
}

TEST(EdnUsualOpTest, DeclinesWhatItDoesNotKnowWhole) {
  // Each of these is left to the general parser (which reads some and refuses others).
  const std::vector<std::string> declined = {
      "{:type :ok, :value [[:r 1 nil]]",                    // cut off by the end of the text
      "{:type :ok, :value [[:r 1 nil]]} ",                  // (not declined: see below)
      "{:type :ok, :value [[:r 1 nil]] ; comment\n}",       // a comment
      "{:type :ok, #_ :x :value [[:r 1 nil]]}",             // a discard
      "{:type :ok, :value [[:r \"k\" 1]]}",                 // a string key
      "{:type :ok, :value [[:r 1 1.5]]}",                   // a float
      "{:type :ok, :value [[:r 1 12345678901234567890]]}",  // too long to be sure of
      "{:type :ok, :value [[:r 1 1N]]}",                    // a big-integer suffix
      "{:type :ok, :value [[:r 1 +1]]}",                    // a '+'
      "{:type :ok, :value [[:r 1 007]]}",                   // a leading zero
      "{:type :ok, :value [[:r 1 nil5]]}",                  // a symbol
      "{:type :ok, :value ([:r 1 nil])}",                   // a list
      "{:type :ok, :value [(:r 1 nil)]}",
      "{:type :ok, :value [[:r 1 nil 2]]}",     // four elements
      "{:type :ok, :value [[:append 1 nil]]}",  // refused by the general parser
      "{:type :ok, :value [[:w 1 [1]]]}",
      "{:type :ok, :value [[:read 1 nil]]}",
      "{:type :ok, :value [[:r :a/b nil]]}",  // a namespaced keyword
      "{:type :ok, :type :ok, :value []}",    // a key twice
      "{:type :ok}",                          // no :value
      "{:value []}",                          // no :type
      "{:type :done, :value []}",
      "{:type :ok, :f :read, :value []}",
      "{:type :ok, :process :nemesis, :value []}",
      "{:type :ok, :index 1.0, :value []}",
      "{:type :ok, :ts {:rts 1 :cts 2 :x 3}, :value []}",
      "{:type :ok, :ts {:cts 2}, :value []}",
      "{:type :ok, :error [:x 1], :value []}",      // an unknown key with a vector
      "{:type :ok, :error \"a\\\"b\", :value []}",  // a string with an escape
      "{\"type\" :ok, :value []}",                  // a key that is no keyword
      "{:type :ok, :value[]}",                      // no space after a keyword
      "{:type :ok :value}",
      "#jepsen.history.Op{:type :ok, :value []}",
      "[:type :ok]",
  };
  for (const std::string& text : declined) {
    ElleOp op;
    if (text == "{:type :ok, :value [[:r 1 nil]]} ") {
      EXPECT_EQ(Read(text, &op), text.size() - 1) << text;
      continue;
    }
    EXPECT_EQ(Read(text, &op), 0u) << text;
  }
}

// What a reader answers: the canonical history, or its refusal.
std::string Outcome(const absl::StatusOr<History>& h) {
  return h.ok() ? isowatch::testing::CanonicalHistory(*h)
                : "error: " + std::string(h.status().message());
}

// Reads `edn` with and without the usual path, strict and lenient, at a few chunk sizes, and
// expects one answer. Returns whether it was a history (in strict mode).
bool ExpectSameEitherWay(const std::string& edn, const std::string& name) {
  bool read = false;
  for (const bool lenient : {false, true}) {
    ReadOptions options;
    options.lenient = lenient;
    const std::string general =
        Outcome(ReadEdnStringChunked(edn, options, name, EdnParser::kDefaultChunkSize, false));
    for (const size_t chunk : {size_t{3}, size_t{64}, EdnParser::kDefaultChunkSize}) {
      EXPECT_EQ(Outcome(ReadEdnStringChunked(edn, options, name, chunk, true)), general)
          << name << " lenient=" << lenient << " chunk=" << chunk << "\n"
          << edn;
    }
    if (!lenient) read = !general.starts_with("error: ");
  }
  return read;
}

TEST(EdnUsualOpTest, SamplesReadTheSameAsWithTheGeneralParser) {
  int files = 0;
  for (const std::string dir :
       {"tests/histories/formats/edn", "tests/fuzz/corpus/edn_reader_fuzz"}) {
    for (const auto& entry : std::filesystem::directory_iterator(
             fmt::format("{}/{}", isowatch::testing::SourceDir(), dir))) {
      if (entry.path().extension() != ".edn") continue;
      ExpectSameEitherWay(samples::FileContents(entry.path().string()),
                          entry.path().filename().string());
      ++files;
    }
  }
  EXPECT_GE(files, 10);
  // The usual path is taken on the samples (else the comparison would be of one parser).
  ElleOp op;
  const std::string sample = samples::FileContents(samples::SamplePath("edn", "list_append.edn"));
  const std::string first_map = sample.substr(sample.find('{'));
  EXPECT_GT(Read(first_map, &op), 0u) << first_map.substr(0, 200);
}

// Random operation maps, most of the usual shape and some a little off it (a mutated byte, a
// comment, an unknown key, a big number), read both ways.
std::string RandomDocument(std::mt19937_64& rng, int* usual_lines) {
  auto pick = [&rng](auto const& v) { return v[rng() % v.size()]; };
  const std::vector<std::string> seps = {" ", ", ", ",", "\n ", "\t", "  "};
  const std::vector<std::string> keys = {"1", "2", "3", ":x", ":y", "-4"};
  const std::vector<std::string> values = {"nil", "1", "2", "-7", "0", "9"};
  std::string doc;
  for (int process = 0; process < 3; ++process) {
    std::string micro;
    const int n = static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      const int kind = static_cast<int>(rng() % 3);
      std::string value = pick(values);
      if (kind == 0 && rng() % 3 == 0) value = fmt::format("[{} {}]", pick(values), pick(values));
      if (kind == 0 && rng() % 5 == 0) value = "[]";
      if (kind == 2 && value == "nil") value = "5";
      micro += fmt::format("{}[{} {}{}{}]", i == 0 ? "" : pick(seps),
                           kind == 0   ? ":r"
                           : kind == 1 ? ":w"
                                       : ":append",
                           pick(keys), pick(seps), value);
    }
    for (const char* type : {":invoke", rng() % 4 == 0   ? ":info"
                                        : rng() % 5 == 0 ? ":fail"
                                                         : ":ok"}) {
      std::vector<std::string> fields = {
          fmt::format(":type{}{}", pick(seps), type),
          fmt::format(":process {}", process),
          fmt::format(":value{}[{}]", pick(seps), micro),
      };
      if (rng() % 2) fields.push_back(":f :txn");
      if (rng() % 2) fields.push_back(fmt::format(":time {}", rng() % 1000));
      if (rng() % 3 == 0) fields.push_back(fmt::format(":index {}", rng() % 50));
      if (rng() % 4 == 0) fields.push_back(":ts {:rts 1 :cts 2}");
      if (rng() % 6 == 0) fields.push_back(":node \"n1\"");
      if (rng() % 8 == 0) fields.push_back(":error :timeout");
      std::shuffle(fields.begin(), fields.end(), rng);
      std::string line = "{";
      for (size_t i = 0; i < fields.size(); ++i) line += (i == 0 ? "" : pick(seps)) + fields[i];
      line += "}";
      switch (rng() % 12) {
        case 0:  // a byte changed
          line[rng() % line.size()] = "{}[]():;\"#\\ ,0aN-+/."[rng() % 21];
          break;
        case 1:  // a comment
          line.insert(line.size() - 1, " ; note\n");
          break;
        case 2:  // a number too long for the usual path
          line.insert(line.size() - 1, " :big 123456789012345678901");
          break;
        case 3:  // a byte dropped
          line.erase(rng() % line.size(), 1);
          break;
        default:
          break;
      }
      ElleOp op;
      if (ReadUsualEdnOp(line + "\n", &op) > 0) ++*usual_lines;
      doc += line + "\n";
    }
  }
  return doc;
}

TEST(EdnUsualOpTest, RandomMapsReadTheSameAsWithTheGeneralParser) {
  std::mt19937_64 rng(20261128);
  int read = 0;
  int usual_lines = 0;
  constexpr int kDocuments = 250;
  for (int i = 0; i < kDocuments; ++i) {
    const std::string doc = RandomDocument(rng, &usual_lines);
    if (ExpectSameEitherWay(doc, fmt::format("random{}.edn", i))) ++read;
    if (::testing::Test::HasFailure()) break;
  }
  // Both kinds of document occur: histories read, and refusals compared word for word.
  EXPECT_GT(read, kDocuments / 10);
  EXPECT_LT(read, kDocuments);
  EXPECT_GT(usual_lines, kDocuments * 3);
}

}  // namespace
}  // namespace isowatch::formats::internal
