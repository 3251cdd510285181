// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/cobra.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/text.h"
#include "isowatch/history/history_builder.h"

#include "tests/testing/canonical_history.h"
#include "tests/testing/temp_dir.h"
#include "tests/unit/formats/format_samples.h"

namespace isowatch::formats {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::TxnStatus;
using history::Value;
using ::testing::HasSubstr;

const std::string& Sample() {
  static const std::string bytes =
      samples::FileContents(samples::SamplePath("cobra", "sample/T1.log"));
  return bytes;
}

std::string Be(int64_t v) {
  std::string out;
  for (int shift = 56; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>(static_cast<uint64_t>(v) >> shift));
  }
  return out;
}
std::string S(int64_t id) { return "S" + Be(id); }
std::string C(int64_t id) { return "C" + Be(id); }
std::string W(int64_t wid, int64_t key, int64_t value) {
  return "W" + Be(wid) + Be(key) + Be(value);
}
std::string R(int64_t writer, int64_t wid, int64_t key, int64_t value) {
  return "R" + Be(writer) + Be(wid) + Be(key) + Be(value);
}

absl::StatusOr<History> Read(const NamedFiles& files, ReadOptions options = {},
                             CobraExtras* extras = nullptr) {
  return ReadCobraFiles(files, options, "logs", extras);
}

std::string ReadError(const NamedFiles& files, ReadOptions options = {}) {
  return samples::ErrorOf(Read(files, options));
}

uint64_t NoteCount(const History& h, std::string_view kind) {
  for (const auto& n : h.info().notes) {
    if (n.kind == kind) return n.count;
  }
  return 0;
}

std::string Canonical(const History& h) { return isowatch::testing::CanonicalHistory(h); }

TEST(CobraTest, SampleDecodes) {
  ASSERT_EQ(Sample().size(), 127u);
  CobraExtras extras;
  absl::StatusOr<History> h =
      ReadCobraDir(samples::SamplePath("cobra", "sample"), ReadOptions{}, &extras);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->info().format, "cobra");
  EXPECT_EQ(h->info().dialect, "plain");
  ASSERT_EQ(h->session_count(), 1u);  // T1.debug is ignored
  EXPECT_EQ(h->session_name(SessionId(0)), "T1");
  ASSERT_EQ(h->size(), 2u);
  const TxnId t11 = h->FindTxn(std::to_string(0x11)), t12 = h->FindTxn(std::to_string(0x12));
  ASSERT_TRUE(t11.valid() && t12.valid());
  EXPECT_EQ(h->txn(t11).status, TxnStatus::kCommitted);
  EXPECT_EQ(h->txn(t12).status, TxnStatus::kCommitted);
  EXPECT_EQ(h->txn(t12).source_offset, 76u);
  ASSERT_EQ(h->ops(t11).size(), 2u);
  const Op w = h->ops(t11)[0], init = h->ops(t11)[1];
  EXPECT_EQ(w.kind(), OpKind::kWrite);
  EXPECT_EQ(h->key(w.key()).payload, 5);
  EXPECT_EQ(w.value(), Value::Int(0x1001));  // the version is its write id
  // The INIT read of key 6 reads the key's initial value, whose hash the extras keep.
  EXPECT_EQ(init.kind(), OpKind::kRead);
  EXPECT_EQ(h->key(init.key()).payload, 6);
  EXPECT_EQ(init.value(), Value::Int(kCobraInit));
  EXPECT_EQ(h->InitialValue(init.key()), Value::Int(kCobraInit));
  EXPECT_EQ(extras.init_hash.at(6), 0x1234);
  // The read of key 5 reads write 0x1001 of txn 0x11.
  ASSERT_EQ(h->ops(t12).size(), 1u);
  EXPECT_EQ(h->ops(t12)[0].value(), Value::Int(0x1001));
  EXPECT_EQ(extras.claimed_writer.at(0x1001), 0x11);
  EXPECT_EQ(extras.value_hash.at(0x1001), 0x4d);
  EXPECT_TRUE(h->info().notes.empty());

  absl::StatusOr<NamedFiles> encoded = EncodeCobra(*h, &extras);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  ASSERT_EQ(encoded->size(), 1u);
  EXPECT_EQ((*encoded)[0].first, "T1.log");
  EXPECT_EQ((*encoded)[0].second, Sample());
}

TEST(CobraTest, TruncationNamesTheCutRecord) {
  const std::vector<size_t> starts = {0, 9, 34, 67, 76, 85, 118};
  for (size_t cut = 1; cut < Sample().size(); ++cut) {
    size_t record = 0;
    for (size_t s : starts) {
      if (s <= cut) record = s;
    }
    const std::string error = ReadError({{"T1.log", Sample().substr(0, cut)}});
    if (cut == 76) {
      EXPECT_EQ(error, "") << cut;  // a whole transaction
    } else if (record == cut) {
      EXPECT_THAT(error, HasSubstr("open at end of file")) << cut;
    } else {
      EXPECT_THAT(error, HasSubstr(fmt::format("logs/T1.log: byte {}: truncated", record))) << cut;
    }
  }
}

