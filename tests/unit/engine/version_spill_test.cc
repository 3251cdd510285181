// SPDX-License-Identifier: Apache-2.0
// The version spill: its byte encodings (docs/spill-format.md) and both implementations against
// a brute-force model.
#include "isowatch/engine/version_spill.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>

namespace isowatch::engine {
namespace {

using history::Timestamp;
using history::Value;
using internal::OrderKey;

OrderKey RandomKey(std::mt19937_64& rng) {
  // Small ranges so that ties on each field are common; negative timestamps included; writers
  // on both sides of 2^32 and up to the greatest id.
  std::uniform_int_distribution<int64_t> ts(-3, 3);
  std::uniform_int_distribution<uint32_t> small(0, 2);
  constexpr uint64_t kWriters[] = {0,
                                   7,
                                   14,
                                   (uint64_t{1} << 32) - 1,
                                   uint64_t{1} << 32,
                                   (uint64_t{1} << 32) + 7,
                                   OrderKey::kMaxTxn};
  const uint64_t writer = kWriters[rng() % std::size(kWriters)];
  const OrderKey k(Timestamp{ts(rng) * (int64_t{1} << 40), ts(rng)}, small(rng), writer);
  EXPECT_EQ(k.txn(), writer);
  return k;
}

// Key k's name in the spill: an integer name for even k (negative ones and the extremes
// included), a byte name for odd k, of lengths 0 to 40, some a prefix of another's bytes.
std::string Name(KeyId key) {
  const uint32_t k = key.value();
  if (k % 2 == 0) {
    if (k == 2) return spill_format::EncodeIntKeyName(INT64_MIN);
    if (k == 4) return spill_format::EncodeIntKeyName(INT64_MAX);
    const auto half = static_cast<int64_t>(k / 2);
    return spill_format::EncodeIntKeyName((half % 2 == 0 ? 1 : -1) * half * 1000003);
  }
  return spill_format::EncodeBytesKeyName(
      std::string((k * 7) % 41, static_cast<char>('a' + k % 3)));
}

TEST(SpillFormatTest, KeyNamesAreAsDocumented) {
  EXPECT_EQ(spill_format::EncodeIntKeyName(-2),
            std::string("\0\x7f\xff\xff\xff\xff\xff\xff\xfe", 9));
  EXPECT_EQ(spill_format::EncodeIntKeyName(5), std::string("\0\x80\0\0\0\0\0\0\x05", 9));
  EXPECT_EQ(spill_format::EncodeBytesKeyName("ab"), std::string("\1\0\0\0\x02"
                                                                "ab",
                                                                7));
  EXPECT_EQ(spill_format::EncodeBytesKeyName(""), std::string("\1\0\0\0\0", 5));
}

// Within one key, version keys sort like OrderKeys; the versions of one key are one contiguous
// range (no key's versions sort between two of another's); a key decodes back to its name and
// place.
TEST(SpillFormatTest, KeyBytesSortLikeOrderKeysWithinEachKey) {
  std::mt19937_64 rng(1);
  std::vector<std::string> names;
  for (uint32_t k = 0; k < 40; ++k) names.push_back(Name(KeyId(k)));
  for (int i = 0; i < 4000; ++i) {
    const std::string& na = names[rng() % names.size()];
    const std::string& nb = names[rng() % names.size()];
    const std::string& nc = names[rng() % names.size()];
    const OrderKey a = RandomKey(rng);
    const OrderKey b = RandomKey(rng);
    const OrderKey c = RandomKey(rng);
    const std::string ka = spill_format::EncodeKey(na, a);
    const std::string kb = spill_format::EncodeKey(na, b);
    const std::string kc = spill_format::EncodeKey(nb, c);
    EXPECT_EQ(ka < kb, a < b);
    if (nb != na && ka < kb) {
      EXPECT_FALSE(ka < kc && kc < kb) << i;
    }
    std::string_view back_name;
    OrderKey back;
    const std::string kd = spill_format::EncodeKey(nc, c);
    ASSERT_TRUE(spill_format::DecodeKey(kd, &back_name, &back));
    EXPECT_EQ(back_name, nc);
    EXPECT_EQ(back, c);
  }
  std::string_view name;
  OrderKey at;
  EXPECT_FALSE(spill_format::DecodeKey(std::string(24, 'x'), &name, &at));
}

TEST(SpillFormatTest, ValuesRoundTripAndTruncationIsRejected) {
  SpilledVersion v;
  v.expires = Timestamp{9, -3};
  v.writer_start = Timestamp{-5, 7};
  v.value = Value::Int(-42);
  v.appends = {Value::Int(1), Value::BytesRef(3), Value::Absent()};
  v.writer_name = "txn-17";
  const std::string bytes = spill_format::EncodeValue(v);
  EXPECT_EQ(bytes.size(), 16u + 16u + 9u + 4u + 3u * 9u + 4u + 6u);
  EXPECT_EQ(spill_format::EncodedBytes(9, v), 9u + 24u + bytes.size());
  SpilledVersion back;
  ASSERT_TRUE(spill_format::DecodeValue(bytes, &back));
  back.at = v.at;
  EXPECT_EQ(back, v);
  Timestamp expires;
  ASSERT_TRUE(spill_format::DecodeExpiry(bytes, &expires));
  EXPECT_EQ(expires, v.expires);
  EXPECT_FALSE(spill_format::DecodeExpiry(bytes.substr(0, 15), &expires));
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(spill_format::DecodeValue(bytes.substr(0, cut), &back)) << cut;
  }
  std::string bad_kind = bytes;
  bad_kind[32] = 9;
  EXPECT_FALSE(spill_format::DecodeValue(bad_kind, &back));
  EXPECT_FALSE(spill_format::DecodeValue(bytes + "x", &back)) << "longer than its name";
}

TEST(SpillFormatTest, KeyRecordsRoundTripAndTruncationIsRejected) {
  const SpilledKey r{.base = OrderKey(Timestamp{-7, 3}, 1, (uint64_t{1} << 40) + 99),
                     .base_value = Value::Int(-12),
                     .trim_point = Timestamp{12, -1},
                     .dropped_upto = OrderKey(Timestamp{5, 0}, 0, 4),
                     .max_duration = 123456789};
  const std::string bytes = spill_format::EncodeKeyRecord(r);
  EXPECT_EQ(bytes.size(), 81u);
  SpilledKey back;
  ASSERT_TRUE(spill_format::DecodeKeyRecord(bytes, &back));
  EXPECT_EQ(back, r);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(spill_format::DecodeKeyRecord(bytes.substr(0, cut), &back)) << cut;
  }
  EXPECT_FALSE(spill_format::DecodeKeyRecord(bytes + "x", &back));
  std::string bad_kind = bytes;
  bad_kind[24] = 9;
  EXPECT_FALSE(spill_format::DecodeKeyRecord(bad_kind, &back));
  EXPECT_EQ(spill_format::EncodeKeyId(KeyId(0x01020304)), std::string("\x01\x02\x03\x04"));
}

class VersionSpillTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      dir_ = (std::filesystem::path(::testing::TempDir()) /
              fmt::format("version_spill_test_{}", getpid()))
                 .string();
      auto rocks = RocksVersionSpill::Open(dir_);
      ASSERT_TRUE(rocks.ok()) << rocks.status();
      spill_ = *std::move(rocks);
    } else {
      spill_ = std::make_unique<MemoryVersionSpill>();
    }
  }
  void TearDown() override {
    spill_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::unique_ptr<VersionSpill> spill_;
};

TEST_P(VersionSpillTest, AgreesWithABruteForceModel) {
  std::mt19937_64 rng(7);
  struct Entry {
    KeyId key;
    SpilledVersion v;
  };
  std::vector<Entry> model;
  int found_hits = 0;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 200; ++i) {
      Entry e{KeyId(static_cast<uint32_t>(rng() % 4)), {}};
      e.v.at = RandomKey(rng);
      const bool taken = std::any_of(model.begin(), model.end(), [&](const Entry& m) {
        return m.key == e.key && m.v.at == e.v.at;
      });
      if (taken) continue;  // the engine never spills a version twice
      e.v.writer_start = Timestamp{static_cast<int64_t>(rng() % 100), 0};
      e.v.value = Value::Int(static_cast<int64_t>(rng() % 1000));
      if (rng() % 2 == 0) e.v.appends = {Value::Int(i), Value::Int(round)};
      spill_->Put(Name(e.key), e.v);
      model.push_back(e);
    }
    // Some versions written again with another expiry: replaced, not counted again.
    for (int i = 0; i < 20 && !model.empty(); ++i) {
      Entry& m = model[rng() % model.size()];
      m.v.expires = Timestamp{static_cast<int64_t>(rng() % 50), 1};
      spill_->Replace(Name(m.key), m.v);
    }
    // Not visible before Flush.
    if (round == 0) {
      auto none = spill_->NewestBefore(Name(model.front().key), OrderKey(Timestamp::Max(), 9, 99));
      ASSERT_TRUE(none.ok());
      EXPECT_FALSE(none->has_value());
    }
    ASSERT_TRUE(spill_->Flush().ok());
    EXPECT_EQ(spill_->versions(), model.size());
    EXPECT_GT(spill_->bytes(), 0u);

    for (int q = 0; q < 300; ++q) {
      const KeyId key(static_cast<uint32_t>(rng() % 5));  // key 4 never holds anything
      const OrderKey point = RandomKey(rng);
      // NewestBefore.
      const SpilledVersion* want = nullptr;
      for (const Entry& m : model) {
        if (m.key == key && m.v.at < point && (want == nullptr || want->at < m.v.at)) {
          want = &m.v;
        }
      }
      auto got = spill_->NewestBefore(Name(key), point);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->has_value(), want != nullptr);
      if (want != nullptr) {
        EXPECT_EQ(**got, *want);
      }
      // Find: exactly the version at the point, if any (points often hit one: small ranges).
      const SpilledVersion* at = nullptr;
      for (const Entry& m : model) {
        if (m.key == key && m.v.at == point) at = &m.v;
      }
      auto found = spill_->Find(Name(key), point);
      ASSERT_TRUE(found.ok()) << found.status();
      ASSERT_EQ(found->has_value(), at != nullptr);
      if (at != nullptr) {
        EXPECT_EQ(**found, *at);
        ++found_hits;
      }
      // ScanAfter, stopping after a few.
      std::vector<SpilledVersion> expected;
      for (const Entry& m : model) {
        if (m.key == key && point < m.v.at) expected.push_back(m.v);
      }
      std::sort(expected.begin(), expected.end(),
                [](const SpilledVersion& a, const SpilledVersion& b) { return a.at < b.at; });
      const size_t limit = rng() % 6;
      if (expected.size() > limit) expected.resize(limit);
      std::vector<SpilledVersion> scanned;
      ASSERT_TRUE(spill_
                      ->ScanAfter(Name(key), point,
                                  [&](const SpilledVersion& v) {
                                    if (scanned.size() == limit) return false;
                                    scanned.push_back(v);
                                    return true;
                                  })
                      .ok());
      EXPECT_EQ(scanned, expected);
    }
  }
  EXPECT_GT(found_hits, 0);  // Find was asked about versions that exist
}

