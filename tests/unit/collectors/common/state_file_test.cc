// SPDX-License-Identifier: Apache-2.0
#include "collectors/common/state_file.h"

#include <fstream>
#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectors/common/state_dir_lock.h"
#include "tests/testing/temp_dir.h"

namespace isowatch::collectors {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(StateFileTest, NoFileIsNoState) {
  testing::TempDir dir;
  const StateFile file(dir.Path(), {"handled"});
  const auto loaded = file.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->has_value());
}

TEST(StateFileTest, SavesAndLoadsEveryField) {
  testing::TempDir dir;
  const StateFile file(dir.Path(), {"released", "watermark"});
  CollectorState s{.stream = "tidb", .run = 3, .durable = {40, 39}};
  s.in_flight.push_back({.seq = 7, .position = {50, 45}});
  s.in_flight.push_back({.seq = 8, .position = {60, 45}});
  s.input = "kafka ticdc 12,-2,7";
  ASSERT_TRUE(file.Save(s).ok());
  const auto loaded = file.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  const CollectorState& l = **loaded;
  EXPECT_EQ(l.stream, "tidb");
  EXPECT_EQ(l.run, 3u);
  EXPECT_THAT(l.durable, ElementsAre(40, 39));
  EXPECT_EQ(l.input, "kafka ticdc 12,-2,7");
  ASSERT_EQ(l.in_flight.size(), 2u);
  EXPECT_EQ(l.in_flight[1].seq, 8u);
  EXPECT_THAT(l.in_flight[1].position, ElementsAre(60, 45));
}

// The files the collectors wrote before the state file was shared read as they did.
TEST(StateFileTest, ReadsTheCollectorsEarlierFiles) {
  testing::TempDir dir;
  Write(dir.Path() + "/state", "stream postgres\nrun 2\nhandled 900\nsent 4:1000\n");
  const auto pg = StateFile(dir.Path(), {"handled"}).Load();
  ASSERT_TRUE(pg.ok()) << pg.status();
  EXPECT_THAT((*pg)->durable, ElementsAre(900));
  ASSERT_EQ((*pg)->in_flight.size(), 1u);
  EXPECT_THAT((*pg)->in_flight[0].position, ElementsAre(1000));
  EXPECT_EQ((*pg)->input, "");

  Write(dir.Path() + "/state", "stream tidb\nrun 1\nreleased 20\nwatermark 19\nsent 3:30:25\n");
  const auto tidb = StateFile(dir.Path(), {"released", "watermark"}).Load();
  ASSERT_TRUE(tidb.ok()) << tidb.status();
  EXPECT_THAT((*tidb)->durable, ElementsAre(20, 19));
  EXPECT_THAT((*tidb)->in_flight[0].position, ElementsAre(30, 25));
}

TEST(StateFileTest, RefusesAFileThatDoesNotParse) {
  testing::TempDir dir;
  const StateFile file(dir.Path(), {"released", "watermark"});
  for (const std::string text :
       {"stream s\nrun x\n", "stream s\nreleased -1\n", "stream s\nsent 3:30\n",
        "stream s\nsent 3:30:25:1\n", "run 1\n"}) {
    Write(file.path(), text);
    const auto loaded = file.Load();
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_THAT(loaded.status().message(), HasSubstr(file.path())) << text;
  }
}

TEST(CollectorStateTest, ConfirmTakesInTheDurableBatchesOnly) {
  CollectorState s{.stream = "s", .durable = {10, 9}};
  s.in_flight = {{.seq = 4, .position = {20, 9}},
                 {.seq = 5, .position = {30, 25}},
                 {.seq = 6, .position = {40, 35}}};
  EXPECT_EQ(s.ConfirmUpTo(3), 0u);
  EXPECT_EQ(s.ConfirmUpTo(5), 2u);
  EXPECT_THAT(s.durable, ElementsAre(30, 25));
  ASSERT_EQ(s.in_flight.size(), 1u);
  EXPECT_EQ(s.in_flight[0].seq, 6u);
}

TEST(StateDirLockTest, OneHolderAtATime) {
  testing::TempDir dir;
  auto first = StateDirLock::Acquire(dir.Path());
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = StateDirLock::Acquire(dir.Path());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("another collector"));
  *first = StateDirLock();
  EXPECT_TRUE(StateDirLock::Acquire(dir.Path()).ok());
}

}  // namespace
}  // namespace isowatch::collectors
