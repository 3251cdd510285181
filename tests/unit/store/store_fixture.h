// SPDX-License-Identifier: Apache-2.0
// StoreTest, for the store tests: a store directory per test, and the log entries and violation
// records they write and read back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "isowatch/history/timestamp.h"
#include "isowatch/store/store.h"
#include "isowatch/store/violation_record.h"

namespace isowatch::store {

// A log entry copied out of ReadLog's callback.
struct Entry {
  uint64_t position = 0;
  std::string stream;
  uint64_t seq = 0;
  std::optional<history::Timestamp> watermark;
  bool end_of_stream = false;
  std::string bytes;

  bool operator==(const Entry&) const = default;
};

inline std::vector<Entry> ReadAll(const Store& store, uint64_t from = 0) {
  std::vector<Entry> entries;
  const absl::Status s = store.ReadLog(from, [&](const LogEntry& e) {
    entries.push_back({e.position, std::string(e.stream), e.seq, e.watermark, e.end_of_stream,
                       std::string(e.bytes)});
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  return entries;
}

// Opens the RocksDB database of a closed store directly, with all its column families.
class RawDb {
 public:
  explicit RawDb(const std::string& dir) {
    std::vector<std::string> names;
    EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    descriptors.reserve(names.size());
    for (const std::string& n : names) descriptors.emplace_back(n, rocksdb::ColumnFamilyOptions());
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status s =
        rocksdb::DB::Open(rocksdb::DBOptions(), dir, descriptors, &handles_, &raw);
    EXPECT_TRUE(s.ok()) << s.ToString();
    db_.reset(raw);
  }
  ~RawDb() {
    for (auto* h : handles_) EXPECT_TRUE(db_->DestroyColumnFamilyHandle(h).ok());
    EXPECT_TRUE(db_->Close().ok());
  }
  rocksdb::DB& Db() { return *db_; }
  rocksdb::ColumnFamilyHandle* Cf(std::string_view name) {
    for (auto* h : handles_) {
      if (h->GetName() == name) return h;
    }
    ADD_FAILURE() << "no column family " << name;
    return nullptr;
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

inline ViolationRecord Violation(std::string id, std::string level, std::string anomaly,
                                 std::vector<std::string> streams, int64_t finalised_ms) {
  ViolationRecord v;
  v.id = std::move(id);
  v.checker = "online";
  v.level = std::move(level);
  v.anomaly = std::move(anomaly);
  v.ext_kind = v.anomaly == "EXT" ? "never" : "";
  v.streams = std::move(streams);
  v.finalised_unix_ms = finalised_ms;
  v.json = fmt::format(R"({{"id":"{}"}})", v.id);
  return v;
}

inline ViolationKind Kind(std::string checker, std::string level, std::string anomaly) {
  return ViolationKind{
      .checker = std::move(checker), .level = std::move(level), .anomaly = std::move(anomaly)};
}

inline bool SameRecord(const ViolationRecord& a, const ViolationRecord& b) {
  return a.id == b.id && a.checker == b.checker && a.level == b.level && a.anomaly == b.anomaly &&
         a.ext_kind == b.ext_kind && a.streams == b.streams &&
         a.finalised_unix_ms == b.finalised_unix_ms && a.json == b.json;
}

// Walks every page of a query and returns the ids in order.
inline std::vector<std::string> AllPages(const Store& store, const ViolationFilter& filter,
                                         size_t limit) {
  std::vector<std::string> ids;
  std::string token;
  for (int pages = 0; pages < 1000; ++pages) {
    auto page = store.QueryViolations(filter, limit, token);
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) break;
    EXPECT_LE(page->violations.size(), limit);
    for (const ViolationRecord& r : page->violations) ids.push_back(r.id);
    if (page->next_page_token.empty()) break;
    EXPECT_EQ(page->violations.size(), limit) << "only the last page may be short";
    token = page->next_page_token;
  }
  return ids;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::path(::testing::TempDir()) /
            fmt::format("isowatch_store_{}_{}", info->name(), getpid());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    dir_ = (root_ / "db").string();
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::unique_ptr<Store> OpenOrDie(const std::string& dir) {
    auto store = Store::Open(dir);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  std::filesystem::path root_;
  std::string dir_;
};

}  // namespace isowatch::store