// PruneUpTo lets the spill drop exactly the versions that expire at or before the point (the
// RocksDB spill once it flushes and compacts); the rest, and every answer about points above
// the prune point, stay as they were.
TEST_P(VersionSpillTest, PruningDropsExactlyWhatExpired) {
  std::vector<std::pair<KeyId, SpilledVersion>> all;
  for (uint32_t k = 0; k < 3; ++k) {
    for (int64_t ts = 1; ts <= 40; ++ts) {
      SpilledVersion v;
      v.at = OrderKey(Timestamp{ts, 0}, 0, static_cast<uint32_t>(ts));
      v.expires = Timestamp{ts + 1 + k, 0};  // the key's next version (lists: itself)
      v.value = Value::Int(ts);
      v.writer_name = fmt::format("w{}", ts);
      spill_->Put(Name(KeyId(k)), v);
      all.emplace_back(KeyId(k), v);
    }
  }
  ASSERT_TRUE(spill_->Flush().ok());
  const uint64_t bytes_before = spill_->bytes();
  spill_->PruneUpTo(Timestamp{20, 0});
  spill_->PruneUpTo(Timestamp{10, 0});  // lower: ignored
  ASSERT_TRUE(spill_->Compact().ok());
  size_t expired = 0;
  for (const auto& [key, v] : all) expired += v.expires <= Timestamp{20, 0} ? 1 : 0;
  EXPECT_EQ(spill_->pruned(), expired);
  EXPECT_EQ(spill_->versions(), all.size() - expired);
  EXPECT_LT(spill_->bytes(), bytes_before);
  for (uint32_t k = 0; k < 3; ++k) {
    std::vector<SpilledVersion> kept;
    ASSERT_TRUE(spill_
                    ->ScanAfter(Name(KeyId(k)), OrderKey(Timestamp::Min(), 0, 0),
                                [&](const SpilledVersion& v) {
                                  kept.push_back(v);
                                  return true;
                                })
                    .ok());
    std::vector<SpilledVersion> want;
    for (const auto& [key, v] : all) {
      if (key == KeyId(k) && v.expires > Timestamp{20, 0}) want.push_back(v);
    }
    EXPECT_EQ(kept, want) << "key " << k;
    // Above the prune point the newest version before a point is unchanged.
    for (int64_t ts = 21; ts <= 40; ++ts) {
      auto got = spill_->NewestBefore(Name(KeyId(k)), OrderKey(Timestamp{ts, 0}, 2, 0));
      ASSERT_TRUE(got.ok());
      ASSERT_TRUE(got->has_value());
      EXPECT_EQ((*got)->at.ts, (Timestamp{ts, 0})) << "key " << k;
    }
  }
}

