// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/text.h"

#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/history/history_builder.h"

#include "tests/testing/canonical_history.h"
#include "tests/unit/formats/format_samples.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::HistoryBuilder;
using history::Op;
using history::OpKind;
using history::TxnStatus;
using history::Value;
using isowatch::TxnId;
using ::testing::HasSubstr;

constexpr std::string_view kPlume =
    "w(1,10,0,100)\nw(2,20,0,100)\nr(1,0,1,200)\nr(2,20,1,200)\nw(1,11,1,200)\nw(2,21,0,-1)\n";
constexpr std::string_view kIsoVista =
    "w(1,0,0,0)\nw(2,0,0,0)\nw(1,1,1,1)\nr(2,0,1,1)\nr(1,1,2,2)\n";

absl::StatusOr<History> Read(std::string_view text, ReadOptions options = {}) {
  return ReadTextString(text, options, "h.txt");
}

std::string ReadError(std::string_view text, ReadOptions options = {}) {
  return samples::ErrorOf(Read(text, options));
}

std::string Write(const History& h) {
  std::ostringstream out;
  absl::Status s = WriteText(h, out);
  EXPECT_TRUE(s.ok()) << s;
  return out.str();
}

std::string Canonical(const History& h) { return isowatch::testing::CanonicalHistory(h); }

uint64_t NoteCount(const History& h, std::string_view kind) {
  for (const auto& n : h.info().notes) {
    if (n.kind == kind) return n.count;
  }
  return 0;
}

// The transaction that writes `value` to `key`, or an invalid id.
TxnId WriterOf(const History& h, int64_t key, int64_t value) {
  for (TxnId id : h.HeldTxns()) {
    for (const Op& op : h.ops(id)) {
      if (op.kind() == OpKind::kWrite && h.key(op.key()).payload == key &&
          op.value() == Value::Int(value)) {
        return id;
      }
    }
  }
  return TxnId();
}

TEST(TextTest, PlumeSample) {
  absl::StatusOr<History> h =
      ReadTextFile(samples::SamplePath("text", "polysi_plume.txt"), ReadOptions{});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->info().format, "text");
  EXPECT_EQ(h->info().dialect, "plume");
  ASSERT_EQ(h->size(), 3u);
  const TxnId t100 = h->FindTxn("100"), t200 = h->FindTxn("200"), pool = h->FindTxn("abort#0");
  ASSERT_TRUE(t100.valid() && t200.valid() && pool.valid());
  EXPECT_EQ(h->txn(t100).status, TxnStatus::kCommitted);
  EXPECT_EQ(h->session_name(h->txn(t100).session), "0");
  EXPECT_EQ(h->ops(t100).size(), 2u);
  EXPECT_EQ(h->session_name(h->txn(t200).session), "1");
  ASSERT_EQ(h->ops(t200).size(), 3u);
  EXPECT_EQ(h->ops(t200)[0].kind(), OpKind::kRead);
  EXPECT_EQ(h->ops(t200)[1].kind(), OpKind::kRead);
  EXPECT_EQ(h->ops(t200)[2].kind(), OpKind::kWrite);
  // The aborted write (2,21) is in its session's pool.
  EXPECT_EQ(h->txn(pool).status, TxnStatus::kAborted);
  EXPECT_EQ(WriterOf(*h, 2, 21), pool);
  // r(1,0): no writer, the initial value; r(2,20): txn 100.
  const Op r1 = h->ops(t200)[0], r2 = h->ops(t200)[1];
  EXPECT_EQ(r1.value(), h->InitialValue(r1.key()));
  EXPECT_FALSE(WriterOf(*h, 1, 0).valid());
  EXPECT_EQ(WriterOf(*h, 2, r2.value().as_int()), t100);
  EXPECT_EQ(h->txn(t100).source_offset, 1u);

  ReadOptions polysi;
  polysi.dialect = "polysi";
  EXPECT_THAT(ReadError(kPlume, polysi), HasSubstr("h.txt:6: transaction -1"));
  polysi.dialect = "mtc";
  EXPECT_THAT(ReadError(kPlume, polysi), HasSubstr("h.txt:6:"));
  ReadOptions plume;
  plume.dialect = "plume";
  absl::StatusOr<History> p = Read(kPlume, plume);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Canonical(*p), Canonical(*h));
}

TEST(TextTest, IsoVistaInitialTransaction) {
  absl::StatusOr<History> h =
      ReadTextFile(samples::SamplePath("text", "isovista.txt"), ReadOptions{});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->info().dialect, "isovista");
  ASSERT_EQ(h->size(), 2u);  // txn 0 is the initial state, not a transaction
  EXPECT_FALSE(h->FindTxn("0").valid());
  EXPECT_EQ(h->initial().default_value, Value::Int(0));
  EXPECT_EQ(h->session_name(h->txn(h->FindTxn("1")).session), "1");
  EXPECT_EQ(h->session_name(h->txn(h->FindTxn("2")).session), "2");
  EXPECT_EQ(WriterOf(*h, 1, 1), h->FindTxn("1"));
}

