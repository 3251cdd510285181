// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the TimeKiller reader: a pipelined read compares list reads with the key lists as
// text, so that neither of its threads parses the elements a read shares with the reads before
// it, most of a list-append history's bytes, and the builder does not compare them.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"

#include "isowatch/common/strong_id.h"
#include "isowatch/formats/internal/timekiller_txn.h"
#include "isowatch/history/value.h"

namespace isowatch::formats::internal {

// Parses the text of a list between its brackets, digits and commas only (ListForm::kText), into
// `elements`: decimal integers without leading zeros that fit in an int64, separated by single
// commas. Returns false, with `elements` partly appended to, if the text is not such a list.
bool ParseListText(std::string_view text, std::vector<int64_t>* elements);
// Checks `text` as ParseListText does, and counts its elements into `*count`.
bool CheckListText(std::string_view text, uint32_t* count);

// A copy, as text, of the list the builder is to hold for each key (HistoryBuilder::ListRead:
// the longest read so far of the key, when every read is a prefix of the next longer one), by
// which a list read left as text by the usual parser (ListForm::kText, kTextInPlace) is found to
// be
//  - a prefix of the key's list, or the whole list and more, which the list then grows by: the
//    builder holds it as a length into the list (ListForm::kPrefix, HistoryBuilder::
//    ListReadPrefix), and is given the list itself once all is read (TakeLists); only the new
//    elements are checked, and none is parsed;
//  - neither (ListForm::kElements): the read is parsed whole, and the builder compares it.
// The copy stands for the builder's list because it is given every list read, in the order the
// builder is, and because the text of a list of integers checked by ParseListText is one-to-one
// with its elements, so comparing texts is comparing elements. A key read as a non-empty list
// that was not left as text (the usual parser parsed it, for a space or a negative element, or
// the general parser read the transaction) is left to the builder from then on: its list goes
// with that read (ListForm::kElementsAfterList), and the copy is dropped.
//
// Resolve changes list reads in place; the Prefetch calls, made some transactions ahead of it,
// only fetch into the cache what it will look at. Not thread-safe.
class ListTexts {
 public:
  // Software prefetch of the texts of the list reads of `txn` left in place
  // (ListForm::kTextInPlace); those copied are prefetched with the transaction.
  static void PrefetchReads(const ParsedTxn& txn);
  // Software prefetch of the records of the keys `txn` reads as lists (its keys numbered).
  void PrefetchRecords(const ParsedTxn& txn) const;
  // Software prefetch of as much of those keys' texts as Resolve will compare (once the records
  // are in cache).
  void PrefetchTexts(const ParsedTxn& txn) const;
  // Resolves each list read of `txn` given as text (its keys numbered: PendingOp::key_id; the
  // texts left in place still readable), in
  // order, and notes the others. Returns false if a text is not a list ParseListText reads; the
  // transaction is then malformed, or has a list the general parser is to read, and this copy
  // is out of step with the builder.
  bool Resolve(ParsedTxn& txn);
  // Gives each key's list that the builder does not hold, parsed (HistoryBuilder::SetKeyList),
  // to `take`, and forgets them all.
  void TakeLists(absl::FunctionRef<void(KeyId, std::vector<history::Value>)> take);

 private:
  struct Record {
    char* text = nullptr;  // in blocks_
    uint32_t size = 0;     // bytes; the room is Room(size)
    uint32_t count = 0;    // elements; kStale: the copy is dropped
  };
  static_assert(sizeof(Record) == 16);
  static constexpr uint32_t kStale = UINT32_MAX;
  static constexpr size_t kBlockSize = size_t{1} << 20;
  // From how many keys on TakeLists parses on two threads.
  static constexpr size_t kParallelKeys = 10000;

  // The room a text of `size` bytes has: a power of two, so that growing it is amortized.
  static size_t Room(size_t size) { return size <= 32 ? 32 : std::bit_ceil(size); }
  Record& RecordOf(uint32_t key_id) {
    if (key_id >= records_.size()) records_.resize(key_id + 1);
    return records_[key_id];
  }
  // Makes `more` the end of the text of `record`, moving the text to more room if needed.
  void Append(Record& record, std::string_view more);
  bool ResolveText(ParsedTxn& txn, PendingOp& op);
  // A non-empty list read of op.key_id not given as text.
  void Drop(ParsedTxn& txn, PendingOp& op);

  std::vector<Record> records_;  // by key id
  // The texts, bump-allocated; room a text moved out of is not reused.
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* free_ = nullptr;
  size_t free_size_ = 0;
};

}  // namespace isowatch::formats::internal
