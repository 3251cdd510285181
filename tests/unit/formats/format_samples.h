// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/history/history.h"

#include "tests/testing/source_dir.h"

namespace isowatch::formats::samples {

// Other formats' composed samples (docs: history-formats notes), for the sniffers' tests.
inline const std::vector<std::string>& ForeignTextSamples() {
  static const std::vector<std::string> samples = {
      // TimeKiller JSON
      R"([{"tid": 1, "sid": 0, "sts": {"p": 100, "l": 0}, "cts": {"p": 105, "l": 2},
   "ops": [{"t": "w", "k": 3, "v": 11}, {"t": "r", "k": 4, "v": null}]}])",
      // TimeKiller initial-transaction file
      R"({"ops": [{"t": "w", "k": 0, "v": 500}, {"t": "w", "k": 1, "v": 0}]})",
      // Jepsen EDN
      "; composed example\n{:index 0, :time 1000, :type :invoke, :process 0, :f :txn, "
      ":value [[:append 1 10] [:r 2 nil]]}\n",
      // elle-cli JSON
      R"([{"type":"invoke","f":"txn","value":[["w","x",1],["r","y",null]],"process":0,"time":10,"index":0}])",
      // dbcop new JSON
      R"({"params": {"id": 0, "n_node": 2, "n_variable": 2, "n_transaction": 2, "n_event": 2},
 "info": "composed", "start": "2024-05-01T10:00:00+00:00", "end": "2024-05-01T10:00:01+00:00",
 "data": [[ {"events": [{"Write": {"variable": 0, "version": 1}}], "committed": true} ]]})",
      // dbcop bare sessions
      R"([[{"events": [["r", 0, 1], ["w", 1, 2]], "committed": true}]])",
      // dbcop .hist
      "// session 1\n[a:=1 b==?]\n---\n// session 2\n[a==1 b:=2]\n[a:=3]!\n",
      // ViperBench
      "{\"value\": [[\"w\", 7, 500, true], [\"w\", 8, 600, true]], \"isInitial\": true}\n",
  };
  return samples;
}

inline std::string SamplePath(std::string_view format, std::string_view name) {
  return fmt::format("{}/tests/histories/formats/{}/{}", isowatch::testing::SourceDir(), format,
                     name);
}

// The whole file at `path`; empty if it cannot be read.
inline std::string FileContents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// What a reader read; a test failure, and an empty history, if it refused.
inline history::History Expect(absl::StatusOr<history::History> h) {
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? std::move(*h) : history::History();
}

// A reader's refusal, expected to be InvalidArgument; empty if it read.
inline std::string ErrorOf(const absl::StatusOr<history::History>& h) {
  if (h.ok()) return "";
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << h.status();
  return std::string(h.status().message());
}

}  // namespace isowatch::formats::samples
