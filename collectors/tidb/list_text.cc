// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/list_text.h"

#include <charconv>

namespace isowatch::tidb {

std::string FormatListText(std::span<const int64_t> elements) {
  std::string out;
  for (size_t i = 0; i < elements.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += std::to_string(elements[i]);
  }
  return out;
}

std::optional<std::vector<int64_t>> ParseListText(std::string_view text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  size_t begin = 0;
  while (true) {
    size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    const char* first = text.data() + begin;
    const char* last = text.data() + end;
    if (first == last || *first == '+') return std::nullopt;
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || ptr != last) return std::nullopt;
    out.push_back(v);
    if (end == text.size()) return out;
    begin = end + 1;
  }
}

}  // namespace isowatch::tidb
