// SPDX-License-Identifier: Apache-2.0
#include "isowatch/store/store.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <signal.h>
#include <spawn.h>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "isowatch/history/timestamp.h"
#include "isowatch/store/internal/codec.h"
#include "isowatch/store/violation_record.h"

extern char** environ;

namespace isowatch::store {
namespace {

using history::Timestamp;
using rocks::RocksDbMemory;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A log entry copied out of ReadLog's callback.
struct Entry {
  uint64_t position = 0;
  std::string stream;
  uint64_t seq = 0;
  std::optional<Timestamp> watermark;
  bool end_of_stream = false;
  std::string bytes;

  bool operator==(const Entry&) const = default;
};

std::vector<Entry> ReadAll(const Store& store, uint64_t from = 0) {
  std::vector<Entry> entries;
  const absl::Status s = store.ReadLog(from, [&](const LogEntry& e) {
    entries.push_back({e.position, std::string(e.stream), e.seq, e.watermark, e.end_of_stream,
                       std::string(e.bytes)});
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  return entries;
}

ViolationRecord Violation(std::string id, std::string level, std::string anomaly,
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

std::vector<std::string> Ids(const std::vector<ViolationRecord>& records) {
  std::vector<std::string> ids;
  ids.reserve(records.size());
  for (const ViolationRecord& r : records) ids.push_back(r.id);
  return ids;
}

bool SameRecord(const ViolationRecord& a, const ViolationRecord& b) {
  return a.id == b.id && a.checker == b.checker && a.level == b.level && a.anomaly == b.anomaly &&
         a.ext_kind == b.ext_kind && a.streams == b.streams &&
         a.finalised_unix_ms == b.finalised_unix_ms && a.json == b.json;
}

// Walks every page of a query and returns the ids in order.
std::vector<std::string> AllPages(const Store& store, const ViolationFilter& filter, size_t limit) {
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

TEST_F(StoreTest, ReadsTheLogBackInArrivalOrderAcrossStreams) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->next_log_position(), 1u);
  std::vector<Entry> expected;
  auto append = [&](std::string stream, uint64_t seq, std::optional<Timestamp> wm, bool eos) {
    const std::string bytes = fmt::format("{}#{}", stream, seq);
    auto pos = store->AppendBatch(stream, seq, wm, eos, bytes);
    ASSERT_TRUE(pos.ok()) << pos.status();
    if (!expected.empty()) {
      EXPECT_GT(*pos, expected.back().position);
    }
    expected.push_back({*pos, stream, seq, wm, eos, bytes});
  };
  append("a", 1, std::nullopt, false);
  append("b", 1, Timestamp{10, 0}, false);
  append("a", 2, Timestamp{5, 3}, false);
  append("c", 1, std::nullopt, false);
  append("b", 2, Timestamp{20, 1}, true);
  append("a", 3, std::nullopt, false);

  EXPECT_EQ(ReadAll(*store), expected);
  // From the middle.
  const std::vector<Entry> tail(expected.begin() + 3, expected.end());
  EXPECT_EQ(ReadAll(*store, expected[3].position), tail);
  EXPECT_TRUE(ReadAll(*store, store->next_log_position()).empty());

  // Stream records follow the durable batches.
  auto a = store->GetStream("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->durable_seq, 3u);
  EXPECT_EQ(a->watermark, (Timestamp{5, 3}));
  EXPECT_FALSE(a->closed);
  auto b = store->GetStream("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->durable_seq, 2u);
  EXPECT_TRUE(b->closed);
  EXPECT_EQ(b->watermark, (Timestamp{20, 1}));
  auto c = store->GetStream("c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->watermark, std::nullopt);
  EXPECT_EQ(store->GetStream("d").status().code(), absl::StatusCode::kNotFound);

  std::vector<std::string> names;
  std::set<uint32_t> ids;
  for (const StreamRecord& r : store->ListStreams()) {
    names.push_back(r.name);
    ids.insert(r.id);
  }
  EXPECT_THAT(names, ElementsAre("a", "b", "c"));
  EXPECT_EQ(ids.size(), 3u);
}

TEST_F(StoreTest, CallbackErrorStopsReadLog) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    ASSERT_TRUE(store->AppendBatch("s", seq, std::nullopt, false, "x").ok());
  }
  int calls = 0;
  const absl::Status s = store->ReadLog(0, [&](const LogEntry& e) {
    ++calls;
    return e.seq == 2 ? absl::CancelledError("enough") : absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 2);
}

TEST_F(StoreTest, RefusesASequenceNumberThatDoesNotFollowTheDurableOne) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  // A new stream starts at 1.
  auto gap = store->AppendBatch("s", 2, std::nullopt, false, "x");
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gap.status().message(), HasSubstr("\"s\""));
  EXPECT_EQ(store->GetStream("s").status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(store->AppendBatch("s", 1, std::nullopt, false, "one").ok());
  EXPECT_EQ(store->AppendBatch("s", 3, std::nullopt, false, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A re-sent batch is the caller's to recognise; the store refuses it.
  EXPECT_EQ(store->AppendBatch("s", 1, std::nullopt, false, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->AppendBatch("s", 0, std::nullopt, false, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->AppendBatch("", 1, std::nullopt, false, "x").status().code(),
            absl::StatusCode::kInvalidArgument);

  auto s = store->GetStream("s");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->durable_seq, 1u);
  const std::vector<Entry> log = ReadAll(*store);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].bytes, "one");
  EXPECT_TRUE(store->AppendBatch("s", 2, std::nullopt, false, "two").ok());
}

TEST_F(StoreTest, KeepsTheRefusalsOfRecentBatches) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  auto refusals = [&](std::string_view stream, uint64_t seq) {
    absl::StatusOr<std::string> r = store->BatchRefusals(stream, seq);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::string("error");
  };
  ASSERT_TRUE(store->AppendBatch("s", 1, std::nullopt, false, "one", true, "r1").ok());
  ASSERT_TRUE(store->AppendBatch("s", 2, std::nullopt, false, "two").ok());
  ASSERT_TRUE(store->AppendBatch("t", 1, std::nullopt, false, "one", false, "t1").ok());
  EXPECT_EQ(refusals("s", 1), "r1");
  EXPECT_EQ(refusals("s", 2), "");  // had none
  EXPECT_EQ(refusals("s", 3), "");  // not durable
  EXPECT_EQ(refusals("t", 1), "t1");
  EXPECT_EQ(refusals("u", 1), "");  // no such stream
  // A failed append keeps nothing.
  EXPECT_FALSE(store->AppendBatch("s", 4, std::nullopt, false, "x", true, "r4").ok());
  ASSERT_TRUE(store->AppendBatch("s", 3, std::nullopt, false, "three", true, "r3").ok());
  EXPECT_EQ(refusals("s", 4), "");

  // They survive reopening.
  store.reset();
  store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(refusals("s", 1), "r1");
  EXPECT_EQ(refusals("t", 1), "t1");

  // Refusals kept with batch n forget those of the stream's batches at or below
  // n - kKeptRefusalBatches, and only that stream's.
  const uint64_t keep = Store::kKeptRefusalBatches;
  for (uint64_t seq = 4; seq <= keep + 1; ++seq) {
    ASSERT_TRUE(store->AppendBatch("s", seq, std::nullopt, false, "b", false).ok());
  }
  EXPECT_EQ(refusals("s", 1), "r1");  // nothing kept since: nothing forgotten
  ASSERT_TRUE(store->AppendBatch("s", keep + 2, std::nullopt, false, "b", false, "r-late").ok());
  EXPECT_EQ(refusals("s", 1), "");
  EXPECT_EQ(refusals("s", 3), "r3");
  EXPECT_EQ(refusals("s", keep + 2), "r-late");
  EXPECT_EQ(refusals("t", 1), "t1");
}

TEST_F(StoreTest, AClosedStreamTakesNoMoreBatches) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AppendBatch("s", 1, std::nullopt, true, "last").ok());
  auto after = store->AppendBatch("s", 2, std::nullopt, false, "x");
  EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(after.status().message(), HasSubstr("closed"));
  EXPECT_EQ(ReadAll(*store).size(), 1u);
}

TEST_F(StoreTest, KeepsTheHighestWatermark) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AppendBatch("s", 1, Timestamp{7, 2}, false, "").ok());
  ASSERT_TRUE(store->AppendBatch("s", 2, Timestamp{7, 1}, false, "").ok());
  ASSERT_TRUE(store->AppendBatch("s", 3, std::nullopt, false, "").ok());
  EXPECT_EQ(store->GetStream("s")->watermark, (Timestamp{7, 2}));
  // The log keeps each batch's own watermark.
  const std::vector<Entry> log = ReadAll(*store);
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[1].watermark, (Timestamp{7, 1}));
  EXPECT_EQ(log[2].watermark, std::nullopt);
  ASSERT_TRUE(store->AppendBatch("s", 4, Timestamp{-3, 0}, false, "").ok());
  ASSERT_TRUE(store->AppendBatch("s", 5, Timestamp{8, -1}, false, "").ok());
  EXPECT_EQ(store->GetStream("s")->watermark, (Timestamp{8, -1}));
}

