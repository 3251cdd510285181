// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/json_head.h"

#include <algorithm>

namespace isowatch::formats::internal {

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Reads the JSON string starting at text[i] == '"' into `out` (escapes kept as written); returns
// the index after its closing quote, or npos if the text ends first.
size_t ReadString(std::string_view text, size_t i, std::string* out) {
  for (++i; i < text.size(); ++i) {
    if (text[i] == '\\') {
      if (++i == text.size()) break;
      out->push_back('\\');
    } else if (text[i] == '"') {
      return i + 1;
    }
    out->push_back(text[i]);
  }
  return std::string_view::npos;
}

// Collects the member names of the object whose '{' is at text[i].
void ReadKeys(std::string_view text, size_t i, std::vector<std::string>* keys) {
  int depth = 0;
  bool expect_key = false;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      std::string s;
      const size_t next = ReadString(text, i, &s);
      if (next == std::string_view::npos) return;
      if (depth == 1 && expect_key) {
        keys->push_back(std::move(s));
        expect_key = false;
      }
      i = next;
      continue;
    }
    if (c == '{' || c == '[') {
      ++depth;
      expect_key = c == '{' && depth == 1;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return;
    } else if (c == ',' && depth == 1) {
      expect_key = true;
    }
    ++i;
  }
}

}  // namespace

bool JsonHead::Has(std::string_view key) const {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string_view SkipBomAndSpace(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  return text;
}

JsonHead ScanJsonHead(std::string_view text) {
  JsonHead head;
  text = SkipBomAndSpace(text);
  if (text.empty() || (text[0] != '[' && text[0] != '{')) return head;
  head.top = text[0];
  if (head.top == '{') {
    ReadKeys(text, 0, &head.keys);
    return head;
  }
  size_t i = 1;
  while (i < text.size() && IsSpace(text[i])) ++i;
  if (i == text.size()) return head;
  head.first = text[i];
  if (head.first == '{') ReadKeys(text, i, &head.keys);
  return head;
}

}  // namespace isowatch::formats::internal
