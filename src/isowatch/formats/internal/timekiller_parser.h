// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the TimeKiller reader: the parser that reads a TimeKiller history (and its initial
// transaction) into a HistoryBuilder, and the simdjson helpers its parts share.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <simdjson.h>

#include "isowatch/formats/internal/chunked_json_array.h"
#include "isowatch/formats/internal/timekiller_internal.h"
#include "isowatch/formats/internal/timekiller_txn.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/history/timestamp.h"

namespace isowatch::formats::internal {

namespace od = simdjson::ondemand;

inline constexpr size_t kSimdjsonPadding = simdjson::SIMDJSON_PADDING;
static_assert(ChunkedJsonArray::kPadding >= kSimdjsonPadding);

// The name of `field`; unescaped (into the parser's string buffer) only if it has escapes.
[[gnu::always_inline]] inline simdjson::error_code FieldName(od::field& field,
                                                             std::string_view* name) {
  const char* raw = field.key().raw();
  size_t n = 0;
  while (raw[n] != '"' && raw[n] != '\\') ++n;
  if (raw[n] == '"') {
    *name = std::string_view(raw, n);
    return simdjson::SUCCESS;
  }
  return field.unescaped_key().get(*name);
}

// The text of the string `v`; unescaped only if it has escapes (stage 1 has already rejected
// unescaped control characters and bad UTF-8). INCORRECT_TYPE if `v` is not a string.
[[gnu::always_inline]] inline simdjson::error_code StringText(od::value& v,
                                                              std::string_view* text) {
  const std::string_view raw = v.raw_json_token();
  if (raw.empty() || raw[0] != '"') return simdjson::INCORRECT_TYPE;
  const char* s = raw.data() + 1;
  size_t n = 0;
  while (s[n] != '"' && s[n] != '\\') ++n;
  if (s[n] == '"') {
    *text = std::string_view(s, n);
    return simdjson::SUCCESS;
  }
  return v.get_string().get(*text);
}

// Whether the document has been read to its end.
inline bool AtEnd(od::document& doc) {
  return doc.current_location().error() == simdjson::OUT_OF_BOUNDS;
}

// Parses TimeKiller transactions and initial-transaction documents into a history::HistoryBuilder.
// Errors are recorded as (position, message) and turned into a Status by the caller, which knows
// how to name positions. Its parts: the driver (timekiller_parser.cc), which reads the array and
// gives each transaction to the builder; the parser of usual transactions (ParseUsualTxn); the
// general parser, on simdjson's On-Demand API (timekiller_txn_ondemand.cc). Not thread-safe.
class TimeKillerParser {
 public:
  TimeKillerParser(history::HistoryBuilder* builder, TxnParsers parsers)
      : builder_(builder), usual_first_(parsers == TxnParsers::kUsualFirst) {}

  // Whether ParseNext leaves lists of digits and commas as text (ParseUsualTxn's DeferLists;
  // in place if the array is, so the array must outlive the transactions parsed), for ListTexts
  // to resolve: only for the parsing thread of a pipelined read.
  void set_defer_lists(bool defer) { defer_lists_ = defer; }

  // Reads the transaction array from `source`.
  absl::Status ReadHistory(ByteSource* source, const std::string& source_name, size_t chunk_size);
  // Reads the transaction array from `source` as ReadHistory does, with the parsing on a second
  // thread and the building on this one. Returns true if the whole array was read into the
  // builder; false if anything failed (the builder is then to be discarded: ReadHistory on a
  // fresh parser and builder gives the error with its position).
  bool ReadHistoryPipelined(ByteSource* source, const std::string& source_name, size_t chunk_size);
  // In a history whose keys are all lists, a key that is only ever read with null (or without
  // "v") is a list too: marks it so that the builder turns those reads into empty-list reads.
  void MarkUndecidedKeysAsLists();
  // Reads an initial-transaction document. `json` must have SIMDJSON_PADDING readable bytes
  // after its end.
  absl::Status ReadInitial(std::string_view json, const std::string& source_name);

 private:
  struct CachedKey {
    int64_t key = 0;
    KeyId id;  // invalid = empty slot
  };
  static constexpr int kKeyCacheBits = 12;
  static constexpr int64_t kMaxSmallKeys = int64_t{1} << 20;
  // Sizing: how many transactions are read before the builder is sized from them, and the
  // fewest bytes a transaction ({"tid":1,"sid":1,"sts":{"p":1},"cts":{"p":1},"ops":[]}) or an op
  // ({"t":"r","k":1},) can take.
  static constexpr uint64_t kSizingSample = 1000;
  static constexpr uint64_t kMinTxnBytes = 52;
  static constexpr uint64_t kMinOpBytes = 16;

  // Records an error at `where` and returns false.
  bool Fail(const char* where, std::string message) {
    fail_where_ = where;
    fail_message_ = std::move(message);
    return false;
  }
  // The recorded failure as a positioned error of transaction `element`: at the recorded
  // position, else at the transaction's start.
  absl::Status TxnFailure(const ChunkedJsonArray& array, const ArrayElement& element) const;
  // Records a simdjson error met while reading `what`.
  bool FailJson(const char* where, simdjson::error_code error, std::string_view what);
  // The raw text of `v` (for messages), or "" if it cannot be had.
  static std::string_view RawToken(od::value& v);
  static const char* Where(od::value& v, const char* fallback);

