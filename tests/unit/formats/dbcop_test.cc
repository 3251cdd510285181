// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/dbcop.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

const std::string& Bincode() {
  static const std::string kBytes =
      samples::FileContents(samples::SamplePath("dbcop", "sample.bincode"));
  return kBytes;
}
const std::string& NewJson() {
  static const std::string kText = samples::FileContents(samples::SamplePath("dbcop", "new.json"));
  return kText;
}

absl::StatusOr<History> ReadBin(std::string_view data, const ReadOptions& options = {},
                                DbcopHeader* header = nullptr) {
  return ReadDbcopBincodeString(data, options, "h.bincode", header);
}
absl::StatusOr<History> ReadJson(std::string_view data, DbcopHeader* header = nullptr) {
  return ReadDbcopJsonString(data, ReadOptions{}, "h.json", header);
}
std::string Error(const absl::StatusOr<History>& h) {
  if (h.ok()) return "";
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(h.status().message());
}
uint64_t NoteCount(const History& h, std::string_view kind) {
  for (const auto& n : h.info().notes) {
    if (n.kind == kind) return n.count;
  }
  return 0;
}
std::string Canonical(const History& h) { return isowatch::testing::CanonicalHistory(h); }
std::string Encode(const History& h, const DbcopHeader* header = nullptr) {
  std::ostringstream out;
  absl::Status s = WriteDbcopBincode(h, out, header);
  EXPECT_TRUE(s.ok()) << s;
  return out.str();
}

TEST(DbcopTest, BincodeSample) {
  ASSERT_EQ(Bincode().size(), 214u);
  DbcopHeader header;
  absl::StatusOr<History> h =
      ReadDbcopBincodeFile(samples::SamplePath("dbcop", "sample.bincode"), {}, &header);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->info().format, "dbcop-bincode");
  EXPECT_EQ(header.info, "demo");
  EXPECT_EQ(header.start, "2024-01-01T00:00:00+00:00");
  EXPECT_EQ(header.n_node, 2u);
  ASSERT_EQ(h->session_count(), 2u);
  ASSERT_EQ(h->size(), 2u);
  const TxnId t1 = h->FindTxn("1:0"), t2 = h->FindTxn("2:0");
  ASSERT_TRUE(t1.valid() && t2.valid());
  EXPECT_EQ(h->session_name(h->txn(t1).session), "1");
  EXPECT_EQ(h->txn(t1).status, TxnStatus::kCommitted);
  EXPECT_EQ(h->txn(t1).source_offset, 134u);
  ASSERT_EQ(h->ops(t1).size(), 2u);
  EXPECT_EQ(h->ops(t1)[0].kind(), OpKind::kWrite);
  EXPECT_EQ(h->ops(t1)[0].value(), Value::Int(1));
  const Op read = h->ops(t1)[1];
  EXPECT_EQ(read.kind(), OpKind::kRead);
  EXPECT_EQ(h->key(read.key()).payload, 1);
  EXPECT_EQ(read.value(), h->InitialValue(read.key()));  // 0: the initial state
  EXPECT_EQ(h->txn(t2).status, TxnStatus::kAborted);     // not committed
  EXPECT_EQ(h->ops(t2)[0].value(), Value::Int(5));
  EXPECT_EQ(NoteCount(*h,
                      "unsuccessful transactions read as aborted (the format cannot tell "
                      "aborted from unknown)"),
            1u);
  // Byte-identical with the header the reader saw.
  EXPECT_EQ(Encode(*h, &header), Bincode());
  // Without it, the history still round-trips.
  absl::StatusOr<History> again = ReadBin(Encode(*h));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Canonical(*again), Canonical(*h));
}

TEST(DbcopTest, IneffectiveEventDropped) {
  std::string bytes = Bincode();
  bytes[159] = 0;  // the success byte of "write x0 := 1"
  absl::StatusOr<History> h = ReadBin(bytes);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->ops(h->FindTxn("1:0")).size(), 1u);
  EXPECT_EQ(h->ops(h->FindTxn("1:0"))[0].kind(), OpKind::kRead);
  EXPECT_EQ(NoteCount(*h, "ineffective events dropped (success false)"), 1u);
}

