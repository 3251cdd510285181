// SPDX-License-Identifier: Apache-2.0
// DecodeUsualTxn, the native reader's path for transaction records of the usual shape: what it
// reads, what it leaves to the generated parser, and that a file reads the same either way.
#include "isowatch/formats/internal/native_usual_txn.h"

#include <cstdint>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/formats/native.h"
#include "isowatch/v1/history.pb.h"

#include "tests/testing/canonical_history.h"
#include "tests/testing/source_dir.h"
#include "tests/unit/formats/format_samples.h"

namespace isowatch::formats::internal {
namespace {

namespace pb = ::isowatch::v1;
using history::History;

std::string Serialized(const pb::HistoryRecord& record) {
  std::string out;
  EXPECT_TRUE(record.SerializeToString(&out));
  return out;
}

pb::HistoryRecord UsualRecord() {
  pb::HistoryRecord record;
  pb::Transaction* t = record.mutable_txn();
  t->set_id_int(17);
  t->set_session_str("s1");
  t->set_seq(3);
  t->set_status(pb::Transaction::ABORTED);
  t->mutable_start()->set_physical(5);
  t->mutable_start()->set_logical(-1);
  t->mutable_commit()->set_physical(9);
  t->set_xid(12);
  pb::Operation* read = t->add_ops();
  read->set_kind(pb::Operation::READ);
  read->mutable_key()->set_int_(-4);
  pb::Operation* write = t->add_ops();
  write->set_kind(pb::Operation::WRITE);
  write->mutable_key()->set_bytes("k");
  write->mutable_value()->set_bytes("v");
  pb::Operation* list = t->add_ops();
  list->set_kind(pb::Operation::LIST_READ);
  list->mutable_key()->set_int_(8);
  list->mutable_list()->add_elements()->set_int_(1);
  list->mutable_list()->add_elements()->set_bytes("two");
  pb::Operation* unknown = t->add_ops();
  unknown->set_kind(pb::Operation::READ);
  unknown->mutable_key()->set_int_(1);
  unknown->set_unknown(true);
  return record;
}

TEST(NativeUsualTxnTest, ReadsAUsualTransactionWhole) {
  const std::string bytes = Serialized(UsualRecord());
  UsualTxn t;
  ASSERT_TRUE(DecodeUsualTxn(bytes, &t));
  EXPECT_TRUE(t.id_numeric);
  EXPECT_EQ(t.id_int, 17);
  EXPECT_EQ(t.session, UsualTxn::Session::kStr);
  EXPECT_EQ(t.session_str, "s1");
  EXPECT_TRUE(t.has_seq);
  EXPECT_EQ(t.seq, 3);
  EXPECT_EQ(t.status, pb::Transaction::ABORTED);
  EXPECT_TRUE(t.has_start);
  EXPECT_EQ(t.start_physical, 5);
  EXPECT_EQ(t.start_logical, -1);
  EXPECT_TRUE(t.has_commit);
  EXPECT_EQ(t.commit_physical, 9);
  EXPECT_EQ(t.commit_logical, 0);
  EXPECT_EQ(t.xid, 12u);
  ASSERT_EQ(t.ops.size(), 4u);
  EXPECT_EQ(t.ops[0].kind, pb::Operation::READ);
  EXPECT_EQ(t.ops[0].key.kind, UsualDatum::Kind::kInt);
  EXPECT_EQ(t.ops[0].key.i, -4);
  EXPECT_EQ(t.ops[0].value.kind, UsualDatum::Kind::kNone);
  EXPECT_EQ(t.ops[1].key.bytes, "k");
  EXPECT_EQ(t.ops[1].value.bytes, "v");
  EXPECT_EQ(t.ops[2].kind, pb::Operation::LIST_READ);
  ASSERT_EQ(t.ops[2].elements_count, 2u);
  EXPECT_EQ(t.elements[t.ops[2].elements_begin].i, 1);
  EXPECT_EQ(t.elements[t.ops[2].elements_begin + 1].bytes, "two");
  EXPECT_TRUE(t.ops[3].unknown);
  // Reused: a second record leaves nothing of the first.
  pb::HistoryRecord small;
  small.mutable_txn()->set_id_str("t");
  const std::string small_bytes = Serialized(small);
  ASSERT_TRUE(DecodeUsualTxn(small_bytes, &t));
  EXPECT_FALSE(t.id_numeric);
  EXPECT_EQ(t.id_str, "t");
  EXPECT_EQ(t.session, UsualTxn::Session::kNone);
  EXPECT_FALSE(t.has_seq || t.has_start || t.has_commit);
  EXPECT_TRUE(t.ops.empty());
  EXPECT_TRUE(t.elements.empty());
}

TEST(NativeUsualTxnTest, DeclinesWhatItDoesNotKnowOrTheReaderRefuses) {
  std::vector<std::pair<std::string, pb::HistoryRecord>> declined;
  auto add = [&](std::string what, auto change) {
    pb::HistoryRecord r = UsualRecord();
    change(r);
    declined.emplace_back(std::move(what), std::move(r));
  };
  add("header", [](pb::HistoryRecord& r) { r.mutable_header()->set_version(1); });
  add("no id", [](pb::HistoryRecord& r) { r.mutable_txn()->clear_id_int(); });
  add("empty id", [](pb::HistoryRecord& r) { r.mutable_txn()->set_id_str(""); });
  add("non-ASCII id", [](pb::HistoryRecord& r) { r.mutable_txn()->set_id_str("t\xc3\xa9"); });
  add("stream", [](pb::HistoryRecord& r) { r.mutable_txn()->set_stream("a"); });
  add("snapshot", [](pb::HistoryRecord& r) { r.mutable_txn()->mutable_snapshot()->set_xmin(1); });
  add("real time", [](pb::HistoryRecord& r) { r.mutable_txn()->mutable_real_time(); });
  add("range read", [](pb::HistoryRecord& r) { r.mutable_txn()->add_range_reads(); });
  add("negative seq", [](pb::HistoryRecord& r) { r.mutable_txn()->set_seq(-1); });
  add("unknown status", [](pb::HistoryRecord& r) {
    r.mutable_txn()->set_status(static_cast<pb::Transaction_Status>(7));
  });
  add("no kind", [](pb::HistoryRecord& r) { r.mutable_txn()->mutable_ops(0)->clear_kind(); });
  add("no key", [](pb::HistoryRecord& r) { r.mutable_txn()->mutable_ops(0)->clear_key(); });
  add("unknown read with a value",
      [](pb::HistoryRecord& r) { r.mutable_txn()->mutable_ops(3)->mutable_value()->set_int_(1); });
  add("write without a value",
      [](pb::HistoryRecord& r) { r.mutable_txn()->mutable_ops(1)->clear_value(); });
  add("unknown write",
      [](pb::HistoryRecord& r) { r.mutable_txn()->mutable_ops(1)->set_unknown(true); });
  add("list read with a value",
      [](pb::HistoryRecord& r) { r.mutable_txn()->mutable_ops(2)->mutable_value()->set_int_(1); });
  add("list element without a value", [](pb::HistoryRecord& r) {
    r.mutable_txn()->mutable_ops(2)->mutable_list()->add_elements();
  });
  add("read with a list", [](pb::HistoryRecord& r) {
    r.mutable_txn()->mutable_ops(0)->mutable_list()->add_elements()->set_int_(1);
  });
  UsualTxn t;
  for (const auto& [what, record] : declined) {
    EXPECT_FALSE(DecodeUsualTxn(Serialized(record), &t)) << what;
  }
  const std::string usual = Serialized(UsualRecord());
  // A field given twice: protobuf merges or lets the last win; left to it.
  pb::HistoryRecord id_again;
  id_again.mutable_txn()->set_id_int(18);
  EXPECT_FALSE(DecodeUsualTxn(usual + Serialized(id_again), &t));
  // An over-long varint (the id 17 in two bytes), an unknown field, a truncated record.
  pb::HistoryRecord tiny;
  tiny.mutable_txn()->set_id_int(17);
  const std::string plain = Serialized(tiny);  // 12 03 08 11
  ASSERT_EQ(plain, std::string("\x12\x02\x08\x11", 4));
  EXPECT_TRUE(DecodeUsualTxn(plain, &t));
  EXPECT_FALSE(DecodeUsualTxn(std::string("\x12\x03\x08\x91\x00", 5), &t));
  EXPECT_FALSE(DecodeUsualTxn(std::string("\x12\x04\x08\x11\x78\x01", 6), &t));
  EXPECT_FALSE(DecodeUsualTxn(usual.substr(0, usual.size() - 1), &t));
  EXPECT_FALSE(DecodeUsualTxn("", &t));
}

// What a reader answers: the canonical history with its key ids, byte pool and source offsets
// (which depend on the order of interning), or its refusal.
std::string Outcome(const absl::StatusOr<History>& h) {
  if (!h.ok()) return "error: " + std::string(h.status().message());
  std::string out = isowatch::testing::CanonicalHistory(*h);
  for (size_t k = 0; k < h->key_count(); ++k) {
    out += fmt::format("key {}: {}\n", k, h->KeyToString(KeyId(static_cast<uint32_t>(k))));
  }
  for (size_t b = 0; b < h->byte_count(); ++b) {
    out += fmt::format("bytes {}: {}\n", b, h->bytes(static_cast<uint32_t>(b)));
  }
  for (size_t i = h->first_txn(); i < h->size(); ++i) {
    out += fmt::format("offset {}\n", h->txn(TxnId(static_cast<uint32_t>(i))).source_offset);
  }
  return out;
}

// Reads `data` both ways and expects one answer; returns whether it was a history.
bool ExpectSameEitherWay(std::string_view data, const std::string& name) {
  bool read = false;
  for (const bool lenient : {false, true}) {
    ReadOptions options;
    options.lenient = lenient;
    const std::string generated = Outcome(ReadNativeStringWith(data, options, name, false));
    EXPECT_EQ(Outcome(ReadNativeStringWith(data, options, name, true)), generated)
        << name << " lenient=" << lenient;
    if (!lenient) read = !generated.starts_with("error: ");
  }
  return read;
}

TEST(NativeUsualTxnTest, CorpusReadsTheSameAsWithTheGeneratedParser) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(fmt::format(
           "{}/tests/fuzz/corpus/native_reader_fuzz", isowatch::testing::SourceDir()))) {
    ExpectSameEitherWay(samples::FileContents(entry.path().string()),
                        entry.path().filename().string());
    ++files;
  }
  EXPECT_GE(files, 10);
}

