// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "isowatch/common/strong_id.h"
#include "isowatch/engine/engine.h"
#include "isowatch/history/history.h"
#include "isowatch/history/timestamp.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::sim {

// Simulated asynchrony between a database and the engine (seed 000 §VI-C): a collector picks up
// the transactions of a history in commit order at a steady rate, each one reaches the engine
// after a random delay, and the engine receives them in batches, in order of arrival.
struct DeliveryOptions {
  // Delay of each transaction between its collection and its arrival: normal N(mean, sigma) in
  // milliseconds, clamped at 0.
  double mean_ms = 100;
  double sigma_ms = 10;
  // Transactions per delivered batch (the last one may be smaller). REQUIRES: > 0.
  uint32_t batch = 500;
  // Seed of the delays; the schedule is a function of the history and these options.
  uint64_t seed = 1;
  // Collection rate, transactions per second: the transaction at position i of the collection
  // order is collected at i / rate_tps seconds. REQUIRES: > 0.
  double rate_tps = 10000;
  // Send a watermark with every batch (else the engine must finalise by timeout).
  bool watermarks = true;
};

// One delivered batch: order[begin, end) of its schedule.
struct DeliveryBatch {
  size_t begin = 0;
  size_t end = 0;
  // Simulated wall time at which the batch reaches the engine: the arrival of its last
  // transaction, in milliseconds from the first collection.
  double time_ms = 0;
  // The stream's watermark after this batch (DeliverySchedule describes it); nullopt when
  // watermarks are off or no commit timestamp is covered yet.
  std::optional<history::Timestamp> watermark;
};

// When and in which batches the transactions of a history reach the engine.
//
// Collection order: the transactions sorted by commit timestamp; a transaction without one (an
// aborted one) by its start timestamp; one with neither right after the transaction before it in
// the history. Ties keep history order.
//
// Watermark after a batch: the largest commit timestamp W of a delivered transaction such that
// every transaction whose collection timestamp (commit, else start) is at most W has been
// delivered. So every transaction with commit timestamp <= W has been delivered, and so has every
// aborted transaction that started at or before W: the engine can explain a read of an aborted
// write before it finalises the read. Watermarks never decrease.
struct DeliverySchedule {
  // Every transaction of the history exactly once, in order of arrival.
  std::vector<TxnId> order;
  // Arrival time of order[i] in milliseconds.
  std::vector<double> arrival_ms;
  std::vector<DeliveryBatch> batches;
  // The most any transaction reaches the engine after one collected later than it: max over
  // i before j in collection order of time(batch of i) - time(batch of j), 0 when delivery is in
  // collection order. A finality timeout above it lets every transaction arrive before any
  // verdict that depends on it times out.
  double max_disorder_ms = 0;
  // How many transactions arrived in a batch after one collected later than them.
  size_t overtaken = 0;

  std::span<const TxnId> txns(const DeliveryBatch& b) const {
    return std::span<const TxnId>(order).subspan(b.begin, b.end - b.begin);
  }
};

// Builds the delivery schedule of `h`. Deterministic for given `h` and `options` on any platform
// (delays come from a seeded std::mt19937_64 through a Box-Muller transform).
DeliverySchedule BuildDeliverySchedule(const history::History& h, const DeliveryOptions& options);

// An engine call RunOnline makes.
enum class EngineCall : uint8_t { kDeliver, kTick, kFinish };

// How RunOnline configures the engine.
struct OnlineOptions {
  // The engine's options (its level among them), but the clock: the run sets the engine's clock
  // to its own simulated one.
  engine::EngineOptions engine;
  // Called with the engine after each Deliver, Tick and Finish, and which of them it was (a test
  // checks its invariants there: Engine::CheckInvariantsForTest). May be empty.
  std::function<void(const engine::Engine&, EngineCall)> after_call;
};

// The outcome of one online run.
struct OnlineResult {
  // Every final violation, in the order the engine made them final.
  std::vector<verdict::Violation> violations;
  // The engine's counters at the end of the run.
  engine::EngineStats stats;
  // Maxima of the engine's gauges, sampled after every batch.
  uint64_t max_provisional_reads = 0;
  uint64_t max_retained_versions = 0;
  uint64_t max_retained_txns = 0;
  uint64_t max_memory_bytes = 0;  // EngineStats::memory_bytes, sampled after each batch
  // Violations reported more than once (same anomaly, transactions and key). Must be 0.
  uint64_t repeated_reports = 0;
  size_t batches = 0;
};

// Feeds `h` to one Engine through one stream, following BuildDeliverySchedule(h, delivery): for
// each batch, sets a common::ManualClock to the batch's time (rounded up to a millisecond),
// delivers the batch with its watermark, calls Tick() and takes the violations that became final;
// at the end calls Finish() and takes the rest.
OnlineResult RunOnline(const history::History& h, const DeliveryOptions& delivery,
                       const OnlineOptions& online = {});

// The same, over a schedule built beforehand.
OnlineResult RunOnline(const history::History& h, const DeliverySchedule& schedule,
                       const OnlineOptions& online = {});

}  // namespace isowatch::sim
