// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "tests/testing/temp_dir.h"

namespace isowatch::testing {

// One file in a TempDir of its own, for a test or fuzz target that reads its input from a file
// as well as from memory: rewritten for each input, removed with the object.
class ScratchFile {
 public:
  explicit ScratchFile(std::string_view prefix) : dir_(prefix), path_(dir_.Path() + "/input") {}

  const std::string& path() const { return path_; }

  // Makes `bytes` the file's contents; aborts if it cannot.
  void Write(std::string_view bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) std::abort();
  }

  // `text` with the file's path, wherever a message names it, replaced by `name`.
  std::string Renamed(std::string text, std::string_view name) const {
    for (size_t at = text.find(path_); at != std::string::npos; at = text.find(path_, at)) {
      text.replace(at, path_.size(), name);
    }
    return text;
  }

 private:
  TempDir dir_;
  std::string path_;
};

}  // namespace isowatch::testing
