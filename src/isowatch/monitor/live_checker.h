// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"

#include "isowatch/common/clock.h"
#include "isowatch/engine/engine.h"
#include "isowatch/formats/proto_decoder.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/history/live_history.h"
#include "isowatch/store/violation_record.h"
#include "isowatch/v1/ingest.pb.h"
#include "isowatch/verdict/violation.h"
#include "isowatch/windows/window_cutter.h"

namespace isowatch::v1 {
class LiveCheckpoint;
}  // namespace isowatch::v1

namespace isowatch::monitor {

struct LiveOptions {
  // The online engine's options. Its clock is also the checker's (nullptr: the system clock).
  // Under a memory budget (engine.memory_budget) the live history forgets what neither the engine
  // nor the window cutter holds, as `history` says.
  engine::EngineOptions engine;
  history::LiveHistoryOptions history;
  // How reads of absent values are taken when no stream header says (metadata "data_model":
  // "kv", "list" or "mixed"): docs/operations.md, "Data model".
  history::DataModel default_model = history::DataModel::kMixed;
  // Cut the delivered transactions into windows for the plug-in checkers (docs/windows.md),
  // sealed as the engine's final point passes them; unset: no windows.
  std::optional<windows::WindowOptions> windows;
};

// A transaction the history could not take (docs/ingest-protocol.md): its batch index and why.
struct TxnRefusal {
  uint32_t index = 0;
  std::string txn_id;
  std::string detail;
};

struct LiveStreamStatus {
  std::string name;
  bool closed = false;
  std::optional<history::Timestamp> watermark;
  // The physical part of the stream's timestamps is a Unix time in units of this many
  // nanoseconds, as its header's metadata "timestamp_clock" says; 0: no clock (LSNs, counters).
  int64_t clock_ns = 0;
  uint64_t delivered = 0;  // transactions delivered to the engine
  uint64_t committed = 0;  // of which committed
  uint64_t pending = 0;    // of which not final yet
};

// The checking half of the daemon, with no I/O: takes the validated batches of any number of
// streams, appends their transactions to one live history, runs them through the online engine
// and hands out the violations that became final, rendered self-contained with stable ids. The
// daemon feeds it from the ingest queue and, after a restart, from the store's log in the same
// order, which gives the same violations with the same ids.
//
// Engine-thread only (thread-compatible).
class LiveChecker {
 public:
  explicit LiveChecker(LiveOptions options);
  ~LiveChecker();
  LiveChecker(const LiveChecker&) = delete;
  LiveChecker& operator=(const LiveChecker&) = delete;

  // Applies one batch: its header's initial state (taken only before the first transaction of
  // the history; later headers are ignored and counted), the transactions at `accepted` (a
  // transaction the live history refuses, e.g. a key used both as a register and as a list, is
  // returned and not delivered), then its watermark and end of stream.
  // `now_ms`: the arrival time, for the check latency (CollectFinal).
  std::vector<TxnRefusal> Apply(const v1::IngestBatch& batch, std::span<const uint32_t> accepted,
                                int64_t now_ms = 0);

  // Forgets the delivered transactions that have become final since the last call and appends,
  // for each, the time from its arrival to `now_ms` (milliseconds) to `latencies_ms` if given.
  void CollectFinal(int64_t now_ms, std::vector<int64_t>* latencies_ms);

  // Finalises what has timed out (streams without watermarks). Call periodically.
  void Tick();

  // The windows sealed since the last call, in order (none without LiveOptions::windows).
  std::vector<windows::Window> TakeSealedWindows() { return std::exchange(sealed_, {}); }
  // The window cutter's counts; nullptr without windows.
  const windows::CutterStats* window_stats() const {
    return cutter_ != nullptr ? &cutter_->stats() : nullptr;
  }
  // The name of the stream with index `origin` (history::Transaction::origin, Window::origins);
  // empty if there is none.
  std::string_view stream_name(uint16_t origin) const {
    return origin < streams_.size() ? std::string_view(streams_[origin].name) : std::string_view();
  }

  // The violations that became final since the last call, in the order they became final,
  // stamped with `now_unix_ms`.
  std::vector<store::ViolationRecord> TakeViolations(int64_t now_unix_ms);

