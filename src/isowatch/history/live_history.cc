// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/live_history.h"

#include <algorithm>
#include <utility>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "isowatch/common/check.h"

namespace isowatch::history {

namespace {

// Whether a collection is due, given `held` now, `kept` at the last collection and the least
// worth collecting (0: always). Each collection costs about what stays: collect once at least as
// many were added since.
bool CollectionDue(size_t held, size_t kept, uint64_t least) {
  return least == 0 || (held >= least && held - std::min(held, kept) >= kept);
}

}  // namespace

LiveHistory::LiveHistory(LiveHistoryOptions options, const common::Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

void LiveHistory::Register(HistoryHolder* holder) {
  ISOWATCH_CHECK(holder != nullptr, "a null holder");
  holders_.push_back(holder);
}

void LiveHistory::Unregister(HistoryHolder* holder) { std::erase(holders_, holder); }

bool LiveHistory::MaybeForget() {
  if (!MaybeRelease()) return false;
  MaybeCollectKeys();
  MaybeCollectBytes();
  MaybeTrim();
  return true;
}

bool LiveHistory::MaybeRelease() {
  const History& h = history();
  release_end_ = std::max<uint64_t>(release_end_, h.first_txn());
  const auto final_for_all = [this](TxnId id) {
    return std::all_of(holders_.begin(), holders_.end(),
                       [id](const HistoryHolder* x) { return x->IsFinal(id); });
  };
  while (release_end_ < h.size() && final_for_all(TxnId(release_end_))) ++release_end_;
  // Each release costs about what stays held (and asks again about every retired one): release
  // once at least twice as much goes.
  const uint64_t releasable = release_end_ - h.first_txn();
  const uint64_t held = h.size() - release_end_ + h.retired_count();
  if (releasable < std::max<uint64_t>(options_.min_release, 1) || releasable < 2 * held) {
    return false;
  }
  for (HistoryHolder* x : holders_) x->BeforeRelease();
  builder_.ReleaseLive(
      TxnId(release_end_),
      [this](TxnId id) {
        // Every holder is asked, so that each drops what it may.
        bool keep = false;
        for (HistoryHolder* x : holders_) keep = x->Release(id) || keep;
        return keep;
      },
      [this](TxnId id) {
        for (HistoryHolder* x : holders_) x->WillRelease(id);
      });
  ++stats_.releases;
  return true;
}

void LiveHistory::MaybeCollectKeys() {
  if (std::any_of(holders_.begin(), holders_.end(),
                  [](const HistoryHolder* x) { return x->PinsKeys(); })) {
    return;
  }
  const History& h = history();
  if (!CollectionDue(h.keys_held(), keys_kept_, options_.min_keys_collect)) return;
  const int64_t start_us = clock_.NowMicros();
  marks_.assign((h.key_count() + 63) / 64, 0);
  for (const HistoryHolder* x : holders_) x->MarkKeys(marks_);
  const std::vector<KeyId> forgotten = builder_.CollectKeys(marks_);
  for (HistoryHolder* x : holders_) x->ForgetKeys(forgotten);
  stats_.keys_forgotten += forgotten.size();
  keys_kept_ = h.keys_held();
  ++stats_.key_collections;
  if (options_.on_key_collection) {
    options_.on_key_collection(clock_.SecondsSince(start_us), forgotten.size());
  }
}

void LiveHistory::MaybeCollectBytes() {
  const History& h = history();
  if (!CollectionDue(h.byte_strings_held(), bytes_kept_, options_.min_bytes_collect)) return;
  const int64_t start_us = clock_.NowMicros();
  marks_.assign((h.byte_count() + 63) / 64, 0);
  for (HistoryHolder* x : holders_) x->MarkBytes(marks_);
  const size_t forgotten = builder_.CollectBytes(marks_);
  stats_.bytes_forgotten += forgotten;
  bytes_kept_ = h.byte_strings_held();
  ++stats_.byte_collections;
  if (options_.on_byte_collection) {
    options_.on_byte_collection(clock_.SecondsSince(start_us), forgotten);
  }
}

void LiveHistory::MaybeTrim() {
#if defined(__GLIBC__)
  // A release frees the history's old buffers, and glibc keeps freed memory in its arenas (the
  // owning thread's, mostly): hand the free pages back, or RSS stays at the high-water mark of
  // the last release. At most once a second: a trim hands back every thread's free pages, which
  // other threads (the daemon's gRPC threads) then fault in again (bench/README.md).
  const int64_t now_us = clock_.NowMicros();
  if (now_us < next_trim_us_) return;
  next_trim_us_ = now_us + 1'000'000;
  malloc_trim(0);
#endif
}

void LiveHistory::Save(v1::HistoryCheckpoint* out, uint64_t* release_end,
                       uint64_t* releases) const {
  builder_.SaveLive(out);
  *release_end = release_end_;
  *releases = stats_.releases;
}

absl::Status LiveHistory::Restore(const v1::HistoryCheckpoint& checkpoint, uint64_t release_end,
                                  uint64_t releases) {
  if (absl::Status s = builder_.RestoreLive(checkpoint); !s.ok()) return s;
  release_end_ = release_end;
  stats_.releases = releases;
  bytes_kept_ = history().byte_strings_held();
  return absl::OkStatus();
}

}  // namespace isowatch::history
