// SPDX-License-Identifier: Apache-2.0
// TimeKillerParser's driver: reads the transaction array element by element, has each
// transaction parsed (by ParseUsualTxn, or else by the general parser) and gives it to the
// HistoryBuilder; and reads the initial transaction.
#include "isowatch/formats/internal/timekiller_parser.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include <fmt/format.h>
#include <simdjson.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/internal/batch_pipe.h"
#include "isowatch/formats/internal/chunked_json_array.h"
#include "isowatch/formats/internal/timekiller_list_texts.h"
#include "isowatch/formats/internal/timekiller_text.h"
#include "isowatch/formats/internal/timekiller_txn.h"
#include "isowatch/formats/internal/timekiller_usual_txn.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::formats::internal {
namespace {

using history::Timestamp;
using history::Value;

// How a key has been used so far.
constexpr uint8_t kUsedAsRegister = 1;
constexpr uint8_t kUsedAsList = 2;

constexpr size_t kMinParserCapacity = size_t{64} << 10;

// How far ahead of the transaction given to the builder the pipelined read's building thread
// prefetches what the builder will need (ReadHistoryPipelined).
constexpr size_t kRecordAhead = 16;   // the ParsedTxn record
constexpr size_t kArraysAhead = 12;   // its ops, elements and list texts
constexpr size_t kKeyListsAhead = 8;  // TimeKillerParser::PrefetchKeyLists
constexpr size_t kElementsAhead = 4;  // TimeKillerParser::PrefetchListElements
// How many transactions behind the one just parsed the parsing thread numbers keys, having
// prefetched where it looks them up (KeyNumbering).
constexpr size_t kNumberBehind = 4;

// Software prefetch of the `bytes` at `p`.
void PrefetchBytes(const void* p, size_t bytes) {
  const auto* c = static_cast<const char*>(p);
  for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b);
}

}  // namespace

bool TimeKillerParser::UseKey(KeyId key, int64_t key_value, uint8_t use, size_t op_index,
                              const char* where) {
  if (key.value() >= key_use_.size()) key_use_.resize(key.value() + 1, 0);
  uint8_t& used = key_use_[key.value()];
  if ((used | use) == (kUsedAsRegister | kUsedAsList)) {
    return Fail(where,
                use == kUsedAsList
                    ? fmt::format("op #{}: key {} is used as a list here (appended to or read as "
                                  "an array) but as a register elsewhere",
                                  op_index, key_value)
                    : fmt::format("op #{}: key {} is used as a register here (written or read as "
                                  "a scalar) but as a list elsewhere",
                                  op_index, key_value));
  }
  used |= use;
  return true;
}