// Key records: visible after a flush, the last one flushed wins, one key's never another's, and
// pruning the versions leaves them alone.
TEST_P(VersionSpillTest, KeepsTheLastRecordOfEachKey) {
  auto record = [](int64_t i) {
    return SpilledKey{.base = OrderKey(Timestamp{i, 0}, 0, static_cast<uint32_t>(i)),
                      .base_value = Value::Int(i * 7),
                      .trim_point = Timestamp{i + 1, 0},
                      .dropped_upto = OrderKey(Timestamp{i - 1, 0}, 0, 1),
                      .max_duration = i * 10};
  };
  spill_->PutKey(Name(KeyId(3)), record(1));
  auto got = spill_->FindKey(Name(KeyId(3)));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value()) << "not flushed yet";
  ASSERT_TRUE(spill_->Flush().ok());
  got = spill_->FindKey(Name(KeyId(3)));
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, record(1));
  spill_->PutKey(Name(KeyId(3)), record(2));
  spill_->PutKey(Name(KeyId(4)), record(3));
  ASSERT_TRUE(spill_->Flush().ok());
  spill_->PruneUpTo(Timestamp::Max());
  ASSERT_TRUE(spill_->Compact().ok());
  for (uint32_t k : {2u, 3u, 4u, 5u}) {
    got = spill_->FindKey(Name(KeyId(k)));
    ASSERT_TRUE(got.ok()) << got.status();
    if (k == 3 || k == 4) {
      ASSERT_TRUE(got->has_value()) << k;
      EXPECT_EQ(**got, record(k == 3 ? 2 : 3));
    } else {
      EXPECT_FALSE(got->has_value()) << k;
    }
  }
  EXPECT_EQ(spill_->versions(), 0u);
  EXPECT_EQ(spill_->pruned(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Implementations, VersionSpillTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? std::string("RocksDB") : std::string("Memory");
                         });

