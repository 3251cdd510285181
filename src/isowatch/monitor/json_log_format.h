// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/formatter.h>

namespace isowatch::monitor {

// `text` as the contents of a JSON string (RFC 8259): quotes, backslashes and control characters
// escaped, and each byte that is not part of valid UTF-8 replaced by U+FFFD.
std::string JsonEscape(std::string_view text);

// The formatter of log.format=json (docs/operations.md, "Logs"): one JSON object per line,
// {"time": ..., "level": ..., "thread": ..., "message": ...}, whatever the message holds.
std::unique_ptr<spdlog::formatter> JsonLineFormatter();

}  // namespace isowatch::monitor