TEST(DbcopTest, TemplateRefused) {
  std::string bytes = Bincode();
  for (size_t at : {159, 177, 178, 212, 213}) bytes[at] = 0;
  EXPECT_THAT(Error(ReadBin(bytes)), HasSubstr("workload template"));
}

TEST(DbcopTest, BincodeErrors) {
  std::string bytes = Bincode();
  bytes[142] = 2;
  EXPECT_THAT(Error(ReadBin(bytes)), HasSubstr("h.bincode: byte 142: event write flag is byte 2"));
  for (size_t cut : {10, 50, 120, 150, 213}) {
    EXPECT_THAT(Error(ReadBin(Bincode().substr(0, cut))), HasSubstr("left")) << cut;
  }
  // A hostile count is refused before anything is allocated for it.
  bytes = Bincode();
  bytes[118 + 7] = 0x7f;  // 2 sessions -> about 2^62
  EXPECT_THAT(Error(ReadBin(bytes)), HasSubstr("byte 118: session count"));
  bytes = Bincode();
  bytes[134 + 5] = 0x10;
  EXPECT_THAT(Error(ReadBin(bytes)), HasSubstr("byte 134: event count"));
  bytes = Bincode();
  bytes[40 + 6] = 0x01;
  EXPECT_THAT(Error(ReadBin(bytes)), HasSubstr("byte 40: length of info"));
  bytes = Bincode();
  bytes[195 + 1 + 8 + 7] = static_cast<char>(0x80);  // value 5 + 2^63
  EXPECT_THAT(Error(ReadBin(bytes)), HasSubstr("byte 204: value"));
  EXPECT_THAT(Error(ReadBin(Bincode() + "x")), HasSubstr("byte 214: 1 bytes after the last"));
  ReadOptions lenient;
  lenient.lenient = true;
  absl::StatusOr<History> h = ReadBin(Bincode() + "x", lenient);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(NoteCount(*h, "trailing bytes ignored"), 1u);
}

// A bincode file larger than the reader's blocks, with records across their boundaries (events
// are 18 bytes): read from the file as from memory, and its errors at the same bytes.
TEST(DbcopTest, LargeFileReadsAsFromMemory) {
  std::string bytes;
  auto u64 = [&bytes](uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(v >> (8 * i)));
  };
  for (uint64_t v : {0, 3, 50, 800, 5}) u64(v);
  for (const char* s : {"info", "start", "end"}) {
    u64(std::strlen(s));
    bytes += s;
  }
  u64(3);
  uint64_t value = 0;
  for (int session = 0; session < 3; ++session) {
    u64(800);
    for (int t = 0; t < 800; ++t) {
      u64(5);
      for (int e = 0; e < 5; ++e) {
        const bool write = e % 2 == 0;
        bytes.push_back(write ? 1 : 0);
        u64(static_cast<uint64_t>((t + e) % 50));
        u64(write ? ++value : value);
        bytes.push_back(1);
      }
      bytes.push_back(1);
    }
  }
  ASSERT_GT(bytes.size(), size_t{3} << 16);
  const std::string path = ::testing::TempDir() + "/dbcop_large.bincode";
  auto read_file = [&path](const std::string& data) {
    std::ofstream(path, std::ios::binary) << data;
    return ReadDbcopBincodeFile(path, {});
  };
  absl::StatusOr<History> from_file = read_file(bytes);
  absl::StatusOr<History> from_memory = ReadDbcopBincodeString(bytes, {}, path);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(from_memory.ok()) << from_memory.status();
  EXPECT_EQ(from_file->size(), 2400u);
  EXPECT_EQ(Canonical(*from_file), Canonical(*from_memory));
  // A bad flag in the third block, and a file cut inside an event there.
  std::string bad = bytes;
  const size_t at = bytes.size() - 1 - size_t{5} * 18;  // the last transaction's first write flag
  bad[at] = 7;
  EXPECT_EQ(read_file(bad).status(), ReadDbcopBincodeString(bad, {}, path).status());
  EXPECT_THAT(std::string(read_file(bad).status().message()), HasSubstr("is byte 7"));
  const std::string cut = bytes.substr(0, at + 5);
  EXPECT_EQ(read_file(cut).status(), ReadDbcopBincodeString(cut, {}, path).status());
  std::remove(path.c_str());
}