TEST_F(StoreTest, StreamHeaders) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->SetStreamHeader("h", std::string("\0init", 5)).ok());
  auto h = store->GetStream("h");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->durable_seq, 0u);
  EXPECT_EQ(h->header, std::string("\0init", 5));
  ASSERT_TRUE(store->AppendBatch("h", 1, Timestamp{1, 0}, false, "b").ok());
  EXPECT_EQ(store->GetStream("h")->header, std::string("\0init", 5));
  ASSERT_TRUE(store->SetStreamHeader("h", "second").ok());
  h = store->GetStream("h");
  EXPECT_EQ(h->header, "second");
  EXPECT_EQ(h->durable_seq, 1u);
  EXPECT_EQ(store->SetStreamHeader("", "x").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, ReopeningKeepsEverything) {
  std::vector<Entry> log;
  std::vector<StreamRecord> streams;
  uint64_t next_position = 0;
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->SetStreamHeader("x", "header-x").ok());
    for (uint64_t seq = 1; seq <= 4; ++seq) {
      ASSERT_TRUE(store
                      ->AppendBatch("x", seq, Timestamp{static_cast<int64_t>(seq) * 10, 0},
                                    seq == 4, fmt::format("x{}", seq))
                      .ok());
      ASSERT_TRUE(store->AppendBatch("y", seq, std::nullopt, false, fmt::format("y{}", seq)).ok());
    }
    ASSERT_TRUE(*store->PutViolation(Violation("v1", "si", "EXT", {"x"}, 100)));
    ASSERT_TRUE(*store->PutViolation(Violation("v2", "ser", "SESSION", {"x", "y"}, 200)));
    log = ReadAll(*store);
    streams = store->ListStreams();
    next_position = store->next_log_position();
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(ReadAll(*store), log);
  EXPECT_EQ(store->ListStreams(), streams);
  EXPECT_EQ(store->next_log_position(), next_position);
  EXPECT_EQ(store->CountViolations(), 2u);
  auto page = store->QueryViolations({}, 10, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->violations.size(), 2u);
  EXPECT_TRUE(SameRecord(page->violations[0], Violation("v1", "si", "EXT", {"x"}, 100)));
  EXPECT_TRUE(SameRecord(page->violations[1], Violation("v2", "ser", "SESSION", {"x", "y"}, 200)));

  // It carries on where it stopped: streams keep their ids and sequence numbers.
  EXPECT_EQ(store->AppendBatch("y", 4, std::nullopt, false, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto pos = store->AppendBatch("y", 5, std::nullopt, false, "y5");
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ(*pos, next_position);
  EXPECT_EQ(store->GetStream("y")->id, streams[1].id);
  EXPECT_EQ(store->AppendBatch("x", 5, std::nullopt, false, "").status().code(),
            absl::StatusCode::kFailedPrecondition);  // closed
  auto z = store->AppendBatch("z", 1, std::nullopt, false, "z1");
  ASSERT_TRUE(z.ok());
  EXPECT_GT(store->GetStream("z")->id, streams[1].id);
  EXPECT_FALSE(*store->PutViolation(Violation("v2", "ser", "SESSION", {"x", "y"}, 200)));
  EXPECT_TRUE(*store->PutViolation(Violation("v3", "si", "INT", {"z"}, 300)));
  EXPECT_EQ(store->CountViolations(), 3u);
}

TEST_F(StoreTest, TheDirectoryIsLockedWhileOpen) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  auto second = Store::Open(dir_);
  EXPECT_FALSE(second.ok());
}

