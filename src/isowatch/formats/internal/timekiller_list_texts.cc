// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/timekiller_list_texts.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "isowatch/formats/internal/timekiller_txn.h"

namespace isowatch::formats::internal {
namespace {

// The commas in `text`, a word at a time.
uint32_t CountCommas(std::string_view text) {
  const char* p = text.data();
  const char* const end = p + text.size();
  uint32_t n = 0;
  for (; end - p >= 8; p += 8) {
    uint64_t word = 0;
    std::memcpy(&word, p, 8);
    const uint64_t y = word ^ 0x2C2C2C2C2C2C2C2CULL;
    // A byte's top bit: set if the byte was a comma (exact in every byte: no carries).
    const uint64_t comma =
        ~(((y & 0x7F7F7F7F7F7F7F7FULL) + 0x7F7F7F7F7F7F7F7FULL) | y) & 0x8080808080808080ULL;
    n += static_cast<uint32_t>(std::popcount(comma));
  }
  for (; p < end; ++p) n += *p == ',' ? 1 : 0;
  return n;
}

void Prefetch(const char* p, size_t bytes) {
  for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b);
}

// Calls f(x) for each element x of `text`, a list's text as ParseListText reads it; returns false
// at the first thing that is not such a list.
template <typename F>
bool ForEachListElement(std::string_view text, F f) {
  const char* p = text.data();
  const char* const end = p + text.size();
  while (true) {
    const char* const digits = p;
    uint64_t v = 0;
    while (p < end && *p != ',') {
      const auto d = static_cast<unsigned>(static_cast<unsigned char>(*p) - '0');
      if (d > 9) return false;
      v = v * 10 + d;
      ++p;
    }
    const auto n = static_cast<size_t>(p - digits);
    if (n == 0 || (n > 1 && *digits == '0')) return false;
    if (n > 18) {
      // Beyond what the sum above holds: what fits in an int64.
      int64_t x = 0;
      const std::from_chars_result r = std::from_chars(digits, p, x);
      if (r.ec != std::errc() || r.ptr != p) return false;
      f(x);
    } else {
      f(static_cast<int64_t>(v));
    }
    if (p == end) return true;
    ++p;  // the comma
  }
}

bool IsText(const PendingOp& op) {
  return op.list_form == ListForm::kText || op.list_form == ListForm::kTextInPlace;
}

std::string_view TextOf(const ParsedTxn& txn, const PendingOp& op) {
  const char* base = op.list_form == ListForm::kText ? txn.list_text.data() : op.where;
  return {base + op.list_begin, op.list_size};
}

}  // namespace

bool ParseListText(std::string_view text, std::vector<int64_t>* elements) {
  return ForEachListElement(text, [&](int64_t x) { elements->push_back(x); });
}

bool CheckListText(std::string_view text, uint32_t* count) {
  uint32_t n = 0;
  if (!ForEachListElement(text, [&](int64_t) { ++n; })) return false;
  *count = n;
  return true;
}

void ListTexts::PrefetchRecords(const ParsedTxn& txn) const {
  for (const PendingOp& op : txn.ops) {
    if (op.form == ValueForm::kList && op.key_id < records_.size()) {
      __builtin_prefetch(&records_[op.key_id]);
    }
  }
}

void ListTexts::PrefetchReads(const ParsedTxn& txn) {
  for (const PendingOp& op : txn.ops) {
    if (op.list_form == ListForm::kTextInPlace) Prefetch(op.where + op.list_begin, op.list_size);
  }
}

void ListTexts::PrefetchTexts(const ParsedTxn& txn) const {
  for (const PendingOp& op : txn.ops) {
    if (!IsText(op) || op.key_id >= records_.size()) continue;
    const Record& r = records_[op.key_id];
    if (r.count != kStale) Prefetch(r.text, std::min(r.size, op.list_size + 1));
  }
}

bool ListTexts::Resolve(ParsedTxn& txn) {
  for (PendingOp& op : txn.ops) {
    if (op.form != ValueForm::kList) continue;
    if (IsText(op)) {
      if (!ResolveText(txn, op)) return false;
    } else if (op.list_size > 0) {
      Drop(txn, op);
    }
  }
  return true;
}

