// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/collector.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/clock.h"
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/ingest/client.h"

#include "collectors/common/state_file.h"
#include "collectors/common/stream_resume.h"
#include "collectors/tidb/client_feed.h"
#include "collectors/tidb/txn_grouper.h"

namespace isowatch::tidb {
namespace {

// A live client's ids are forgotten this long (TSO time) after their records were decided.
constexpr Tso kLiveForgetAfter = MakeTso(uint64_t{10} * 60 * 1000, 0);

// Seconds from the physical time of `ts` to now; nullopt for a TSO that is no wall-clock time
// (before 2015, as histories with logical timestamps have).
std::optional<double> LagSeconds(Tso ts, int64_t now_ms) {
  const int64_t physical = static_cast<int64_t>(TsoPhysicalMs(ts));
  if (physical < int64_t{1420070400000}) return std::nullopt;
  return static_cast<double>(now_ms - physical) / 1e3;
}

}  // namespace

absl::StatusOr<CollectorResult> RunCollector(const CollectorOptions& options,
                                             const CdcInputFactory& open_input,
                                             const std::atomic<bool>* stop) {
  ASSIGN_OR_RETURN(std::unique_ptr<ClientSource> source,
                   OpenClientLog(options.client_log, options.join.data));
  return RunCollector(options, *source, open_input, stop);
}

absl::StatusOr<CollectorResult> RunCollector(const CollectorOptions& options, ClientSource& source,
                                             const CdcInputFactory& open_input,
                                             const std::atomic<bool>* stop) {
  const absl::Time started = absl::Now();
  auto stopping = [&] { return stop != nullptr && stop->load(); };
  const collectors::DaemonOptions& daemon = options.daemon;
  const std::string& stream = options.join.stream;
  // What is durable: every record the joiner decided below `released`, and the watermark
  // `watermark`.
  constexpr size_t kReleased = 0;
  constexpr size_t kWatermark = 1;
  const collectors::StateFile file(daemon.state_dir, {"released", "watermark"});
  ASSIGN_OR_RETURN(collectors::ResumedStream resumed,
                   collectors::ResumeStream(daemon, stream, source.header(), file));
  collectors::CollectorState& state = resumed.state;
  CollectorResult result;
  result.resumed = resumed.resumed;
  result.run = state.run;

  JoinerOptions join = options.join;
  join.live = source.live();
  if (join.live && join.forget_after == 0) join.forget_after = kLiveForgetAfter;
  Joiner joiner(join);
  joiner.SkipBelow(state.durable[kReleased]);
  RETURN_IF_ERROR(source.Start(state.run));
  // The client's records reach the joiner through the feed (all of a client log at once).
  ClientFeed feed(source, joiner);
  RETURN_IF_ERROR(feed.Pump());

  ASSIGN_OR_RETURN(std::unique_ptr<CdcInput> input, open_input(state.input));
  TxnGrouper grouper(input->streams());
  constexpr size_t kMaxInFlight = 8;
  ingest::IngestClient client(daemon.target, stream,
                              ingest::ClientOptions{.max_in_flight = kMaxInFlight,
                                                    .first_seq = resumed.durable_seq + 1,
                                                    .auth = daemon.auth});

  // What the joiner emitted and is not sent yet, with the commit ts of each (0: none), the
  // release point they complete and the watermark that may follow them.
  std::deque<std::pair<v1::Transaction, Tso>> ready;
  Tso ready_released = state.durable[kReleased];
  std::optional<Tso> ready_watermark;
  // The release point of the last batch that emptied `ready`: what a partial batch completes.
  Tso complete_released = state.durable[kReleased];
  Tso sent_watermark = state.durable[kWatermark];
  // What the CDC input was last told is durable, whether it took it, and when.
  Tso acknowledged = 0;
  bool acknowledge_failed = false;
  absl::Time acknowledge_tried = absl::InfinitePast();
  std::string acknowledge_error;
  std::deque<std::pair<uint64_t, std::vector<Tso>>> commits_in_flight;
  // The lags of the whole run, and of the transactions made durable since the last progress line.
  collectors::LagSamples lags;
  collectors::LagSamples recent_lags;
  absl::Time last_flush = absl::Now();
  absl::Time last_progress = absl::Now();
  absl::Time last_moved = absl::Now();
  Tso last_release = 0;
  absl::Status failure;

  auto take_ready = [&] {
    const Tso release_point = feed.ReleasePoint(grouper.release_point());
    Joiner::Output out = joiner.Take(release_point);
    for (v1::Transaction& t : out.txns) {
      const Tso commit = t.has_commit() ? static_cast<Tso>(t.commit().physical()) : 0;
      ready.emplace_back(std::move(t), commit);
    }
    ready_released = std::max(ready_released, release_point);
    if (out.watermark && *out.watermark > sent_watermark) ready_watermark = *out.watermark;
  };
  // Sends up to batch_size ready transactions; the watermark goes with the batch that empties
  // `ready`.
  auto send = [&]() -> absl::Status {
    const bool moved = ready_watermark.has_value() || ready_released > complete_released;
    if (ready.empty() && !moved) return absl::OkStatus();
    v1::IngestBatch batch;
    std::vector<Tso> commits;
    while (!ready.empty() && static_cast<size_t>(batch.txns_size()) < daemon.batch_size) {
      *batch.add_txns() = std::move(ready.front().first);
      if (ready.front().second != 0) commits.push_back(ready.front().second);
      ready.pop_front();
    }
    if (ready.empty()) {
      complete_released = ready_released;
      if (ready_watermark) {
        batch.mutable_watermark()->set_physical(static_cast<int64_t>(*ready_watermark));
        sent_watermark = *ready_watermark;
        ready_watermark.reset();
      }
    }
    const uint64_t seq = client.next_seq();
    const int n = batch.txns_size();
    state.in_flight.push_back({.seq = seq, .position = {complete_released, sent_watermark}});
    RETURN_IF_ERROR(file.Save(state));
    RETURN_IF_ERROR(client.Send(std::move(batch)));
    commits_in_flight.emplace_back(seq, std::move(commits));
    result.sent += n;
    ++result.batches;
    last_flush = absl::Now();
    return absl::OkStatus();
  };
  // Learns what became durable: saves it, and lets the CDC input forget what is below the
  // durable watermark (and saves where the input resumes then).
  auto confirm = [&]() -> absl::Status {
    const uint64_t durable = client.durable_seq();
    const int64_t now_ms = absl::ToUnixMillis(absl::Now());
    while (!commits_in_flight.empty() && commits_in_flight.front().first <= durable) {
      for (Tso t : commits_in_flight.front().second) {
        if (const std::optional<double> lag = LagSeconds(t, now_ms)) {
          lags.Add(*lag);
          recent_lags.Add(*lag);
        }
      }
      commits_in_flight.pop_front();
    }
    bool changed = state.ConfirmUpTo(durable) > 0;
    // Everything at or below the durable watermark is decided and durable. A failed
    // acknowledgement (a Kafka commit) is tried again a second later.
    const Tso point = state.durable[kWatermark] + 1;
    if (state.durable[kWatermark] > 0 &&
        (point > acknowledged ||
         (acknowledge_failed && absl::Now() - acknowledge_tried >= absl::Seconds(1)))) {
      acknowledged = point;
      acknowledge_tried = absl::Now();
      const absl::Status s = input->Acknowledge(point);
      if (!s.ok()) {
        ++result.acknowledge_failures;
        if (!acknowledge_failed || s.message() != acknowledge_error) {
          // Nothing is lost: the state file, not the input, says where reading resumes.
          spdlog::warn("acknowledging the CDC input: {}", s.ToString());
          acknowledge_error = std::string(s.message());
        }
      } else if (acknowledge_failed) {
        spdlog::info("acknowledging the CDC input works again");
      }
      acknowledge_failed = !s.ok();
      if (std::string position = input->ResumePosition(); position != state.input) {
        state.input = std::move(position);
        changed = true;
      }
    }
    if (changed) RETURN_IF_ERROR(file.Save(state));
    return absl::OkStatus();
  };
  // The progress line (docs/collectors/tidb.md, "Progress"): rates over the time since the last
  // one, lags of what became durable since then.
  struct Counts {
    uint64_t rows = 0;
    uint64_t joined = 0;
    uint64_t sent = 0;
  };
  Counts last_counts;
  auto print_progress = [&] {
    const absl::Time now = absl::Now();
    const double seconds = std::max(1e-3, absl::ToDoubleSeconds(now - last_progress));
    last_progress = now;
    const JoinerStats& j = joiner.stats();
    const Counts counts{grouper.stats().rows, j.joined, result.sent};
    auto rate = [&](uint64_t now_count, uint64_t then_count) {
      return static_cast<double>(now_count - then_count) / seconds;
    };
    const collectors::LagSummary lag = recent_lags.Summarize();
    recent_lags.Clear();
    fmt::print(stderr,
               "isowatch-tidb: rows {} ({:.0f}/s), joined {} ({:.0f}/s), sent {} ({:.0f}/s), "
               "durable batches {}; unknown outcomes committed {}, aborted {}, pending {}; "
               "waiting {} client records / {} CDC transactions; release point {}, watermark "
               "{}; lag {}; refused by isowatchd {}, CDC messages refused {}, late rows {}, "
               "input errors {}, acknowledgements failed {}\n",
               counts.rows, rate(counts.rows, last_counts.rows), counts.joined,
               rate(counts.joined, last_counts.joined), counts.sent,
               rate(counts.sent, last_counts.sent), client.durable_seq(), j.unknown_committed,
               j.unknown_aborted, joiner.unknown_pending(), joiner.waiting(),
               grouper.pending_txns(), grouper.release_point(), state.durable[kWatermark],
               lag.count == 0 ? std::string("-")
                              : fmt::format("p50 {:.3f} s, p99 {:.3f} s, max {:.3f} s", lag.p50,
                                            lag.p99, lag.max),
               client.refusals(), result.rejected_cdc, grouper.stats().late_rows,
               result.input_errors, result.acknowledge_failures);
    last_counts = counts;
  };

  while (!stopping()) {
    failure = feed.Pump();
    if (!failure.ok()) break;
    bool room = client.next_seq() - 1 - client.durable_seq() < kMaxInFlight;
    if (room) {
      absl::StatusOr<CdcInput::Polled> polled = input->Poll(absl::Milliseconds(20));
      if (!polled.ok()) {
        if (!absl::IsUnavailable(polled.status())) {
          failure = polled.status();
          break;
        }
        ++result.input_errors;
        spdlog::warn("{}", polled.status().ToString());
        absl::SleepFor(absl::Milliseconds(100));
      } else {
        for (const std::string& r : polled->rejected) {
          ++result.rejected_cdc;
          spdlog::error("refused: {}", r);
        }
        for (auto& [s, e] : polled->events) {
          // Late rows are counted by the grouper and reported here; nothing else fails.
          if (absl::Status st = grouper.Add(s, std::move(e)); !st.ok()) {
            spdlog::error("{}", st.ToString());
          }
        }
        for (const CdcTxn& t : grouper.Release()) feed.AddCdc(t);
        take_ready();
      }
    } else {
      // isowatchd takes no batches: wait for it (it restarts, say), unless the ingest client
      // stopped for good.
      failure = client.status();
      if (!failure.ok()) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
    // A stall is the CDC stream's: while isowatchd takes no batches (it restarts, say), the
    // collector reads nothing and does not count the time.
    if (grouper.release_point() != last_release || !room) {
      last_release = grouper.release_point();
      last_moved = absl::Now();
    }
    while (room && (ready.size() >= daemon.batch_size ||
                    (!ready.empty() && absl::Now() - last_flush >= daemon.flush_interval) ||
                    (ready.empty() && ready_watermark &&
                     absl::Now() - last_flush >= daemon.flush_interval))) {
      failure = send();
      if (!failure.ok()) break;
      room = client.next_seq() - 1 - client.durable_seq() < kMaxInFlight;
    }
    if (!failure.ok()) break;
    failure = confirm();
    if (!failure.ok()) break;
    if (daemon.progress_interval > absl::ZeroDuration() &&
        absl::Now() - last_progress >= daemon.progress_interval) {
      print_progress();
    }
    if (feed.done() && joiner.waiting() == 0 && ready.empty() && !ready_watermark) break;
    if (options.stall_timeout > absl::ZeroDuration() &&
        absl::Now() - last_moved > options.stall_timeout) {
      failure = absl::DeadlineExceededError(fmt::format(
          "the CDC stream's release point has stayed at {} for {}, with {} client records "
          "waiting",
          grouper.release_point(), absl::FormatDuration(options.stall_timeout), joiner.waiting()));
      break;
    }
  }
  while (failure.ok() && (!ready.empty() || ready_watermark)) failure = send();
  source.Stop();
  if (failure.ok() && daemon.end_of_stream && !stopping() && feed.done() && joiner.waiting() == 0) {
    absl::StatusOr<std::vector<v1::Refusal>> closed = client.Close();
    if (!closed.ok()) failure = closed.status();
  } else if (failure.ok()) {
    absl::StatusOr<std::vector<v1::Refusal>> detached = client.Detach();
    if (!detached.ok()) failure = detached.status();
  }
  if (absl::Status s = confirm(); failure.ok()) failure = s;
  result.refusals = client.refusals();
  result.daemon_reconnects = client.reconnects();
  result.join = joiner.stats();
  result.client_records = feed.records();
  result.late_rows = grouper.stats().late_rows;
  result.duplicate_rows = grouper.stats().duplicate_rows;
  result.rows = grouper.stats().rows;
  result.release_point = grouper.release_point();
  result.watermark = state.durable[kWatermark];
  result.seconds = absl::ToDoubleSeconds(absl::Now() - started);
  result.lag = lags.Summarize();
  if (!failure.ok()) return failure;
  return result;
}

}  // namespace isowatch::tidb