TEST_F(StoreTest, CreatesMissingParentDirectories) {
  const std::string nested = (root_ / "a" / "b" / "db").string();
  auto store = OpenOrDie(nested);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->AppendBatch("s", 1, std::nullopt, false, "x").ok());
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(nested) / "CURRENT"));
}

TEST_F(StoreTest, OpeningAMissingStoreWithoutCreateFails) {
  auto store = Store::Open(dir_, {.sync_writes = true, .create_if_missing = false});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Store::Open("").status().code(), absl::StatusCode::kInvalidArgument);
}

// A copy of the directory taken while the store is open and written to is what a kill -9 (or a
// power failure, with synced writes) leaves behind: every acknowledged write must be in it.
TEST_F(StoreTest, ASnapshotOfTheOpenDirectoryHoldsEveryAcknowledgedWrite) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  std::vector<Entry> acknowledged;
  for (uint64_t seq = 1; seq <= 50; ++seq) {
    const std::string bytes(100 + seq, static_cast<char>('a' + seq % 26));
    auto pos = store->AppendBatch("s", seq, Timestamp{static_cast<int64_t>(seq), 0}, false, bytes);
    ASSERT_TRUE(pos.ok());
    acknowledged.push_back({*pos, "s", seq, Timestamp{static_cast<int64_t>(seq), 0}, false, bytes});
    if (seq % 10 == 0) {
      ASSERT_TRUE(*store->PutViolation(Violation(fmt::format("v{}", seq), "si", "EXT", {"s"}, 0)));
    }
  }
  const std::string copy = (root_ / "copy").string();
  std::filesystem::copy(dir_, copy, std::filesystem::copy_options::recursive);
  // Writes after the snapshot are not in it.
  ASSERT_TRUE(store->AppendBatch("s", 51, std::nullopt, false, "later").ok());

  auto reopened = OpenOrDie(copy);
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(ReadAll(*reopened), acknowledged);
  EXPECT_EQ(reopened->GetStream("s")->durable_seq, 50u);
  EXPECT_EQ(reopened->CountViolations(), 5u);
  EXPECT_FALSE(*reopened->PutViolation(Violation("v50", "si", "EXT", {"s"}, 0)));
  EXPECT_TRUE(reopened->AppendBatch("s", 51, std::nullopt, false, "again").ok());
}

// ---- kill -9: a child process writes until the parent kills it ----

constexpr const char* kChildDirEnv = "ISOWATCH_STORE_TEST_CHILD_DIR";
constexpr const char* kChildFdEnv = "ISOWATCH_STORE_TEST_CHILD_FD";

std::string BatchBytes(uint64_t seq) { return fmt::format("batch-{}-{}", seq, seq * 7919); }

// Not a test of its own: the body of the child process of the kill -9 test. Appends batches and
// stores a violation per batch, and reports each sequence number on the pipe once both are
// acknowledged.
TEST(StoreKillChild, WritesUntilKilled) {
  const char* dir = std::getenv(kChildDirEnv);
  const char* fd_text = std::getenv(kChildFdEnv);
  if (dir == nullptr || fd_text == nullptr) GTEST_SKIP() << "runs as the child of a kill test";
  const int fd = std::atoi(fd_text);
  auto store = Store::Open(dir);
  if (!store.ok()) _exit(2);
  for (uint64_t seq = 1; seq <= 1'000'000; ++seq) {
    if (!(*store)
             ->AppendBatch("s", seq, Timestamp{static_cast<int64_t>(seq), 0}, false,
                           BatchBytes(seq))
             .ok()) {
      _exit(3);
    }
    if (!(*store)->PutViolation(Violation(fmt::format("v{}", seq), "si", "EXT", {"s"}, 0)).ok()) {
      _exit(4);
    }
    if (write(fd, &seq, sizeof(seq)) != static_cast<ssize_t>(sizeof(seq))) _exit(5);
  }
  _exit(0);
}