TEST(CobraTest, TimeOrderDetected) {
  const std::string timed = S(0x11) + Be(1000) + W(0x1001, 5, 77) + C(0x11) + Be(1005) + S(0x12) +
                            Be(1006) + R(0x11, 0x1001, 5, 77) + C(0x12) + Be(1010);
  CobraExtras extras;
  absl::StatusOr<History> h = Read({{"T1.log", timed}}, {}, &extras);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->info().dialect, "time-order");
  EXPECT_EQ(h->info().time_unit, "ms");
  const auto& t = h->txn(h->FindTxn("17"));
  EXPECT_TRUE(t.has_real_time);
  EXPECT_EQ(t.invoke_time, 1000);
  EXPECT_EQ(t.complete_time, 1005);
  absl::StatusOr<NamedFiles> encoded = EncodeCobra(*h, &extras);
  ASSERT_TRUE(encoded.ok());
  EXPECT_EQ((*encoded)[0].second, timed);
  // Plain records read as time order do not fit; a forced dialect says where.
  ReadOptions plain;
  plain.dialect = "plain";
  EXPECT_THAT(ReadError({{"T1.log", timed}}, plain), HasSubstr("byte 9: unknown record tag"));
  EXPECT_THAT(ReadError({{"T1.log", S(1) + Be(9) + C(1) + Be(8)}}),
              HasSubstr("commit time 8 before start time 9"));
}

TEST(CobraTest, ForcedDialects) {
  const std::string bytes = S(1) + C(1);
  EXPECT_TRUE(Read({{"T1.log", bytes}}).ok());
  EXPECT_TRUE(Read({{"T1.log", ""}}).ok());  // an empty log fits either mode
  const std::string twice = S(0x43) + Be(0x43) + C(0x43) + Be(0x44);
  ReadOptions timed;
  timed.dialect = "time-order";
  EXPECT_TRUE(Read({{"T1.log", twice}}, timed).ok());
  EXPECT_THAT(ReadError({{"T1.log", bytes}}, timed), HasSubstr("byte 17: unknown record tag 0x01"));
  ReadOptions bad;
  bad.dialect = "json";
  EXPECT_THAT(ReadError({{"T1.log", bytes}}, bad), HasSubstr("unknown Cobra dialect"));
}

TEST(CobraTest, StructuralErrors) {
  EXPECT_THAT(ReadError({{"T1.log", S(1) + "X" + C(1)}}),
              HasSubstr("byte 9: unknown record tag 0x58"));
  EXPECT_THAT(ReadError({{"T1.log", W(1, 2, 3)}}), HasSubstr("byte 0: W record outside"));
  EXPECT_THAT(ReadError({{"T1.log", S(1) + C(1) + R(1, 1, 1, 1)}}),
              HasSubstr("byte 18: R record outside"));
  EXPECT_THAT(ReadError({{"T1.log", S(1) + S(2) + C(2) + C(1)}}),
              HasSubstr("byte 9: S of transaction 2 inside transaction 1"));
  EXPECT_THAT(ReadError({{"T1.log", S(1) + C(2)}}),
              HasSubstr("byte 9: C of transaction 2 closes transaction 1"));
  EXPECT_THAT(ReadError({{"T1.log", C(1)}}), HasSubstr("byte 0: C record outside"));
  EXPECT_THAT(ReadError({{"T1.log", S(1) + "A" + Be(1)}}), HasSubstr("byte 9: A (abort) record"));
  EXPECT_THAT(ReadError({{"T1.log", S(1) + W(kCobraInit, 1, 1) + C(1)}}),
              HasSubstr("byte 9: write with the reserved"));
  EXPECT_THAT(ReadError({{"T1.log", S(1) + C(1)}, {"T2.log", S(1) + C(1)}}),
              HasSubstr("logs/T2.log: byte 0: transaction 1 again (first at T1.log byte 0)"));
  EXPECT_THAT(ReadError({{"T1.log", S(1) + C(1) + S(2) + W(5, 1, 1)}}),
              HasSubstr("logs/T1.log: byte 18: transaction 2 open at end of file"));
  ReadOptions lenient;
  lenient.lenient = true;
  absl::StatusOr<History> h = Read({{"T1.log", S(1) + C(1) + S(2) + W(5, 1, 1)}}, lenient);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->size(), 1u);
  EXPECT_EQ(NoteCount(*h, "transactions open at end of file dropped"), 1u);
}

