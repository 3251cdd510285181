// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace isowatch::formats::internal {

// The shape of the start of a JSON document (or of its first line, for JSON lines), as far as
// the bytes given go: enough to tell the JSON formats apart without parsing the whole file.
struct JsonHead {
  char top = 0;    // '[' or '{'; 0 if the text does not start like a JSON container
  char first = 0;  // top '[': the first element's first byte (']' if the array is empty, 0 if
                   // the text ends first)
  // The member names of the first object: the top object, or the top array's first element
  // if that is an object; in order, as far as the text goes.
  std::vector<std::string> keys;

  bool Has(std::string_view key) const;
};

// Scans `text` (a UTF-8 byte order mark and whitespace before the document are skipped).
JsonHead ScanJsonHead(std::string_view text);

// `text` without a UTF-8 byte order mark and leading whitespace.
std::string_view SkipBomAndSpace(std::string_view text);

}  // namespace isowatch::formats::internal