// A snapshot of the earlier format (keys named by KeyId, no format record), written with RocksDB
// directly, is renamed by RenameKeyIds and then reads as if written by name.
TEST(RocksVersionSpillTest, RenamesASnapshotOfTheEarlierFormat) {
  const std::string base = (std::filesystem::path(::testing::TempDir()) /
                            fmt::format("version_spill_rename_{}", getpid()))
                               .string();
  const std::string legacy = base + "/legacy";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(legacy);
  auto version = [](uint32_t k, int64_t ts) {
    SpilledVersion v;
    v.at = OrderKey(Timestamp{ts, 0}, 0, k * 100 + static_cast<uint64_t>(ts));
    v.expires = Timestamp::Max();
    v.value = Value::Int(static_cast<int64_t>(k) * 10 + ts);
    v.writer_name = fmt::format("w{}-{}", k, ts);
    return v;
  };
  auto record = [](uint32_t k) {
    return SpilledKey{.base = OrderKey(Timestamp{3, 0}, 0, k * 100 + 3),
                      .base_value = Value::Int(k),
                      .trim_point = Timestamp{3, 0},
                      .dropped_upto = OrderKey(Timestamp{1, 0}, 0, 1),
                      .max_duration = 0};
  };
  constexpr uint32_t kKeys = 9;
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, legacy,
                                  {{rocksdb::kDefaultColumnFamilyName, options}, {"keys", options}},
                                  &handles, &raw)
                    .ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    for (uint32_t k = 0; k < kKeys; ++k) {
      for (int64_t ts = 1; ts <= 3; ++ts) {
        ASSERT_TRUE(db->Put({}, spill_format::EncodeKeyIdKey(KeyId(k), version(k, ts).at),
                            spill_format::EncodeValue(version(k, ts)))
                        .ok());
      }
      ASSERT_TRUE(db->Put({}, handles[1], spill_format::EncodeKeyId(KeyId(k)),
                          spill_format::EncodeKeyRecord(record(k)))
                      .ok());
    }
    ASSERT_TRUE(db->Flush({}, handles).ok());
    for (rocksdb::ColumnFamilyHandle* h : handles)
      ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  }
  auto spill = RocksVersionSpill::OpenFromSnapshot(base + "/spill", legacy);
  ASSERT_TRUE(spill.ok()) << spill.status();
  ASSERT_TRUE((*spill)->named_by_key_id());
  // An id the history does not know is data loss.
  absl::Status unknown = (*spill)->RenameKeyIds([](KeyId k) -> std::optional<std::string> {
    if (k.value() == 5) return std::nullopt;
    return Name(k);
  });
  EXPECT_EQ(unknown.code(), absl::StatusCode::kDataLoss) << unknown;
  EXPECT_TRUE((*spill)->named_by_key_id());
  spill->reset();
  spill = RocksVersionSpill::OpenFromSnapshot(base + "/spill", legacy);
  ASSERT_TRUE(spill.ok()) << spill.status();
  ASSERT_TRUE((*spill)->RenameKeyIds([](KeyId k) { return std::optional(Name(k)); }).ok());
  EXPECT_FALSE((*spill)->named_by_key_id());
  auto check = [&](VersionSpill& s) {
    for (uint32_t k = 0; k < kKeys; ++k) {
      for (int64_t ts = 1; ts <= 3; ++ts) {
        auto found = s.Find(Name(KeyId(k)), version(k, ts).at);
        ASSERT_TRUE(found.ok()) << found.status();
        ASSERT_TRUE(found->has_value()) << k << " " << ts;
        EXPECT_EQ(**found, version(k, ts));
      }
      auto newest = s.NewestBefore(Name(KeyId(k)), OrderKey::Last(Timestamp{9, 0}));
      ASSERT_TRUE(newest.ok() && newest->has_value()) << k;
      EXPECT_EQ(**newest, version(k, 3));
      auto r = s.FindKey(Name(KeyId(k)));
      ASSERT_TRUE(r.ok() && r->has_value()) << k;
      EXPECT_EQ(**r, record(k));
    }
    auto none = s.FindKey(spill_format::EncodeKeyId(KeyId(1)));
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
  };
  check(**spill);
  // Renamed, it snapshots in the current format.
  ASSERT_TRUE((*spill)->Snapshot(base + "/snap").ok());
  spill->reset();
  auto again = RocksVersionSpill::OpenFromSnapshot(base + "/spill", base + "/snap");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE((*again)->named_by_key_id());
  check(**again);
  again->reset();
  std::filesystem::remove_all(base);
}

TEST(RocksVersionSpillTest, OpenClearsWhatAPreviousProcessLeft) {
  const std::string dir = (std::filesystem::path(::testing::TempDir()) /
                           fmt::format("version_spill_reopen_{}", getpid()))
                              .string();
  {
    auto spill = RocksVersionSpill::Open(dir);
    ASSERT_TRUE(spill.ok()) << spill.status();
    SpilledVersion v;
    v.at = OrderKey(Timestamp{5, 0}, 0, 1);
    (*spill)->Put(Name(KeyId(0)), v);
    ASSERT_TRUE((*spill)->Flush().ok());
    auto found = (*spill)->NewestBefore(Name(KeyId(0)), OrderKey(Timestamp{6, 0}, 0, 0));
    ASSERT_TRUE(found.ok());
    EXPECT_TRUE(found->has_value());
  }
  auto again = RocksVersionSpill::Open(dir);
  ASSERT_TRUE(again.ok()) << again.status();
  auto found = (*again)->NewestBefore(Name(KeyId(0)), OrderKey(Timestamp{6, 0}, 0, 0));
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->has_value());
  again->reset();
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(RocksVersionSpill::Open("").ok());
}

