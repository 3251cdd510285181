// SPDX-License-Identifier: Apache-2.0
// The classic anomaly examples of the notes as black-box histories: every
// tests/histories/blackbox/NAME.edn (Jepsen/Elle EDN) and NAME.txt (text r/w) is read with format
// detection, checked by adya at all four levels, and must give exactly what
// tests/histories/blackbox/EXPECTED says for NAME (see the comment at its top for the words
// valid, undecided, beyond adya and disagrees).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/checkers/adya/adya.h"
#include "isowatch/formats/history_file.h"

#include "tests/testing/source_dir.h"
#include "tests/unit/checkers/adya/summary.h"

namespace isowatch::checkers::adya {
namespace {

namespace fs = std::filesystem;
using formats::FileFormat;
using verdict::IsolationLevel;

fs::path GoldenDir() {
  return fs::path(isowatch::testing::SourceDir()) / "tests/histories/blackbox";
}

// File names (with their extension) of the histories in GoldenDir().
std::vector<std::string> GoldenFiles() {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(GoldenDir())) {
    const std::string ext = entry.path().extension().string();
    if (ext == ".edn" || ext == ".txt") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct Expectation {
  std::vector<std::string> findings;
  bool valid = false;
  bool undecided = false;
  bool beyond_adya = false;
  bool disagrees = false;
  bool misdetected = false;
};

std::map<std::string, Expectation> ParseExpected() {
  std::map<std::string, Expectation> out;
  std::ifstream in(GoldenDir() / "EXPECTED");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) {
      ADD_FAILURE() << "EXPECTED: no \"NAME: \" in " << line;
      continue;
    }
    Expectation& e = out[line.substr(0, colon)];
    const std::string rest = line.substr(colon + 2);
    if (rest == "valid") {
      e.valid = true;
    } else if (rest == "undecided") {
      e.undecided = true;
    } else if (rest == "beyond adya") {
      e.beyond_adya = true;
    } else if (rest == "disagrees") {
      e.disagrees = true;
    } else if (rest == "misdetected") {
      e.misdetected = true;
    } else {
      e.findings.push_back(rest);
    }
  }
  return out;
}

const std::map<std::string, Expectation>& Expected() {
  static const auto* expected = new std::map<std::string, Expectation>(ParseExpected());
  return *expected;
}

std::string Stem(const std::string& file) { return fs::path(file).stem().string(); }

// "G-single [rr,si,ser] T2,T1 k=1" -> "G-single T2,T1 k=1".
std::string WithoutLevels(const std::string& summary) {
  const size_t open = summary.find(" [");
  if (open == std::string::npos) return summary;
  const size_t close = summary.find(']', open);
  return summary.substr(0, open) + summary.substr(close + 1);
}

class AdyaBlackBoxGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AdyaBlackBoxGoldenTest, ReportsExactlyWhatTheNotesDefine) {
  const std::string file = GetParam();
  auto it = Expected().find(Stem(file));
  ASSERT_NE(it, Expected().end()) << "no line for " << Stem(file) << " in EXPECTED";
  const Expectation& e = it->second;

  const std::string path = (GoldenDir() / file).string();
  const FileFormat format =
      fs::path(file).extension() == ".edn" ? FileFormat::kEdn : FileFormat::kText;
  FileFormat used = FileFormat::kAuto;
  auto h = formats::ReadHistoryFile(path, FileFormat::kAuto, {}, &used);
  if (e.misdetected) {
    // A known detection bug (EXPECTED's comment): fails once detection gets it right, so that the
    // marker goes; the verdict is still checked, on the file read in its own format.
    EXPECT_FALSE(h.ok() && used == format)
        << Stem(file) << " is detected now: drop \"misdetected\"";
    std::cout << Stem(file) << ": detected as " << formats::FileFormatName(used) << ": "
              << h.status() << "\n";
    h = formats::ReadHistoryFile(path, format, {});
  } else {
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(used, format) << formats::FileFormatName(used);
  }
  ASSERT_TRUE(h.ok()) << h.status();

