// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace isowatch::server::internal {

// An HTTP request target in origin form ("/path?query"), split and percent-decoded.
struct RequestTarget {
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
};

// Decodes %XX escapes; with `plus_is_space` (query strings, HTML form encoding) also '+' to ' '.
// Errors: InvalidArgument for a '%' not followed by two hex digits.
absl::StatusOr<std::string> PercentDecode(std::string_view in, bool plus_is_space);

// Splits a request target into its decoded path and query parameters. The path must start with
// '/'; a fragment ("#...") is dropped; empty query segments ("a=1&&b=2") are skipped and a segment
// without '=' is a parameter with an empty value. Errors: InvalidArgument for a target that is
// not in origin form or has a bad escape.
absl::StatusOr<RequestTarget> ParseRequestTarget(std::string_view target);

}  // namespace isowatch::server::internal
