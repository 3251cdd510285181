// SPDX-License-Identifier: Apache-2.0
// A file mapped for reading in place: its bytes and padding, pages given back, and a file that
// shrinks under the mapping.
#include "isowatch/formats/internal/mapped_file.h"

#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/formats/internal/chunked_json_array.h"

namespace isowatch::formats::internal {
namespace {

class MappedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    path_ = (std::filesystem::path(::testing::TempDir()) /
             fmt::format("mapped_{}_{}.bin", getpid(),
                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    std::filesystem::remove(path_);
  }

  // Writes `bytes` to the file and opens it.
  void Write(const std::string& bytes) {
    std::ofstream(path_, std::ios::binary) << bytes;
    fd_ = open(path_.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  std::string FileBytes() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  size_t page_ = 0;
  std::string path_;
  int fd_ = -1;
};

// Bytes that differ from page to page and within one.
std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  return s;
}

TEST_F(MappedFileTest, HoldsTheFileThenZerosAndWritesStayInTheMapping) {
  const std::string bytes = Pattern(2 * page_ + 100);
  Write(bytes);
  // Padding that ends inside the file's last page, and padding that needs a page of its own.
  for (size_t padding : {size_t{64}, page_}) {
    std::unique_ptr<MappedFile> m = MappedFile::Map(fd_, bytes.size(), padding, path_);
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(m->size(), bytes.size());
    EXPECT_EQ(std::string(m->data(), m->size()), bytes);
    for (size_t i = 0; i < padding; ++i) {
      ASSERT_EQ(m->data()[bytes.size() + i], '\0') << "padding byte " << i;
    }
    std::memset(m->data(), 'Z', 10);
    std::memset(m->data() + bytes.size(), ' ', padding);
    EXPECT_EQ(m->data()[0], 'Z');
  }
  EXPECT_EQ(FileBytes(), bytes);
}

TEST_F(MappedFileTest, DropGivesBackWholePagesOnly) {
  const std::string bytes = Pattern(4 * page_);
  Write(bytes);
  std::unique_ptr<MappedFile> m = MappedFile::Map(fd_, bytes.size(), 64, path_);
  ASSERT_NE(m, nullptr);
  // A private write to each page; those of the pages given back are lost, and the pages read
  // the file again.
  for (size_t p = 0; p < 4; ++p) m->data()[p * page_ + 5] = '#';
  // Pages 1 and 2 lie wholly inside the range; pages 0 and 3 only partly.
  m->Drop(m->data() + 10, 3 * page_);
  EXPECT_EQ(m->data()[5], '#');
  EXPECT_EQ(m->data()[page_ + 5], bytes[page_ + 5]);
  EXPECT_EQ(m->data()[2 * page_ + 5], bytes[2 * page_ + 5]);
  EXPECT_EQ(m->data()[3 * page_ + 5], '#');
}

TEST_F(MappedFileTest, ManyAtOnceFallBackToReading) {
  Write(Pattern(100));
  std::vector<std::unique_ptr<MappedFile>> maps;
  while (true) {
    std::unique_ptr<MappedFile> m = MappedFile::Map(fd_, 100, 64, path_);
    if (m == nullptr) break;
    maps.push_back(std::move(m));
    ASSERT_LE(maps.size(), 1000U) << "no limit";
  }
  EXPECT_GE(maps.size(), 2U);
  // One given back makes room for one more.
  maps.pop_back();
  EXPECT_NE(MappedFile::Map(fd_, 100, 64, path_), nullptr);
}

TEST_F(MappedFileTest, FileSourceMapsAsAsked) {
  const std::string bytes = Pattern(1000);
  Write(bytes);
  auto mapped = [&](FileMapping mapping) {
    absl::StatusOr<std::unique_ptr<FileSource>> source = FileSource::Open(path_, mapping);
    EXPECT_TRUE(source.ok()) << source.status();
    if (!source.ok()) return false;
    std::unique_ptr<MappedFile> m = (*source)->Map(ChunkedJsonArray::kPadding);
    if (m == nullptr) return false;
    EXPECT_EQ(std::string(m->data(), m->size()), bytes);
    EXPECT_EQ((*source)->SizeHint(), 0U);
    return true;
  };
  EXPECT_TRUE(mapped(FileMapping::kAlways));
  EXPECT_FALSE(mapped(FileMapping::kNever));
  EXPECT_FALSE(mapped(FileMapping::kAuto)) << "smaller than kMapMinBytes";
  // Not once reading has begun.
  absl::StatusOr<std::unique_ptr<FileSource>> source =
      FileSource::Open(path_, FileMapping::kAlways);
  ASSERT_TRUE(source.ok());
  char c = 0;
  ASSERT_EQ((*source)->Read(&c, 1).value_or(0), 1U);
  EXPECT_EQ((*source)->Map(ChunkedJsonArray::kPadding), nullptr);
}

using MappedFileDeathTest = MappedFileTest;

TEST_F(MappedFileDeathTest, AFileThatShrinksEndsTheReadWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string bytes = Pattern(3 * page_);
  Write(bytes);
  EXPECT_EXIT(
      {
        std::unique_ptr<MappedFile> m = MappedFile::Map(fd_, bytes.size(), 64, path_);
        if (m == nullptr) _exit(9);
        if (ftruncate(fd_, 0) != 0) _exit(8);
        volatile char c = m->data()[2 * page_];
        (void)c;
        _exit(0);
      },
      ::testing::ExitedWithCode(2), "mapped_.*: the file shrank while it was being read");
}

TEST_F(MappedFileDeathTest, OtherBusErrorsAreHandledAsBefore) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Write(Pattern(100));
  // Each case in a process of its own, where the first mapping installs the handler that passes
  // on what is not its own to the one before.
  auto map_and_raise = [&] {
    std::unique_ptr<MappedFile> m = MappedFile::Map(fd_, 100, 64, path_);
    if (m == nullptr) _exit(9);
    raise(SIGBUS);
    _exit(0);
  };
  EXPECT_EXIT(
      {
        signal(SIGBUS, SIG_DFL);
        map_and_raise();
      },
      ::testing::KilledBySignal(SIGBUS), "");
  EXPECT_EXIT(
      {
        signal(SIGBUS, [](int) { _exit(7); });
        map_and_raise();
      },
      ::testing::ExitedWithCode(7), "");
}

}  // namespace
}  // namespace isowatch::formats::internal
