// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "isowatch/checkers/plugin.h"

namespace isowatch::checkers {

// Every plug-in checker, in registration order (registry.cc is the one place that lists them).
const std::vector<CheckerInfo>& RegisteredCheckers();

// The plug-in named `name`, or nullptr.
const CheckerInfo* FindChecker(std::string_view name);

// Builds plug-in `name` from its options: "levels" (comma-separated level names, each one the
// plug-in judges; default all of them) and the plug-in's own. Errors: NotFound for an unknown
// plug-in (the message lists the known ones); InvalidArgument for an unknown option or a bad
// value, naming it.
absl::StatusOr<std::unique_ptr<Checker>> CreateChecker(std::string_view name,
                                                       const CheckerOptions& options);

// Parses "adya,chronos" into the plug-ins' names, checking each is registered and none is
// repeated.
absl::StatusOr<std::vector<std::string>> ParseCheckerList(std::string_view list);

}  // namespace isowatch::checkers
