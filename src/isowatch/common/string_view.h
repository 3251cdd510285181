// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace isowatch::common {

// `s` as a std::string_view, for fmt and the standard library: Debian's abseil has a string_view
// of its own (docs/style.md, item 1), which they do not take. Typically a Status's message:
// `fmt::format("...: {}", common::StdView(status.message()))`.
inline std::string_view StdView(absl::string_view s) { return {s.data(), s.size()}; }

}  // namespace isowatch::common