  const engine::EngineStats& stats() const {
    return engine_ != nullptr ? engine_->stats() : no_stats_;
  }
  std::vector<LiveStreamStatus> Streams() const;
  uint64_t ignored_headers() const { return ignored_headers_; }
  // Bytes held by the live history (transactions, operations, interned keys and values).
  size_t history_bytes() const { return live_.history().MemoryUsage(); }
  // Keys the live history holds (HistoryBuilder::CollectKeys forgets the others).
  size_t history_keys() const { return live_.history().keys_held(); }
  // What the live history forgot (under a memory budget).
  const history::LiveHistoryStats& history_stats() const { return live_.stats(); }
  const history::History& history() const { return live_.history(); }
  // The live history's builder (what it decided about keys and sessions), for ingest's
  // ConflictRegistry after a restart from a checkpoint.
  const history::HistoryBuilder& builder() const { return live_.builder(); }

  // Checkpoints (docs/operations.md, "Checkpoints"). Writes everything this checker holds to
  // `out`: the live history, the engine's state (flushing its spill), the streams and the
  // window cutter. Call between batches, after TakeViolations and TakeSealedWindows
  // (FailedPrecondition otherwise, or if the engine cannot save: its spill failed).
  absl::Status SaveCheckpoint(v1::LiveCheckpoint* out);
  // Makes this checker, fresh (nothing applied), the one that saved `checkpoint`, over a spill
  // (LiveOptions::spill) restored as it was then. The transactions still pending count as
  // arrived at `now_ms`. An error if the checkpoint is malformed or does not fit the options
  // (among them: windows are cut, and the checkpoint was taken without windows or cut them by
  // other options).
  absl::Status RestoreCheckpoint(const v1::LiveCheckpoint& checkpoint, int64_t now_ms);

 private:
  struct Stream {
    std::string name;
    engine::StreamId id = 0;
    bool closed = false;
    std::optional<history::Timestamp> watermark;
    int64_t clock_ns = 0;  // LiveStreamStatus::clock_ns
    uint64_t delivered = 0;
    uint64_t committed = 0;
    // Delivered committed transactions not yet known to be final: commit timestamp and arrival.
    struct Unfinal {
      history::Timestamp commit;
      int64_t arrival_ms = 0;
    };
    std::vector<Unfinal> unfinal;
  };

  // Seals the windows the engine's final point has passed (all of them once every stream is
  // closed).
  void SealWindows();
  Stream& StreamFor(std::string_view name);
  void StartIfNeeded(const v1::IngestBatch& batch);
  std::unique_ptr<engine::Engine> MakeEngine() const;
  const common::Clock& clock() const {
    return options_.engine.clock != nullptr ? *options_.engine.clock : common::SystemClock::Get();
  }
  // Sets the engine, registered with the live history (the one before, if any, is let go).
  void SetEngine(std::unique_ptr<engine::Engine> engine);

  // Renders, before the live history forgets transactions, the violations that became final
  // while every transaction they name is still held.
  class Renderer final : public history::HistoryHolder {
   public:
    explicit Renderer(LiveChecker& checker) : checker_(checker) {}
    void BeforeRelease() override;

   private:
    LiveChecker& checker_;
  };
  store::ViolationRecord Render(const verdict::Violation& v, int64_t now_unix_ms) const;

  LiveOptions options_;
  history::LiveHistory live_;
  formats::ProtoDecoder decoder_{live_.builder()};
  std::unique_ptr<engine::Engine> engine_;
  bool started_ = false;
  uint64_t ignored_headers_ = 0;
  std::vector<Stream> streams_;
  absl::flat_hash_map<std::string, size_t> stream_index_;
  // Violations rendered before a release, for the next TakeViolations.
  std::vector<store::ViolationRecord> rendered_;
  std::vector<TxnId> scratch_;
  std::unique_ptr<windows::WindowCutter> cutter_;
  std::vector<windows::Window> sealed_;
  Renderer renderer_{*this};
  engine::EngineStats no_stats_;  // before the first batch
};

// The stable id of a violation: a 64-bit FNV-1a hash, in 16 hex digits, of its checker, level,
// anomaly, key and the transactions at fault (their ids as in the source): for EXT the reader
// alone, for the others all of them. The same violation found again (after a restart, from a
// re-sent batch) gets the same id. The EXT kind and the writer an EXT violation names are left
// out: they are judged from the transactions delivered by the time the verdict became final, so
// a writer that arrives later can change them, not the verdict.
std::string StableViolationId(const history::History& h, const verdict::Violation& v);

// A violation found in `h` as the store keeps it: its stable id, checker, level, anomaly, the
// streams `stream_of` names for its transactions (empty: unknown), its JSON, and its key and
// transactions (what the store bounds findings by). finalised_unix_ms is left 0.
store::ViolationRecord RenderViolation(const history::History& h, const verdict::Violation& v,
                                       absl::FunctionRef<std::string_view(TxnId)> stream_of);

}  // namespace isowatch::monitor
