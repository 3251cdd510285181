// SPDX-License-Identifier: Apache-2.0
// TimeKillerTest, for the TimeKiller format's tests: the composed samples, and reading and writing
// histories in the format.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/formats/read_options.h"
#include "isowatch/formats/timekiller.h"
#include "isowatch/history/history.h"

#include "tests/testing/canonical_history.h"
#include "tests/testing/source_dir.h"

namespace isowatch::formats {

inline std::string Message(const absl::Status& s) { return std::string(s.message()); }

inline std::string SamplePath(std::string_view name) {
  return fmt::format("{}/tests/histories/timekiller/{}", isowatch::testing::SourceDir(), name);
}

inline std::string ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string Canonical(const history::History& h) {
  return isowatch::testing::CanonicalHistory(h);
}

inline std::string Write(const history::History& h) {
  std::ostringstream out;
  absl::Status s = WriteTimeKiller(h, out);
  EXPECT_TRUE(s.ok()) << s;
  return out.str();
}

inline absl::StatusOr<history::History> Read(std::string_view json, std::string_view initial = {},
                                             const ReadOptions& options = {}) {
  return ReadTimeKillerString(json, options, "history.json", initial);
}

class TimeKillerTest : public ::testing::Test {
 protected:
  const std::string kv_sample_ = ReadFileToString(SamplePath("kv_sample.json"));
  const std::string list_sample_ = ReadFileToString(SamplePath("list_sample.json"));
  const std::string initial_ = ReadFileToString(SamplePath("initial_txn.json"));
};

}  // namespace isowatch::formats