bool TimeKillerParser::EmitTxn(const ParsedTxn& txn, const char* start, uint64_t offset,
                               bool numbered) {
  history::TxnHeader header{.id = txn.tid,
                            .id_numeric = txn.tid_numeric,
                            .session = txn.sid,
                            .session_numeric = txn.sid_numeric,
                            .start = txn.has_sts ? std::optional<Timestamp>(txn.sts) : std::nullopt,
                            .commit = txn.cts,
                            .source_offset = offset,
                            .xid = txn.xid};
  if (txn.has_snapshot) header.snapshot = history::SnapshotView{txn.xmin, txn.xmax, txn.xip};
  if (absl::Status s = builder_->BeginTxn(header); !s.ok()) {
    return Fail(start, std::string(s.message()));
  }
  for (size_t i = 0; i < txn.ops.size(); ++i) {
    const PendingOp& op = txn.ops[i];
    KeyId key;
    if (!numbered) {
      key = InternKey(op.key);
    } else {
      key = KeyId(op.key_id);
      // A key the builder does not have yet: its first use, where the builder hands out the
      // next id, which the parsing thread gave it too. (The parsing thread's table of keys is
      // the history's once all is read: KeyNumbering::TakeKeys.)
      if (op.key_id >= builder_->key_count() && builder_->AddNewIntKey(op.key) != key) {
        builder_->AbandonTxn();
        return Fail(start, "the parsing thread numbered a key differently");
      }
    }
    if (key.value() >= key_use_.size()) key_use_.resize(key.value() + 1, 0);
    uint8_t use = 0;
    if (op.type == OpType::kAppend || op.form == ValueForm::kList) {
      use = kUsedAsList;
    } else if (op.type == OpType::kWrite || op.form == ValueForm::kInt) {
      use = kUsedAsRegister;
    }
    if (use != 0 && !UseKey(key, op.key, use, i, op.where)) {
      builder_->AbandonTxn();
      return false;
    }
    switch (op.type) {
      case OpType::kWrite:
        builder_->Write(key, op.form == ValueForm::kInt ? Value::Int(op.value) : Value::Absent());
        break;
      case OpType::kAppend:
        builder_->Append(key, Value::Int(op.value));
        break;
      case OpType::kRead:
        if (op.form == ValueForm::kList) {
          // Where list_begin and list_size point into txn.elements (not for a prefix or a text).
          auto elements = [&] {
            return std::span<const int64_t>(txn.elements).subspan(op.list_begin, op.list_size);
          };
          switch (op.list_form) {
            case ListForm::kElements:
              builder_->ListReadInts(key, elements());
              break;
            case ListForm::kElementsAfterList: {
              const auto list = elements().first(static_cast<size_t>(op.value));
              std::vector<Value> values;
              values.reserve(list.size());
              for (const int64_t x : list) values.push_back(Value::Int(x));
              builder_->SetKeyList(key, std::move(values));
              builder_->ListReadInts(key, elements().subspan(list.size()));
              break;
            }
            case ListForm::kPrefix:
              builder_->ListReadPrefix(key, op.list_size);
              break;
            case ListForm::kApart:
              builder_->ListReadApart(key, elements());
              break;
            case ListForm::kText:
            case ListForm::kTextInPlace:
              // ListTexts::Resolve gives every list read another form first.
              builder_->AbandonTxn();
              return Fail(start, "a list read was not resolved");
          }
        } else {
          builder_->Read(key, op.form == ValueForm::kInt ? Value::Int(op.value) : Value::Absent());
        }
        break;
    }
  }
  builder_->EndTxn();
  return true;
}

void TimeKillerParser::PrefetchKeyLists(const ParsedTxn& txn) const {
  for (const PendingOp& op : txn.ops) {
    // Only a list read given as elements is compared with the builder's list.
    if (op.form == ValueForm::kList && op.list_form == ListForm::kElements) {
      builder_->PrefetchKeyList(KeyId(op.key_id));
    }
  }
}

void TimeKillerParser::PrefetchListElements(const ParsedTxn& txn) const {
  for (const PendingOp& op : txn.ops) {
    if (op.form == ValueForm::kList && op.list_form == ListForm::kElements) {
      builder_->PrefetchKeyListElements(KeyId(op.key_id), op.list_size);
    }
  }
}

absl::Status TimeKillerParser::TxnFailure(const ChunkedJsonArray& array,
                                          const ArrayElement& element) const {
  return array.ErrorAt(fail_where_ != nullptr ? fail_where_ : element.data,
                       fmt::format("transaction #{}: {}", element.index, fail_message_));
}

