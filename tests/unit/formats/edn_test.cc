// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/edn.h"

#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/internal/edn_internal.h"
#include "isowatch/history/history_builder.h"

#include "tests/testing/canonical_history.h"
#include "tests/testing/temp_dir.h"
#include "tests/unit/formats/format_samples.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Timestamp;
using history::Transaction;
using history::TxnStatus;
using history::Value;
using ::testing::HasSubstr;

std::string SamplePath(std::string_view name) { return samples::SamplePath("edn", name); }

std::string Canonical(const History& h) { return isowatch::testing::CanonicalHistory(h); }

History ReadOk(std::string_view edn, ReadOptions options = {}) {
  return samples::Expect(ReadEdnString(edn, options, "h.edn"));
}

std::string ReadError(std::string_view edn, ReadOptions options = {}) {
  return samples::ErrorOf(ReadEdnString(edn, options, "h.edn"));
}

History ReadSample(std::string_view name, ReadOptions options = {}) {
  return samples::Expect(ReadEdnFile(SamplePath(name), options));
}

uint64_t NoteCount(const History& h, std::string_view prefix) {
  uint64_t n = 0;
  for (const auto& note : h.info().notes) {
    if (note.kind.starts_with(prefix)) n += note.count;
  }
  return n;
}

const Transaction& Txn(const History& h, std::string_view id) {
  TxnId t = h.FindTxn(id);
  EXPECT_TRUE(t.valid()) << id;
  return h.txn(t);
}

std::span<const Op> Ops(const History& h, std::string_view id) { return h.ops(h.FindTxn(id)); }

std::string Write(const History& h) {
  std::ostringstream out;
  absl::Status s = WriteEdn(h, out);
  EXPECT_TRUE(s.ok()) << s;
  return out.str();
}

std::string WriteError(const History& h) {
  std::ostringstream out;
  absl::Status s = WriteEdn(h, out);
  EXPECT_FALSE(s.ok());
  return std::string(s.message());
}

// The canonical text with transaction ids replaced by their positions in the history (the
// writer renumbers ids to its :index).
std::string CanonicalByPosition(const History& h) {
  std::map<std::string, std::string> rename;
  for (size_t i = 0; i < h.size(); ++i) {
    rename[std::string(h.txn_name(TxnId(static_cast<uint32_t>(i))))] = fmt::format("#{}", i);
  }
  std::istringstream in(Canonical(h));
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("txn ")) {
      const size_t end = line.find(' ', 4);
      line = "txn " + rename[line.substr(4, end - 4)] + line.substr(end);
      const size_t prev = line.find(" prev=");
      const size_t prev_end = line.find(' ', prev + 6);
      const std::string name = line.substr(prev + 6, prev_end - prev - 6);
      if (name != "-") line = line.substr(0, prev + 6) + rename[name] + line.substr(prev_end);
    }
    out += line + "\n";
  }
  return out;
}

