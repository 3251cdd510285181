// SPDX-License-Identifier: Apache-2.0
#include "isowatch/sim/delivery.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>
#include <tuple>
#include <utility>

#include "isowatch/common/clock.h"
#include "isowatch/workload/rng.h"

namespace isowatch::sim {
namespace {

using history::History;
using history::Timestamp;
using history::Transaction;

// A standard normal draw (Box-Muller, one value per pair of uniforms).
double StandardNormal(workload::Rng& rng) {
  const double u1 = 1.0 - rng.UniformDouble();  // (0, 1]: the logarithm is finite
  const double u2 = rng.UniformDouble();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// The collection order of `h` and each transaction's collection timestamp (parallel).
void CollectionOrder(const History& h, std::vector<TxnId>& order, std::vector<Timestamp>& key) {
  std::vector<Timestamp> ts(h.size());
  Timestamp previous = Timestamp::Min();
  for (size_t i = 0; i < h.size(); ++i) {
    const Transaction& t = h.txns()[i];
    if (t.has_commit) {
      ts[i] = t.commit;
    } else if (t.has_start) {
      ts[i] = t.start;
    } else {
      ts[i] = previous;
    }
    previous = ts[i];
  }
  order.resize(h.size());
  for (size_t i = 0; i < h.size(); ++i) order[i] = TxnId(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](TxnId a, TxnId b) { return ts[a.value()] < ts[b.value()]; });
  key.resize(h.size());
  for (size_t i = 0; i < order.size(); ++i) key[i] = ts[order[i].value()];
}

}  // namespace

DeliverySchedule BuildDeliverySchedule(const History& h, const DeliveryOptions& options) {
  DeliverySchedule s;
  const size_t n = h.size();
  std::vector<TxnId> collected;
  std::vector<Timestamp> key;
  CollectionOrder(h, collected, key);

  // Arrival times, in collection order.
  workload::Rng rng(options.seed);
  const double period_ms = 1000.0 / options.rate_tps;
  std::vector<double> arrival(n);
  for (size_t i = 0; i < n; ++i) {
    double delay = options.mean_ms;
    if (options.sigma_ms > 0) delay += options.sigma_ms * StandardNormal(rng);
    arrival[i] = static_cast<double>(i) * period_ms + std::max(0.0, delay);
  }
  std::vector<uint32_t> by_arrival(n);  // collection positions in arrival order
  for (size_t i = 0; i < n; ++i) by_arrival[i] = static_cast<uint32_t>(i);
  std::stable_sort(by_arrival.begin(), by_arrival.end(),
                   [&](uint32_t a, uint32_t b) { return arrival[a] < arrival[b]; });

  // wm_at[p]: the watermark once collection positions [0, p) have all been delivered: the last
  // commit timestamp before the group of equal collection timestamps that position p opens.
  std::vector<std::optional<Timestamp>> wm_at(n + 1);
  {
    std::optional<Timestamp> last_commit;
    std::optional<Timestamp> group_wm;
    for (size_t i = 0; i < n; ++i) {
      if (i == 0 || key[i] != key[i - 1]) group_wm = last_commit;
      wm_at[i] = group_wm;
      const Transaction& t = h.txn(collected[i]);
      if (t.has_commit) last_commit = t.commit;
    }
    wm_at[n] = last_commit;
  }

  s.order.reserve(n);
  s.arrival_ms.reserve(n);
  const size_t batch = std::max<uint32_t>(options.batch, 1);
  std::vector<uint8_t> delivered(n, 0);
  std::vector<size_t> batch_of(n, 0);  // by collection position
  size_t prefix = 0;                   // collection positions [0, prefix) are all delivered
  for (size_t begin = 0; begin < n; begin += batch) {
    const size_t end = std::min(n, begin + batch);
    DeliveryBatch b;
    b.begin = begin;
    b.end = end;
    for (size_t i = begin; i < end; ++i) {
      const uint32_t pos = by_arrival[i];
      s.order.push_back(collected[pos]);
      s.arrival_ms.push_back(arrival[pos]);
      delivered[pos] = 1;
      batch_of[pos] = s.batches.size();
      b.time_ms = std::max(b.time_ms, arrival[pos]);
    }
    while (prefix < n && delivered[prefix]) ++prefix;
    if (options.watermarks) b.watermark = wm_at[prefix];
    s.batches.push_back(b);
  }

  // Disorder: how much later than a later-collected transaction each one arrives.
  double suffix_min_time = 0;
  size_t suffix_min_batch = 0;
  for (size_t i = n; i-- > 0;) {
    const double time = s.batches[batch_of[i]].time_ms;
    if (i + 1 < n) {
      s.max_disorder_ms = std::max(s.max_disorder_ms, time - suffix_min_time);
      if (batch_of[i] > suffix_min_batch) ++s.overtaken;
    }
    if (i + 1 == n || time < suffix_min_time) suffix_min_time = time;
    if (i + 1 == n || batch_of[i] < suffix_min_batch) suffix_min_batch = batch_of[i];
  }
  return s;
}

OnlineResult RunOnline(const History& h, const DeliveryOptions& delivery,
                       const OnlineOptions& online) {
  return RunOnline(h, BuildDeliverySchedule(h, delivery), online);
}

OnlineResult RunOnline(const History& h, const DeliverySchedule& schedule,
                       const OnlineOptions& online) {
  OnlineResult result;
  common::ManualClock clock(0);
  engine::EngineOptions options = online.engine;
  options.clock = &clock;
  engine::Engine engine(h, std::move(options));
  const engine::StreamId stream = engine.AddStream("simulated");

  std::set<std::tuple<verdict::Anomaly, std::vector<TxnId>, KeyId>> seen;
  auto take = [&] {
    for (verdict::Violation& v : engine.TakeFinalViolations()) {
      if (!seen.emplace(v.anomaly, v.txns, v.key).second) ++result.repeated_reports;
      result.violations.push_back(std::move(v));
    }
  };
  auto sample = [&] {
    const engine::EngineStats& st = engine.stats();
    result.max_provisional_reads = std::max(result.max_provisional_reads, st.provisional_reads);
    result.max_retained_versions = std::max(result.max_retained_versions, st.retained_versions);
    result.max_retained_txns = std::max(result.max_retained_txns, st.retained_txns);
    result.max_memory_bytes = std::max(result.max_memory_bytes, st.memory_bytes);
  };

  auto after_call = [&](EngineCall call) {
    if (online.after_call) online.after_call(engine, call);
  };
  for (const DeliveryBatch& b : schedule.batches) {
    const auto now = static_cast<int64_t>(std::ceil(b.time_ms));
    if (now > clock.NowMs()) clock.Set(now);
    engine.Deliver(stream, schedule.txns(b), b.watermark);
    after_call(EngineCall::kDeliver);
    sample();
    engine.Tick();
    after_call(EngineCall::kTick);
    take();
  }
  engine.Finish();
  after_call(EngineCall::kFinish);
  take();
  result.stats = engine.stats();
  result.batches = schedule.batches.size();
  return result;
}

}  // namespace isowatch::sim