absl::StatusOr<const ParsedTxn*> TimeKillerParser::ParseNext(ChunkedJsonArray& array,
                                                             ArrayElement* element,
                                                             ParsedTxn* usual) {
  std::string_view window;
  ASSIGN_OR_RETURN(bool more, array.Start(&window));
  if (!more) return nullptr;
  // Most transactions are read by ParseUsualTxn straight from the buffer; the rest are first
  // delimited by the array splitter.
  // A list's text may be left where it is if the window is the source's bytes, which stay.
  const DeferLists defer = !defer_lists_      ? DeferLists::kNo
                           : array.in_place() ? DeferLists::kInPlace
                                              : DeferLists::kCopy;
  const char* usual_end =
      usual_first_ ? ParseUsualTxn(window.data(), window.data() + window.size(), usual, defer)
                   : nullptr;
  if (usual_end != nullptr) {
    array.Take(static_cast<size_t>(usual_end - window.data()), element);
    return usual;
  }
  ASSIGN_OR_RETURN(more, array.Next(element));
  if (!more) return nullptr;
  const char* start = element->data;
  const char* end = element->data + element->size;
  auto failure = [&]() { return TxnFailure(array, *element); };
  if (*start != '{') {
    return array.ErrorAt(
        start, fmt::format("transaction #{}: expected an object, found an array", element->index));
  }
  // A transaction that did not fit in the window may still be a usual one.
  if (usual_first_ && element->size > window.size() &&
      ParseUsualTxn(start, end, usual, defer_lists_ ? DeferLists::kCopy : DeferLists::kNo) == end) {
    return usual;
  }
  if (parser_.capacity() < element->size) {
    size_t capacity = std::max({element->size, 2 * parser_.capacity(), kMinParserCapacity});
    if (auto error = parser_.allocate(capacity)) {
      return array.ErrorAt(start,
                           fmt::format("transaction #{}: cannot parse {} bytes: {}", element->index,
                                       element->size, simdjson::error_message(error)));
    }
  }
  od::document doc;
  if (auto error = parser_.iterate(start, element->size, element->padded_size).get(doc)) {
    FailIterate(error, start, end);
    return failure();
  }
  od::object obj;
  if (auto error = doc.get_object().get(obj)) {
    FailJson(start, error, "a transaction object");
    return failure();
  }
  if (!ParseTxn(obj, start)) return failure();
  if (!AtEnd(doc)) {
    Fail(start, "unexpected content after the transaction object");
    return failure();
  }
  return &txn_;
}

absl::Status TimeKillerParser::ReadHistory(ByteSource* source, const std::string& source_name,
                                           size_t chunk_size) {
  const std::optional<uint64_t> source_size = source->SizeHint();
  ChunkedJsonArray array(source, source_name, "transaction", chunk_size);
  ArrayElement element;
  while (true) {
    ASSIGN_OR_RETURN(const ParsedTxn* txn, ParseNext(array, &element, &txn_));
    if (txn == nullptr) break;
    if (!EmitTxn(*txn, element.data, element.offset)) return TxnFailure(array, element);
    CountForSizing(element.index, element.offset + element.size, txn->ops.size(), source_size);
  }
  return absl::OkStatus();
}

namespace {

// Parsed transactions on their way from the parsing thread to the building one.
struct ParsedBatch {
  static constexpr size_t kCapacity = 1024;
  struct Entry {
    ParsedTxn txn;        // its ids point into `ids`; its ops' `where` are stale
    std::string ids;      // the transaction id, then the session id
    uint64_t offset = 0;  // where the transaction starts and ends in the source
    uint64_t end = 0;
  };
  std::vector<Entry> entries = std::vector<Entry>(kCapacity);
  size_t size = 0;
};

// Has the kernel back the whole pages inside [p, p + bytes) for writing, as a first write to each
// would, without writing: contents do not change, so another thread may be filling the range
// meanwhile. The pages' first-touch cost (zeroing, and on a virtual machine getting the memory
// from the host) is then paid by the calling thread. Returns false if the kernel cannot (before
// Linux 5.14, or the range is not mapped).
bool PopulateForWrite(std::byte* p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (begin >= end) return true;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the page-aligned start of the range
  return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0;
#else
  (void)p;
  (void)bytes;
  return false;
#endif
}

// The builder's two large arrays, as the building thread publishes them, for the parsing thread
// to have the kernel back their room a little ahead of the building, in the time it would
// otherwise wait for the builder (HistoryBuilder::TxnRoom). First touches of new memory are
// slow (about 2 us a 4 KiB page on the VM of bench/README.md, and these arrays take 230 MB for
// 1M list-append transactions), and the building thread is the slower of the two.
class RoomAhead {
 public:
  static constexpr size_t kAhead = size_t{8} << 20;  // bytes populated past the filling
  static constexpr size_t kStep = size_t{2} << 20;   // bytes per Step

