// SPDX-License-Identifier: Apache-2.0
#include "isowatch/common/atomic_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>

#include <gtest/gtest.h>

namespace isowatch {
namespace {

std::string Read(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("atomic_file_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(std::filesystem::create_directories(dir_));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(AtomicFileTest, CreatesAndReplacesWithoutLeavingTheTemporary) {
  const std::string path = (dir_ / "state").string();
  for (bool sync : {false, true}) {
    ASSERT_TRUE(WriteFileAtomically(path, "first\n", sync).ok());
    EXPECT_EQ(Read(path), "first\n");
    const std::string big(1 << 20, 'x');  // more than one write() may take
    ASSERT_TRUE(WriteFileAtomically(path, big, sync).ok());
    EXPECT_EQ(Read(path), big);
    ASSERT_TRUE(WriteFileAtomically(path, "", sync).ok());
    EXPECT_EQ(Read(path), "");
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  }
}

TEST_F(AtomicFileTest, AFailureLeavesTheOldFileAndSaysWhy) {
  const std::string path = (dir_ / "state").string();
  ASSERT_TRUE(WriteFileAtomically(path, "kept", true).ok());
  // The temporary cannot be created where a directory of that name stands.
  std::filesystem::create_directory(path + ".tmp");
  const absl::Status s = WriteFileAtomically(path, "lost", true);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("state.tmp"), std::string::npos) << s;
  EXPECT_EQ(Read(path), "kept");
  std::filesystem::remove(path + ".tmp");
  // A missing directory.
  const absl::Status missing = WriteFileAtomically((dir_ / "no" / "file").string(), "x", false);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot create"), std::string::npos) << missing;
}

}  // namespace
}  // namespace isowatch