TEST(TextTest, TransactionZeroOfAnotherShapeIsOrdinary) {
  absl::StatusOr<History> h = Read("w(1,5,0,7)\nr(1,0,0,0)\n");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->FindTxn("0").valid());
  EXPECT_EQ(NoteCount(*h, "transaction 0 read as an ordinary transaction"), 1u);
  EXPECT_EQ(h->info().dialect, "polysi");
}

TEST(TextTest, InitTxnOptionNamesTheInitialState) {
  ReadOptions options;
  options.init_txn = "9";
  absl::StatusOr<History> h = Read("w(1,100,0,9)\nw(2,0,0,9)\nr(1,100,1,1)\nw(2,3,1,1)\n", options);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 1u);
  EXPECT_EQ(h->InitialValue(h->FindIntKey(1)), Value::Int(100));
  EXPECT_EQ(h->InitialValue(h->FindIntKey(2)), Value::Int(0));
  options.init_txn = "8";
  EXPECT_THAT(ReadError("w(1,1,0,1)\n", options), HasSubstr("no transaction 8"));
  options.init_txn = "1";
  EXPECT_THAT(ReadError("r(1,1,0,1)\n", options),
              HasSubstr("h.txt:1: the initial transaction reads"));
}

TEST(TextTest, NonContiguousLinesMakeOneTransaction) {
  absl::StatusOr<History> split = Read("w(1,1,0,1)\nw(5,5,1,2)\nw(2,2,0,1)\nr(1,1,1,2)\n");
  absl::StatusOr<History> grouped = Read("w(1,1,0,1)\nw(2,2,0,1)\nw(5,5,1,2)\nr(1,1,1,2)\n");
  ASSERT_TRUE(split.ok() && grouped.ok());
  EXPECT_EQ(Canonical(*split), Canonical(*grouped));
  EXPECT_EQ(split->ops(split->FindTxn("1")).size(), 2u);
}

TEST(TextTest, SessionOrderIsFirstAppearanceNotIdOrder) {
  absl::StatusOr<History> h = Read("w(1,1,0,9)\nw(1,2,0,3)\nr(1,1,0,9)\n");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->txn(h->FindTxn("9")).seq, 0u);
  EXPECT_EQ(h->txn(h->FindTxn("3")).seq, 1u);
}

TEST(TextTest, TransactionUnderTwoSessions) {
  constexpr std::string_view kText = "w(1,1,0,1)\nw(2,2,1,1)\n";
  EXPECT_THAT(ReadError(kText),
              HasSubstr("h.txt:2: transaction 1 under session 1, but line 1 put it in session 0"));
  ReadOptions polysi;
  polysi.dialect = "polysi";  // the reference readers: first session wins
  absl::StatusOr<History> h = Read(kText, polysi);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->session_name(h->txn(h->FindTxn("1")).session), "0");
  EXPECT_EQ(h->ops(h->FindTxn("1")).size(), 2u);
  EXPECT_EQ(NoteCount(*h, "session of a later line ignored (first session wins)"), 1u);
  ReadOptions lenient;
  lenient.lenient = true;
  absl::StatusOr<History> l = Read(kText, lenient);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->ops(l->FindTxn("1")).size(), 1u);
}

TEST(TextTest, WritesOfZero) {
  constexpr std::string_view kText = "w(1,0,0,5)\nw(1,4,0,5)\n";
  EXPECT_THAT(ReadError(kText), HasSubstr("h.txt:1: write of 0 (the initial value)"));
  ReadOptions plume;
  plume.dialect = "plume";
  absl::StatusOr<History> h = Read(kText, plume);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->ops(h->FindTxn("5")).size(), 1u);
  EXPECT_EQ(NoteCount(*h, "writes of the initial value dropped (plume)"), 1u);
  ReadOptions other_initial;
  other_initial.initial_value = -1;  // 0 is then an ordinary value
  h = Read(kText, other_initial);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->ops(h->FindTxn("5")).size(), 2u);
  EXPECT_EQ(h->initial().default_value, Value::Int(-1));
}

