// SPDX-License-Identifier: Apache-2.0
// What a store keeps on disk: reopened, copied while open or killed with -9 it has every
// acknowledged write; checkpoints in chunks; unknown formats and damaged records refused.
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <signal.h>
#include <spawn.h>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "isowatch/history/timestamp.h"
#include "isowatch/store/internal/codec.h"
#include "isowatch/store/store.h"
#include "isowatch/store/violation_record.h"

#include "tests/unit/store/store_fixture.h"

extern char** environ;

namespace isowatch::store {
namespace {

using history::Timestamp;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace isowatch::store