// A length-delimited record, as the binary encoding frames it.
void Frame(std::string_view record, std::string* out) {
  uint64_t n = record.size();
  while (n >= 0x80) {
    out->push_back(static_cast<char>(n | 0x80));
    n >>= 7;
  }
  out->push_back(static_cast<char>(n));
  out->append(record);
}

// Random transactions, most of the usual shape and valid, some refused by the reader, some with
// fields the usual path leaves to the generated parser, and some with a byte changed.
pb::Transaction RandomTxn(std::mt19937_64& rng, int64_t index) {
  auto one_in = [&rng](int n) { return rng() % static_cast<uint64_t>(n) == 0; };
  pb::Transaction t;
  if (one_in(5)) {
    t.set_id_str(one_in(20) ? std::string() : fmt::format("t{}", index));
  } else if (!one_in(50)) {
    t.set_id_int(one_in(30) ? index / 2 : index);
  }
  if (one_in(3)) {
    t.set_session_str(fmt::format("s{}", rng() % 3));
  } else if (!one_in(10)) {
    t.set_session_int(static_cast<int64_t>(rng() % 3));
  }
  if (one_in(4)) t.set_seq(one_in(20) ? -1 : index);
  t.set_status(static_cast<pb::Transaction_Status>(one_in(10) ? rng() % 6 : 1));
  if (!one_in(3)) {
    t.mutable_start()->set_physical(index * 10);
    t.mutable_commit()->set_physical(index * 10 + (one_in(30) ? -5 : 5));
    if (one_in(4)) t.mutable_commit()->set_logical(2);
  }
  if (one_in(10)) t.set_xid(rng() % 100);
  if (one_in(30)) t.set_stream("s");
  if (one_in(40)) t.mutable_real_time()->set_invoke(index);
  const int ops = static_cast<int>(rng() % 6);
  auto datum = [&](pb::Datum* d) {
    if (one_in(4)) {
      d->set_bytes(fmt::format("b{}", rng() % 4));
    } else {
      d->set_int_(static_cast<int64_t>(rng() % 5) - (one_in(10) ? 1000000000000 : 0));
    }
  };
  for (int i = 0; i < ops; ++i) {
    pb::Operation* op = t.add_ops();
    op->set_kind(static_cast<pb::Operation_Kind>(one_in(25) ? rng() % 7 : 1 + rng() % 4));
    if (!one_in(30)) datum(op->mutable_key());
    const bool list = op->kind() == pb::Operation::LIST_READ;
    if (op->kind() != pb::Operation::READ && !list && !one_in(30)) datum(op->mutable_value());
    if (op->kind() == pb::Operation::READ && one_in(2)) datum(op->mutable_value());
    if (list || one_in(40)) {
      const int n = static_cast<int>(rng() % 4);
      for (int e = 0; e < n; ++e) {
        pb::Datum* d = op->mutable_list()->add_elements();
        if (!one_in(30)) datum(d);
      }
    }
    if (one_in(15)) op->set_unknown(true);
  }
  return t;
}