TEST(EdnTest, ListAppendSample) {
  History h = ReadSample("list_append.edn");
  EXPECT_EQ(h.info().format, "edn");
  EXPECT_EQ(h.info().dialect, "list-append");
  EXPECT_EQ(h.info().time_unit, "ns");
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(NoteCount(h, "non-client operations"), 2u);
  std::vector<std::string> sessions;
  for (size_t s = 0; s < h.session_count(); ++s) {
    sessions.emplace_back(h.session_name(SessionId(static_cast<uint32_t>(s))));
    EXPECT_TRUE(h.session_numeric(SessionId(static_cast<uint32_t>(s))));
  }
  EXPECT_THAT(sessions, ::testing::UnorderedElementsAre("0", "1", "3"));
  int committed = 0, aborted = 0, unknown = 0;
  for (const Transaction& t : h.txns()) {
    committed += t.status == TxnStatus::kCommitted;
    aborted += t.status == TxnStatus::kAborted;
    unknown += t.status == TxnStatus::kUnknown;
  }
  EXPECT_EQ(committed, 2);
  EXPECT_EQ(aborted, 1);
  EXPECT_EQ(unknown, 1);
  // Ids are the completions' :index.
  EXPECT_EQ(Txn(h, "4").status, TxnStatus::kUnknown);
  EXPECT_TRUE(Txn(h, "4").ext_id_numeric);
  // The :info transaction's read of key 1 is unknown, not empty.
  std::span<const Op> info = Ops(h, "4");
  ASSERT_EQ(info.size(), 2u);
  EXPECT_TRUE(info[0].unknown());
  EXPECT_EQ(h.KeyToString(info[0].key()), "1");
  // The committed [:r 2 []] is an observed empty list.
  std::span<const Op> first = Ops(h, "2");
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[1].kind(), OpKind::kListRead);
  EXPECT_FALSE(first[1].unknown());
  EXPECT_TRUE(h.list_elements(first[1]).empty());
  // The last transaction observes 5, which only the :info transaction appended.
  std::span<const Op> last = Ops(h, "9");
  ASSERT_EQ(last.size(), 2u);
  EXPECT_THAT(h.list_elements(last[1]), ::testing::ElementsAre(Value::Int(5)));
  // Real time: [invoke :time, completion :time].
  EXPECT_TRUE(Txn(h, "2").has_real_time);
  EXPECT_EQ(Txn(h, "2").invoke_time, 1000);
  EXPECT_EQ(Txn(h, "2").complete_time, 2100);
  EXPECT_EQ(Txn(h, "7").invoke_time, 3100);
  // Sessions: the crashed process 1 and its replacement 3 are different sessions; process 0's
  // transactions are in order.
  EXPECT_EQ(Txn(h, "9").seq, 1u);
  EXPECT_EQ(h.txn_name(Txn(h, "9").session_prev), "2");
  EXPECT_NE(Txn(h, "4").session, Txn(h, "7").session);
}

TEST(EdnTest, CompletionOnlyFileGivesTheSameTransactionsWithoutIntervals) {
  History full = ReadSample("list_append.edn");
  History completions = ReadSample("list_append_completions.edn");
  ASSERT_EQ(completions.size(), full.size());
  EXPECT_FALSE(completions.has_real_time());
  for (size_t i = 0; i < full.size(); ++i) {
    const TxnId id(static_cast<uint32_t>(i));
    EXPECT_EQ(completions.txn_name(id), full.txn_name(id));
    EXPECT_EQ(completions.txn(id).status, full.txn(id).status);
    EXPECT_EQ(completions.ops(id).size(), full.ops(id).size());
  }
  // Apart from the intervals, the same history.
  std::string expected = Canonical(full);
  std::string got = Canonical(completions);
  EXPECT_THAT(expected, HasSubstr("real time"));
  EXPECT_THAT(got, ::testing::Not(HasSubstr("real time")));
}

TEST(EdnTest, WrappedFileGivesTheSameHistory) {
  History plain = ReadSample("list_append.edn");
  History wrapped = ReadSample("list_append_wrapped.edn");
  EXPECT_EQ(Canonical(wrapped), Canonical(plain));
  // A list instead of a vector, too.
  History listed = ReadOk("(" + samples::FileContents(SamplePath("list_append.edn")) + ")");
  EXPECT_EQ(Canonical(listed), Canonical(plain));
  EXPECT_THAT(ReadError("[{:type :ok, :process 0, :value []}] {:type :ok}"),
              HasSubstr("h.edn:1:38: expected the end of input after the top-level vector"));
  EXPECT_THAT(ReadError("[{:type :ok, :process 0, :value []}"),
              HasSubstr("unexpected end of input in the top-level vector that starts at 1:1"));
}

