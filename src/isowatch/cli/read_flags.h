// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include <CLI/CLI.hpp>

#include "isowatch/formats/history_file.h"
#include "isowatch/formats/read_options.h"

namespace isowatch::cli {

// The flags of the commands that read a history file (check, replay, convert): --format and the
// reader options (formats::ReadOptions).
class ReadFlags {
 public:
  // Adds --format, --initial-value, --initial-txn, --dialect, --init-txn and --lenient to `cmd`.
  void Register(CLI::App& cmd);
  // The format asked for (kAuto unless --format names one).
  formats::FileFormat format() const;
  // The reader options. Errors (InvalidArgument) name the flag.
  absl::StatusOr<formats::ReadOptions> Options() const;

 private:
  std::string format_ = "auto";
  std::string initial_value_;
  std::string initial_txn_;
  std::string dialect_;
  std::string init_txn_;
  bool lenient_ = false;
};

}  // namespace isowatch::cli
