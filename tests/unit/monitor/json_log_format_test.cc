// SPDX-License-Identifier: Apache-2.0
// log.format=json: every line is one JSON object whose message is the logged text, whatever it
// holds (quotes, backslashes, control characters, JSON of its own, bytes that are not UTF-8).
#include "isowatch/monitor/json_log_format.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

namespace isowatch::monitor {
namespace {

TEST(JsonLogFormatTest, EscapesWhatAJsonStringCannotHold) {
  EXPECT_EQ(JsonEscape("plain"), "plain");
  EXPECT_EQ(JsonEscape(R"(a "b" \c)"), R"(a \"b\" \\c)");
  EXPECT_EQ(JsonEscape("l1\nl2\r\t\x01\x7f"), R"(l1\nl2\r\t\u0001\u007f)");
  EXPECT_EQ(JsonEscape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  // Not UTF-8: a lone continuation byte, a truncated sequence, an overlong one, a surrogate.
  EXPECT_EQ(JsonEscape("a\x80z"), "a\uFFFDz");
  EXPECT_EQ(JsonEscape("a\xe2\x82"), "a\uFFFD\uFFFD");
  EXPECT_EQ(JsonEscape("\xc0\xaf"), "\uFFFD\uFFFD");
  EXPECT_EQ(JsonEscape("\xed\xa0\x80"), "\uFFFD\uFFFD\uFFFD");
}

TEST(JsonLogFormatTest, EveryLineIsOneJsonObjectWithTheMessage) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("test", sink);
  logger.set_formatter(JsonLineFormatter());
  const std::vector<std::string> messages = {
      "isowatchd serving",
      R"(violation 1a2b (si EXT/never): {"anomaly":"EXT","txns":[3,4],"explanation":"T3 read \"x\""})",
      "two\nlines and a tab\t and a byte \xff",
  };
  for (const std::string& m : messages) logger.warn("{}", m);
  logger.flush();
  std::istringstream lines(out.str());
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(i, messages.size()) << line;
    rapidjson::Document d;
    d.Parse(line.c_str(), line.size());
    ASSERT_FALSE(d.HasParseError())
        << rapidjson::GetParseError_En(d.GetParseError()) << ": " << line;
    ASSERT_TRUE(d.IsObject());
    EXPECT_STREQ(d["level"].GetString(), "warning");
    EXPECT_TRUE(d["thread"].IsUint64());
    EXPECT_EQ(std::string(d["time"].GetString()).size(), 29u)
        << line;  // 2026-01-02T03:04:05.678+00:00
    const std::string want = i == 2 ? "two\nlines and a tab\t and a byte \uFFFD" : messages[i];
    EXPECT_EQ(std::string(d["message"].GetString(), d["message"].GetStringLength()), want);
    ++i;
  }
  EXPECT_EQ(i, messages.size());
}

}  // namespace
}  // namespace isowatch::monitor