TEST(EdnTest, TsSample) {
  History h = ReadSample("ts.edn");
  ASSERT_EQ(h.size(), 2u);
  const Transaction& a = Txn(h, "11");
  EXPECT_TRUE(a.has_start && a.has_commit);
  EXPECT_EQ(a.start, (Timestamp{7001, 0}));
  EXPECT_EQ(a.commit, (Timestamp{7005, 0}));
  const Transaction& b = Txn(h, "13");
  EXPECT_EQ(b.start, (Timestamp{7006, 0}));
  EXPECT_EQ(b.commit, (Timestamp{7006, 0}));
  EXPECT_EQ(h.info().dialect, "rw-register");
  EXPECT_EQ(NoteCount(h, ":ok completions without :ts"), 0u);
  // An :ok without :ts in a file with some is noted (black-box transaction).
  History mixed = ReadOk(samples::FileContents(SamplePath("ts.edn")) +
                         "{:type :invoke, :f :txn, :value [[:r 4 nil]], :process 7, :index 6}\n"
                         "{:type :ok, :f :txn, :value [[:r 4 9]], :process 7, :index 14}\n");
  EXPECT_EQ(NoteCount(mixed, ":ok completions without :ts"), 1u);
  EXPECT_FALSE(Txn(mixed, "14").has_start);
  // :ts elsewhere than on :ok is ignored, with a note.
  History failed = ReadOk(
      "{:type :fail, :f :txn, :value [[:w 1 1]], :process 0, :index 0, :ts {:rts 5 :cts 6}}");
  EXPECT_FALSE(Txn(failed, "0").has_start);
  EXPECT_EQ(NoteCount(failed, ":ts on a completion other than :ok"), 1u);
  EXPECT_THAT(
      ReadError("{:type :ok, :f :txn, :value [], :process 0, :index 0, :ts {:rts 9 :cts 6}}"),
      HasSubstr("h.edn:1: transaction 0"));
}

TEST(EdnTest, CommentsDiscardsAndTaggedLiterals) {
  const std::string edn =
      "; a comment line\n"
      "#_ {:type :ok, :process 9, :value [[:w 1 1]], :index 99}\n"
      "{:type :invoke, :f :txn, :process 0, :index 0, :value [[:w 1 1]] #_ :ignored}\n"
      "{:type :ok, :f :txn, :process 0, :index 1, :value [[:w 1 1]], ; trailing comment\n"
      " :error [#inst \"2024-01-01T00:00:00Z\" #uuid \"f81d4fae-7dec-11d0-a765-00a0c91e6bf6\"\n"
      "         #object[java.lang.Exception 0x1f \"boom\"] #{1 2} \\a \\newline 1/2 2.5M 7N\n"
      "         :can't-join-in-this-state ##Inf \"esc\\\"aped\\u00e9\" nil true false sym]}\n"
      "#jepsen.history.Op{:type :invoke, :f :txn, :process 1, :index 2, :value [[:r 1 nil]]}\n"
      "#jepsen.history.Op{:type :ok, :f :txn, :process 1, :index 3, :value [[:r 1 1]]}\n";
  History h = ReadOk(edn);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_FALSE(h.FindTxn("99").valid());
  EXPECT_EQ(Ops(h, "3")[0].value(), Value::Int(1));
}

TEST(EdnTest, KeysOfEveryTypeStayApart) {
  History h = ReadOk(
      "{:type :ok, :f :txn, :process 0, :index 0, :value [[:w :x 1] [:w \"x\" 2] [:w 3 3]]}\n");
  std::span<const Op> ops = Ops(h, "0");
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_NE(ops[0].key(), ops[1].key());
  EXPECT_EQ(h.KeyToString(ops[0].key()), "\":x\"");
  EXPECT_EQ(h.KeyToString(ops[1].key()), "\"x\"");
  EXPECT_EQ(h.KeyToString(ops[2].key()), "3");
  EXPECT_EQ(NoteCount(h, "keys of more than one type"), 2u);
}

TEST(EdnTest, BigIntegers) {
  History h = ReadOk(
      "{:type :ok, :f :txn, :process 0N, :index 0N, :value [[:w 9223372036854775807N "
      "-9223372036854775808N]]}");
  std::span<const Op> ops = Ops(h, "0");
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(h.KeyToString(ops[0].key()), "9223372036854775807");
  EXPECT_EQ(ops[0].value(), Value::Int(INT64_MIN));
  EXPECT_THAT(ReadError("{:type :ok, :f :txn, :process 0, :index 0, :value [[:w 1 "
                        "9223372036854775808N]]}"),
              HasSubstr("h.edn:1:58: a value 9223372036854775808N does not fit in 64 bits"));
  // A big integer the reader does not need is fine (a nemesis value).
  ReadOk("{:type :info, :process :nemesis, :value 99999999999999999999999}");
}

