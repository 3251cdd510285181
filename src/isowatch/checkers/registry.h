// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "isowatch/checkers/plugin.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

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

// What a history holds that decides which checkers can judge it.
struct HistoryShape {
  bool commit_timestamps = true;  // its transactions carry commit timestamps
  bool registers = false;         // it reads or writes registers
  bool lists = false;             // it appends to or reads lists

  static HistoryShape Of(const history::History& h);
  // "registers with commit timestamps", "lists without commit timestamps", ...
  std::string Describe() const;
};

// Whether plug-in `info` judges `level` on a history of `shape`: it judges the level, the history
// has the commit timestamps it needs, and it handles every kind of data the history holds.
bool Judges(const CheckerInfo& info, verdict::IsolationLevel level, const HistoryShape& shape);

// The plug-ins that judge `level` on a history of `shape`, in registration order, except that on
// registers without commit timestamps those that decide every such history
// (Requirements::decides_black_box_registers) come first: the first is the one `isowatch check`
// picks without --checker.
std::vector<const CheckerInfo*> CheckersFor(verdict::IsolationLevel level,
                                            const HistoryShape& shape);

// Parses "adya,chronos" into the plug-ins' names, checking each is registered and none is
// repeated.
absl::StatusOr<std::vector<std::string>> ParseCheckerList(std::string_view list);

}  // namespace isowatch::checkers