  // Building thread: the arrays once reserved, and then how far they are filled.
  void Publish(const history::HistoryBuilder::ArrayRoom& txns,
               const history::HistoryBuilder::ArrayRoom& ops) {
    if (!ready_.load(std::memory_order_relaxed)) {
      room_[0] = txns;
      room_[1] = ops;
      // Release: the rooms above are written before the parsing thread sees them.
      ready_.store(true, std::memory_order_release);
    }
    // Relaxed: a hint of where to populate; a stale one only populates less or what is filled.
    filled_[0].store(txns.size, std::memory_order_relaxed);
    filled_[1].store(ops.size, std::memory_order_relaxed);
  }

  // Parsing thread: populates the next step ahead of the filling. False if there is none.
  bool Step() {
    if (failed_ || !ready_.load(std::memory_order_acquire)) return false;
    for (int i = 0; i < 2; ++i) {
      const history::HistoryBuilder::ArrayRoom& r = room_[i];
      const size_t filled = filled_[i].load(std::memory_order_relaxed) * r.element_size;
      const size_t limit = std::min(r.capacity * r.element_size, filled + kAhead);
      size_t& done = populated_[i];
      done = std::max(done, filled);
      if (done >= limit) continue;
      const size_t n = std::min(kStep, limit - done);
      if (!PopulateForWrite(r.data + done, n)) {
        failed_ = true;
        return false;
      }
      done += n;
      return true;
    }
    return false;
  }

 private:
  history::HistoryBuilder::ArrayRoom room_[2];  // written before ready_, then read-only
  std::atomic<bool> ready_{false};
  std::atomic<size_t> filled_[2] = {0, 0};
  size_t populated_[2] = {0, 0};  // parsing thread only
  bool failed_ = false;           // parsing thread only
};

// The parsing thread's numbering of the keys of a pipelined read: each key gets the id the
// builder will give it, so that the building thread need not look keys up. The builder hands out
// ids in order of first use (HistoryBuilder::IntKey) and is given the keys in the order they are
// parsed, so the numbering is the count of keys seen before, starting from the keys the builder
// has already (those of the initial transaction). The building thread checks it at each key's
// first use (TimeKillerParser::EmitTxn), where it adds the key without a lookup: the table of
// keys made here becomes the history's once all is read.
class KeyNumbering {
 public:
  explicit KeyNumbering(const history::HistoryBuilder& builder)
      : next_(static_cast<uint32_t>(builder.key_count())) {
    for (uint32_t k = 0; k < next_; ++k) {
      const history::KeyInfo& info = builder.key(KeyId(k));
      if (!info.is_int) continue;
      keys_.emplace(info.payload, KeyId(k));
      if (static_cast<uint64_t>(info.payload) < kDenseKeys) *DenseSlot(info.payload) = k + 1;
    }
  }

  // The id of `key`: a new one if the key was not seen before.
  uint32_t Number(int64_t key) {
    if (static_cast<uint64_t>(key) < kDenseKeys) {
      uint32_t* slot = DenseSlot(key);
      if (*slot == 0) {
        keys_.emplace(key, KeyId(next_));
        *slot = ++next_;
      }
      return *slot - 1;
    }
    auto [it, inserted] = keys_.try_emplace(key, KeyId(next_));
    if (inserted) ++next_;
    return it->second.value();
  }
  // Software prefetch of where Number looks `key` up.
  void Prefetch(int64_t key) const {
    if (static_cast<uint64_t>(key) < dense_.size()) {
      __builtin_prefetch(&dense_[static_cast<size_t>(key)]);
    } else if (static_cast<uint64_t>(key) >= kDenseKeys) {
      keys_.prefetch(key);
    }
  }
  // Every key numbered, with its id: the history's table of keys (HistoryBuilder::SetIntKeys),
  // which the builder need not make again.
  absl::flat_hash_map<int64_t, KeyId> TakeKeys() { return std::move(keys_); }