TEST(RocksVersionSpillTest, ReportsRocksDbMemoryWithinItsBounds) {
  const std::string dir = (std::filesystem::path(::testing::TempDir()) /
                           fmt::format("version_spill_memory_{}", getpid()))
                              .string();
  auto spill = RocksVersionSpill::Open(dir);
  ASSERT_TRUE(spill.ok()) << spill.status();
  for (uint32_t key = 0; key < 10000; ++key) {
    SpilledVersion v;
    v.at = OrderKey(Timestamp{key + 1, 0}, 0, 1);
    v.writer_name = fmt::format("writer-{}", key);
    (*spill)->Put(Name(KeyId(key)), v);
  }
  ASSERT_TRUE((*spill)->Flush().ok());
  const rocks::RocksDbMemory m = (*spill)->rocksdb_memory();
  EXPECT_GE(m.memtables, (*spill)->bytes());
  EXPECT_LE(m.memtables, uint64_t{64} << 20);
  EXPECT_LE(m.block_cache, uint64_t{64} << 20);
  EXPECT_LE(m.table_readers, uint64_t{1} << 20);
  spill->reset();
  std::filesystem::remove_all(dir);
}

// A spill's answers about keys [0, keys): each key's versions (ScanAfter from the start, then
// Find and NewestBefore of each), its newest one, and its record.
std::vector<std::string> Contents(VersionSpill& spill, uint32_t keys) {
  auto render = [](const SpilledVersion& v) {
    std::string out = fmt::format(
        "{}/{}/{}/{} expires {} start {} value {}:{} by {}", v.at.ts.ToString(), v.at.phase(),
        v.at.txn(), v.expires.ToString(), v.expires.ToString(), v.writer_start.ToString(),
        static_cast<int>(v.value.kind()), v.value.payload(), v.writer_name);
    for (const Value a : v.appends) {
      out += fmt::format(" +{}:{}", static_cast<int>(a.kind()), a.payload());
    }
    return out;
  };
  std::vector<std::string> out;
  const OrderKey first(Timestamp::Min(), 0, 0);
  const OrderKey last(Timestamp::Max(), 0, 0);
  for (uint32_t k = 0; k < keys; ++k) {
    const KeyId key(k);
    std::vector<SpilledVersion> versions;
    EXPECT_TRUE(spill
                    .ScanAfter(Name(key), first,
                               [&](const SpilledVersion& v) {
                                 versions.push_back(v);
                                 return true;
                               })
                    .ok());
    for (const SpilledVersion& v : versions) {
      out.push_back(fmt::format("key {} scan {}", k, render(v)));
      absl::StatusOr<std::optional<SpilledVersion>> found = spill.Find(Name(key), v.at);
      EXPECT_TRUE(found.ok() && found->has_value() && **found == v) << k;
      absl::StatusOr<std::optional<SpilledVersion>> before = spill.NewestBefore(Name(key), v.at);
      EXPECT_TRUE(before.ok());
      out.push_back(fmt::format("key {} before it {}", k,
                                before.ok() && before->has_value() ? render(**before) : "none"));
    }
    absl::StatusOr<std::optional<SpilledVersion>> newest = spill.NewestBefore(Name(key), last);
    EXPECT_TRUE(newest.ok());
    out.push_back(fmt::format("key {} newest {}", k,
                              newest.ok() && newest->has_value() ? render(**newest) : "none"));
    absl::StatusOr<std::optional<SpilledKey>> record = spill.FindKey(Name(key));
    EXPECT_TRUE(record.ok());
    if (record.ok() && record->has_value()) {
      const SpilledKey& r = **record;
      out.push_back(fmt::format("key {} record {}/{} value {} trim {} dropped {} longest {}", k,
                                r.base.ts.ToString(), r.base.txn(), r.base_value.payload(),
                                r.trim_point.ToString(), r.dropped_upto.ts.ToString(),
                                r.max_duration));
    }
  }
  return out;
}

