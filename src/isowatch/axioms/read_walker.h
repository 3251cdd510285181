// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "isowatch/axioms/explain.h"
#include "isowatch/axioms/own_appends.h"
#include "isowatch/history/history.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::axioms {

// The per-transaction half of the axioms, shared by Chronos and the online engine: walks one
// transaction's operations in program order, checks INT (once per key), and hands each first
// external read of a key to the caller, with the transaction's own appends to that key before it.
//
// Scratch state is indexed by key through a stamp, so nothing is cleared between transactions.
// Thread-compatible; one walker per checking thread.
class ReadWalker {
 public:
  explicit ReadWalker(const history::History& h)
      : h_(h), slot_stamp_(h.key_count(), 0), slot_index_(h.key_count(), 0) {}

  // Makes room for keys added to a live history since construction.
  void Grow() {
    slot_stamp_.resize(h_.key_count(), 0);
    slot_index_.resize(h_.key_count(), 0);
  }

  // Walks transaction `id`: for its first external read of each key calls
  // `on_external(op_index, op, own_appends)`; for each INT violation calls `on_int(violation)`.
  template <typename OnExternal, typename OnInt>
  void Walk(TxnId id, verdict::IsolationLevel level, OnExternal&& on_external, OnInt&& on_int) {
    Walk(
        id, level, [](KeyId) { return true; }, on_external, on_int);
  }
  // Walk, of the ops on keys for which `has(key)` is true. (What a transaction does to one key
  // decides its reads of that key alone.)
  template <typename Has, typename OnExternal, typename OnInt>
  void Walk(TxnId id, verdict::IsolationLevel level, Has&& has, OnExternal&& on_external,
            OnInt&& on_int) {
    Begin();
    auto ops = h_.ops(id);
    for (uint32_t i = 0; i < ops.size(); ++i) {
      if (ops[i].unknown() || !has(ops[i].key())) continue;
      Visit(id, level, ops, i, on_external, on_int);
    }
  }
  // Walk, of the ops whose bit is set in `mask` (bit i: op i): the same as Walk with a `has`
  // true for those ops' keys, for a caller that has the mask without a branch per op.
  // REQUIRES: every op of a key has its bit or none does; the transaction has at most 64 ops.
  template <typename OnExternal, typename OnInt>
  void WalkMasked(TxnId id, verdict::IsolationLevel level, uint64_t mask, OnExternal&& on_external,
                  OnInt&& on_int) {
    Begin();
    auto ops = h_.ops(id);
    for (; mask != 0; mask &= mask - 1) {
      const auto i = static_cast<uint32_t>(std::countr_zero(mask));
      if (ops[i].unknown()) continue;
      Visit(id, level, ops, i, on_external, on_int);
    }
  }

  // Inside a callback of Walk: the index of the op it is called for.
  uint32_t current_op() const { return current_op_; }
  uint64_t external_reads() const { return external_reads_; }
  uint64_t internal_reads() const { return internal_reads_; }

 private:
  void Begin() {
    ++stamp_;
    locals_.clear();
    lists_used_ = 0;
  }

  // Walks op `i` of `ops`, transaction `id`'s, on a key the walk judges.
  template <typename OnExternal, typename OnInt>
  void Visit(TxnId id, verdict::IsolationLevel level, std::span<const history::Op> ops, uint32_t i,
             OnExternal& on_external, OnInt& on_int) {
    const history::Op& op = ops[i];
    current_op_ = i;
    Local& local = LocalFor(op.key());
    switch (op.kind()) {
      case history::OpKind::kWrite:
        local.wrote = true;
        local.observed = true;  // later reads are internal
        local.last = op.value();
        break;
      case history::OpKind::kAppend:
        if (!local.has_list) NewListSlot(local);
        local.wrote = true;
        list_scratch_[local.list_slot].push_back(op.value());
        break;
      case history::OpKind::kRead:
        if (!local.observed) {
          ++external_reads_;
          on_external(i, op, std::span<const history::Value>());
          local.observed = true;
        } else {
          ++internal_reads_;
          if (op.value() != local.last && !local.int_reported) {
            local.int_reported = true;
            on_int(ExplainInt(h_, level, id, op.key(), h_.ValueToString(local.last),
                              h_.ValueToString(op.value()), RegisterFault(ops, i, local.wrote)));
          }
        }
        local.last = op.value();
        break;
      case history::OpKind::kListRead: {
        if (!local.observed) {
          ++external_reads_;
          std::span<const history::Value> own;
          if (local.has_list) own = list_scratch_[local.list_slot];
          // A read that misses the transaction's own earlier appends is an internal fault,
          // whatever it says of the committed list; one that holds a later own append is
          // judged (a future read) with the external reads.
          std::optional<IntRead> fault;
          if (!own.empty() && !EndsWith(h_.list_elements(op), own)) {
            fault = JudgeOwnAppends(h_, id, i);
          }
          if (fault && fault->fault != verdict::ReadFault::kFuture) {
            local.int_reported = true;
            on_int(ExplainInt(h_, level, id, op.key(), {}, h_.ListToString(h_.list_elements(op)),
                              *fault));
          } else {
            on_external(i, op, own);
          }
          local.observed = true;
        } else {
          ++internal_reads_;
          if (!local.int_reported && !SameList(ops[local.last_read], local, op)) {
            local.int_reported = true;
            std::vector<history::Value> expected;
            const auto base = h_.list_elements(ops[local.last_read]);
            const std::vector<history::Value>& since = list_scratch_[local.list_slot];
            expected.assign(base.begin(), base.end());
            expected.insert(expected.end(), since.begin(), since.end());
            const std::optional<IntRead> fault = JudgeOwnAppends(h_, id, i);
            on_int(ExplainInt(h_, level, id, op.key(), h_.ListToString(expected),
                              h_.ListToString(h_.list_elements(op)),
                              fault ? *fault : IntRead{.read_op = i, .own_op = local.last_read}));
          }
        }
        // What the transaction knows of the list is now this read (held by the history, not
        // copied) and the appends after it.
        if (!local.has_list) NewListSlot(local);
        list_scratch_[local.list_slot].clear();
        local.last_read = i;
        break;
      }
    }
  }