 private:
  // Keys in [0, kDenseKeys), which most histories' keys are, are looked up in a table.
  static constexpr uint64_t kDenseKeys = uint64_t{1} << 20;

  // Where the id + 1 of dense `key` is held (0: none yet).
  uint32_t* DenseSlot(int64_t key) {
    const auto k = static_cast<uint64_t>(key);
    if (k >= dense_.size()) {
      dense_.resize(
          std::min<size_t>(std::max<size_t>({k + 1, 2 * dense_.size(), 1024}), kDenseKeys), 0);
    }
    return &dense_[k];
  }

  uint32_t next_;
  std::vector<uint32_t> dense_;
  absl::flat_hash_map<int64_t, KeyId> keys_;  // every key, dense or not
};

}  // namespace

bool TimeKillerParser::ReadHistoryPipelined(ByteSource* source, const std::string& source_name,
                                            size_t chunk_size) {
  const std::optional<uint64_t> source_size = source->SizeHint();
  // Enough batches that neither side waits on the other's burst.
  BatchPipe<ParsedBatch> pipe(4);
  RoomAhead ahead;
  KeyNumbering numbering(*builder_);
  ListTexts texts;
  // Used by the parsing thread alone, but it outlives it: list texts left in place in a mapped
  // file are read by this thread, until it is done.
  ChunkedJsonArray array(source, source_name, "transaction", chunk_size);
  // An error is found again, with its position, by the one-thread read.
  array.set_uncounted();
  std::thread parsing([&] {
    TimeKillerParser parser(nullptr,
                            usual_first_ ? TxnParsers::kUsualFirst : TxnParsers::kGeneralOnly);
    parser.set_defer_lists(true);
    ArrayElement element;
    bool done = false;
    while (!done) {
      ParsedBatch* batch = nullptr;
      while (!pipe.TryTakeEmpty(&batch)) {
        if (!ahead.Step()) {
          batch = pipe.TakeEmpty();
          break;
        }
      }
      if (batch == nullptr) break;
      batch->size = 0;
      while (batch->size < ParsedBatch::kCapacity) {
        ParsedBatch::Entry& e = batch->entries[batch->size];
        absl::StatusOr<const ParsedTxn*> txn = parser.ParseNext(array, &element, &e.txn);
        // An error is found again, with its position, by the sequential read.
        if (!txn.ok() || *txn == nullptr) {
          done = true;
          if (!txn.ok()) batch->size = SIZE_MAX;
          break;
        }
        if (*txn != &e.txn) e.txn = **txn;
        e.ids.assign(e.txn.tid);
        e.ids.append(e.txn.sid);
        const size_t tid_size = e.txn.tid.size();
        e.txn.tid = std::string_view(e.ids).substr(0, tid_size);
        e.txn.sid = std::string_view(e.ids).substr(tid_size);
        e.offset = element.offset;
        e.end = element.offset + element.size;
        // This transaction's keys are numbered kNumberBehind transactions later, the lookups
        // prefetched meanwhile.
        for (const PendingOp& op : e.txn.ops) numbering.Prefetch(op.key);
        if (++batch->size > kNumberBehind) {
          for (PendingOp& op : batch->entries[batch->size - 1 - kNumberBehind].txn.ops) {
            op.key_id = numbering.Number(op.key);
          }
        }
      }
      if (batch->size != SIZE_MAX) {
        for (size_t i = batch->size - std::min(batch->size, kNumberBehind); i < batch->size; ++i) {
          for (PendingOp& op : batch->entries[i].txn.ops) op.key_id = numbering.Number(op.key);
        }
      }
      pipe.Send(batch);
    }
    pipe.Close();
  });
  bool ok = true;
  uint64_t index = 0;
  while (ParsedBatch* batch = pipe.Receive()) {
    if (batch->size == SIZE_MAX) ok = false;
    // What the builder will need is fetched ahead of it, in steps (kRecordAhead and the
    // rest): each loads what the step before prefetched and prefetches what the next will load,
    // from the record the parsing thread wrote down to the key's list the builder compares a
    // list read with. The keys come numbered (KeyNumbering); a read that fails discards the
    // builder.
    auto& entries = batch->entries;
    const size_t size = ok ? batch->size : 0;
    for (size_t j = 0; ok && j < size + kRecordAhead; ++j) {
      // The entry `distance` transactions after the one given to the builder at this step, if
      // any.
      auto at = [&](size_t distance) -> ParsedBatch::Entry* {
        const size_t k = j + distance - kRecordAhead;
        return j + distance >= kRecordAhead && k < size ? &entries[k] : nullptr;
      };
      if (ParsedBatch::Entry* e = at(kRecordAhead)) PrefetchBytes(&e->txn, sizeof(ParsedTxn));
      if (ParsedBatch::Entry* e = at(kArraysAhead)) {
        PrefetchBytes(e->txn.ops.data(), e->txn.ops.size() * sizeof(PendingOp));
        PrefetchBytes(e->txn.elements.data(), e->txn.elements.size() * sizeof(int64_t));
        PrefetchBytes(e->txn.list_text.data(), e->txn.list_text.size());
      }
      if (ParsedBatch::Entry* e = at(kKeyListsAhead)) {
        PrefetchKeyLists(e->txn);
        texts.PrefetchRecords(e->txn);
        ListTexts::PrefetchReads(e->txn);
      }
      if (ParsedBatch::Entry* e = at(kElementsAhead)) {
        PrefetchListElements(e->txn);
        texts.PrefetchTexts(e->txn);
      }
      if (j < kRecordAhead) continue;
      ParsedBatch::Entry& e = entries[j - kRecordAhead];
      if (!texts.Resolve(e.txn) || !EmitTxn(e.txn, nullptr, e.offset, /*numbered=*/true)) {
        ok = false;
        break;
      }
      CountForSizing(index++, e.end, e.txn.ops.size(), source_size);
    }
    if (index >= kSizingSample) ahead.Publish(builder_->TxnRoom(), builder_->OpRoom());
    pipe.Release(batch);
    if (!ok) pipe.Cancel();
  }
  parsing.join();
  if (ok) {
    builder_->SetIntKeys(numbering.TakeKeys());
    texts.TakeLists(
        [&](KeyId key, std::vector<Value> list) { builder_->SetKeyList(key, std::move(list)); });
  }
  return ok;
}