TEST_F(StoreTest, KillDashNineLosesNoAcknowledgedWrite) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  setenv(kChildDirEnv, dir_.c_str(), 1);
  setenv(kChildFdEnv, std::to_string(fds[1]).c_str(), 1);
  std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=StoreKillChild.WritesUntilKilled";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  posix_spawn_file_actions_t actions;
  ASSERT_EQ(posix_spawn_file_actions_init(&actions), 0);
  // The child's own test output would interleave with ours.
  ASSERT_EQ(posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0), 0);
  pid_t child = 0;
  const int spawned = posix_spawn(&child, exe.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  unsetenv(kChildDirEnv);
  unsetenv(kChildFdEnv);
  close(fds[1]);
  ASSERT_EQ(spawned, 0);

  // Kill it once it has acknowledged a good number of writes.
  uint64_t last_acked = 0;
  uint64_t seq = 0;
  while (last_acked < 200 && read(fds[0], &seq, sizeof(seq)) == sizeof(seq)) {
    EXPECT_EQ(seq, last_acked + 1);
    last_acked = seq;
  }
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  // Acks written before it died.
  while (read(fds[0], &seq, sizeof(seq)) == sizeof(seq)) last_acked = seq;
  close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the child ended on its own with status " << wstatus;
  ASSERT_GE(last_acked, 200u);

  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  auto s = store->GetStream("s");
  ASSERT_TRUE(s.ok());
  // Everything acknowledged is there, and what is there is whole and in order: maybe one batch
  // more, durable but killed before its ack.
  EXPECT_GE(s->durable_seq, last_acked);
  EXPECT_LE(s->durable_seq, last_acked + 1);
  const std::vector<Entry> log = ReadAll(*store);
  ASSERT_EQ(log.size(), s->durable_seq);
  for (size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i].seq, i + 1);
    EXPECT_EQ(log[i].bytes, BatchBytes(i + 1));
    EXPECT_EQ(log[i].watermark, (Timestamp{static_cast<int64_t>(i + 1), 0}));
  }
  EXPECT_GE(store->CountViolations(), last_acked);
  EXPECT_LE(store->CountViolations(), s->durable_seq);
  const std::vector<std::string> ids = AllPages(*store, {}, 64);
  ASSERT_EQ(ids.size(), store->CountViolations());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], fmt::format("v{}", i + 1));
  // The store carries on.
  EXPECT_TRUE(store->AppendBatch("s", s->durable_seq + 1, std::nullopt, false, "more").ok());
}

// ---- Violations ----

TEST_F(StoreTest, AViolationPutTwiceIsStoredOnce) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  auto first = store->PutViolation(Violation("id-1", "si", "EXT", {"a"}, 10));
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  // Found again (a re-fed batch): same id, not stored again, even with other contents.
  auto again = store->PutViolation(Violation("id-1", "si", "EXT", {"a"}, 99));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  EXPECT_EQ(store->CountViolations(), 1u);
  auto page = store->QueryViolations({}, 10, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->violations.size(), 1u);
  EXPECT_EQ(page->violations[0].finalised_unix_ms, 10);
  EXPECT_EQ(store->PutViolation(Violation("", "si", "EXT", {}, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

class StoreQueryTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    store_ = OpenOrDie(dir_);
    ASSERT_NE(store_, nullptr);
    // 30 violations: level alternates, anomaly cycles through three kinds, streams vary.
    const char* anomalies[] = {"EXT", "SESSION", "NOCONFLICT"};
    for (int i = 0; i < 30; ++i) {
      std::vector<std::string> streams = {fmt::format("s{}", i % 4)};
      if (i % 5 == 0) streams.push_back("shared");
      ViolationRecord v = Violation(fmt::format("v{:02}", i), i % 2 == 0 ? "si" : "ser",
                                    anomalies[i % 3], streams, 1000 + 10 * i);
      all_.push_back(v);
      ASSERT_TRUE(*store_->PutViolation(v));
    }
  }

  std::vector<std::string> Expected(const std::function<bool(const ViolationRecord&)>& pred) {
    std::vector<std::string> ids;
    for (const ViolationRecord& v : all_) {
      if (pred(v)) ids.push_back(v.id);
    }
    return ids;
  }

  std::unique_ptr<Store> store_;
  std::vector<ViolationRecord> all_;
};

TEST_F(StoreQueryTest, FiltersByLevelAnomalyStreamAndTime) {
  ViolationFilter f;
  f.level = "ser";
  EXPECT_EQ(AllPages(*store_, f, 100),
            Expected([](const ViolationRecord& v) { return v.level == "ser"; }));
  EXPECT_EQ(AllPages(*store_, f, 100).size(), 15u);

  f = {};
  f.anomaly = "SESSION";
  EXPECT_EQ(AllPages(*store_, f, 100),
            Expected([](const ViolationRecord& v) { return v.anomaly == "SESSION"; }));

  f = {};
  f.stream = "shared";
  EXPECT_THAT(AllPages(*store_, f, 100), ElementsAre("v00", "v05", "v10", "v15", "v20", "v25"));
  f.stream = "s1";
  EXPECT_THAT(AllPages(*store_, f, 100),
              ElementsAre("v01", "v05", "v09", "v13", "v17", "v21", "v25", "v29"));

  f = {};
  f.since_unix_ms = 1050;  // inclusive
  f.until_unix_ms = 1100;  // exclusive
  EXPECT_THAT(AllPages(*store_, f, 100), ElementsAre("v05", "v06", "v07", "v08", "v09"));

  f = {};
  f.level = "si";
  f.anomaly = "EXT";
  f.since_unix_ms = 1100;
  EXPECT_EQ(AllPages(*store_, f, 100), Expected([](const ViolationRecord& v) {
              return v.level == "si" && v.anomaly == "EXT" && v.finalised_unix_ms >= 1100;
            }));
  f.anomaly = "G2-item";
  EXPECT_TRUE(AllPages(*store_, f, 100).empty());

  // Records come back whole.
  auto page = store_->QueryViolations({}, 1, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->violations.size(), 1u);
  EXPECT_TRUE(SameRecord(page->violations[0], all_[0]));
}

TEST_F(StoreQueryTest, PagingWalksEveryRecordExactlyOnce) {
  const std::vector<std::string> everything = Expected([](const ViolationRecord&) { return true; });
  ViolationFilter ser;
  ser.level = "ser";
  const std::vector<std::string> sers =
      Expected([](const ViolationRecord& v) { return v.level == "ser"; });
  for (size_t limit : {1, 2, 3, 7, 10, 15, 29, 30, 31}) {
    SCOPED_TRACE(limit);
    EXPECT_EQ(AllPages(*store_, {}, limit), everything);
    EXPECT_EQ(AllPages(*store_, ser, limit), sers);
  }
  // The last page has no token, even when it is full.
  auto page = store_->QueryViolations({}, 30, "");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->violations.size(), 30u);
  EXPECT_TRUE(page->next_page_token.empty());

  // Records stored after a page was served show up on the following pages.
  page = store_->QueryViolations({}, 29, "");
  ASSERT_TRUE(page.ok());
  ASSERT_FALSE(page->next_page_token.empty());
  ASSERT_TRUE(*store_->PutViolation(Violation("late", "si", "EXT", {"s0"}, 5000)));
  auto next = store_->QueryViolations({}, 29, page->next_page_token);
  ASSERT_TRUE(next.ok());
  EXPECT_THAT(Ids(next->violations), ElementsAre("v29", "late"));
}

