// SPDX-License-Identifier: Apache-2.0
// Data-driven adya tests: every tests/histories/adya/NAME.jsonl (native format) is checked at all
// four levels, and the findings must be exactly the ones tests/histories/adya/EXPECTED lists for
// NAME (see the comment at its top for the format).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/adya/adya.h"
#include "isowatch/formats/native.h"

#include "tests/testing/source_dir.h"
#include "tests/unit/checkers/adya/summary.h"

namespace isowatch::checkers::adya {
namespace {

namespace fs = std::filesystem;

fs::path GoldenDir() { return fs::path(isowatch::testing::SourceDir()) / "tests/histories/adya"; }

std::vector<std::string> GoldenNames() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(GoldenDir())) {
    if (entry.path().extension() == ".jsonl") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// NAME -> expected findings; a name with "valid" maps to an empty list.
std::map<std::string, std::vector<std::string>> ParseExpected() {
  std::map<std::string, std::vector<std::string>> out;
  std::ifstream in(GoldenDir() / "EXPECTED");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    std::vector<std::string>& list = out[line.substr(0, colon)];
    std::string rest = line.substr(colon + 2);
    if (rest != "valid") list.push_back(rest);
  }
  return out;
}

class AdyaGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AdyaGoldenTest, ReportsExactlyTheExpectedFindings) {
  static const auto* expected =
      new std::map<std::string, std::vector<std::string>>(ParseExpected());
  auto it = expected->find(GetParam());
  ASSERT_NE(it, expected->end()) << "no line for " << GetParam() << " in EXPECTED";
  auto h = formats::ReadNativeFile((GoldenDir() / (GetParam() + ".jsonl")).string(), {});
  ASSERT_TRUE(h.ok()) << h.status();
  AdyaResult r = CheckAdya(*h);
  EXPECT_THAT(SummarizeAll(*h, r.violations), ::testing::UnorderedElementsAreArray(it->second));
  for (const verdict::Violation& v : r.violations) {
    EXPECT_EQ(v.checker, "adya");
    EXPECT_FALSE(v.explanation.empty());
    if (!v.levels.empty()) {
      EXPECT_EQ(v.level, v.levels.front());
    }
  }
}

TEST(AdyaGoldenFilesTest, EveryExpectationHasAHistory) {
  std::vector<std::string> names = GoldenNames();
  for (const auto& [name, findings] : ParseExpected()) {
    EXPECT_TRUE(std::binary_search(names.begin(), names.end(), name)) << name;
  }
  EXPECT_GE(names.size(), 20u);
}

INSTANTIATE_TEST_SUITE_P(Histories, AdyaGoldenTest, ::testing::ValuesIn(GoldenNames()),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace isowatch::checkers::adya
