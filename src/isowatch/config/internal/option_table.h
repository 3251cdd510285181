// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

#include "isowatch/config/config.h"

namespace isowatch::config::internal {

// One entry of the option table: how to read a value into a DaemonConfig and render it back.
struct Option {
  std::string key;
  std::string type;      // short, for tables: "duration"
  std::string expected;  // for messages: "a duration such as \"5s\""
  std::string help;
  // A YAML null (`key:`) sets the empty string; for the options that may be empty.
  bool nullable = false;
  // Render the value as a double-quoted YAML string.
  bool quoted = false;
  // A list: the file may give a YAML sequence of scalars, taken as their comma-separated text;
  // the value is rendered as a flow sequence.
  bool list = false;
  // Sets the option from its text; the error message does not name the option.
  std::function<absl::Status(DaemonConfig&, std::string_view)> set;
  std::function<std::string(const DaemonConfig&)> get;
};

// The option table: the one list of options, in the order of config/isowatchd.yaml.
const std::vector<Option>& Table();

// The option named `key` (dotted), or nullptr.
const Option* FindOption(std::string_view key);

// The items of a comma-separated list, optionally in brackets ("[a, b]"), trimmed, empty ones
// dropped.
std::vector<std::string> SplitList(std::string_view text);

}  // namespace isowatch::config::internal