TEST_F(StoreQueryTest, RefusesABadPageTokenOrLimit) {
  for (std::string_view token :
       {"x", "zzzzzzzzzzzzzzzz", "000000000000001", "00000000000000001", "-000000000000001",
        "+000000000000001", " 000000000000001", "0000000000000001 "}) {
    SCOPED_TRACE(token);
    auto page = store_->QueryViolations({}, 5, token);
    EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(page.status().message(), HasSubstr("page_token"));
  }
  EXPECT_EQ(store_->QueryViolations({}, 0, "").status().code(), absl::StatusCode::kInvalidArgument);
  // A well-formed token past the end is an empty last page.
  auto page = store_->QueryViolations({}, 5, "ffffffffffffffff");
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->violations.empty());
  EXPECT_TRUE(page->next_page_token.empty());
}

// ---- Log truncation ----

TEST_F(StoreTest, TruncationDropsTheOldEntriesAndKeepsThePositions) {
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    for (uint64_t seq = 1; seq <= 10; ++seq) {
      ASSERT_TRUE(store->AppendBatch("s", seq, std::nullopt, false, "b").ok());
    }
    EXPECT_EQ(store->TruncateLogBefore(12).code(), absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(store->TruncateLogBefore(6).ok());
    EXPECT_EQ(store->first_log_position(), 6u);
    ASSERT_TRUE(store->TruncateLogBefore(3).ok());  // already done
    EXPECT_EQ(store->first_log_position(), 6u);
    const std::vector<Entry> log = ReadAll(*store);
    ASSERT_EQ(log.size(), 5u);
    EXPECT_EQ(log.front().seq, 6u);
    // Everything: the next position survives an empty log.
    ASSERT_TRUE(store->TruncateLogBefore(store->next_log_position()).ok());
    EXPECT_TRUE(ReadAll(*store).empty());
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->first_log_position(), 11u);
  EXPECT_EQ(store->next_log_position(), 11u);
  EXPECT_EQ(store->GetStream("s")->durable_seq, 10u);
  auto pos = store->AppendBatch("s", 11, std::nullopt, false, "b");
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ(*pos, 11u);
}

// ---- Checkpoints ----

// The keys of the `checkpoint` column family of the closed store in `dir`.
std::vector<std::string> CheckpointKeys(const std::string& dir) {
  RawDb raw(dir);
  std::vector<std::string> keys;
  std::unique_ptr<rocksdb::Iterator> it(raw.Db().NewIterator({}, raw.Cf("checkpoint")));
  for (it->SeekToFirst(); it->Valid(); it->Next()) keys.push_back(it->key().ToString());
  EXPECT_TRUE(it->status().ok());
  return keys;
}

// `size` bytes that differ from chunk to chunk.
std::string Blob(size_t size, uint64_t seed) {
  std::string blob(size, '\0');
  uint64_t x = seed;
  for (char& c : blob) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    c = static_cast<char>(x >> 56);
  }
  return blob;
}

std::optional<CheckpointRecord> CheckpointOrDie(const Store& store) {
  absl::StatusOr<std::optional<CheckpointRecord>> record = store.GetCheckpoint();
  EXPECT_TRUE(record.ok()) << record.status();
  return record.ok() ? *std::move(record) : std::nullopt;
}

