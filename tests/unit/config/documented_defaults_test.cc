// SPDX-License-Identifier: Apache-2.0
// The defaults the docs state outside docs/configuration.md (which config_test checks): the ingest
// limits of docs/ingest-protocol.md and the ports of every example.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/config/config.h"

#include "tests/testing/source_dir.h"

namespace isowatch::config {
namespace {

std::string Read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// 10000 as "10,000".
std::string WithCommas(uint64_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return digits;
}

// The row of the table in `doc` whose first cell is `key` in backquotes.
std::string Row(const std::string& doc, const std::string& key) {
  const std::string start = fmt::format("| `{}` |", key);
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(start)) return line;
  }
  return {};
}

TEST(DocumentedDefaultsTest, IngestProtocolLimitsAreTheDaemonDefaults) {
  const std::string doc = Read(testing::SourceDir() + "/docs/ingest-protocol.md");
  const IngestConfig d;
  const std::vector<std::pair<std::string, std::string>> want = {
      {"ingest.max_batch_transactions", WithCommas(d.max_batch_transactions) + " transactions"},
      {"ingest.max_batch_bytes", fmt::format("{} MiB", d.max_batch_bytes >> 20)},
      {"ingest.max_ops_per_transaction", WithCommas(d.max_ops_per_transaction) + " operations"},
      {"ingest.max_streams", WithCommas(d.max_streams) + " streams"},
  };
  for (const auto& [key, value] : want) {
    const std::string row = Row(doc, key);
    ASSERT_FALSE(row.empty()) << key << " has no row in docs/ingest-protocol.md";
    EXPECT_TRUE(row.starts_with(fmt::format("| `{}` | {}", key, value)))
        << "docs/ingest-protocol.md: " << row << "\nwant the default " << value;
  }
}

TEST(DocumentedDefaultsTest, ExamplesUseTheDefaultPorts) {
  const DaemonConfig d;
  std::vector<std::filesystem::path> files = {testing::SourceDir() + "/README.md"};
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(testing::SourceDir() + "/docs")) {
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  }
  // An address of this machine or of the daemon's host with a port, or a port flag.
  const std::regex address(R"((127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1?\]|isowatch-host):(\d+))");
  const std::regex flag(R"(--(grpc|http)-port[ =](\d+))");
  int checked = 0;
  for (const auto& file : files) {
    const std::string text = Read(file);
    for (const std::regex& re : {address, flag}) {
      for (auto it = std::sregex_iterator(text.begin(), text.end(), re);
           it != std::sregex_iterator(); ++it) {
        const int port = std::stoi((*it)[2]);
        ++checked;
        EXPECT_TRUE(port == 0 || port == d.grpc.port || port == d.http.port)
            << file << ": " << (*it)[0] << " is neither the gRPC port " << d.grpc.port
            << " nor the HTTP port " << d.http.port << " (nor 0)";
      }
    }
  }
  EXPECT_GT(checked, 3);
}

}  // namespace
}  // namespace isowatch::config