TEST(EdnTest, DuplicateListElementsAreKept) {
  History h = ReadOk("{:type :ok, :f :txn, :process 0, :index 0, :value [[:r 1 [4 5 4]]]}");
  EXPECT_THAT(h.list_elements(Ops(h, "0")[0]),
              ::testing::ElementsAre(Value::Int(4), Value::Int(5), Value::Int(4)));
  EXPECT_EQ(NoteCount(h, "list reads holding an element twice"), 1u);
}

TEST(EdnTest, NilReadsAreUnknownOutsideOk) {
  History h = ReadOk(
      "{:type :invoke, :f :txn, :process 0, :index 0, :time 1, :value [[:r 1 nil] [:w 2 7]]}\n"
      "{:type :info, :f :txn, :process 0, :index 1, :time 5, :value [[:r 1 nil] [:w 2 7]]}\n"
      "{:type :invoke, :f :txn, :process 1, :index 2, :time 6, :value [[:r 1 nil]]}\n"
      "{:type :ok, :f :txn, :process 1, :index 3, :time 7, :value [[:r 1 nil]]}\n"
      "{:type :invoke, :f :txn, :process 2, :index 4, :time 8, :value [[:r 3 nil] [:w 4 1]]}\n");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_TRUE(Ops(h, "1")[0].unknown());
  EXPECT_FALSE(Ops(h, "3")[0].unknown());
  EXPECT_TRUE(Ops(h, "3")[0].value().absent());
  // The dangling invocation: unknown, never completed, its own :index, writes from it.
  const Transaction& dangling = Txn(h, "4");
  EXPECT_EQ(dangling.status, TxnStatus::kUnknown);
  EXPECT_EQ(dangling.invoke_time, 8);
  EXPECT_EQ(dangling.complete_time, Transaction::kNeverCompleted);
  ASSERT_EQ(Ops(h, "4").size(), 2u);
  EXPECT_TRUE(Ops(h, "4")[0].unknown());
  EXPECT_EQ(Ops(h, "4")[1].value(), Value::Int(1));
  EXPECT_EQ(h.info().dialect, "rw-register");
}

TEST(EdnTest, PairingErrorsNameTheOperation) {
  const std::string double_invoke =
      "{:type :invoke, :f :txn, :process 0, :index 0, :value []}\n"
      "{:type :invoke, :f :txn, :process 0, :index 1, :value []}\n";
  EXPECT_THAT(ReadError(double_invoke),
              HasSubstr("h.edn:2: :index 1: process 0 invokes again while its invocation at "
                        "h.edn:1 (:index 0) has not completed"));
  const std::string orphan =
      "{:type :invoke, :f :txn, :process 0, :index 0, :value []}\n"
      "{:type :ok, :f :txn, :process 1, :index 1, :value []}\n";
  EXPECT_THAT(ReadError(orphan),
              HasSubstr("h.edn:2: :index 1: a completion of process 1 without an invocation"));
  const std::string orphan_first =
      "{:type :ok, :f :txn, :process 1, :index 0, :value []}\n"
      "{:type :invoke, :f :txn, :process 0, :index 1, :value []}\n";
  EXPECT_THAT(ReadError(orphan_first),
              HasSubstr("h.edn:1: :index 0: a completion without an invocation"));
  // Lenient: noted and skipped.
  ReadOptions lenient;
  lenient.lenient = true;
  History h =
      ReadOk(double_invoke + "{:type :ok, :f :txn, :process 0, :index 2, :value []}\n", lenient);
  EXPECT_EQ(h.size(), 1u);
  EXPECT_TRUE(h.FindTxn("2").valid());
  EXPECT_EQ(NoteCount(h, "invocations never completed before a double invoke"), 1u);
  History o = ReadOk(orphan, lenient);
  EXPECT_EQ(NoteCount(o, "completions without an invocation dropped"), 1u);
}