TEST(DbcopTest, EmptySessionsAndTransactionsKeepPositions) {
  // Session 1 empty; session 2: an empty transaction, then one writing x3 := 7.
  std::string bytes = Bincode().substr(0, 118);
  auto u64 = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(v >> (8 * i)));
  };
  u64(2);
  u64(0);
  u64(2);
  u64(0);
  bytes.push_back(1);
  u64(1);
  bytes.push_back(1);
  u64(3);
  u64(7);
  bytes.push_back(1);
  bytes.push_back(1);
  DbcopHeader header;
  absl::StatusOr<History> h = ReadBin(bytes, {}, &header);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->FindTxn("2:0").valid());
  EXPECT_EQ(h->ops(h->FindTxn("2:1")).size(), 1u);
  EXPECT_EQ(NoteCount(*h, "empty sessions (kept as positions)"), 1u);
  EXPECT_EQ(NoteCount(*h, "empty transactions"), 1u);
  EXPECT_EQ(Encode(*h, &header), bytes);
}

// One event of a generated bincode history.
struct GenEvent {
  bool write;
  int64_t variable;
  int64_t value;
  bool success;
};
using GenSessions = std::vector<std::vector<std::pair<std::vector<GenEvent>, bool>>>;

std::string EncodeSessions(const GenSessions& sessions) {
  std::string bytes;
  auto u64 = [&bytes](uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(v >> (8 * i)));
  };
  for (uint64_t v : {1, 2, 3, 4, 5}) u64(v);
  for (int i = 0; i < 3; ++i) u64(0);
  u64(sessions.size());
  for (const auto& txns : sessions) {
    u64(txns.size());
    for (const auto& [events, success] : txns) {
      u64(events.size());
      for (const GenEvent& e : events) {
        bytes.push_back(e.write ? 1 : 0);
        u64(static_cast<uint64_t>(e.variable));
        u64(static_cast<uint64_t>(e.value));
        bytes.push_back(e.success ? 1 : 0);
      }
      bytes.push_back(success ? 1 : 0);
    }
  }
  return bytes;
}

// The notes of AddTxn as the reader wrote them with a table of every (variable, value) written:
// kind, count and first example, in order of first occurrence.
std::vector<std::tuple<std::string, uint64_t, std::string>> ReferenceNotes(
    const GenSessions& sessions) {
  std::vector<std::tuple<std::string, uint64_t, std::string>> notes;
  auto note = [&notes](const std::string& kind, const std::string& example) {
    for (auto& [k, count, first] : notes) {
      if (k == kind) {
        ++count;
        return;
      }
    }
    notes.emplace_back(kind, 1, example);
  };
  std::set<std::pair<int64_t, int64_t>> written;
  for (size_t s = 0; s < sessions.size(); ++s) {
    for (size_t t = 0; t < sessions[s].size(); ++t) {
      const auto& [events, success] = sessions[s][t];
      const std::string id = fmt::format("{}:{}", s + 1, t);
      if (!success) {
        note(
            "unsuccessful transactions read as aborted (the format cannot tell aborted from "
            "unknown)",
            fmt::format("transaction {} at", id));
      }
      if (events.empty()) note("empty transactions", fmt::format("transaction {} at", id));
      for (size_t i = 0; i < events.size(); ++i) {
        const GenEvent& e = events[i];
        if (!e.success) {
          note("ineffective events dropped (success false)",
               fmt::format("transaction {} event {}", id, i));
          continue;
        }
        if (!e.write) continue;
        if (e.value == 0) {
          note("writes of the initial value",
               fmt::format("transaction {} event {}: variable {}", id, i, e.variable));
        }
        if (!written.insert({e.variable, e.value}).second) {
          note("duplicate writes of one (variable, value)",
               fmt::format("transaction {} event {}: variable {} value {}", id, i, e.variable,
                           e.value));
        }
      }
    }
    if (sessions[s].empty()) note("empty sessions (kept as positions)", "");
  }
  return notes;
}

