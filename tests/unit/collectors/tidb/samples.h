// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "collectors/tidb/cdc_event.h"
#include "tests/testing/source_dir.h"

namespace isowatch::tidb::testing {

// The bytes of samples/<relative> (tests/unit/collectors/tidb/samples/); empty if it cannot be
// read (the tests assert they are not).
inline std::string ReadSample(std::string_view relative) {
  std::ifstream in(fmt::format("{}/tests/unit/collectors/tidb/samples/{}",
                               isowatch::testing::SourceDir(), relative),
                   std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `text` cut at every `separator`; an empty last piece is left out.
inline std::vector<std::string> SplitRecords(std::string_view text, std::string_view separator) {
  std::vector<std::string> records;
  while (!text.empty()) {
    const size_t end = text.find(separator);
    records.emplace_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + separator.size());
  }
  return records;
}

// A one-line rendering of a row for golden comparisons:
// "INSERT db.t @ts key(id) [id=1 name=NULL] old[...]".
inline std::string Describe(const RowChange& row) {
  auto columns = [](const std::vector<Column>& list) {
    std::string out;
    for (const Column& column : list) {
      if (!out.empty()) out += ' ';
      out += column.name + '=' + column.value.value_or("NULL");
    }
    return out;
  };
  std::string keys;
  for (const std::string& key : row.key_columns) keys += (keys.empty() ? "" : ",") + key;
  std::string out = fmt::format("{} {}.{} @{} key({}) [{}]", RowOpName(row.op), row.schema,
                                row.table, row.commit_ts, keys, columns(row.columns));
  if (!row.old_columns.empty()) out += fmt::format(" old[{}]", columns(row.old_columns));
  return out;
}

}  // namespace isowatch::tidb::testing
