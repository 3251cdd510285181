// SPDX-License-Identifier: Apache-2.0
// Data-driven Chronos tests: every tests/histories/chronos/NAME.json (TimeKiller format) is
// checked at each level its NAME.expected names, and the violations must be exactly the ones
// listed. Format of NAME.expected, one entry per line:
//   # options: --initial-value N     (optional)
//   si: valid                        (no violation at SI)
//   ser: EXT/before 2,0 k=1          (one violation, as testing::Summarize prints it)
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/chronos/chronos.h"
#include "isowatch/formats/timekiller.h"

#include "tests/testing/source_dir.h"
#include "tests/testing/test_history.h"

namespace isowatch::checkers {
namespace {

namespace fs = std::filesystem;

fs::path GoldenDir() {
  return fs::path(isowatch::testing::SourceDir()) / "tests/histories/chronos";
}

std::vector<std::string> GoldenNames() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(GoldenDir())) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct Expectation {
  formats::ReadOptions options;
  std::map<std::string, std::vector<std::string>> by_level;  // "si"/"ser" -> violations
};

Expectation ParseExpected(const fs::path& path) {
  Expectation e;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# options: --initial-value ", 0) == 0) {
      e.options.initial_value = std::stoll(line.substr(27));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    size_t colon = line.find(": ");
    std::string level = line.substr(0, colon);
    std::string rest = line.substr(colon + 2);
    auto& list = e.by_level[level];
    if (rest != "valid") list.push_back(rest);
  }
  return e;
}

class GoldenHistoryTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenHistoryTest, ChronosReportsExactlyTheExpectedViolations) {
  fs::path json = GoldenDir() / (GetParam() + ".json");
  Expectation e = ParseExpected(GoldenDir() / (GetParam() + ".expected"));
  ASSERT_FALSE(e.by_level.empty()) << "no expectations for " << GetParam();
  auto h = formats::ReadTimeKillerFile(json.string(), e.options);
  ASSERT_TRUE(h.ok()) << h.status();
  for (const auto& [level_name, expected] : e.by_level) {
    auto level = verdict::ParseIsolationLevel(level_name);
    ASSERT_TRUE(level.has_value()) << level_name;
    ChronosResult r = RunChronos(*h, {.level = *level});
    EXPECT_THAT(testing::SummarizeAll(*h, r.violations),
                ::testing::UnorderedElementsAreArray(expected))
        << GetParam() << " at " << level_name;
  }
}

INSTANTIATE_TEST_SUITE_P(Histories, GoldenHistoryTest, ::testing::ValuesIn(GoldenNames()),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace isowatch::checkers
