// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/collector.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "isowatch/common/atomic_file.h"
#include "isowatch/common/status_macros.h"
#include "isowatch/ingest/client.h"

#include "collectors/tidb/client_feed.h"
#include "collectors/tidb/txn_grouper.h"

namespace isowatch::tidb {
namespace {

// What a collector remembers between runs (docs/collectors/tidb.md, "Restarts").
struct CollectorState {
  std::string stream;
  uint32_t run = 0;
  // Every record the joiner decided below `released` is durable in the daemon, and so is the
  // watermark `watermark`.
  Tso released = 0;
  Tso watermark = 0;
  // Batches sent and not known to be durable: (seq, released, watermark) once they are.
  struct InFlight {
    uint64_t seq = 0;
    Tso released = 0;
    Tso watermark = 0;
  };
  std::vector<InFlight> in_flight;
};

// A live client's ids are forgotten this long (TSO time) after their records were decided.
constexpr Tso kLiveForgetAfter = MakeTso(uint64_t{10} * 60 * 1000, 0);

std::string StatePath(const std::string& dir) { return dir + "/state"; }

absl::StatusOr<std::optional<CollectorState>> LoadState(const std::string& dir) {
  std::ifstream in(StatePath(dir));
  if (!in) return std::optional<CollectorState>();
  CollectorState s;
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string name = line.substr(0, space);
    const std::string value = line.substr(space + 1);
    bool ok = true;
    if (name == "stream") {
      s.stream = value;
    } else if (name == "run") {
      ok = absl::SimpleAtoi(value, &s.run);
    } else if (name == "released") {
      ok = absl::SimpleAtoi(value, &s.released);
    } else if (name == "watermark") {
      ok = absl::SimpleAtoi(value, &s.watermark);
    } else if (name == "sent") {
      CollectorState::InFlight f;
      const size_t a = value.find(':');
      const size_t b = a == std::string::npos ? a : value.find(':', a + 1);
      ok = b != std::string::npos && absl::SimpleAtoi(value.substr(0, a), &f.seq) &&
           absl::SimpleAtoi(value.substr(a + 1, b - a - 1), &f.released) &&
           absl::SimpleAtoi(value.substr(b + 1), &f.watermark);
      s.in_flight.push_back(f);
    }
    if (!ok) {
      return absl::DataLossError(
          fmt::format("{}: bad value \"{}\" for {}", StatePath(dir), value, name));
    }
  }
  if (s.stream.empty()) return absl::DataLossError(fmt::format("{}: no stream", StatePath(dir)));
  return std::optional<CollectorState>(std::move(s));
}

absl::Status SaveState(const std::string& dir, const CollectorState& s) {
  std::string text = fmt::format("stream {}\nrun {}\nreleased {}\nwatermark {}\n", s.stream, s.run,
                                 s.released, s.watermark);
  for (const auto& f : s.in_flight) {
    text += fmt::format("sent {}:{}:{}\n", f.seq, f.released, f.watermark);
  }
  return WriteFileAtomically(StatePath(dir), text, /*sync=*/true);
}

struct Probe {
  uint64_t durable_seq = 0;
  bool known = false;
};

// Learns the stream's durable seq by pushing its first batch (the header) again: a daemon that
// has the stream answers it as a duplicate; one that has not takes it as batch 1.
absl::StatusOr<Probe> ProbeStream(const CollectorOptions& o, const v1::Header& header) {
  ingest::ClientOptions co;
  co.auth = o.auth;
  std::shared_ptr<grpc::Channel> channel = ingest::MakeIngestChannel(o.target, co);
  std::unique_ptr<v1::Ingest::Stub> stub = v1::Ingest::NewStub(channel);
  ASSIGN_OR_RETURN(const v1::ClaimReply claim, ingest::ClaimStream(*stub, o.join.stream, co));
  v1::IngestBatch batch;
  batch.set_stream(o.join.stream);
  batch.set_seq(1);
  *batch.mutable_header() = header;
  ASSIGN_OR_RETURN(v1::IngestAck ack,
                   ingest::PushBatch(*stub, batch, co, /*stats=*/nullptr, claim.epoch()));
  for (const v1::Refusal& r : ack.refusals()) {
    return absl::FailedPreconditionError(
        fmt::format("isowatchd refused stream \"{}\": {}", o.join.stream, r.detail()));
  }
  return Probe{.durable_seq = ack.durable_seq(), .known = ack.duplicate()};
}

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
  if (options.state_dir.empty()) return absl::InvalidArgumentError("no state directory");
  std::error_code ec;
  std::filesystem::create_directories(options.state_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        fmt::format("cannot create {}: {}", options.state_dir, ec.message()));
  }
  ASSIGN_OR_RETURN(std::optional<CollectorState> loaded, LoadState(options.state_dir));
  const std::string& stream = options.join.stream;
  if (loaded && loaded->stream != stream) {
    return absl::FailedPreconditionError(fmt::format(
        "{} belongs to stream \"{}\", not \"{}\": give each stream its own state directory",
        options.state_dir, loaded->stream, stream));
  }
  CollectorResult result;
  result.resumed = loaded.has_value();
  ASSIGN_OR_RETURN(const Probe probe, ProbeStream(options, source.header()));
  if (!loaded && probe.known) {
    return absl::FailedPreconditionError(fmt::format(
        "isowatchd already has stream \"{}\" ({} batches) but {} holds no state for it: use a "
        "new --stream, or the state directory of the collector that sent it",
        stream, probe.durable_seq, options.state_dir));
  }
  if (loaded && !probe.known) {
    return absl::FailedPreconditionError(fmt::format(
        "{} says stream \"{}\" was sent to isowatchd, but isowatchd does not have it (a new "
        "store?): start a new stream with a new state directory",
        options.state_dir, stream));
  }
  CollectorState state = loaded.value_or(CollectorState{.stream = stream});
  for (const auto& f : state.in_flight) {
    if (f.seq <= probe.durable_seq) {
      state.released = std::max(state.released, f.released);
      state.watermark = std::max(state.watermark, f.watermark);
    }
  }
  state.in_flight.clear();
  ++state.run;
  RETURN_IF_ERROR(SaveState(options.state_dir, state));
  result.run = state.run;

  JoinerOptions join = options.join;
  join.live = source.live();
  if (join.live && join.forget_after == 0) join.forget_after = kLiveForgetAfter;
  Joiner joiner(join);
  joiner.SkipBelow(state.released);
  RETURN_IF_ERROR(source.Start(state.run));
  // The client's records reach the joiner through the feed (all of a client log at once).
  ClientFeed feed(source, joiner);
  RETURN_IF_ERROR(feed.Pump());

  ASSIGN_OR_RETURN(std::unique_ptr<CdcInput> input, open_input());
  TxnGrouper grouper(input->streams());
  constexpr size_t kMaxInFlight = 8;
  ingest::IngestClient client(
      options.target, stream,
      ingest::ClientOptions{
          .max_in_flight = kMaxInFlight, .first_seq = probe.durable_seq + 1, .auth = options.auth});

  // What the joiner emitted and is not sent yet, with the commit ts of each (0: none), the
  // release point they complete and the watermark that may follow them.
  std::deque<std::pair<v1::Transaction, Tso>> ready;
  Tso ready_released = state.released;
  std::optional<Tso> ready_watermark;
  // The release point of the last batch that emptied `ready`: what a partial batch completes.
  Tso complete_released = state.released;
  Tso sent_watermark = state.watermark;
  Tso acknowledged = 0;
  std::deque<std::pair<uint64_t, std::vector<Tso>>> commits_in_flight;
  std::vector<double> lags;
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
    while (!ready.empty() && static_cast<size_t>(batch.txns_size()) < options.batch_size) {
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
    state.in_flight.push_back(CollectorState::InFlight{
        .seq = seq, .released = complete_released, .watermark = sent_watermark});
    RETURN_IF_ERROR(SaveState(options.state_dir, state));
    RETURN_IF_ERROR(client.Send(std::move(batch)));
    commits_in_flight.emplace_back(seq, std::move(commits));
    result.sent += n;
    ++result.batches;
    last_flush = absl::Now();
    return absl::OkStatus();
  };
  // Learns what became durable: saves it, and lets the CDC input forget what is below the
  // durable watermark.
  auto confirm = [&](bool force_save) -> absl::Status {
    const uint64_t durable = client.durable_seq();
    const int64_t now_ms = absl::ToUnixMillis(absl::Now());
    while (!commits_in_flight.empty() && commits_in_flight.front().first <= durable) {
      for (Tso t : commits_in_flight.front().second) {
        const std::optional<double> lag = LagSeconds(t, now_ms);
        if (lag && lags.size() < (size_t{1} << 24)) lags.push_back(*lag);
      }
      commits_in_flight.pop_front();
    }
    size_t done = 0;
    while (done < state.in_flight.size() && state.in_flight[done].seq <= durable) {
      state.released = std::max(state.released, state.in_flight[done].released);
      state.watermark = std::max(state.watermark, state.in_flight[done].watermark);
      ++done;
    }
    if (done > 0 || force_save) {
      state.in_flight.erase(state.in_flight.begin(), state.in_flight.begin() + done);
      RETURN_IF_ERROR(SaveState(options.state_dir, state));
    }
    // Everything at or below the durable watermark is decided and durable.
    if (state.watermark > 0 && state.watermark + 1 > acknowledged) {
      if (absl::Status s = input->Acknowledge(state.watermark + 1); s.ok()) {
        acknowledged = state.watermark + 1;
      } else {
        spdlog::warn("acknowledging the CDC input: {}", s.ToString());
      }
    }
    return absl::OkStatus();
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
      absl::SleepFor(absl::Milliseconds(5));
    }
    if (grouper.release_point() != last_release) {
      last_release = grouper.release_point();
      last_moved = absl::Now();
    }
    while (room && (ready.size() >= options.batch_size ||
                    (!ready.empty() && absl::Now() - last_flush >= options.flush_interval) ||
                    (ready.empty() && ready_watermark &&
                     absl::Now() - last_flush >= options.flush_interval))) {
      failure = send();
      if (!failure.ok()) break;
      room = client.next_seq() - 1 - client.durable_seq() < kMaxInFlight;
    }
    if (!failure.ok()) break;
    failure = confirm(false);
    if (!failure.ok()) break;
    if (options.progress_interval > absl::ZeroDuration() &&
        absl::Now() - last_progress >= options.progress_interval) {
      last_progress = absl::Now();
      fmt::print(stderr,
                 "isowatch-tidb: release point {}, watermark {}, sent {}, durable batches {}, "
                 "waiting {} client records / {} CDC transactions, refused {} CDC\n",
                 grouper.release_point(), state.watermark, result.sent, client.durable_seq(),
                 joiner.waiting(), grouper.pending_txns(), result.rejected_cdc);
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
  if (failure.ok() && options.end_of_stream && !stopping() && feed.done() &&
      joiner.waiting() == 0) {
    absl::StatusOr<std::vector<v1::Refusal>> closed = client.Close();
    if (!closed.ok()) failure = closed.status();
  } else if (failure.ok()) {
    absl::StatusOr<std::vector<v1::Refusal>> detached = client.Detach();
    if (!detached.ok()) failure = detached.status();
  }
  if (absl::Status s = confirm(/*force_save=*/true); failure.ok()) failure = s;
  result.refusals = client.refusals();
  result.daemon_reconnects = client.reconnects();
  result.join = joiner.stats();
  result.client_records = feed.records();
  result.late_rows = grouper.stats().late_rows;
  result.duplicate_rows = grouper.stats().duplicate_rows;
  result.release_point = grouper.release_point();
  result.watermark = state.watermark;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - started);
  if (!lags.empty()) {
    std::sort(lags.begin(), lags.end());
    result.lag_p50 = lags[lags.size() / 2];
    result.lag_p99 = lags[std::min(lags.size() - 1, lags.size() * 99 / 100)];
    result.lag_max = lags.back();
  }
  if (!failure.ok()) return failure;
  return result;
}

}  // namespace isowatch::tidb