void TimeKillerParser::ReserveFor(uint64_t source_size, uint64_t sample_bytes,
                                  uint64_t sample_ops) {
  if (sample_bytes == 0 || source_size <= 2 * sample_bytes) return;
  // The sample's proportions, with some slack, but never more than the smallest transactions
  // and ops could fill: the reservation is an estimate, and the history still grows past it.
  const double scale = 1.03 * static_cast<double>(source_size) / static_cast<double>(sample_bytes);
  const uint64_t max_txns = source_size / kMinTxnBytes;
  const uint64_t max_ops = source_size / kMinOpBytes;
  const auto txns =
      static_cast<uint64_t>(std::min(scale * kSizingSample, static_cast<double>(max_txns)));
  const auto ops = static_cast<uint64_t>(
      std::min(scale * static_cast<double>(sample_ops), static_cast<double>(max_ops)));
  builder_->Reserve(static_cast<size_t>(txns), static_cast<size_t>(ops));
}

void TimeKillerParser::MarkUndecidedKeysAsLists() {
  bool any_list = false;
  for (uint8_t use : key_use_) {
    if (use & kUsedAsRegister) return;
    if (use & kUsedAsList) any_list = true;
  }
  if (!any_list) return;
  for (size_t k = 0; k < key_use_.size(); ++k) {
    // An empty initial list is what an unlisted list starts with anyway.
    if (key_use_[k] == 0) builder_->SetInitialList(KeyId(static_cast<uint32_t>(k)), {});
  }
}

