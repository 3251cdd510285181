// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/registry.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include <fmt/format.h>

#include "isowatch/checkers/adya/plugin.h"
#include "isowatch/checkers/chronos/plugin.h"
#include "isowatch/checkers/plume/plugin.h"
#include "isowatch/checkers/polygraph/plugin.h"
#include "isowatch/common/status_macros.h"

namespace isowatch::checkers {
namespace {

using verdict::IsolationLevel;

// "a, b,c" -> {"a", "b", "c"}; empty items are kept (as empty strings) for the caller to refuse.
std::vector<std::string_view> SplitList(std::string_view list) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    out.push_back(item);
    if (comma == std::string_view::npos) return out;
    list.remove_prefix(comma + 1);
  }
}

std::string LevelNames(const std::vector<IsolationLevel>& levels) {
  std::vector<std::string_view> names;
  names.reserve(levels.size());
  for (IsolationLevel level : levels) names.emplace_back(verdict::IsolationLevelName(level));
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string KnownCheckers() {
  std::vector<std::string_view> names;
  for (const CheckerInfo& info : RegisteredCheckers()) names.emplace_back(info.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// The "levels" option of `info`: a subset of info.levels, in its canonical order.
absl::StatusOr<std::vector<IsolationLevel>> ParseLevels(const CheckerInfo& info,
                                                        std::string_view text) {
  std::vector<IsolationLevel> wanted;
  for (std::string_view name : SplitList(text)) {
    std::optional<IsolationLevel> level = verdict::ParseIsolationLevel(name);
    if (!level.has_value()) {
      return absl::InvalidArgumentError(
          fmt::format("{}.levels: '{}' is no isolation level ({} judges {})", info.name, name,
                      info.name, LevelNames(info.levels)));
    }
    if (std::find(info.levels.begin(), info.levels.end(), *level) == info.levels.end()) {
      return absl::InvalidArgumentError(fmt::format("{}.levels: {} cannot judge {} (it judges {})",
                                                    info.name, info.name, name,
                                                    LevelNames(info.levels)));
    }
    wanted.push_back(*level);
  }
  std::vector<IsolationLevel> levels;
  for (IsolationLevel level : info.levels) {
    if (std::find(wanted.begin(), wanted.end(), level) != wanted.end()) levels.push_back(level);
  }
  return levels;
}

}  // namespace

const std::vector<CheckerInfo>& RegisteredCheckers() {
  // Every plug-in, one line each.
  static const auto* const kCheckers = new std::vector<CheckerInfo>{
      ChronosPlugin(),
      AdyaPlugin(),
      PlumePlugin(),
      PolygraphPlugin(),
  };
  return *kCheckers;
}

const CheckerInfo* FindChecker(std::string_view name) {
  for (const CheckerInfo& info : RegisteredCheckers()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

HistoryShape HistoryShape::Of(const history::History& h) {
  HistoryShape shape{.commit_timestamps = h.size() == 0 || h.has_commit_timestamps()};
  for (uint32_t k = 0; k < h.key_count(); ++k) {
    const history::KeyInfo& key = h.key(KeyId(k));
    if (key.forgotten) continue;
    (key.is_list ? shape.lists : shape.registers) = true;
    if (shape.lists && shape.registers) break;
  }
  return shape;
}

std::string HistoryShape::Describe() const {
  const char* data = registers && lists ? "registers and lists"
                     : lists            ? "lists"
                     : registers        ? "registers"
                                        : "no keys";
  return fmt::format("{} {} commit timestamps", data, commit_timestamps ? "with" : "without");
}

bool Judges(const CheckerInfo& info, IsolationLevel level, const HistoryShape& shape) {
  const Requirements& r = info.requirements;
  return std::find(info.levels.begin(), info.levels.end(), level) != info.levels.end() &&
         (shape.commit_timestamps || !r.commit_timestamps) && (!shape.registers || r.registers) &&
         (!shape.lists || r.lists);
}

std::vector<const CheckerInfo*> CheckersFor(IsolationLevel level, const HistoryShape& shape) {
  std::vector<const CheckerInfo*> out;
  for (const CheckerInfo& info : RegisteredCheckers()) {
    if (Judges(info, level, shape)) out.push_back(&info);
  }
  // On registers without commit timestamps, the checkers that decide every history come first.
  if (shape.registers && !shape.commit_timestamps) {
    std::stable_partition(out.begin(), out.end(), [](const CheckerInfo* info) {
      return info->requirements.decides_black_box_registers;
    });
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Checker>> CreateChecker(std::string_view name,
                                                       const CheckerOptions& options) {
  const CheckerInfo* info = FindChecker(name);
  if (info == nullptr) {
    return absl::NotFoundError(
        fmt::format("unknown checker '{}' (known: {})", name, KnownCheckers()));
  }
  std::vector<IsolationLevel> levels = info->levels;
  CheckerOptions own;
  for (const auto& [option, value] : options) {
    if (option == "levels") {
      ASSIGN_OR_RETURN(levels, ParseLevels(*info, value));
      continue;
    }
    // (A structured binding cannot be captured by clang before 16.)
    const std::string_view option_name = option;
    auto known = std::find_if(info->options.begin(), info->options.end(),
                              [&](const OptionSpec& spec) { return spec.name == option_name; });
    if (known == info->options.end()) {
      std::vector<std::string_view> names = {"levels"};
      for (const OptionSpec& spec : info->options) names.emplace_back(spec.name);
      return absl::InvalidArgumentError(fmt::format("unknown option {}.{} ({} takes {})",
                                                    info->name, option, info->name,
                                                    fmt::join(names, ", ")));
    }
    own.emplace(option, value);
  }
  if (levels.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}.levels: no level given", info->name));
  }
  return info->create(std::move(levels), own);
}

absl::StatusOr<std::vector<std::string>> ParseCheckerList(std::string_view list) {
  std::vector<std::string> names;
  for (std::string_view name : SplitList(list)) {
    if (name.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("empty checker name in '{}' (known: {})", list, KnownCheckers()));
    }
    if (FindChecker(name) == nullptr) {
      return absl::NotFoundError(
          fmt::format("unknown checker '{}' (known: {})", name, KnownCheckers()));
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return absl::InvalidArgumentError(fmt::format("checker '{}' named twice", name));
    }
    names.emplace_back(name);
  }
  return names;
}

}  // namespace isowatch::checkers