TEST(EdnTest, SkipsAndCountsWhatIsNotATransaction) {
  History h = ReadOk(
      "{:type :info, :process :nemesis, :f :start, :value [:isolated {\"n1\" #{\"n2\"}}]}\n"
      "{:type :invoke, :process 0, :f :read, :value nil}\n"
      "{:type :ok, :process 0, :f :read, :value 3}\n"
      "{:type :ok, :process 1, :value [[:w 1 2]], :index 4}\n");
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(NoteCount(h, "non-client operations"), 1u);
  EXPECT_EQ(NoteCount(h, "client operations whose :f is not :txn"), 2u);
  EXPECT_THAT(ReadError("{:type :invoke, :process 0, :f :cas, :value [1 2]}\n"
                        "{:type :ok, :process 0, :f :cas, :value [1 2]}\n"),
              HasSubstr("non-transactional workload"));
}

TEST(EdnTest, WithoutProcessOrIndex) {
  History h = ReadOk(
      "{:type :invoke, :value [[:append :k 1]]}\n"
      "{:type :ok, :value [[:append :k 1]]}\n"
      "{:type :invoke, :value [[:r :k nil]]}\n"
      "{:type :ok, :value [[:r :k [1]]]}\n");
  ASSERT_EQ(h.size(), 2u);
  // Ids are the completions' positions; each transaction is its own session.
  EXPECT_TRUE(h.FindTxn("1").valid());
  EXPECT_TRUE(h.FindTxn("3").valid());
  EXPECT_EQ(h.session_count(), 2u);
  EXPECT_EQ(NoteCount(h, "operations without :index"), 2u);
  EXPECT_EQ(NoteCount(h, "transactions without :process"), 2u);
  EXPECT_THAT(ReadError("{:type :invoke, :value []}\n{:type :ok, :process 0, :value []}\n"),
              HasSubstr("h.edn:2: no :index: an operation with a :process"));
}

TEST(EdnTest, TimeGoingBackIsNoted) {
  History h = ReadOk(
      "{:type :invoke, :f :txn, :process 0, :index 0, :time 10, :value [[:w 1 1]]}\n"
      "{:type :invoke, :f :txn, :process 1, :index 1, :time 5, :value [[:w 1 2]]}\n"
      "{:type :ok, :f :txn, :process 0, :index 2, :time 20, :value [[:w 1 1]]}\n"
      "{:type :ok, :f :txn, :process 1, :index 3, :time 21, :value [[:w 1 2]]}\n");
  EXPECT_EQ(NoteCount(h, "operations whose :time goes back"), 1u);
  EXPECT_EQ(h.txn_name(TxnId(0)), "2");
}

TEST(EdnTest, Dialects) {
  const std::string reads = "{:type :ok, :f :txn, :process 0, :index 0, :value [[:r 1 nil]]}\n";
  EXPECT_EQ(ReadOk(reads).info().dialect, "rw-register");
  EXPECT_EQ(ReadOk(reads).data_model(), history::DataModel::kKeyValue);
  ReadOptions list;
  list.dialect = "list-append";
  History as_list = ReadOk(reads, list);
  EXPECT_EQ(as_list.info().dialect, "list-append");
  EXPECT_EQ(as_list.data_model(), history::DataModel::kList);
  EXPECT_EQ(Ops(as_list, "0")[0].kind(), OpKind::kListRead);
  EXPECT_EQ(
      ReadOk("{:type :ok, :f :txn, :process 0, :index 0, :value [[:r 1 (1 2)]]}").info().dialect,
      "list-append");
  History mixed =
      ReadOk("{:type :ok, :f :txn, :process 0, :index 0, :value [[:append 1 1] [:w 2 2]]}");
  EXPECT_EQ(mixed.info().dialect, "mixed");
  EXPECT_EQ(mixed.data_model(), history::DataModel::kMixed);
  EXPECT_EQ(NoteCount(mixed, "a history of both :append and :w"), 1u);
  ReadOptions bad;
  bad.dialect = "cas-register";
  EXPECT_THAT(ReadError(reads, bad), HasSubstr("unknown EDN dialect"));
}