absl::Status TimeKillerParser::ReadInitial(std::string_view json, const std::string& source_name) {
  const char* begin = json.data();
  const char* end = json.data() + json.size();
  auto failure = [&]() {
    return absl::InvalidArgumentError(fmt::format(
        "{}:{}: initial transaction: {}", source_name,
        LineColumnIn(begin, fail_where_ != nullptr ? fail_where_ : begin), fail_message_));
  };
  txn_.ops.clear();
  txn_.elements.clear();
  od::document doc;
  if (auto error =
          parser_.iterate(json.data(), json.size(), json.size() + kSimdjsonPadding).get(doc)) {
    FailIterate(error, begin, end);
    return failure();
  }
  od::json_type type;
  if (auto error = doc.type().get(type)) {
    FailJson(begin, error, "a JSON object with \"ops\"");
    return failure();
  }
  if (type != od::json_type::object) {
    Fail(begin, "expected a JSON object with \"ops\"");
    return failure();
  }
  od::object obj;
  if (auto error = doc.get_object().get(obj)) {
    FailJson(begin, error, "a JSON object with \"ops\"");
    return failure();
  }
  const char* ops_where = nullptr;
  for (auto field_result : obj) {
    if (auto error = field_result.error()) {
      FailJson(begin, error, "an object");
      return failure();
    }
    od::field& field = field_result.value_unsafe();
    const char* member_where = field.key().raw() - 1;
    std::string_view key;
    if (auto error = FieldName(field, &key)) {
      FailJson(member_where, error, "a member name");
      return failure();
    }
    if (key != "ops") continue;
    if (ops_where != nullptr) {
      Fail(member_where, "two members \"ops\"");
      return failure();
    }
    ops_where = member_where;
    od::value& value = field.value();
    if (!ParseOps(value, member_where)) return failure();
  }
  if (!AtEnd(doc)) {
    Fail(begin, "unexpected content after the object");
    return failure();
  }
  if (ops_where == nullptr) {
    Fail(begin, "missing \"ops\"");
    return failure();
  }

  // Registers: the last write wins. Lists: the appends, in order.
  std::vector<KeyId> list_keys;
  absl::flat_hash_map<KeyId, std::vector<Value>> lists;
  for (size_t i = 0; i < txn_.ops.size(); ++i) {
    const PendingOp& op = txn_.ops[i];
    if (op.type == OpType::kRead) continue;
    const KeyId key = InternKey(op.key);
    const bool is_list = op.type == OpType::kAppend;
    if (!UseKey(key, op.key, is_list ? kUsedAsList : kUsedAsRegister, i, op.where)) {
      return failure();
    }
    if (is_list) {
      auto [it, inserted] = lists.try_emplace(key);
      if (inserted) list_keys.push_back(key);
      it->second.push_back(Value::Int(op.value));
    } else {
      builder_->SetInitialRegister(
          key, op.form == ValueForm::kInt ? Value::Int(op.value) : Value::Absent());
    }
  }
  for (KeyId key : list_keys) builder_->SetInitialList(key, lists[key]);
  txn_.ops.clear();
  txn_.elements.clear();
  return absl::OkStatus();
}

}  // namespace isowatch::formats::internal
