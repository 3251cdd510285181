// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace isowatch::tidb {

// The v column of a list row of the workload's table: the elements in decimal, in order,
// separated by commas ("1,2,3"); the empty list is "" (or a row that is absent, or NULL). The
// workload appends with CONCAT(v, ',', e), so a list holds no spaces and no empty element.

std::string FormatListText(std::span<const int64_t> elements);

// The elements of `text`; nullopt when it is not such a list (an empty element, a sign other
// than a leading '-', anything but digits, a number out of range).
std::optional<std::vector<int64_t>> ParseListText(std::string_view text);

}  // namespace isowatch::tidb