  // What the transaction being walked knows of one key.
  struct Local {
    bool observed = false;      // a read of the key has been checked (external or internal)
    bool wrote = false;         // the transaction wrote or appended to the key
    bool int_reported = false;  // INT already reported for this (transaction, key)
    bool has_list = false;      // lists: list_slot holds the appends below
    uint32_t list_slot = 0;     // lists: the appends since the last list read (once observed), or
                                // (before any read) the appends so far
    uint32_t last_read = 0;     // lists, once observed: the index of the last list read
    history::Value last;        // registers: last value read or written
  };

  // Whether list read `read` observed what `before` (an earlier read of the key) did followed by
  // the appends since (local's list slot). Two reads of a key's list without appends between
  // compare by length alone.
  bool SameList(const history::Op& before, const Local& local, const history::Op& read) const {
    const std::vector<history::Value>& since = list_scratch_[local.list_slot];
    if (read.list_size() != static_cast<size_t>(before.list_size()) + since.size()) return false;
    if (history::History::SharesKeyList(before) && history::History::SharesKeyList(read) &&
        since.empty()) {
      return true;
    }
    const auto base = h_.list_elements(before);
    const auto observed = h_.list_elements(read);
    return std::equal(base.begin(), base.end(), observed.begin()) &&
           std::equal(since.begin(), since.end(), observed.begin() + base.size());
  }

  // What is wrong with register read ops[i], which disagrees with the transaction's last read or
  // write of its key: a value it writes only later, an own write it had overwritten, another's
  // value after its own write, or else (it had only read the key) a non-repeatable read.
  static IntRead RegisterFault(std::span<const history::Op> ops, uint32_t i, bool wrote) {
    const history::Op& read = ops[i];
    uint32_t last_write = 0;
    uint32_t last_read = 0;
    for (uint32_t j = 0; j < i; ++j) {
      if (ops[j].key() != read.key() || ops[j].unknown()) continue;
      (ops[j].is_write() ? last_write : last_read) = j;
    }
    for (uint32_t j = 0; j < ops.size(); ++j) {
      if (ops[j].is_write() && ops[j].key() == read.key() && ops[j].value() == read.value()) {
        return {.read_op = i,
                .fault = j > i ? verdict::ReadFault::kFuture : verdict::ReadFault::kNotLastWrite,
                .own_op = j > i ? j : last_write};
      }
    }
    if (!wrote) return {.read_op = i, .own_op = last_read};
    return {.read_op = i, .fault = verdict::ReadFault::kNotOwnWrite, .own_op = last_write};
  }

  // Whether list read `observed` ends with `own`, the transaction's appends to its key since it
  // last read it (or since it began).
  static bool EndsWith(std::span<const history::Value> observed,
                       std::span<const history::Value> own) {
    return observed.size() >= own.size() &&
           std::equal(own.begin(), own.end(), observed.end() - static_cast<ptrdiff_t>(own.size()));
  }

  Local& LocalFor(KeyId key) {
    uint32_t k = key.value();
    if (slot_stamp_[k] != stamp_) {
      slot_stamp_[k] = stamp_;
      slot_index_[k] = static_cast<uint32_t>(locals_.size());
      locals_.push_back(Local{});
    }
    return locals_[slot_index_[k]];
  }

  void NewListSlot(Local& local) {
    local.has_list = true;
    local.list_slot = static_cast<uint32_t>(lists_used_++);
    if (lists_used_ > list_scratch_.size()) list_scratch_.emplace_back();
    list_scratch_[local.list_slot].clear();
  }

  const history::History& h_;
  uint32_t stamp_ = 0;
  std::vector<uint32_t> slot_stamp_;
  std::vector<uint32_t> slot_index_;
  std::vector<Local> locals_;
  std::vector<std::vector<history::Value>> list_scratch_;
  size_t lists_used_ = 0;
  uint64_t external_reads_ = 0;
  uint64_t internal_reads_ = 0;
  uint32_t current_op_ = 0;  // Walk's op, for current_op()
};

}  // namespace isowatch::axioms