  // A transaction object, into txn_: the general parser, which accepts every transaction
  // ParseUsualTxn accepts, with the same meaning, and the others.
  bool ParseTxn(od::object& obj, const char* start);
  bool ParseId(od::value& v, const char* where, std::string_view name, std::string_view* text,
               bool* numeric);
  bool ParseHlc(od::value& v, const char* where, std::string_view name, history::Timestamp* ts);
  // The isowatch extension: "xid" (a positive integer) and "snapshot" ("xmin:xmax:xip,...").
  bool ParseXid(od::value& v, const char* where);
  bool ParseSnapshotText(od::value& v, const char* where);
  // Part `part` ("p" or "l") of timestamp `name`.
  bool ParseHlcPart(od::value& v, const char* where, std::string_view name, std::string_view part,
                    int64_t* out);
  // The "ops" array, into txn_.ops and txn_.elements.
  bool ParseOps(od::value& v, const char* where);
  bool ParseOp(od::value& v, size_t index);
  bool ParseOpValue(od::value& v, const char* where, size_t index, PendingOp* op);
  // The next transaction of `array`, in `*element`: parsed into `*usual` if it has the usual
  // shape, else into txn_ by the general parser. nullptr after the last one; errors are
  // positioned.
  absl::StatusOr<const ParsedTxn*> ParseNext(ChunkedJsonArray& array, ArrayElement* element,
                                             ParsedTxn* usual);
  // Gives a parsed transaction, which starts at `start` (for messages) and at byte `offset` of
  // the source, to the builder. With `numbered`, its ops' keys have their ids already
  // (PendingOp::key_id, from ReadHistoryPipelined's parsing thread): a key the builder does not
  // have yet must get that id from it, or the transaction fails.
  bool EmitTxn(const ParsedTxn& txn, const char* start, uint64_t offset, bool numbered = false);
  // Software prefetch, for the pipelined read's building thread, of what EmitTxn will compare the
  // list reads of `txn` (its keys numbered) with: the keys' list records, then (a few
  // transactions later, once those are in cache) the lists' elements.
  void PrefetchKeyLists(const ParsedTxn& txn) const;
  void PrefetchListElements(const ParsedTxn& txn) const;
  // Counts transaction `index` (which ends at byte `end` of the source and has `ops` ops), and
  // sizes the builder after the first kSizingSample of them.
  void CountForSizing(uint64_t index, uint64_t end, size_t ops,
                      std::optional<uint64_t> source_size) {
    sample_ops_ += ops;
    if (index + 1 == kSizingSample && source_size) ReserveFor(*source_size, end, sample_ops_);
  }
  // Reserves room in the builder for a source of `source_size` bytes whose first kSizingSample
  // transactions took `sample_bytes` bytes and had `sample_ops` ops.
  void ReserveFor(uint64_t source_size, uint64_t sample_bytes, uint64_t sample_ops);
  // Records how `key` is used; fails if it was used the other way before.
  bool UseKey(KeyId key, int64_t key_value, uint8_t use, size_t op_index, const char* where);
  // Turns a simdjson error from iterate() into a positioned failure.
  bool FailIterate(simdjson::error_code error, const char* begin, const char* end);
  // HistoryBuilder::IntKey through small_keys_ or key_cache_.
  KeyId InternKey(int64_t key) {
    if (static_cast<uint64_t>(key) < small_keys_.size()) {
      KeyId& id = small_keys_[static_cast<size_t>(key)];
      if (!id.valid()) id = builder_->IntKey(key);
      return id;
    }
    if (key >= 0 && key < kMaxSmallKeys) {
      small_keys_.resize(std::min<size_t>(
          std::max<size_t>({static_cast<size_t>(key) + 1, 2 * small_keys_.size(), 1024}),
          kMaxSmallKeys));
      return InternKey(key);
    }
    const size_t slot = static_cast<size_t>((static_cast<uint64_t>(key) * 0x9e3779b97f4a7c15ULL) >>
                                            (64 - kKeyCacheBits));
    CachedKey& cached = key_cache_[slot];
    if (cached.id.valid() && cached.key == key) return cached.id;
    cached.key = key;
    cached.id = builder_->IntKey(key);
    return cached.id;
  }

  history::HistoryBuilder* builder_;
  // Whether ReadHistory tries ParseUsualTxn before the general parser.
  bool usual_first_;
  bool defer_lists_ = false;
  od::parser parser_;
  const char* fail_where_ = nullptr;
  std::string fail_message_;

  // The transaction being parsed.
  ParsedTxn txn_;
  // The ops of the transactions counted by CountForSizing.
  uint64_t sample_ops_ = 0;
  // Per key id: kUsedAsRegister / kUsedAsList bits.
  std::vector<uint8_t> key_use_;

  // The ids of keys 0 <= k < kMaxSmallKeys (invalid: not seen yet), the usual kind of key.
  std::vector<KeyId> small_keys_;
  // A direct-mapped cache in front of HistoryBuilder::IntKey for other keys: the keys of a
  // history repeat, and most accesses go to a few hot ones.
  std::vector<CachedKey> key_cache_ = std::vector<CachedKey>(size_t{1} << kKeyCacheBits);
};

}  // namespace isowatch::formats::internal