TEST(EdnTest, MalformedInputNamesLineAndColumn) {
  EXPECT_THAT(ReadError("{:type :ok, :f :txn, :process 0, :value [[:read 1 2]]}"),
              HasSubstr("h.edn:1:43: unknown micro-op :read"));
  EXPECT_THAT(ReadError("\n  {:type :ok :f :txn :process 0 :value [[:r 1 2]}"),
              HasSubstr("h.edn:2:49: expected ']' to close the vector that starts at 2:40"));
  EXPECT_THAT(ReadError("{:type :ok, :process}"), HasSubstr("h.edn:1:1: a map with an odd"));
  EXPECT_THAT(ReadError("{:type :done}"), HasSubstr("h.edn:1:8: :type must be"));
  EXPECT_THAT(ReadError("{:process 0}"), HasSubstr("h.edn:1:1: an operation map without :type"));
  EXPECT_THAT(ReadError("[:a]"), HasSubstr("expected an operation map, found a keyword"));
  EXPECT_THAT(ReadError("{:type :ok, :value \"abc}"),
              HasSubstr("unexpected end of input in the string"));
  EXPECT_THAT(ReadError("{:type :ok, :process 0, :f :txn, :value [[:w 1 2.5]]}"),
              HasSubstr("h.edn:1:48: a value must be an integer or a string, not a floating"));
  EXPECT_THAT(ReadError("{:value: [[:r, 5, 77, false]]}"),
              HasSubstr("malformed keyword ':value:'"));
  EXPECT_THAT(ReadError("{:type :ok :time 1x}"), HasSubstr("h.edn:1:18: malformed number '1x'"));
  EXPECT_THAT(ReadError(std::string(300, '[')), HasSubstr("nested deeper than"));
  ReadOptions lenient;
  lenient.lenient = true;
  History h = ReadOk(
      "{:type :ok, :f :txn, :process 0, :index 0, :value [[:read 1 2]]}\n"
      "{:type :ok, :f :txn, :process 1, :index 1, :value [[:r 1 2]]}\n",
      lenient);
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(NoteCount(h, "malformed operations dropped"), 1u);
}

TEST(EdnTest, ChunkBoundariesDoNotMatter) {
  const std::string edn = samples::FileContents(SamplePath("list_append.edn")) +
                          "{:type :info, :process :n, :value [\"a\\u00e9\\\"b\" \\newline ##NaN "
                          "#_ [1 2] #inst \"x\"]}\n";
  const std::string expected = Canonical(ReadOk(edn));
  for (size_t chunk : {1, 2, 3, 7, 64}) {
    absl::StatusOr<History> h = internal::ReadEdnStringChunked(edn, {}, "h.edn", chunk);
    ASSERT_TRUE(h.ok()) << chunk << ": " << h.status();
    EXPECT_EQ(Canonical(*h), expected) << chunk;
  }
}

TEST(EdnTest, ToleratesBomCrlfAndBlankLines) {
  History h = ReadOk(
      "\xEF\xBB\xBF\r\n\r\n{:type :ok, :f :txn, :process 0, :index 0, :value [[:w 1 1]]}  \r\n\n");
  EXPECT_EQ(h.size(), 1u);
}

TEST(EdnTest, InitialValueAndInitTxnOptions) {
  ReadOptions zero;
  zero.initial_value = 0;
  History h = ReadOk("{:type :ok, :f :txn, :process 0, :index 0, :value [[:r 1 0]]}", zero);
  EXPECT_EQ(h.initial().default_value, Value::Int(0));
  ReadOptions init;
  init.init_txn = "0";
  History i = ReadOk(
      "{:type :ok, :f :txn, :process 0, :index 0, :value [[:w 1 5]]}\n"
      "{:type :ok, :f :txn, :process 0, :index 1, :value [[:r 1 5]]}\n",
      init);
  EXPECT_EQ(i.size(), 1u);
  EXPECT_EQ(i.InitialValue(i.FindIntKey(1)), Value::Int(5));
  init.init_txn = "7";
  EXPECT_THAT(ReadError("{:type :ok, :f :txn, :process 0, :index 0, :value []}", init),
              HasSubstr("the initial transaction 7 is not in the history"));
}