// The note on duplicate writes decides most writes by a bit per value and the rest by a table
// (values out of the bits' range, and every write once a value repeats): the notes are those of
// a table of every write, on values of every range, repeated or not, and read from a file (in
// blocks, where a transaction across two is read a field at a time) as from memory.
TEST(DbcopTest, NotesMatchAReferenceOnRandomHistories) {
  std::mt19937_64 rng(17);
  for (int round = 0; round < 60; ++round) {
    const int shape = round % 6;
    int64_t next = 0;
    auto value = [&]() -> int64_t {
      switch (shape) {
        case 0:  // distinct values, each written once
          return next += 1 + static_cast<int64_t>(rng() % 5);
        case 1:  // few values: repeats, of one variable or of others
          return static_cast<int64_t>(rng() % 50);
        case 2:  // large values first out of the bits' range, then within it as writes add up
          return static_cast<int64_t>(60000 + rng() % 400000);
        case 3:  // huge and small values mixed, a few repeated
          return rng() % 2 == 0 ? static_cast<int64_t>(rng() % 3000)
                                : INT64_MAX - static_cast<int64_t>(rng() % 3000);
        default:  // unique increasing values, with now and then one written again
          return rng() % 500 == 0 ? static_cast<int64_t>(rng() % 1000)
                                  : static_cast<int64_t>(1000 + rng() % (uint64_t{1} << 30));
      }
    };
    GenSessions sessions(1 + rng() % 4);
    for (auto& txns : sessions) {
      txns.resize(rng() % 600);
      for (auto& [events, success] : txns) {
        events.resize(rng() % 9);
        for (GenEvent& e : events) {
          e = GenEvent{.write = rng() % 2 == 0,
                       .variable = static_cast<int64_t>(rng() % 20),
                       .value = 0,
                       .success = rng() % 200 != 0};
          e.value = e.write ? value() : static_cast<int64_t>(rng() % 100);
        }
        success = rng() % 100 != 0;
      }
    }
    const std::string bytes = EncodeSessions(sessions);
    absl::StatusOr<History> h = ReadBin(bytes);
    if (!h.ok()) {
      EXPECT_THAT(Error(h), HasSubstr("workload template")) << round;
      continue;
    }
    std::vector<std::tuple<std::string, uint64_t, std::string>> got;
    for (const auto& n : h->info().notes) got.emplace_back(n.kind, n.count, n.example);
    std::vector<std::tuple<std::string, uint64_t, std::string>> want = ReferenceNotes(sessions);
    ASSERT_EQ(got.size(), want.size()) << round;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(std::get<0>(got[i]), std::get<0>(want[i])) << round;
      EXPECT_EQ(std::get<1>(got[i]), std::get<1>(want[i])) << round << " " << std::get<0>(want[i]);
      EXPECT_THAT(std::get<2>(got[i]), HasSubstr(std::get<2>(want[i]))) << round;
    }
    const std::string path = ::testing::TempDir() + "/dbcop_random.bincode";
    std::ofstream(path, std::ios::binary) << bytes;
    absl::StatusOr<History> from_file = ReadDbcopBincodeFile(path, {});
    ASSERT_TRUE(from_file.ok()) << from_file.status();
    EXPECT_EQ(Canonical(*from_file), Canonical(*h)) << round;
    std::remove(path.c_str());
  }
}

