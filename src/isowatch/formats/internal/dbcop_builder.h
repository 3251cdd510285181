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
  void StartSession();
  void EndSession(uint64_t offset);
  // Adds the current session's next transaction.
  absl::Status AddTxn(const std::vector<DbcopEvent>& events, bool success, uint64_t offset);
  void set_dialect(std::string dialect) { dialect_ = std::move(dialect); }
  history::HistoryBuilder& builder() { return builder_; }
  // Makes room for about `txns` transactions and `events` events in all (an estimate from the
  // source's size; see HistoryBuilder::Reserve).
  void Reserve(size_t txns, size_t events);
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
  std::string session_name_;  // session_ in decimal
  std::string id_;            // the current transaction's id, "session:index"

  // Whether a write of `value` to `key` was added before; records this one.
  bool WrittenBefore(KeyId key, int64_t value);
  // Covers `value` with value_bits_ if that keeps them within their budget; false if not.
  bool CoverValue(uint64_t value);
  // Puts every write added so far in written_ and decides by it from here on.
  void DecideExactly();

  // The note on duplicate writes. Values are almost always written once each, whatever the
  // variable, so a bit per value (value_bits_, for values from 0 to a bound that grows with the
  // writes) tells most writes apart without a table lookup, which for millions of writes missed
  // the cache every time. The first value met twice, whatever the variables, makes the builder
  // decide exactly: written_ then holds every (key, value) written. Until then written_ holds
  // only the writes of values out of the bits' range.
  bool exact_ = false;
  uint64_t writes_ = 0;           // added so far
  uint64_t expected_writes_ = 0;  // Reserve's estimate
  std::vector<uint64_t> value_bits_;
  absl::flat_hash_set<std::pair<uint32_t, int64_t>> written_;
};

}  // namespace isowatch::formats::internal
