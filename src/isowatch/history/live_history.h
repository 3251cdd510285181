// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "isowatch/common/clock.h"
#include "isowatch/history/history.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::history {

// Something outside a live history that holds references into it: transaction ids it reads after
// they are final, byte-string pool indices, key ids. It registers with the LiveHistory
// (LiveHistory::Register), which asks it before forgetting anything; every method has a default
// that holds nothing. Called on the thread that owns the LiveHistory only.
class HistoryHolder {
 public:
  virtual ~HistoryHolder() = default;

  // Whether nothing about transaction `id` can change any more for this holder, so that the
  // history may forget it. Asked in increasing id order; once true for an id, stays true.
  virtual bool IsFinal(TxnId /*id*/) const { return true; }
  // The history is about to forget final transaction `id`: returns whether the holder still
  // reads it, in which case the history keeps it, as retired, and asks again at the next release.
  // Otherwise the holder drops what it keeps about it.
  virtual bool Release(TxnId /*id*/) { return false; }
  // A hint that Release(id) is asked a few calls from now.
  virtual void WillRelease(TxnId /*id*/) {}
  // Called once before each release, while every transaction the history holds is still there:
  // the holder takes now whatever needs the transactions about to go (e.g. renders violations).
  virtual void BeforeRelease() {}

  // Adds to `marks` (a bit per byte-string index, history::MarkBytes) every byte string of the
  // history the holder keeps outside the history's transactions.
  virtual void MarkBytes(std::vector<uint64_t>& /*marks*/) {}

  // Whether the holder keeps key ids in a way that cannot survive a key being forgotten and its
  // id handed to another key; while any holder pins keys, no key is forgotten.
  virtual bool PinsKeys() const { return false; }
  // Sets in `marks` (a bit per key id) the bit of every key the history must not forget.
  virtual void MarkKeys(std::vector<uint64_t>& /*marks*/) const {}
  // The history forgot `keys` (in increasing order): their ids will name other keys.
  virtual void ForgetKeys(std::span<const KeyId> /*keys*/) {}
};

// When a live history forgets what it holds. Plain data.
struct LiveHistoryOptions {
  // Forget final transactions (but those a holder still reads) once at least this many, and twice
  // as many as stay held, are final.
  uint64_t min_release = 4096;
  // After a release, forget the byte strings nothing holds any more (docs/engine.md, "Byte
  // strings") once the history holds at least this many, and as many more as it kept at the last
  // collection. 0: after every release.
  uint64_t min_bytes_collect = 65536;
  // After a release, forget the register keys nothing holds (docs/engine.md, "Forgetting keys")
  // once the history holds at least this many, and as many more as it kept at the last
  // collection. 0: after every release. Never while a holder pins keys.
  uint64_t min_keys_collect = 65536;
  // Called after each collection of byte strings, and of keys, with the time it took (seconds)
  // and how many it forgot. May be empty.
  std::function<void(double, uint64_t)> on_byte_collection;
  std::function<void(double, uint64_t)> on_key_collection;
};

// What a live history has forgotten since it started (or was restored: the release counts are
// saved in checkpoints, the collection counts are not). Plain data.
struct LiveHistoryStats {
  uint64_t releases = 0;
  uint64_t byte_collections = 0;
  uint64_t bytes_forgotten = 0;
  uint64_t key_collections = 0;
  uint64_t keys_forgotten = 0;
};

// The daemon's history: a HistoryBuilder in live mode that grows as transactions arrive and, when
// asked (MaybeForget), forgets what nobody needs any more, by one protocol written here:
//   1. release: the transactions below the first one some holder does not call final are
//      forgotten, but those a holder still reads (Release false) are kept as retired; before it,
//      every holder's BeforeRelease;
//   2. keys: unless a holder pins keys, the register keys neither the history nor a holder marks
//      are forgotten, and every holder is told (ForgetKeys);
//   3. byte strings: those neither the history nor a holder marks are forgotten;
//   4. the freed memory is handed back to the system, at most once a second.
// Each step runs only when it is worth its cost (LiveHistoryOptions). Thread-compatible.
class LiveHistory {
 public:
  // REQUIRES: `clock` outlives this object.
  LiveHistory(LiveHistoryOptions options, const common::Clock& clock);
  LiveHistory(const LiveHistory&) = delete;
  LiveHistory& operator=(const LiveHistory&) = delete;

  // Starts live mode (HistoryBuilder::StartLive). Call once, before any transaction, or restore.
  void Start(DataModel model) { builder_.StartLive(model); }

  // Adds a holder, asked after those added before it. REQUIRES: `holder` outlives this object or
  // is unregistered first.
  void Register(HistoryHolder* holder);
  void Unregister(HistoryHolder* holder);

  // Releases and collects what the options say is due (the protocol above). Returns whether
  // transactions were released. REQUIRES: no transaction open.
  bool MaybeForget();

  HistoryBuilder& builder() { return builder_; }
  const HistoryBuilder& builder() const { return builder_; }
  const History& history() const { return builder_.live_history(); }
  const LiveHistoryStats& stats() const { return stats_; }

  // Checkpoints: the history and where its releases stand. Restore REQUIRES: nothing added yet.
  void Save(v1::HistoryCheckpoint* out, uint64_t* release_end, uint64_t* releases) const;
  absl::Status Restore(const v1::HistoryCheckpoint& checkpoint, uint64_t release_end,
                       uint64_t releases);

 private:
  bool MaybeRelease();
  void MaybeCollectKeys();
  void MaybeCollectBytes();
  void MaybeTrim();

  LiveHistoryOptions options_;
  const common::Clock& clock_;
  HistoryBuilder builder_;
  std::vector<HistoryHolder*> holders_;
  LiveHistoryStats stats_;
  uint64_t release_end_ = 0;  // transactions below it are final for every holder
  size_t bytes_kept_ = 0;     // byte strings held after the last collection
  size_t keys_kept_ = 0;      // keys held after the last collection
  std::vector<uint64_t> marks_;
  // Steady time (microseconds) before which memory is not handed back to the system again.
  int64_t next_trim_us_ = 0;
};

}  // namespace isowatch::history
