// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/cobra.h"

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
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
  static const std::string kBytes =
      samples::FileContents(samples::SamplePath("cobra", "sample/T1.log"));
  return kBytes;
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

absl::StatusOr<History> Read(const NamedFiles& files, const ReadOptions& options = {},
                             CobraExtras* extras = nullptr) {
  return ReadCobraFiles(files, options, "logs", extras);
}

std::string ReadError(const NamedFiles& files, const ReadOptions& options = {}) {
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

// The notes on write ids and the error on a repeated transaction, as the reader made them with a
// table of every transaction id and write id: kind, count and first example in order of first
// occurrence, or the error.
struct Reference {
  std::string error;
  std::vector<std::tuple<std::string, uint64_t, std::string>> notes;
};
Reference ReferenceRead(const NamedFiles& files) {
  Reference ref;
  auto note = [&ref](const std::string& kind, const std::string& example) {
    for (auto& [k, count, first] : ref.notes) {
      if (k == kind) {
        ++count;
        return;
      }
    }
    ref.notes.emplace_back(kind, 1, example);
  };
  std::map<int64_t, std::string> first_at;
  std::map<int64_t, int64_t> writer_of;
  struct PendingRead {
    int64_t wid;
    int64_t claimed;
    std::string where;
  };
  std::vector<PendingRead> reads;
  for (const auto& file : files) {
    const std::string& name = file.first;
    const std::string& bytes = file.second;
    int64_t txn = 0;
    for (size_t pos = 0; pos < bytes.size();) {
      auto be = [&bytes](size_t at) {
        uint64_t v = 0;
        for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(bytes[at + i]);
        return static_cast<int64_t>(v);
      };
      const std::string where = fmt::format("{} byte {}", name, pos);
      switch (bytes[pos]) {
        case 'S':
          txn = be(pos + 1);
          if (first_at.contains(txn)) {
            ref.error = fmt::format("logs/{}: byte {}: transaction {} again (first at {})", name,
                                    pos, txn, first_at[txn]);
            return ref;
          }
          first_at[txn] = where;
          pos += 9;
          break;
        case 'C':
          pos += 9;
          break;
        case 'W':
          if (!writer_of.try_emplace(be(pos + 1), txn).second) {
            note("duplicate write ids", fmt::format("{}: write id {:#x}", where, be(pos + 1)));
          }
          pos += 25;
          break;
        default:
          reads.push_back({be(pos + 9), be(pos + 1), where});
          pos += 33;
          break;
      }
    }
  }
  for (const PendingRead& r : reads) {
    auto it = writer_of.find(r.wid);
    if (it == writer_of.end()) {
      note("reads of a write id no transaction wrote",
           fmt::format("{}: write id {:#x} (writer {} named)", r.where, r.wid, r.claimed));
    } else if (it->second != r.claimed) {
      note("reads naming another writer than the write id's",
           fmt::format("{}: write id {:#x} names {}, written by {}", r.where, r.wid, r.claimed,
                       it->second));
    }
  }
  return ref;
}

// The reader keeps transaction ids and write ids in arrays where they are dense and in hash
// tables where not, checks a read against its writer when it comes if the write came before,
// and finds the position of a first example by walking the logs again: on random logs with
// ids of every range, repeated or not, its notes and errors are those of a table of every id.
TEST(CobraTest, WriteIdNotesMatchAReferenceOnRandomLogs) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 80; ++round) {
    const int shape = round % 4;
    auto id = [&](uint64_t range) -> int64_t {
      switch (shape) {
        case 0:  // dense, from 1
          return static_cast<int64_t>(1 + rng() % range);
        case 1:  // huge
          return static_cast<int64_t>((uint64_t{1} << 50) + rng() % range);
        case 2:  // past the arrays' first bound, within it as ids add up
          return static_cast<int64_t>(1 + 4000 + rng() % (range * 40));
        default:  // mixed
          return rng() % 2 == 0 ? static_cast<int64_t>(1 + rng() % range)
                                : static_cast<int64_t>((uint64_t{1} << 40) + rng() % range);
      }
    };
    // Transaction ids unique unless the round repeats one; write ids from a range about as large
    // as the writes, so that some repeat.
    const bool repeat_txn = round % 5 == 4;
    std::set<int64_t> txn_ids;
    std::vector<int64_t> txns_so_far;
    std::vector<std::pair<int64_t, int64_t>> writes_so_far;  // (wid, writer)
    NamedFiles files;
    const int logs = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < logs; ++f) {
      std::string bytes;
      const int txns = static_cast<int>(rng() % 300);
      for (int t = 0; t < txns; ++t) {
        int64_t txn = id(100000);
        while (txn_ids.contains(txn) && !(repeat_txn && rng() % 200 == 0)) txn = id(100000);
        txn_ids.insert(txn);
        txns_so_far.push_back(txn);
        bytes += S(txn);
        const int ops = static_cast<int>(rng() % 8);
        for (int o = 0; o < ops; ++o) {
          if (rng() % 2 == 0) {
            const int64_t wid = id(1200);
            bytes += W(wid, static_cast<int64_t>(rng() % 10), 0);
            writes_so_far.emplace_back(wid, txn);
          } else if (!writes_so_far.empty() && rng() % 4 != 0) {
            const auto& [wid, writer] = writes_so_far[rng() % writes_so_far.size()];
            const int64_t named =
                rng() % 20 == 0 ? txns_so_far[rng() % txns_so_far.size()] : writer;
            bytes += R(named, wid, static_cast<int64_t>(rng() % 10), 0);
          } else {
            // A write id written later in the logs, or never.
            bytes += R(id(100000), id(1200), static_cast<int64_t>(rng() % 10), 0);
          }
        }
        bytes += C(txn);
      }
      files.emplace_back(fmt::format("T{}.log", f), std::move(bytes));
    }
    const Reference want = ReferenceRead(files);
    ReadOptions plain;
    plain.dialect = "plain";
    absl::StatusOr<History> h = Read(files, plain);
    if (!want.error.empty()) {
      EXPECT_THAT(samples::ErrorOf(h), HasSubstr(want.error)) << round;
      continue;
    }
    ASSERT_TRUE(h.ok()) << round << " " << h.status();
    std::vector<std::tuple<std::string, uint64_t, std::string>> got;
    for (const auto& n : h->info().notes) got.emplace_back(n.kind, n.count, n.example);
    EXPECT_EQ(got, want.notes) << round;
  }
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
