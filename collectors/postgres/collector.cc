// SPDX-License-Identifier: Apache-2.0
#include "collectors/postgres/collector.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/ingest/client.h"

#include "collectors/common/state_file.h"
#include "collectors/common/stream_resume.h"

namespace isowatch::pg {
namespace {

v1::Header MakeHeader(const CollectorOptions& o) {
  v1::Header h;
  h.set_version(1);
  (*h.mutable_metadata())["data_model"] =
      o.workload.data == history::DataModel::kList ? "list" : "kv";
  (*h.mutable_metadata())["source"] = "isowatch-pg";
  (*h.mutable_metadata())["isolation"] = IsolationName(o.workload.isolation);
  return h;
}

// The client records the workload's sessions hand over to the collector's loop. Thread-safe.
class Inbox {
 public:
  void Add(ClientTxn t) {
    absl::MutexLock lock(&mu_);
    txns_.push_back(std::move(t));
  }
  // Everything added since the last call.
  std::vector<ClientTxn> Take() {
    absl::MutexLock lock(&mu_);
    return std::exchange(txns_, {});
  }

 private:
  absl::Mutex mu_;
  std::vector<ClientTxn> txns_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<CollectorResult> RunCollector(const CollectorOptions& options,
                                             const CommitFeedFactory& open_feed,
                                             const std::atomic<bool>* stop) {
  const absl::Time started = absl::Now();
  auto stopping = [&] { return stop != nullptr && stop->load(); };
  const collectors::DaemonOptions& daemon = options.daemon;
  const collectors::StateFile file(daemon.state_dir, {"handled"});
  ASSIGN_OR_RETURN(collectors::ResumedStream resumed,
                   collectors::ResumeStream(daemon, options.stream, MakeHeader(options), file));
  // state.durable[0]: every decoded transaction ending at or below it is durable in the daemon.
  collectors::CollectorState& state = resumed.state;
  CollectorResult result;
  result.resumed = resumed.resumed;
  result.run = state.run;

  WorkloadOptions wo = options.workload;
  wo.shape.run = state.run;
  Inbox inbox;
  Workload workload(wo, [&](ClientTxn t) { inbox.Add(std::move(t)); });
  RETURN_IF_ERROR(workload.Prepare(/*reset=*/!resumed.resumed));
  ASSIGN_OR_RETURN(std::unique_ptr<CommitFeed> feed, open_feed());

  Joiner joiner(JoinerOptions{.run = state.run,
                              .message_prefix = wo.message_prefix,
                              .table = TableName(wo),
                              .data = wo.data,
                              .stream = options.stream});
  joiner.SkipUpto(state.durable[0]);
  constexpr size_t kMaxInFlight = 8;
  ingest::IngestClient client(daemon.target, options.stream,
                              ingest::ClientOptions{.max_in_flight = kMaxInFlight,
                                                    .first_seq = resumed.durable_seq + 1,
                                                    .auth = daemon.auth});

  // Flag, set once the workload's sessions have ended. Sequentially consistent (the default): it
  // is set and read once per loop, so the strongest order costs nothing.
  std::atomic<bool> workload_done{false};
  workload.Start();
  std::thread waiter([&] {
    workload.Wait();
    workload_done.store(true);
  });
  auto finish_workload = [&] {
    workload.Stop();
    if (waiter.joinable()) waiter.join();
  };

  v1::IngestBatch batch;
  std::optional<Lsn> batch_handled;
  std::optional<Lsn> sent_watermark;
  absl::Time last_flush = absl::Now();
  absl::Time last_progress = absl::Now();
  std::optional<absl::Time> done_at;
  absl::Status failure;

  // Commit times of the committed transactions of the batch being filled and of the batches in
  // flight (by seq), and the lags measured once they are durable.
  std::vector<int64_t> batch_commit_times;
  std::deque<std::pair<uint64_t, std::vector<int64_t>>> commit_times_in_flight;
  collectors::LagSamples lags;
  // Moves what the joiner has ready into the batch being filled.
  auto take_ready = [&] {
    Joiner::Output out = joiner.Take(absl::Now());
    for (v1::Transaction& t : out.txns) *batch.add_txns() = std::move(t);
    batch_commit_times.insert(batch_commit_times.end(), out.commit_times_us.begin(),
                              out.commit_times_us.end());
    if (out.watermark) {
      batch.mutable_watermark()->set_physical(static_cast<int64_t>(*out.watermark));
    }
    if (out.handled_upto) batch_handled = out.handled_upto;
  };
  auto send = [&](bool force) -> absl::Status {
    const bool watermark_moved =
        batch.has_watermark() &&
        (!sent_watermark || batch.watermark().physical() != static_cast<int64_t>(*sent_watermark));
    if (batch.txns_size() == 0 && !watermark_moved && !force) return absl::OkStatus();
    const uint64_t seq = client.next_seq();
    const int n = batch.txns_size();
    if (batch.has_watermark()) sent_watermark = batch.watermark().physical();
    if (batch_handled) {
      state.in_flight.push_back({.seq = seq, .position = {*batch_handled}});
      RETURN_IF_ERROR(file.Save(state));
    }
    RETURN_IF_ERROR(client.Send(std::move(batch)));
    batch = v1::IngestBatch();
    if (!batch_commit_times.empty()) {
      commit_times_in_flight.emplace_back(seq, std::move(batch_commit_times));
      batch_commit_times.clear();
    }
    result.sent += n;
    ++result.batches;
    batch_handled.reset();
    last_flush = absl::Now();
    return absl::OkStatus();
  };
  auto confirm = [&]() -> absl::Status {
    const uint64_t durable = client.durable_seq();
    const int64_t now_us = absl::ToUnixMicros(absl::Now());
    while (!commit_times_in_flight.empty() && commit_times_in_flight.front().first <= durable) {
      for (int64_t t : commit_times_in_flight.front().second) {
        lags.Add(static_cast<double>(now_us - t) / 1e6);
      }
      commit_times_in_flight.pop_front();
    }
    if (state.ConfirmUpTo(durable) == 0) return absl::OkStatus();
    if (feed != nullptr) feed->Confirm(state.durable[0]);
    // Saved at each step, so that a restart re-sends as little as possible (what it re-sends
    // of an earlier run the daemon keeps in its first form: docs/collectors/postgres.md).
    return file.Save(state);
  };

  absl::Duration feed_backoff = absl::Milliseconds(100);
  while (!stopping()) {
    // Commits.
    if (feed == nullptr) {
      absl::StatusOr<std::unique_ptr<CommitFeed>> f = open_feed();
      if (!f.ok()) {
        if (!absl::IsUnavailable(f.status())) {
          failure = f.status();
          break;
        }
        absl::SleepFor(feed_backoff);
        feed_backoff = std::min(feed_backoff * 2, absl::Seconds(2));
        continue;
      }
      feed = *std::move(f);
      feed_backoff = absl::Milliseconds(100);
      ++result.feed_reconnects;
      feed->Confirm(state.durable[0]);
    }
    // While isowatchd is not taking batches (it restarts, say), the collector holds one full
    // batch and stops reading commits, but keeps the replication connection alive.
    const bool room = client.next_seq() - 1 - client.durable_seq() < kMaxInFlight;
    const bool held = !room && static_cast<size_t>(batch.txns_size()) >= daemon.batch_size;
    if (held) {
      if (absl::Status s = feed->KeepAlive(); !s.ok()) {
        if (!absl::IsUnavailable(s)) failure = s;
        feed.reset();
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    absl::Duration wait = absl::Milliseconds(20);
    for (int i = 0; !held && feed != nullptr && i < 10000; ++i) {
      absl::StatusOr<std::optional<DecodedTxn>> d = feed->Next(wait);
      if (!d.ok()) {
        if (!absl::IsUnavailable(d.status())) failure = d.status();
        spdlog::warn("logical decoding: {}", d.status().ToString());
        feed.reset();
        break;
      }
      if (!d->has_value()) break;
      joiner.AddDecoded(**std::move(d));
      wait = absl::ZeroDuration();
    }
    if (!failure.ok()) break;
    // Client records.
    std::vector<ClientTxn> arrived = inbox.Take();
    for (ClientTxn& t : arrived) joiner.AddClient(std::move(t));
    const bool done = workload_done.load() && arrived.empty();
    if (done && !done_at) done_at = absl::Now();
    if (done && joiner.waiting_clients() > 0 && absl::Now() - *done_at > options.unknown_grace) {
      joiner.GiveUpWaiting();
    }
    take_ready();
    // Send.
    if (room && (static_cast<size_t>(batch.txns_size()) >= daemon.batch_size ||
                 absl::Now() - last_flush >= daemon.flush_interval)) {
      failure = send(false);
      if (!failure.ok()) break;
    }
    failure = confirm();
    if (!failure.ok()) break;
    if (daemon.progress_interval > absl::ZeroDuration() &&
        absl::Now() - last_progress >= daemon.progress_interval) {
      last_progress = absl::Now();
      const WorkloadStats& ws = workload.stats();
      fmt::print(stderr,
                 "isowatch-pg: {} committed, {} aborted, {} sent, {} durable batches, waiting "
                 "{} client / {} decoded\n",
                 ws.committed.load(), ws.aborted_conflict.load() + ws.aborted_other.load(),
                 result.sent, client.durable_seq(), joiner.waiting_clients(),
                 joiner.waiting_decoded());
    }
    if (done && joiner.waiting_clients() == 0 && joiner.waiting_decoded() == 0) break;
  }
  finish_workload();
  if (failure.ok()) {
    // Whatever is ready goes out; the stream ends only when the workload ran to its end.
    for (ClientTxn& t : inbox.Take()) joiner.AddClient(std::move(t));
    take_ready();
    failure = send(false);
  }
  if (failure.ok() && daemon.end_of_stream && !stopping()) {
    absl::StatusOr<std::vector<v1::Refusal>> closed = client.Close();
    if (!closed.ok()) failure = closed.status();
  } else if (failure.ok()) {
    // Keep the stream open for the next run, but make what was sent durable first.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (client.durable_seq() + 1 < client.next_seq() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  if (absl::Status s = confirm(); failure.ok()) failure = s;
  result.refusals = client.refusals();
  result.daemon_reconnects = client.reconnects();
  result.join = joiner.stats();
  const WorkloadStats& ws = workload.stats();
  result.attempted = ws.attempted.load();
  result.committed = ws.committed.load();
  result.aborted_conflict = ws.aborted_conflict.load();
  result.aborted_other = ws.aborted_other.load();
  result.unknown = ws.unknown.load();
  result.session_reconnects = ws.reconnects.load();
  result.seconds = absl::ToDoubleSeconds(absl::Now() - started);
  result.lag = lags.Summarize();
  if (!failure.ok()) return failure;
  return result;
}

}  // namespace isowatch::pg