// Bytes changed at random read from a file (a block at a time, records across blocks read a
// field at a time) as from memory: the same history, or the same error at the same byte.
TEST(DbcopTest, MutatedFilesReadAsFromMemory) {
  std::mt19937_64 rng(5);
  GenSessions sessions(3);
  for (auto& txns : sessions) {
    txns.resize(1500);
    for (auto& [events, success] : txns) {
      events.resize(1 + rng() % 6);
      for (GenEvent& e : events) {
        e = GenEvent{.write = rng() % 2 == 0,
                     .variable = static_cast<int64_t>(rng() % 30),
                     .value = static_cast<int64_t>(1 + rng() % 100000),
                     .success = true};
      }
      success = true;
    }
  }
  const std::string bytes = EncodeSessions(sessions);
  ASSERT_GT(bytes.size(), size_t{3} << 16);
  const std::string path = ::testing::TempDir() + "/dbcop_mutated.bincode";
  for (int round = 0; round < 40; ++round) {
    std::string bad = bytes;
    for (int k = 0; k < 1 + round % 3; ++k) {
      const size_t at = 70 + rng() % (bad.size() - 70);
      bad[at] = static_cast<char>(rng() % 2 == 0 ? rng() % 3 : rng());
    }
    std::ofstream(path, std::ios::binary) << bad;
    absl::StatusOr<History> from_file = ReadDbcopBincodeFile(path, {});
    absl::StatusOr<History> from_memory = ReadDbcopBincodeString(bad, {}, path);
    ASSERT_EQ(from_file.status(), from_memory.status()) << round;
    if (from_file.ok()) {
      EXPECT_EQ(Canonical(*from_file), Canonical(*from_memory)) << round;
    }
  }
  std::remove(path.c_str());
}

constexpr std::string_view kTuples =
    R"([[{"events": [["w", 0, 1], ["r", 1, null]], "committed": true}],
        [{"events": [["r", 0, 1], ["w", 1, 2]], "committed": true},
         {"events": [["w", 0, 3]], "committed": false}]])";

TEST(DbcopTest, NewJsonSample) {
  DbcopHeader header;
  absl::StatusOr<History> h =
      ReadDbcopJsonFile(samples::SamplePath("dbcop", "new.json"), {}, &header);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->info().format, "dbcop-json");
  EXPECT_EQ(h->info().dialect, "new");
  EXPECT_EQ(header.info, "composed");
  EXPECT_EQ(header.end, "2024-05-01T10:00:01+00:00");
  ASSERT_EQ(h->session_count(), 2u);
  EXPECT_EQ(h->session_name(SessionId(0)), "1");
  EXPECT_EQ(h->session_name(SessionId(1)), "2");
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ(h->txn(h->FindTxn("1:0")).status, TxnStatus::kCommitted);
  EXPECT_EQ(h->txn(h->FindTxn("2:0")).status, TxnStatus::kCommitted);
  EXPECT_EQ(h->txn(h->FindTxn("2:1")).status, TxnStatus::kAborted);
  const Op null_read = h->ops(h->FindTxn("1:0"))[1];
  EXPECT_EQ(null_read.value(), Value::Absent());  // version null: the initial state
  EXPECT_FALSE(null_read.unknown());
  // Tagged and tuple forms, wrapper and bare sessions, read alike.
  absl::StatusOr<History> tuples = ReadJson(kTuples);
  ASSERT_TRUE(tuples.ok()) << tuples.status();
  EXPECT_EQ(Canonical(*tuples), Canonical(*h));
}

TEST(DbcopTest, OldJsonMatchesBincode) {
  constexpr std::string_view kOld =
      R"({"params": {"id": 0, "n_node": 2, "n_variable": 2, "n_transaction": 1, "n_event": 2},
      "info": "demo", "start": "2024-01-01T00:00:00+00:00", "end": "2024-01-01T00:00:01+00:00",
      "data": [[{"events": [{"write": true, "variable": 0, "value": 1, "success": true},
                            {"write": false, "variable": 1, "value": 0}], "success": true}],
               [{"events": [{"write": true, "variable": 1, "value": 5, "success": true}],
                 "success": false}]]})";
  DbcopHeader header;
  absl::StatusOr<History> json = ReadJson(kOld, &header);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->info().dialect, "old");
  absl::StatusOr<History> bin = ReadBin(Bincode());
  ASSERT_TRUE(bin.ok());
  EXPECT_EQ(Canonical(*json), Canonical(*bin));
  EXPECT_EQ(Encode(*json, &header), Bincode());
}

