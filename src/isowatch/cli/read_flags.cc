// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/read_flags.h"

#include <charconv>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

namespace isowatch::cli {

void ReadFlags::Register(CLI::App& cmd) {
  std::vector<std::string> names = formats::FormatNames();
  names.insert(names.begin(), "auto");
  cmd.add_option("--format", format_,
                 fmt::format("History format: {} (default auto: decided from the content; "
                             "`isowatch formats` lists them)",
                             fmt::join(names, ", ")))
      ->check(CLI::IsMember(names));
  cmd.add_option("--initial-value", initial_value_,
                 "Value of every register before the first write: an integer, or null (the "
                 "default: the format's own convention, absent for most, 0 for text and dbcop)");
  cmd.add_option("--initial-txn", initial_txn_, "TimeKiller initial-transaction file");
  cmd.add_option("--dialect", dialect_,
                 "The format's variant where it has several (text: polysi, plume, isovista, mtc; "
                 "edn: list-append, rw-register); default: decided from the file");
  cmd.add_option("--init-txn", init_txn_,
                 "The transaction with this id holds the initial state (its writes are the "
                 "keys' values before the history) and is not checked");
  cmd.add_flag("--lenient", lenient_,
               "Drop a malformed transaction (counted in the report) instead of failing");
}

formats::FileFormat ReadFlags::format() const {
  return formats::ParseFileFormat(format_).value_or(formats::FileFormat::kAuto);
}

absl::StatusOr<formats::ReadOptions> ReadFlags::Options() const {
  formats::ReadOptions options;
  if (!initial_value_.empty() && initial_value_ != "null") {
    int64_t v = 0;
    auto [ptr, ec] =
        std::from_chars(initial_value_.data(), initial_value_.data() + initial_value_.size(), v);
    if (ec != std::errc() || ptr != initial_value_.data() + initial_value_.size()) {
      return absl::InvalidArgumentError(
          fmt::format("--initial-value must be null or an integer, not {}", initial_value_));
    }
    options.initial_value = v;
  }
  options.initial_txn_path = initial_txn_;
  options.dialect = dialect_;
  if (!init_txn_.empty()) options.init_txn = init_txn_;
  options.lenient = lenient_;
  return options;
}

}  // namespace isowatch::cli