// Versions of key `key` at commits from..to (one each), and a record of every third key.
void Fill(VersionSpill& spill, uint32_t keys, int64_t from, int64_t to) {
  for (uint32_t k = 0; k < keys; ++k) {
    for (int64_t ts = from; ts <= to; ++ts) {
      SpilledVersion v;
      v.at = OrderKey(Timestamp{ts, 0}, 0, static_cast<uint32_t>(ts * 100 + k));
      v.expires = Timestamp{ts + 1, 0};
      v.writer_start = Timestamp{ts - 1, 0};
      v.value = k % 2 == 0 ? Value::Int(ts * 10 + k) : Value::Absent();
      if (k % 2 == 1) v.appends = {Value::Int(ts), Value::BytesRef(k)};
      v.writer_name = fmt::format("w{}-{}", k, ts);
      spill.Put(Name(KeyId(k)), v);
    }
    if (k % 3 == 0) {
      spill.PutKey(Name(KeyId(k)), SpilledKey{.base = OrderKey(Timestamp{to, 0}, 0, k),
                                              .base_value = Value::Int(to + k),
                                              .trim_point = Timestamp{from, 0},
                                              .max_duration = to - from});
    }
  }
}

class RocksVersionSpillSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::path(::testing::TempDir()) /
            fmt::format("version_spill_snapshot_{}", getpid());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::string Dir(std::string_view name) const { return (root_ / name).string(); }

  std::filesystem::path root_;
};

TEST_F(RocksVersionSpillSnapshotTest, ACopyHoldsExactlyWhatWasFlushedBeforeIt) {
  auto opened = RocksVersionSpill::Open(Dir("spill"));
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<RocksVersionSpill> spill = *std::move(opened);
  Fill(*spill, 12, 1, 4);
  ASSERT_TRUE(spill->Flush().ok());
  const std::vector<std::string> before = Contents(*spill, 16);
  const uint64_t versions_before = spill->versions();
  ASSERT_EQ(versions_before, 48u);
  Fill(*spill, 16, 5, 6);  // put, not flushed: not in the snapshot
  ASSERT_TRUE(spill->Snapshot(Dir("snapshot")).ok());
  EXPECT_EQ(spill->Snapshot(Dir("snapshot")).code(), absl::StatusCode::kInvalidArgument);

  // The spill goes on.
  ASSERT_TRUE(spill->Flush().ok());
  const std::vector<std::string> after = Contents(*spill, 16);
  EXPECT_NE(after, before);
  EXPECT_GT(after.size(), before.size());

  // A copy of the snapshot answers as the spill did before it.
  {
    auto restored = RocksVersionSpill::OpenFromSnapshot(Dir("first"), Dir("snapshot"));
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(Contents(**restored, 16), before);
    EXPECT_EQ((*restored)->versions(), versions_before);
    EXPECT_GT((*restored)->bytes(), 0u);
    EXPECT_EQ((*restored)->pruned(), 0u);
    // Its table files are the snapshot's, linked.
    bool linked = false;
    for (const auto& entry : std::filesystem::directory_iterator(Dir("snapshot"))) {
      if (entry.path().extension() != ".sst") continue;
      linked = std::filesystem::equivalent(
          entry.path(), std::filesystem::path(Dir("first")) / entry.path().filename());
      if (!linked) break;
    }
    EXPECT_TRUE(linked);
    // It takes writes, prunes and compacts as its own.
    Fill(**restored, 20, 7, 8);
    ASSERT_TRUE((*restored)->Flush().ok());
    (*restored)->PruneUpTo(Timestamp{3, 0});
    ASSERT_TRUE((*restored)->Compact().ok());
    EXPECT_GT((*restored)->pruned(), 0u);
    EXPECT_NE(Contents(**restored, 20), before);
  }
  // The snapshot is untouched: a second copy answers as the first did.
  auto again = RocksVersionSpill::OpenFromSnapshot(Dir("second"), Dir("snapshot"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Contents(**again, 16), before);
  // And the same directory again, cleared first.
  again->reset();
  again = RocksVersionSpill::OpenFromSnapshot(Dir("first"), Dir("snapshot"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Contents(**again, 16), before);

  // The original spill kept working throughout.
  EXPECT_EQ(Contents(*spill, 16), after);
  Fill(*spill, 2, 9, 9);
  ASSERT_TRUE(spill->Flush().ok());
  ASSERT_TRUE(spill->Snapshot(Dir("later")).ok());
  auto later = RocksVersionSpill::OpenFromSnapshot(Dir("third"), Dir("later"));
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(Contents(**later, 16), Contents(*spill, 16));

  EXPECT_EQ(
      RocksVersionSpill::OpenFromSnapshot(Dir("fourth"), Dir("no-such-snapshot")).status().code(),
      absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace isowatch::engine