TEST(DbcopTest, JsonSemanticsAndErrors) {
  // Version 0 reads the initial value unless written; duplicate writes are noted.
  absl::StatusOr<History> h = ReadJson(R"([[{"events": [["r", 4, 0], ["w", 4, 2]]}],
      [{"events": [["w", 4, 2]], "committed": true}]])");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->ops(h->FindTxn("1:0"))[0].value(), Value::Int(0));
  EXPECT_EQ(NoteCount(*h, "duplicate writes of one (variable, value)"), 1u);
  EXPECT_THAT(Error(ReadJson(R"({"info": "x"})")), HasSubstr("no \"data\" member"));
  EXPECT_THAT(Error(ReadJson(R"([[{"events": [["w", 0, 1], {"write": true, "variable": 0,
      "value": 2}]}]])")),
              HasSubstr("mixes old and new"));
  EXPECT_THAT(Error(ReadJson(R"([[{"events": [["x", 0, 1]]}]])")),
              HasSubstr("byte 18: an event tuple starts with"));
  EXPECT_THAT(Error(ReadJson(R"([[{"events": [["w", 0, 18446744073709551615]]}]])")),
              HasSubstr("version overflows"));
  EXPECT_THAT(Error(ReadJson(R"([[{"events": [["w", -1, 1]]}]])")), HasSubstr("negative variable"));
  EXPECT_THAT(Error(ReadJson(R"([[{"events": [["w", 0, null]]}]])")),
              HasSubstr("not a non-negative integer"));
  EXPECT_THAT(Error(ReadJson(R"([[{"events": [["r", 0]]}]])")), HasSubstr("incomplete event"));
  EXPECT_THAT(Error(ReadJson(R"([[{"events": [{"Write": {"variable": 0}}]}]])")),
              HasSubstr("incomplete event"));
  EXPECT_THAT(Error(ReadJson(R"([[{"events": [{"Delete": {}}]}]])")),
              HasSubstr("unexpected member \"Delete\""));
  EXPECT_THAT(Error(ReadJson(R"([[{"events": []}]] x)")), HasSubstr("text after the document"));
  EXPECT_THAT(Error(ReadJson(R"([[{"events": [})")), HasSubstr("h.json: byte"));
  EXPECT_THAT(Error(ReadJson(R"([{"events": []}])")), HasSubstr("expected a session"));
  EXPECT_THAT(Error(ReadJson(R"([[{"events": [], "committed": false}]])")),
              HasSubstr("workload template"));
  h = ReadJson(R"({"data": [], "extra": 1})");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(NoteCount(*h, "unknown members ignored"), 1u);
}

TEST(DbcopTest, WriterRefuses) {
  absl::StatusOr<History> h = ReadJson(kTuples);
  ASSERT_TRUE(h.ok());
  std::ostringstream out;
  EXPECT_THAT(std::string(WriteDbcopBincode(*h, out).message()), HasSubstr("read of no value"));
}

TEST(DbcopTest, Sniff) {
  EXPECT_TRUE(SniffDbcopBincode(Bincode()).ok());
  EXPECT_TRUE(SniffDbcopJson(NewJson()).ok());
  EXPECT_TRUE(SniffDbcopJson(kTuples).ok());
  const std::vector<std::string>& foreign = samples::ForeignTextSamples();
  for (size_t i = 0; i < foreign.size(); ++i) {
    EXPECT_FALSE(SniffDbcopBincode(foreign[i]).ok()) << foreign[i];
    // Samples 4 and 5 are dbcop JSON itself.
    if (i != 4 && i != 5) {
      EXPECT_FALSE(SniffDbcopJson(foreign[i]).ok()) << foreign[i];
    }
  }
  for (const char* other : {"cobra/sample/T1.log", "text/polysi_plume.txt", "dbcop/sample.hist"}) {
    const std::string bytes = samples::FileContents(samples::SamplePath("", other));
    EXPECT_FALSE(SniffDbcopBincode(bytes).ok()) << other;
    EXPECT_FALSE(SniffDbcopJson(bytes).ok()) << other;
  }
  EXPECT_FALSE(SniffDbcopJson(Bincode()).ok());
  EXPECT_FALSE(SniffDbcopBincode(NewJson()).ok());
}

}  // namespace
}  // namespace isowatch::formats