TEST_F(StoreTest, ACheckpointReplacesTheLastOneAndTruncatesTheLog) {
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(CheckpointOrDie(*store), std::nullopt);
    for (uint64_t seq = 1; seq <= 10; ++seq) {
      ASSERT_TRUE(store->AppendBatch("s", seq, std::nullopt, false, "b").ok());
    }
    EXPECT_EQ(store->PutCheckpoint(12, "x").code(), absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(store->PutCheckpoint(4, "first").ok());
    EXPECT_EQ(CheckpointOrDie(*store), (CheckpointRecord{1, 4, "first"}));
    EXPECT_EQ(store->first_log_position(), 4u);
    std::vector<Entry> log = ReadAll(*store);
    ASSERT_EQ(log.size(), 7u);
    EXPECT_EQ(log.front().position, 4u);
    // Below the log start the entries are gone: refused.
    EXPECT_EQ(store->PutCheckpoint(3, "x").code(), absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(store->PutCheckpoint(4, "").ok());
    EXPECT_EQ(CheckpointOrDie(*store), (CheckpointRecord{2, 4, ""}));
    EXPECT_EQ(ReadAll(*store).size(), 7u);
    // Everything.
    ASSERT_TRUE(store->PutCheckpoint(store->next_log_position(), "second").ok());
    EXPECT_EQ(CheckpointOrDie(*store), (CheckpointRecord{3, 11, "second"}));
    EXPECT_TRUE(ReadAll(*store).empty());
    EXPECT_EQ(store->first_log_position(), 11u);
  }
  // The replaced generations' chunks are gone.
  EXPECT_THAT(CheckpointKeys(dir_), ElementsAre(internal::EncodeCheckpointChunkKey(3, 0)));
  {
    RawDb raw(dir_);
    std::string value;
    ASSERT_TRUE(raw.Db().Get({}, raw.Cf("meta"), "log_start", &value).ok());
    EXPECT_EQ(value, internal::EncodeNumberKey(11));
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(CheckpointOrDie(*store), (CheckpointRecord{3, 11, "second"}));
  EXPECT_EQ(store->first_log_position(), 11u);
  EXPECT_EQ(store->next_log_position(), 11u);
  ASSERT_EQ(*store->AppendBatch("s", 11, std::nullopt, false, "b"), 11u);
  ASSERT_TRUE(store->PutCheckpoint(11, "third").ok());  // after the reopening: the next one
  EXPECT_EQ(CheckpointOrDie(*store), (CheckpointRecord{4, 11, "third"}));
  EXPECT_EQ(ReadAll(*store).size(), 1u);
}

TEST_F(StoreTest, ALargeCheckpointIsStoredInChunks) {
  const std::string large = Blob(2 * Store::kCheckpointChunkBytes + 17, 1);
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->PutCheckpoint(1, large).ok());
    const std::optional<CheckpointRecord> back = CheckpointOrDie(*store);
    ASSERT_TRUE(back.has_value());
    EXPECT_TRUE(back->blob == large);
  }
  {
    RawDb raw(dir_);
    std::vector<size_t> sizes;
    std::unique_ptr<rocksdb::Iterator> it(raw.Db().NewIterator({}, raw.Cf("checkpoint")));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      EXPECT_EQ(it->key().ToString(), internal::EncodeCheckpointChunkKey(1, sizes.size()));
      sizes.push_back(it->value().size());
    }
    EXPECT_THAT(sizes, ElementsAre(Store::kCheckpointChunkBytes, Store::kCheckpointChunkBytes, 17));
    std::string meta;
    ASSERT_TRUE(raw.Db().Get({}, raw.Cf("meta"), "checkpoint", &meta).ok());
    absl::StatusOr<internal::CheckpointMeta> decoded = internal::DecodeCheckpointMeta(meta);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(meta.size(), 36u);  // as docs/store-format.md says
    EXPECT_EQ(decoded->generation, 1u);
    EXPECT_EQ(decoded->log_position, 1u);
    EXPECT_EQ(decoded->size, large.size());
    EXPECT_EQ(decoded->chunks, 3u);
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  const std::optional<CheckpointRecord> back = CheckpointOrDie(*store);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->blob == large);
  ASSERT_TRUE(store->PutCheckpoint(1, "small").ok());
  store.reset();
  EXPECT_THAT(CheckpointKeys(dir_), ElementsAre(internal::EncodeCheckpointChunkKey(2, 0)));
}

TEST_F(StoreTest, ADamagedCheckpointIsDataLoss) {
  const std::string blob = Blob(Store::kCheckpointChunkBytes + 100, 2);
  using Damage = std::function<void(RawDb&)>;
  const std::vector<std::pair<std::string, Damage>> damages = {
      {"a byte changed",
       [](RawDb& raw) {
         std::string chunk;
         const std::string key = internal::EncodeCheckpointChunkKey(1, 1);
         ASSERT_TRUE(raw.Db().Get({}, raw.Cf("checkpoint"), key, &chunk).ok());
         chunk[50] = static_cast<char>(chunk[50] ^ 1);
         ASSERT_TRUE(raw.Db().Put({}, raw.Cf("checkpoint"), key, chunk).ok());
       }},
      {"a chunk missing",
       [](RawDb& raw) {
         ASSERT_TRUE(raw.Db()
                         .Delete({}, raw.Cf("checkpoint"), internal::EncodeCheckpointChunkKey(1, 1))
                         .ok());
       }},
      {"a chunk cut short",
       [](RawDb& raw) {
         ASSERT_TRUE(
             raw.Db()
                 .Put({}, raw.Cf("checkpoint"), internal::EncodeCheckpointChunkKey(1, 0), "short")
                 .ok());
       }},
      {"a chunk count that does not fit the size",
       [](RawDb& raw) {
         std::string meta;
         ASSERT_TRUE(raw.Db().Get({}, raw.Cf("meta"), "checkpoint", &meta).ok());
         absl::StatusOr<internal::CheckpointMeta> decoded = internal::DecodeCheckpointMeta(meta);
         ASSERT_TRUE(decoded.ok());
         decoded->chunks = 1;
         ASSERT_TRUE(
             raw.Db()
                 .Put({}, raw.Cf("meta"), "checkpoint", internal::EncodeCheckpointMeta(*decoded))
                 .ok());
       }},
  };
  for (const auto& [name, damage] : damages) {
    std::filesystem::remove_all(dir_);
    {
      auto store = OpenOrDie(dir_);
      ASSERT_NE(store, nullptr);
      ASSERT_TRUE(store->PutCheckpoint(1, blob).ok());
    }
    {
      RawDb raw(dir_);
      damage(raw);
    }
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->GetCheckpoint().status().code(), absl::StatusCode::kDataLoss) << name;
    // A new checkpoint replaces the damaged one.
    ASSERT_TRUE(store->PutCheckpoint(1, "again").ok()) << name;
    EXPECT_EQ(CheckpointOrDie(*store), (CheckpointRecord{2, 1, "again"})) << name;
  }
  // A record that does not decode: the store does not open.
  {
    RawDb raw(dir_);
    ASSERT_TRUE(raw.Db().Put({}, raw.Cf("meta"), "checkpoint", "\x01\x02").ok());
  }
  EXPECT_EQ(Store::Open(dir_).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(StoreTest, AStoreWithoutTheCheckpointColumnFamilyOpens) {
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->AppendBatch("s", 1, std::nullopt, false, "b").ok());
  }
  {
    // As a store written before the column family existed.
    RawDb raw(dir_);
    ASSERT_TRUE(raw.Db().DropColumnFamily(raw.Cf("checkpoint")).ok());
  }
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(CheckpointOrDie(*store), std::nullopt);
    EXPECT_EQ(ReadAll(*store).size(), 1u);
    ASSERT_TRUE(store->PutCheckpoint(2, "c").ok());
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(CheckpointOrDie(*store), (CheckpointRecord{1, 2, "c"}));
}