  AdyaResult r = CheckAdya(*h);
  const std::vector<std::string> got = SummarizeAll(*h, r.violations);
  std::vector<std::string> sorted_got = got;
  std::vector<std::string> sorted_expected = e.findings;
  std::sort(sorted_got.begin(), sorted_got.end());
  std::sort(sorted_expected.begin(), sorted_expected.end());
  const bool findings_match = sorted_got == sorted_expected;
  const bool complete_matches = r.complete == !e.undecided;

  if (e.disagrees) {
    // A known disagreement (EXPECTED's comment says who is wrong): the expectation stays the
    // notes', and this fails once adya agrees, so that the marker goes.
    EXPECT_FALSE(findings_match && complete_matches)
        << Stem(file) << " now gives what the notes define: drop its \"disagrees\" line";
    std::string report = "adya says:";
    for (const std::string& s : got) report += "\n  " + s;
    if (!r.complete) report += "\n  undecided: " + r.undecided;
    std::cout << Stem(file) << ": " << report << "\n";
    return;
  }
  EXPECT_THAT(got, ::testing::UnorderedElementsAreArray(e.findings));
  if (e.valid) {
    EXPECT_TRUE(e.findings.empty()) << "EXPECTED says both valid and findings for " << Stem(file);
    EXPECT_FALSE(e.undecided) << "EXPECTED says both valid and undecided for " << Stem(file);
  }
  if (e.undecided) {
    EXPECT_FALSE(r.complete) << "adya decided " << Stem(file);
    EXPECT_FALSE(r.undecided.empty());
  } else {
    EXPECT_TRUE(r.complete) << r.undecided;
  }
  for (const verdict::Violation& v : r.violations) {
    EXPECT_EQ(v.checker, "adya");
    EXPECT_FALSE(v.explanation.empty());
  }
}

// Judging serializable alone reports a subset of the all-levels findings: those that violate
// serializable, naming only it.
TEST_P(AdyaBlackBoxGoldenTest, SerializableAloneReportsASubset) {
  const std::string file = GetParam();
  const FileFormat format =
      fs::path(file).extension() == ".edn" ? FileFormat::kEdn : FileFormat::kText;
  auto h = formats::ReadHistoryFile((GoldenDir() / file).string(), format, {});
  ASSERT_TRUE(h.ok()) << h.status();
  AdyaResult all = CheckAdya(*h);
  AdyaResult ser = CheckAdya(*h, {.levels = {IsolationLevel::kSerializable}});
  std::multiset<std::string> violating_ser;
  for (const std::string& s : SummarizeAll(*h, all.violations)) {
    if (s.find("ser]") != std::string::npos) violating_ser.insert(WithoutLevels(s));
  }
  for (const std::string& s : SummarizeAll(*h, ser.violations)) {
    EXPECT_THAT(s, ::testing::HasSubstr(" [ser] "));
    auto found = violating_ser.find(WithoutLevels(s));
    EXPECT_NE(found, violating_ser.end()) << s << " is not among the all-levels findings";
    if (found != violating_ser.end()) violating_ser.erase(found);
  }
}

TEST(AdyaBlackBoxGoldenFilesTest, EveryExpectationHasAHistoryAndAVerdict) {
  std::set<std::string> names;
  for (const std::string& file : GoldenFiles()) {
    EXPECT_TRUE(names.insert(Stem(file)).second) << "two histories named " << Stem(file);
  }
  for (const auto& [name, e] : Expected()) {
    EXPECT_TRUE(names.contains(name)) << name;
    EXPECT_TRUE(e.valid || e.undecided || e.beyond_adya || e.misdetected || !e.findings.empty())
        << name << " has no verdict";
  }
  EXPECT_GE(names.size(), 30u);
}

INSTANTIATE_TEST_SUITE_P(Histories, AdyaBlackBoxGoldenTest, ::testing::ValuesIn(GoldenFiles()),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

}  // namespace
}  // namespace isowatch::checkers::adya