TEST(NativeUsualTxnTest, RandomRecordsReadTheSameAsWithTheGeneratedParser) {
  std::mt19937_64 rng(26);
  int histories = 0;
  int usual = 0;
  int records = 0;
  for (int doc = 0; doc < 400; ++doc) {
    std::string data;
    if (rng() % 2 == 0) {
      pb::HistoryRecord header;
      header.mutable_header()->set_version(1);
      Frame(Serialized(header), &data);
    }
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) {
      pb::HistoryRecord record;
      *record.mutable_txn() = RandomTxn(rng, int64_t{doc} * 10 + i);
      std::string bytes = Serialized(record);
      if (rng() % 12 == 0 && !bytes.empty()) {
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
      }
      UsualTxn t;
      usual += DecodeUsualTxn(bytes, &t) ? 1 : 0;
      ++records;
      Frame(bytes, &data);
    }
    if (ExpectSameEitherWay(data, fmt::format("random {}", doc))) ++histories;
  }
  // Both paths are exercised, and not only on refusals.
  EXPECT_GT(usual, records / 4);
  EXPECT_LT(usual, records);
  EXPECT_GT(histories, 20);
}

// The usual path is taken on every transaction the writer writes (without real time or range
// reads).
TEST(NativeUsualTxnTest, WrittenTransactionsTakeTheUsualPath) {
  std::string data;
  Frame(Serialized(UsualRecord()), &data);
  pb::HistoryRecord second = UsualRecord();
  second.mutable_txn()->set_id_int(18);
  second.mutable_txn()->set_seq(4);
  Frame(Serialized(second), &data);
  absl::StatusOr<History> h = ReadNativeString(data, {}, "two");
  ASSERT_TRUE(h.ok()) << h.status();
  std::ostringstream out;
  ASSERT_TRUE(WriteNative(*h, NativeEncoding::kBinary, out).ok());
  const std::string written = out.str();
  int txns = 0;
  for (size_t pos = 0; pos < written.size();) {
    uint64_t n = 0;
    for (int shift = 0;; shift += 7) {
      const auto b = static_cast<uint8_t>(written[pos++]);
      n |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (b < 0x80) break;
    }
    const std::string_view record(written.data() + pos, n);
    pos += n;
    pb::HistoryRecord parsed;
    ASSERT_TRUE(parsed.ParseFromArray(record.data(), static_cast<int>(record.size())));
    if (!parsed.has_txn()) continue;
    UsualTxn t;
    EXPECT_TRUE(DecodeUsualTxn(record, &t)) << parsed.DebugString();
    ++txns;
  }
  EXPECT_EQ(txns, 2);
  ExpectSameEitherWay(written, "written");
}

}  // namespace
}  // namespace isowatch::formats::internal