TEST(TextTest, AbortedLines) {
  absl::StatusOr<History> h = Read("w(1,1,3,-1)\nr(1,1,3,-1)\nw(2,1,3,-1)\nw(1,2,4,-1)\n");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->size(), 2u);
  EXPECT_EQ(h->ops(h->FindTxn("abort#3")).size(), 2u);
  EXPECT_EQ(h->txn(h->FindTxn("abort#4")).status, TxnStatus::kAborted);
  EXPECT_EQ(NoteCount(*h, "reads of transaction -1 dropped"), 1u);
  EXPECT_THAT(ReadError("w(1,1,0,1)\nw(1,2,0,-2)\n"), HasSubstr("h.txt:2: transaction id -2"));
}

TEST(TextTest, Whitespace) {
  absl::StatusOr<History> plain = Read(kPlume);
  absl::StatusOr<History> spaced = Read(
      "\xEF\xBB\xBFw(1, 10, 0, 100)\r\n\r\n  w(2,20,0,100)  \r\n\nr(1,0,1,200)\nr(2,20,1,200)\n"
      "w(1,11,1,200)\n\t w( 2 , 21 , 0 , -1 )");
  ASSERT_TRUE(plain.ok() && spaced.ok()) << spaced.status();
  EXPECT_EQ(Canonical(*plain), Canonical(*spaced));
}

TEST(TextTest, MalformedLinesNameLineAndColumn) {
  EXPECT_THAT(ReadError("w(1,1,0,1)\nR(1,1,0,1)\n"), HasSubstr("h.txt:2:1: uppercase"));
  EXPECT_THAT(ReadError("w(1,99999999999999999999,0,1)\n"),
              HasSubstr("h.txt:1:5: value overflows"));
  EXPECT_THAT(ReadError("w(1,9223372036854775808,0,1)\n"), HasSubstr("overflows"));
  EXPECT_TRUE(Read("w(1,9223372036854775807,0,1)\n").ok());
  EXPECT_THAT(ReadError("w(-1,1,0,1)\n"), HasSubstr("h.txt:1:3: negative key"));
  EXPECT_THAT(ReadError("w(1,1,0)\n"), HasSubstr("h.txt:1:8: expected ','"));
  EXPECT_THAT(ReadError("w(1,1,0,1) x\n"), HasSubstr("h.txt:1:12: unexpected text"));
  EXPECT_THAT(ReadError("x(1,1,0,1)\n"), HasSubstr("expected r( or w("));
  EXPECT_THAT(ReadError("\xEF\xBB\xBFw[1,1,0,1)\n"), HasSubstr("h.txt:1:5:"));
  ReadOptions lenient;
  lenient.lenient = true;
  absl::StatusOr<History> h = Read("w(1,1,0,1)\nbad\n", lenient);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(NoteCount(*h, "malformed lines dropped"), 1u);
  ReadOptions bad;
  bad.dialect = "cobra";
  EXPECT_THAT(ReadError("w(1,1,0,1)\n", bad), HasSubstr("unknown text dialect"));
}

TEST(TextTest, DuplicateWritesAreNoted) {
  absl::StatusOr<History> h = Read("w(1,1,0,1)\nw(1,1,0,2)\n");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(NoteCount(*h, "duplicate writes of one (key, value)"), 1u);
}

TEST(TextTest, RoundTrip) {
  for (std::string_view text : {kPlume, kIsoVista}) {
    absl::StatusOr<History> h = Read(text);
    ASSERT_TRUE(h.ok());
    const std::string first = Write(*h);
    absl::StatusOr<History> again = Read(first);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << first;
    EXPECT_EQ(Canonical(*again), Canonical(*h));
    EXPECT_EQ(Write(*again), first);
  }
  // Grouped by transaction, in order of first appearance.
  absl::StatusOr<History> h = Read("w(1,1,0,1)\nw(5,5,1,2)\nw(2,2,0,1)\n");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(Write(*h), "w(1,1,0,1)\nw(2,2,0,1)\nw(5,5,1,2)\n");
}

TEST(TextTest, WriterWritesNonZeroInitialStateAsTransactionZero) {
  ReadOptions options;
  options.init_txn = "9";
  absl::StatusOr<History> h = Read("w(2,7,0,9)\nw(1,100,0,9)\nr(1,100,1,1)\n", options);
  ASSERT_TRUE(h.ok());
  const std::string text = Write(*h);
  EXPECT_EQ(text, "w(1,100,0,0)\nw(2,7,0,0)\nr(1,100,1,1)\n");
  // Writes of other values than 0 are not the IsoVista shape: init_txn says it.
  EXPECT_TRUE(Read(text)->FindTxn("0").valid());
  options.init_txn = "0";
  absl::StatusOr<History> again = Read(text, options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->initial().registers.size(), 2u);
  EXPECT_EQ(Canonical(*again), Canonical(*h));
}

