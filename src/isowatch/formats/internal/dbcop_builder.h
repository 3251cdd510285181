// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::formats::internal {

// One event of a dbcop transaction, as read.
struct DbcopEvent {
  bool write = false;
  int64_t variable = 0;
  std::optional<int64_t> value;  // nullopt: a new-JSON read of `null`
  bool success = true;
};

// What the bincode and JSON readers share: positional ids, the notes, the template check.
// Thread-compatible.
class DbcopBuilder {
 public:
  DbcopBuilder(const ReadOptions& options, std::string source, std::string format,
               std::string dialect);
  void StartSession() {
    ++session_;
    index_ = 0;
  }
  void EndSession(uint64_t offset);
  // Adds the current session's next transaction.
  absl::Status AddTxn(const std::vector<DbcopEvent>& events, bool success, uint64_t offset);
  void set_dialect(std::string dialect) { dialect_ = std::move(dialect); }
  history::HistoryBuilder& builder() { return builder_; }
  absl::StatusOr<history::History> Finish() &&;

 private:
  const ReadOptions& options_;
  std::string source_;
  std::string format_;
  std::string dialect_;
  history::HistoryBuilder builder_;
  uint64_t session_ = 0;
  uint64_t index_ = 0;
  uint64_t txns_ = 0;
  uint64_t committed_ = 0;
  absl::flat_hash_set<std::pair<int64_t, int64_t>> written_;
};

}  // namespace isowatch::formats::internal
