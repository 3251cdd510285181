// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <filesystem>
#include <stdlib.h>
#include <string>
#include <string_view>
#include <system_error>

#include <gtest/gtest.h>

namespace isowatch::testing {

// A directory under the test's temporary directory, named after `prefix`, removed with its
// contents at the end. Path() is empty if it could not be made (a test asserts it is not).
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "isowatch-test") {
    std::string pattern =
        (std::filesystem::path(::testing::TempDir()) / (std::string(prefix) + "-XXXXXX")).string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& Path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace isowatch::testing