// canonical -> EDN -> canonical is the identity for statuses, sessions, operations, timestamps
// and intervals; transaction ids become the written completions' :index.
void ExpectRoundTrip(const History& h) {
  const std::string edn = Write(h);
  absl::StatusOr<History> again = ReadEdnString(edn, {}, "written.edn");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << edn;
  EXPECT_EQ(CanonicalByPosition(*again), CanonicalByPosition(h)) << edn;
  // And the written text is stable.
  EXPECT_EQ(Write(*again), edn);
}

TEST(EdnTest, RoundTripsTheSamples) {
  for (const char* name :
       {"list_append.edn", "rw_register.edn", "ts.edn", "list_append_completions.edn"}) {
    SCOPED_TRACE(name);
    ExpectRoundTrip(ReadSample(name));
  }
}

TEST(EdnTest, WriterOutput) {
  History h = ReadSample("rw_register.edn");
  EXPECT_EQ(Write(h),
            "{:index 0, :type :invoke, :process 0, :f :txn, :time 10, :value [[:w :x 1] [:r :y "
            "nil]]}\n"
            "{:index 1, :type :invoke, :process 1, :f :txn, :time 15, :value [[:r :x nil]]}\n"
            "{:index 2, :type :ok, :process 0, :f :txn, :time 20, :value [[:w :x 1] [:r :y "
            "nil]]}\n"
            "{:index 3, :type :ok, :process 1, :f :txn, :time 30, :value [[:r :x 1]]}\n");
}

TEST(EdnTest, RoundTripsABuiltHistory) {
  history::HistoryBuilder b;
  auto begin = [&](std::string_view id, std::string_view session, TxnStatus status,
                   std::optional<history::TxnHeader::RealTime> rt) {
    history::TxnHeader t;
    t.id = id;
    t.session = session;
    t.status = status;
    t.real_time = rt;
    ASSERT_TRUE(b.BeginTxn(t).ok());
  };
  begin("a", "client-a", TxnStatus::kCommitted, history::TxnHeader::RealTime{5, 10});
  b.Write(b.BytesKey(":k"), b.BytesValue("v \"1\"\n"));
  b.Write(b.BytesKey("not a keyword"), Value::Int(-3));
  b.Read(b.IntKey(7), Value::Absent());
  b.EndTxn();
  begin("b", "4", TxnStatus::kAborted, history::TxnHeader::RealTime{1, 20});
  b.UnknownRead(b.IntKey(7));
  b.Append(b.IntKey(8), Value::Int(1));
  b.EndTxn();
  begin("c", "client-a", TxnStatus::kUnknown, history::TxnHeader::RealTime{12, 30});
  const Value elements[] = {Value::Int(1), Value::Int(1)};
  b.ListRead(b.IntKey(8), elements);
  b.EndTxn();
  begin("d", "4", TxnStatus::kUnknown,
        history::TxnHeader::RealTime{25, Transaction::kNeverCompleted});
  b.UnknownRead(b.IntKey(8));
  b.Append(b.IntKey(8), Value::Int(2));
  b.EndTxn();
  absl::StatusOr<History> h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  const std::string edn = Write(*h);
  // Sessions: 4 as it is, client-a numbered after it.
  EXPECT_THAT(edn, HasSubstr(":process 5"));
  EXPECT_THAT(edn, HasSubstr("[:w :k \"v \\\"1\\\"\\n\"] [:w \"not a keyword\" -3]"));
  absl::StatusOr<History> again = ReadEdnString(edn, {}, "written.edn");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << edn;
  // Sessions are renamed to processes; everything else stays.
  std::string expected = CanonicalByPosition(*h);
  std::string got = CanonicalByPosition(*again);
  for (std::string* text : {&expected, &got}) {
    *text = std::regex_replace(*text, std::regex("session[= ][^ \\n]*"), "session");
    *text = std::regex_replace(*text, std::regex(" numeric=(true|false)"), "");
  }
  EXPECT_EQ(got, expected) << edn;
}