TEST(StoreCodecTest, CheckpointRecords) {
  const internal::CheckpointMeta meta{
      .generation = 7, .log_position = 1u << 20, .size = 5, .chunks = 1, .checksum = ~0ull};
  const std::string bytes = internal::EncodeCheckpointMeta(meta);
  ASSERT_EQ(bytes.size(), 36u);
  absl::StatusOr<internal::CheckpointMeta> back = internal::DecodeCheckpointMeta(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->generation, 7u);
  EXPECT_EQ(back->log_position, 1u << 20);
  EXPECT_EQ(back->size, 5u);
  EXPECT_EQ(back->chunks, 1u);
  EXPECT_EQ(back->checksum, ~0ull);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_EQ(internal::DecodeCheckpointMeta(bytes.substr(0, cut)).status().code(),
              absl::StatusCode::kDataLoss);
  }
  EXPECT_EQ(internal::DecodeCheckpointMeta(bytes + "x").status().code(),
            absl::StatusCode::kDataLoss);
  // Chunk keys sort by generation, then index.
  EXPECT_EQ(internal::EncodeCheckpointChunkKey(0x0102, 3),
            std::string("\0\0\0\0\0\0\x01\x02\0\0\0\x03", 12));
  EXPECT_LT(internal::EncodeCheckpointChunkKey(1, 0xffffffff),
            internal::EncodeCheckpointChunkKey(2, 0));
}

// ---- Format ----

TEST_F(StoreTest, RefusesAnUnknownFormatVersion) {
  { ASSERT_NE(OpenOrDie(dir_), nullptr); }
  {
    RawDb raw(dir_);
    std::string value;
    ASSERT_TRUE(raw.Db().Get({}, raw.Cf("meta"), "format_version", &value).ok());
    EXPECT_EQ(value, std::string("\0\0\0\2", 4));  // as docs/store-format.md says
    ASSERT_TRUE(
        raw.Db().Put({}, raw.Cf("meta"), "format_version", std::string("\0\0\0\7", 4)).ok());
  }
  auto store = Store::Open(dir_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("format version 7"));
  EXPECT_THAT(store.status().message(), HasSubstr("reads version 2"));
}

TEST_F(StoreTest, RefusesARocksDbDatabaseThatIsNotAStore) {
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put({}, "some", "data").ok());
    ASSERT_TRUE(db->Close().ok());
  }
  auto store = Store::Open(dir_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("not an isowatch store"));
}

TEST_F(StoreTest, ACorruptRecordIsDataLoss) {
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(*store->PutViolation(Violation("v", "si", "EXT", {"s"}, 1)));
  }
  {
    RawDb raw(dir_);
    ASSERT_TRUE(raw.Db()
                    .Put({}, raw.Cf("violations"), internal::EncodeNumberKey(1),
                         std::string("\0\0\0\xff", 4))
                    .ok());
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->QueryViolations({}, 10, "").status().code(), absl::StatusCode::kDataLoss);
}

TEST(StoreCodecTest, RoundTripsAndRejectsDamage) {
  ViolationRecord v = Violation("id", "ser", "EXT", {"a", "", "c"}, -5);
  v.json = std::string("{\0}", 3);
  const std::string bytes = internal::EncodeViolation(v);
  auto back = internal::DecodeViolation(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(SameRecord(*back, v));
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_EQ(internal::DecodeViolation(bytes.substr(0, cut)).status().code(),
              absl::StatusCode::kDataLoss);
  }
  EXPECT_FALSE(internal::DecodeViolation(bytes + "x").ok());

  internal::StreamValue s{.id = 3,
                          .durable_seq = 1ull << 40,
                          .watermark = Timestamp{-1, 1},
                          .closed = true,
                          .header = "h"};
  auto s_back = internal::DecodeStreamValue(internal::EncodeStreamValue(s));
  ASSERT_TRUE(s_back.ok());
  EXPECT_EQ(s_back->id, 3u);
  EXPECT_EQ(s_back->durable_seq, 1ull << 40);
  EXPECT_EQ(s_back->watermark, (Timestamp{-1, 1}));
  EXPECT_TRUE(s_back->closed);
  EXPECT_EQ(s_back->header, "h");
  std::string bad_flags = internal::EncodeStreamValue(s);
  bad_flags[12] = static_cast<char>(0x80);
  EXPECT_EQ(internal::DecodeStreamValue(bad_flags).status().code(), absl::StatusCode::kDataLoss);

  // Keys sort numerically.
  EXPECT_LT(internal::EncodeNumberKey(255), internal::EncodeNumberKey(256));
  EXPECT_EQ(internal::EncodeNumberKey(0x0102030405060708ull), "\x01\x02\x03\x04\x05\x06\x07\x08");
}

// ---- Concurrency ----

