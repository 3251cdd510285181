// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/snapshot.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace isowatch::history {

bool SnapshotView::Sees(uint64_t xid) const {
  if (xid < xmin) return true;
  if (xid >= xmax) return false;
  return !std::binary_search(xip.begin(), xip.end(), xid);
}

std::optional<std::string> SnapshotDefect(uint64_t xmin, uint64_t xmax,
                                          std::span<const uint64_t> xip) {
  if (xmin > xmax) return fmt::format("snapshot xmin {} is above its xmax {}", xmin, xmax);
  for (uint64_t x : xip) {
    if (x < xmin || x >= xmax) {
      return fmt::format("snapshot in-progress xid {} lies outside [xmin {}, xmax {})", x, xmin,
                         xmax);
    }
  }
  return std::nullopt;
}

namespace {

bool ParseXid(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

absl::Status ParseSnapshot(std::string_view text, uint64_t* xmin, uint64_t* xmax,
                           std::vector<uint64_t>* xip) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        fmt::format("snapshot \"{}\": {} (expected xmin:xmax:xip,...)", text, why));
  };
  xip->clear();
  const size_t c1 = text.find(':');
  const size_t c2 = c1 == std::string_view::npos ? c1 : text.find(':', c1 + 1);
  if (c2 == std::string_view::npos) return bad("two ':' are needed");
  if (!ParseXid(text.substr(0, c1), xmin)) return bad("xmin is not an unsigned integer");
  if (!ParseXid(text.substr(c1 + 1, c2 - c1 - 1), xmax)) {
    return bad("xmax is not an unsigned integer");
  }
  std::string_view rest = text.substr(c2 + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    uint64_t x = 0;
    if (!ParseXid(rest.substr(0, comma), &x)) return bad("an in-progress xid is not an integer");
    xip->push_back(x);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) return bad("a trailing ','");
  }
  if (auto defect = SnapshotDefect(*xmin, *xmax, *xip)) {
    return absl::InvalidArgumentError(fmt::format("{} (\"{}\")", *defect, text));
  }
  return absl::OkStatus();
}

std::string FormatSnapshot(const SnapshotView& s) {
  return fmt::format("{}:{}:{}", s.xmin, s.xmax, fmt::join(s.xip, ","));
}

}  // namespace isowatch::history