TEST(EdnTest, WriterRefusesWhatEdnCannotSay) {
  auto one = [](auto add, TxnStatus status = TxnStatus::kCommitted,
                std::optional<Timestamp> start = std::nullopt,
                std::optional<Timestamp> commit = std::nullopt) {
    history::HistoryBuilder b;
    history::TxnHeader t;
    t.id = "1";
    t.session = "0";
    t.status = status;
    t.start = start;
    t.commit = commit;
    EXPECT_TRUE(b.BeginTxn(t).ok());
    add(b);
    b.EndTxn();
    absl::StatusOr<History> h = std::move(b).Finish();
    EXPECT_TRUE(h.ok()) << h.status();
    return std::move(*h);
  };
  auto nothing = [](history::HistoryBuilder&) {};
  EXPECT_THAT(WriteError(one([](auto& b) { b.UnknownRead(b.IntKey(1)); })),
              HasSubstr("an unknown read of 1 in a committed transaction"));
  EXPECT_THAT(
      WriteError(one([](auto& b) { b.Read(b.IntKey(1), Value::Absent()); }, TxnStatus::kAborted)),
      HasSubstr("an observed absent read of 1 in a transaction not committed"));
  EXPECT_THAT(WriteError(one(nothing, TxnStatus::kCommitted, Timestamp{1, 2}, Timestamp{3, 0})),
              HasSubstr("no logical part"));
  EXPECT_THAT(WriteError(one(nothing, TxnStatus::kCommitted, Timestamp{1, 0})),
              HasSubstr("needs both a start and a commit"));
  EXPECT_THAT(WriteError(one(nothing, TxnStatus::kAborted, Timestamp{1, 0}, Timestamp{1, 0})),
              HasSubstr("on :ok completions only"));
  EXPECT_THAT(WriteError(one([](auto& b) { b.SetDefaultInitialValue(Value::Int(0)); })),
              HasSubstr("nil registers"));
}

TEST(EdnTest, SniffAcceptsEdnAndRejectsOtherFormats) {
  for (const char* name : {"list_append.edn", "rw_register.edn", "ts.edn",
                           "list_append_wrapped.edn", "list_append_completions.edn"}) {
    EXPECT_TRUE(SniffEdn(samples::FileContents(SamplePath(name))).ok()) << name;
  }
  EXPECT_TRUE(SniffEdn("#jepsen.history.Op{:type :ok, :process 0}").ok());
  // Cut off by the head's end.
  EXPECT_TRUE(SniffEdn("{:index 0, :type :invoke, :value [[:r 1 [1 2 3").ok());
  const std::pair<const char*, const char*> others[] = {
      {"[\n  {\"tid\": 1, \"sid\": 0, \"sts\": {\"p\": 100, \"l\": 0}, \"cts\": {\"p\": 105, "
       "\"l\": 2},\n   \"ops\": [{\"t\": \"w\", \"k\": 3, \"v\": 11}]}\n]",
       "first key starts with '\"'"},
      {"w(1,10,0,100)\nw(2,20,0,100)\n", "starts with 'w'"},
      {"{\"params\": {\"id\": 0, \"n_node\": 2}, \"data\": []}", "first key starts with '\"'"},
      {"{\"value\": [[\"w\", 7, 1001, true], [\"r\", 8, 600, false]]}",
       "first key starts with '\"'"},
      {"{:value: [[:r, 5, 77, false], [:w, 6, 78, true]]}", "malformed keyword"},
      {"// session 1\n[a:=1 b==?]\n", "starts with '/'"},
      {"[{\"type\":\"invoke\",\"f\":\"txn\",\"value\":[],\"process\":0}]",
       "first key starts with '\"'"},
      {"{:a 1}", "no :type"},
      {"", "no EDN form"},
  };
  for (const auto& [text, why] : others) {
    absl::Status s = SniffEdn(text);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_THAT(std::string(s.message()), HasSubstr(why)) << text;
  }
}

}  // namespace
}  // namespace isowatch::formats