bool ListTexts::ResolveText(ParsedTxn& txn, PendingOp& op) {
  Record& r = RecordOf(op.key_id);
  const std::string_view read = TextOf(txn, op);
  if (r.count != kStale) {
    const std::string_view list(r.text, r.size);
    if (read.size() <= list.size()) {
      if (std::memcmp(read.data(), list.data(), read.size()) == 0 &&
          (read.size() == list.size() || list[read.size()] == ',')) {
        op.list_form = ListForm::kPrefix;
        op.list_size = read.size() == list.size() ? r.count : CountCommas(read) + 1;
        return true;
      }
    } else if (list.empty() || (std::memcmp(read.data(), list.data(), list.size()) == 0 &&
                                read[list.size()] == ',')) {
      // The whole list and more: the list grows by the rest.
      const std::string_view more = read.substr(list.size());
      uint32_t added = 0;
      if (!CheckListText(list.empty() ? more : more.substr(1), &added)) return false;
      r.count += added;
      Append(r, more);
      op.list_form = ListForm::kPrefix;
      op.list_size = r.count;
      return true;
    }
  }
  // Not a prefix of the list, nor an extension of it: held apart. (Or the copy is dropped: the
  // builder compares it.)
  const size_t begin = txn.elements.size();
  if (!ParseListText(read, &txn.elements)) return false;
  op.list_form = r.count == kStale ? ListForm::kElements : ListForm::kApart;
  op.list_begin = static_cast<uint32_t>(begin);
  op.list_size = static_cast<uint32_t>(txn.elements.size() - begin);
  return true;
}

void ListTexts::Drop(ParsedTxn& txn, PendingOp& op) {
  Record& r = RecordOf(op.key_id);
  if (r.count == kStale) return;
  if (r.count > 0) {
    // The builder has not got the list yet: it comes with the read, before its elements.
    std::vector<int64_t>& elements = txn.elements;
    const size_t begin = elements.size();
    // The copy was checked as it grew.
    ParseListText(std::string_view(r.text, r.size), &elements);
    for (uint32_t i = 0; i < op.list_size; ++i) {
      const int64_t x = elements[op.list_begin + i];
      elements.push_back(x);
    }
    op.list_form = ListForm::kElementsAfterList;
    op.value = r.count;
    op.list_begin = static_cast<uint32_t>(begin);
    op.list_size += r.count;
  }
  r.count = kStale;
}

void ListTexts::TakeLists(absl::FunctionRef<void(KeyId, std::vector<history::Value>)> take) {
  // Parsed by two threads, each a half of the keys, since nothing else runs meanwhile: the
  // building is done, and the check waits for the history.
  std::vector<std::vector<history::Value>> lists(records_.size());
  auto parse = [&](size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      const Record& r = records_[k];
      if (r.count == kStale || r.count == 0) continue;
      std::vector<history::Value>& list = lists[k];
      list.reserve(r.count);
      // The copy was checked as it grew.
      ForEachListElement(std::string_view(r.text, r.size),
                         [&](int64_t x) { list.push_back(history::Value::Int(x)); });
    }
  };
  const size_t half = records_.size() / 2;
  if (half < kParallelKeys) {
    parse(0, records_.size());
  } else {
    std::thread other(parse, half, records_.size());
    parse(0, half);
    other.join();
  }
  for (size_t k = 0; k < lists.size(); ++k) {
    if (!lists[k].empty()) take(KeyId(static_cast<uint32_t>(k)), std::move(lists[k]));
  }
  std::vector<Record>().swap(records_);
  std::vector<std::unique_ptr<char[]>>().swap(blocks_);
  free_ = nullptr;
  free_size_ = 0;
}

void ListTexts::Append(Record& record, std::string_view more) {
  const size_t size = record.size + more.size();
  if (record.text == nullptr || Room(size) > Room(record.size)) {
    const size_t room = Room(size);
    if (room > free_size_) {
      const size_t block = std::max(room, kBlockSize);
      blocks_.push_back(std::make_unique_for_overwrite<char[]>(block));
      free_ = blocks_.back().get();
      free_size_ = block;
    }
    char* text = free_;
    free_ += room;
    free_size_ -= room;
    if (record.size > 0) std::memcpy(text, record.text, record.size);
    record.text = text;
  }
  std::memcpy(record.text + record.size, more.data(), more.size());
  record.size = static_cast<uint32_t>(size);
}

}  // namespace isowatch::formats::internal