TEST(CobraTest, SpecialReads) {
  const std::string t1 = S(1) + W(0x100, 1, 11) + W(kCobraDelete, 2, 99) + C(1);
  const std::string t2 = S(2) + R(kCobraNull, kCobraNull, 3, 0) + R(kCobraInit, 0x23332333, 4, 0) +
                         R(kCobraInit, 0x66666666, 4, 0) + R(1, kCobraDelete, 2, 99) +
                         R(7, 0x100, 1, 11) + R(1, 0x999, 1, 12) + W(kCobraDelete, 2, 98) +
                         W(0x100, 9, 9) + C(2);
  absl::StatusOr<History> h = Read({{"T2.log", t2}, {"T1.log", t1}, {"x.log", "junk"}});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->session_name(SessionId(0)), "T1");  // files in name order
  const auto ops1 = h->ops(h->FindTxn("1"));
  ASSERT_EQ(ops1.size(), 2u);
  EXPECT_EQ(ops1[1].value(), Value::Int(-1));  // the first delete
  const auto ops2 = h->ops(h->FindTxn("2"));
  ASSERT_EQ(ops2.size(), 6u);
  EXPECT_EQ(ops2[0].value(), Value::Absent());  // NULL read
  EXPECT_FALSE(ops2[0].unknown());
  EXPECT_TRUE(ops2[1].unknown());              // a read of a deleted value
  EXPECT_EQ(ops2[4].value(), Value::Int(-2));  // the second delete: its own value
  EXPECT_EQ(NoteCount(*h, "GC fence reads dropped"), 2u);
  EXPECT_EQ(NoteCount(*h, "reads of deleted values, not judged"), 1u);
  EXPECT_EQ(NoteCount(*h, "reads naming another writer than the write id's"), 1u);
  EXPECT_EQ(NoteCount(*h, "reads of a write id no transaction wrote"), 1u);
  EXPECT_EQ(NoteCount(*h, "duplicate write ids"), 1u);
}

TEST(CobraTest, RoundTripWithoutExtras) {
  absl::StatusOr<History> h =
      Read({{"T1.log", Sample()},
            {"T9.log", S(5) + R(kCobraNull, kCobraNull, 3, 0) + W(kCobraDelete, 2, 0) + C(5)}});
  ASSERT_TRUE(h.ok()) << h.status();
  absl::StatusOr<NamedFiles> files = EncodeCobra(*h);
  ASSERT_TRUE(files.ok()) << files.status();
  absl::StatusOr<History> again = Read(*files);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Canonical(*again), Canonical(*h));
  absl::StatusOr<NamedFiles> twice = EncodeCobra(*again);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(*twice, *files);
  // Through a directory.
  isowatch::testing::TempDir dir("cobra");
  ASSERT_FALSE(dir.Path().empty());
  ASSERT_TRUE(WriteCobraDir(*h, dir.Path()).ok());
  absl::StatusOr<History> from_dir = ReadCobraDir(dir.Path(), {});
  ASSERT_TRUE(from_dir.ok()) << from_dir.status();
  EXPECT_EQ(Canonical(*from_dir), Canonical(*h));
}

TEST(CobraTest, EncoderRefuses) {
  absl::StatusOr<History> unknown = Read({{"T1.log", S(1) + R(1, kCobraDelete, 2, 0) + C(1)}});
  ASSERT_TRUE(unknown.ok());
  EXPECT_THAT(EncodeCobra(*unknown).status().message(), HasSubstr("unknown read"));
  absl::StatusOr<History> text = ReadTextString("w(1,1,0,1)\nw(2,1,0,-1)\n", {}, "t");
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(EncodeCobra(*text).status().message(), HasSubstr("abort#0"));
  absl::StatusOr<History> orphan = Read({{"T1.log", S(1) + R(3, 0x77, 2, 0) + C(1)}});
  ASSERT_TRUE(orphan.ok());
  EXPECT_THAT(EncodeCobra(*orphan).status().message(), HasSubstr("no transaction writes"));
}

TEST(CobraTest, Sniff) {
  EXPECT_TRUE(SniffCobra(Sample()).ok());
  EXPECT_TRUE(SniffCobra(Sample().substr(0, 50)).ok());  // a head may cut a record
  for (const std::string& foreign : samples::ForeignTextSamples()) {
    EXPECT_FALSE(SniffCobra(foreign).ok()) << foreign;
  }
  EXPECT_FALSE(
      SniffCobra(samples::FileContents(samples::SamplePath("text", "polysi_plume.txt"))).ok());
  EXPECT_FALSE(
      SniffCobra(samples::FileContents(samples::SamplePath("dbcop", "sample.bincode"))).ok());
  EXPECT_THAT(SniffCobra("Some text that starts with S\n").message(), HasSubstr("not a Cobra log"));
}

}  // namespace
}  // namespace isowatch::formats