TEST_F(StoreTest, ConcurrentAppendsPutsAndQueries) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  constexpr int kStreams = 4;
  constexpr uint64_t kBatches = 40;
  std::vector<std::thread> threads;
  threads.reserve(kStreams + 4);
  for (int t = 0; t < kStreams; ++t) {
    threads.emplace_back([&store, t] {
      const std::string stream = fmt::format("t{}", t);
      for (uint64_t seq = 1; seq <= kBatches; ++seq) {
        EXPECT_TRUE(store
                        ->AppendBatch(stream, seq, std::nullopt, seq == kBatches,
                                      fmt::format("{}:{}", stream, seq))
                        .ok());
      }
    });
  }
  // Two threads race to append the same batches of one stream: each batch is taken once.
  std::atomic<int> shared_ok{0};
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&store, &shared_ok] {
      for (uint64_t seq = 1; seq <= kBatches; ++seq) {
        if (store->AppendBatch("shared", seq, std::nullopt, false, "x").ok()) ++shared_ok;
      }
    });
  }
  threads.emplace_back([&store] {
    for (int i = 0; i < 40; ++i) {
      EXPECT_TRUE(
          store->PutViolation(Violation(fmt::format("v{}", i % 30), "si", "EXT", {}, i)).ok());
    }
  });
  threads.emplace_back([&store] {
    for (int i = 0; i < 20; ++i) {
      auto page = store->QueryViolations({}, 7, "");
      EXPECT_TRUE(page.ok());
      EXPECT_LE(page->violations.size(), 7u);
      store->ListStreams();
    }
  });
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(store->CountViolations(), 30u);
  auto shared = store->GetStream("shared");
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(static_cast<uint64_t>(shared_ok.load()), shared->durable_seq);
  // Per stream, the log holds 1..n in position order.
  std::map<std::string, uint64_t> last_seq;
  for (const Entry& e : ReadAll(*store)) {
    EXPECT_EQ(e.seq, last_seq[e.stream] + 1) << e.stream;
    last_seq[e.stream] = e.seq;
  }
  for (int t = 0; t < kStreams; ++t) {
    EXPECT_EQ(last_seq[fmt::format("t{}", t)], kBatches);
    EXPECT_TRUE(store->GetStream(fmt::format("t{}", t))->closed);
  }
  EXPECT_EQ(last_seq["shared"], shared->durable_seq);
}

}  // namespace
}  // namespace isowatch::store

namespace isowatch::store {
namespace {

TEST_F(StoreTest, UnsyncedAppendsMadeDurableBySyncLogAreKeptAcrossReopening) {
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    // Appends of several streams without sync, with syncs running at the same time.
    std::vector<std::thread> writers;
    for (int w = 0; w < 3; ++w) {
      writers.emplace_back([&store, w] {
        const std::string stream = fmt::format("s{}", w);
        for (uint64_t seq = 1; seq <= 50; ++seq) {
          auto pos = store->AppendBatch(stream, seq, Timestamp{static_cast<int64_t>(seq), 0}, false,
                                        fmt::format("{}#{}", stream, seq), /*sync=*/false);
          EXPECT_TRUE(pos.ok()) << pos.status();
          if (seq % 10 == 0) {
            EXPECT_TRUE(store->SyncLog().ok());
          }
        }
      });
    }
    for (std::thread& t : writers) t.join();
    ASSERT_TRUE(store->SyncLog().ok());
    EXPECT_EQ(store->GetStream("s1")->durable_seq, 50u);
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  const std::vector<Entry> entries = ReadAll(*store);
  ASSERT_EQ(entries.size(), 150u);
  std::map<std::string, uint64_t> last;
  for (const Entry& e : entries) {
    EXPECT_EQ(e.seq, last[e.stream] + 1) << e.stream;
    last[e.stream] = e.seq;
    EXPECT_EQ(e.bytes, fmt::format("{}#{}", e.stream, e.seq));
  }
  for (int w = 0; w < 3; ++w) {
    auto r = store->GetStream(fmt::format("s{}", w));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->durable_seq, 50u);
    EXPECT_EQ(r->watermark, (Timestamp{50, 0}));
  }
}

TEST_F(StoreTest, SyncLogWithoutSyncWritesIsANoOp) {
  auto store = Store::Open(dir_, {.sync_writes = false});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->AppendBatch("a", 1, std::nullopt, false, "x", /*sync=*/false).ok());
  EXPECT_TRUE((*store)->SyncLog().ok());
  EXPECT_EQ(ReadAll(**store).size(), 1u);
}

TEST_F(StoreTest, ReportsRocksDbMemoryWithinItsBounds) {
  const std::string bytes(1000, 'x');
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    for (uint64_t seq = 1; seq <= 2000; ++seq) {
      ASSERT_TRUE(store->AppendBatch("s", seq, std::nullopt, false, bytes, /*sync=*/false).ok());
    }
    const RocksDbMemory m = store->rocksdb_memory();
    EXPECT_GE(m.memtables, 2000u * bytes.size());
    EXPECT_LE(m.memtables, uint64_t{80} << 20);
    EXPECT_EQ(m.total(), m.memtables + m.table_readers + m.block_cache);
  }
  // Reopened, the log is in SST files: reading it back goes through the block cache.
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  uint64_t read = 0;
  ASSERT_TRUE(store
                  ->ReadLog(1,
                            [&](const LogEntry&) {
                              ++read;
                              return absl::OkStatus();
                            })
                  .ok());
  EXPECT_EQ(read, 2000u);
  const RocksDbMemory m = store->rocksdb_memory();
  EXPECT_GT(m.block_cache, 0u);
  EXPECT_LE(m.block_cache, uint64_t{80} << 20);
  EXPECT_LE(m.table_readers, uint64_t{1} << 20);
}

}  // namespace
}  // namespace isowatch::store