// Builds a one-transaction history with `fill` adding the operations.
template <typename F>
History Built(F fill, TxnStatus status = TxnStatus::kCommitted, std::string_view id = "1",
              Value initial = Value::Int(0)) {
  HistoryBuilder b;
  b.SetDefaultInitialValue(initial);
  history::TxnHeader header;
  header.id = id;
  header.id_numeric = true;
  header.session = "0";
  header.status = status;
  EXPECT_TRUE(b.BeginTxn(header).ok());
  fill(b);
  b.EndTxn();
  return *std::move(b).Finish();
}

std::string WriteError(const History& h) {
  std::ostringstream out;
  absl::Status s = WriteText(h, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

TEST(TextTest, WriterRefusesWhatTheFormatCannotSay) {
  EXPECT_THAT(WriteError(Built([](HistoryBuilder& b) { b.Write(b.BytesKey("k"), Value::Int(1)); })),
              HasSubstr("bytes key"));
  EXPECT_THAT(WriteError(Built([](HistoryBuilder& b) { b.Write(b.IntKey(1), b.BytesValue("v")); })),
              HasSubstr("value"));
  EXPECT_THAT(WriteError(Built([](HistoryBuilder& b) { b.Write(b.IntKey(-1), Value::Int(1)); })),
              HasSubstr("negative key"));
  EXPECT_THAT(WriteError(Built([](HistoryBuilder& b) { b.Write(b.IntKey(1), Value::Int(-4)); })),
              HasSubstr("negative value"));
  EXPECT_THAT(WriteError(Built([](HistoryBuilder& b) { b.Append(b.IntKey(1), Value::Int(4)); })),
              HasSubstr("list operation"));
  EXPECT_THAT(WriteError(Built([](HistoryBuilder& b) { b.Write(b.IntKey(1), Value::Int(4)); },
                               TxnStatus::kUnknown)),
              HasSubstr("unknown outcome"));
  EXPECT_THAT(WriteError(Built([](HistoryBuilder& b) { b.UnknownRead(b.IntKey(1)); })),
              HasSubstr("unknown value"));
  EXPECT_THAT(WriteError(Built([](HistoryBuilder& b) { b.Read(b.IntKey(1), Value::Absent()); })),
              HasSubstr("no value"));
  EXPECT_THAT(WriteError(Built([](HistoryBuilder& b) { b.Write(b.IntKey(1), Value::Int(0)); })),
              HasSubstr("write of 0"));
  EXPECT_THAT(WriteError(Built([](HistoryBuilder&) {})), HasSubstr("empty transaction"));
  // An aborted transaction is its writes; a null initial value is written as 0.
  std::ostringstream aborted;
  ASSERT_TRUE(WriteText(Built(
                            [](HistoryBuilder& b) {
                              b.Read(b.IntKey(1), Value::Int(4));
                              b.Write(b.IntKey(2), Value::Int(5));
                            },
                            TxnStatus::kAborted),
                        aborted)
                  .ok());
  EXPECT_EQ(aborted.str(), "w(2,5,0,-1)\n");
  std::ostringstream null_initial;
  ASSERT_TRUE(WriteText(Built([](HistoryBuilder& b) { b.Read(b.IntKey(1), Value::Absent()); },
                              TxnStatus::kCommitted, "1", Value::Absent()),
                        null_initial)
                  .ok());
  EXPECT_EQ(null_initial.str(), "r(1,0,0,1)\n");
  // Non-numeric ids are renumbered.
  std::ostringstream out;
  ASSERT_TRUE(WriteText(Built([](HistoryBuilder& b) { b.Write(b.IntKey(1), Value::Int(3)); },
                              TxnStatus::kCommitted, "t-a"),
                        out)
                  .ok());
  EXPECT_EQ(out.str(), "w(1,3,0,1)\n");
}

TEST(TextTest, Sniff) {
  EXPECT_TRUE(SniffText(kPlume).ok());
  EXPECT_TRUE(SniffText(kIsoVista).ok());
  EXPECT_TRUE(SniffText("\xEF\xBB\xBF\r\n  r(1, 2, 3, 4)\r\n").ok());
  for (const std::string& foreign : samples::ForeignTextSamples()) {
    EXPECT_FALSE(SniffText(foreign).ok()) << foreign;
  }
  for (const char* binary : {"cobra/sample/T1.log", "dbcop/sample.bincode"}) {
    const std::string bytes = samples::FileContents(samples::SamplePath("", binary));
    ASSERT_FALSE(bytes.empty()) << binary;
    EXPECT_FALSE(SniffText(bytes).ok()) << binary;
  }
  EXPECT_THAT(SniffText("").message(), HasSubstr("not r/w text"));
  EXPECT_THAT(SniffText("W(1,1,1,1)\n").message(), HasSubstr("uppercase"));
}

}  // namespace
}  // namespace isowatch::formats
