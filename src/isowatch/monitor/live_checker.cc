// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/live_checker.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/ingest/conflict_registry.h"
#include "isowatch/report/check_report.h"
#include "isowatch/v1/checkpoint.pb.h"

namespace isowatch::monitor {

using history::History;
using history::Timestamp;
using history::Transaction;

namespace {

// The unit of the stream's timestamps as its header's metadata "timestamp_clock" names it, in
// nanoseconds; nullopt if it names none (docs/operations.md, "Streams": lag).
std::optional<int64_t> TimestampClockNs(const v1::Header& header) {
  const auto it = header.metadata().find("timestamp_clock");
  if (it == header.metadata().end()) return std::nullopt;
  if (it->second == "unix_s") return 1'000'000'000;
  if (it->second == "unix_ms") return 1'000'000;
  if (it->second == "unix_us") return 1'000;
  if (it->second == "unix_ns") return 1;
  return std::nullopt;
}

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

void Fnv(uint64_t& h, std::string_view bytes) {
  for (char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= kFnvPrime;
  }
  // A separator no field can hold, so that ("ab", "c") and ("a", "bc") differ.
  h ^= 0xff;
  h *= kFnvPrime;
}

}  // namespace

std::string StableViolationId(const History& h, const verdict::Violation& v) {
  uint64_t hash = kFnvOffset;
  Fnv(hash, v.checker);
  Fnv(hash, verdict::IsolationLevelName(v.level));
  Fnv(hash, verdict::AnomalyName(v.anomaly));
  // The transactions at fault, not the ones named to explain it: an EXT violation is its reader's
  // (txns[0]); the writer it names, and its kind, depend on what had arrived when it became final.
  const size_t principal =
      v.anomaly == verdict::Anomaly::kExt ? std::min<size_t>(1, v.txns.size()) : v.txns.size();
  for (size_t i = 0; i < principal; ++i) Fnv(hash, verdict::TxnLabel(h, v, v.txns[i]));
  Fnv(hash, v.key.valid() ? h.KeyToString(v.key) : std::string());
  return fmt::format("{:016x}", hash);
}

LiveChecker::LiveChecker(LiveOptions options)
    : options_(std::move(options)), live_(options_.history, clock()) {
  if (options_.windows) {
    cutter_ = std::make_unique<windows::WindowCutter>(*options_.windows);
    live_.Register(cutter_.get());
  }
  live_.Register(&renderer_);
}

LiveChecker::~LiveChecker() = default;

void LiveChecker::SetEngine(std::unique_ptr<engine::Engine> engine) {
  if (engine_ != nullptr) live_.Unregister(engine_.get());
  engine_ = std::move(engine);
  // After the cutter and the renderer, which call every transaction final: the engine alone
  // decides where a release ends.
  live_.Register(engine_.get());
}

void LiveChecker::Renderer::BeforeRelease() {
  for (const verdict::Violation& v : checker_.engine_->TakeFinalViolations()) {
    checker_.rendered_.push_back(checker_.Render(v, 0));
  }
}

void LiveChecker::StartIfNeeded(const v1::IngestBatch& batch) {
  if (started_) return;
  started_ = true;
  // The same rule as ConflictRegistry's, which decides at ingest what this history will refuse.
  live_.Start((batch.has_header() ? ingest::DataModelOf(batch.header()) : std::nullopt)
                  .value_or(options_.default_model));
  SetEngine(MakeEngine());
}

std::unique_ptr<engine::Engine> LiveChecker::MakeEngine() const {
  return std::make_unique<engine::Engine>(live_.history(), options_.engine);
}

absl::Status LiveChecker::SaveCheckpoint(v1::LiveCheckpoint* out) {
  if (!rendered_.empty()) {
    return absl::FailedPreconditionError("violations rendered and not taken yet");
  }
  if (!sealed_.empty()) {
    return absl::FailedPreconditionError("windows sealed and not taken yet");
  }
  out->Clear();
  out->set_started(started_);
  out->set_ignored_headers(ignored_headers_);
  if (!started_) {
    out->set_release_end(0);
    out->set_releases(0);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(engine_->SaveCheckpoint(out->mutable_engine()));
  uint64_t release_end = 0;
  uint64_t releases = 0;
  live_.Save(out->mutable_history(), &release_end, &releases);
  out->set_release_end(release_end);
  out->set_releases(releases);
  if (cutter_ != nullptr) cutter_->Save(out->mutable_cutter());
  for (const Stream& s : streams_) {
    v1::LiveStream* p = out->add_streams();
    p->set_name(s.name);
    p->set_engine_stream(s.id);
    p->set_closed(s.closed);
    if (s.watermark) {
      p->mutable_watermark()->set_physical(s.watermark->physical);
      p->mutable_watermark()->set_logical(s.watermark->logical);
    }
    p->set_delivered(s.delivered);
    p->set_committed(s.committed);
    p->set_clock_ns(s.clock_ns);
  }
  return absl::OkStatus();
}

absl::Status LiveChecker::RestoreCheckpoint(const v1::LiveCheckpoint& c, int64_t now_ms) {
  if (started_) return absl::FailedPreconditionError("the live checker has applied batches");
  if (!c.started()) return absl::OkStatus();
  if (cutter_ != nullptr && !c.has_cutter()) {
    // A cutter started here would not know the values written before it, and windows would be
    // judged against wrong initial states.
    return absl::FailedPreconditionError(
        "windows.checkers: the store holds a checkpoint taken without windows, and windows "
        "cannot be cut from one; use a new data_dir to check windows");
  }
  RETURN_IF_ERROR(live_.Restore(c.history(), c.release_end(), c.releases()));
  const History& h = live_.history();
  if (cutter_ != nullptr) {
    // A checkpoint taken with windows restores them where they were (without, its cutter is
    // left unread: no windows are cut).
    if (absl::Status s = cutter_->Restore(h, c.cutter()); !s.ok()) {
      return s.code() == absl::StatusCode::kFailedPrecondition
                 ? absl::FailedPreconditionError(fmt::format(
                       "windows.by, windows.size, windows.overlap: {}; start with the same "
                       "windows options, or use a new data_dir",
                       std::string(s.message())))
                 : s;
    }
  }
  engine::VersionSpill* spill = options_.engine.spill;
  if (spill != nullptr && spill->named_by_key_id()) {
    // A spill snapshot written by an earlier isowatch names keys by id: the history saved with
    // it names them (docs/spill-format.md, "Earlier format").
    RETURN_IF_ERROR(spill->RenameKeyIds([&h](KeyId k) -> std::optional<std::string> {
      if (k.value() >= h.key_count() || h.key(k).forgotten) return std::nullopt;
      return engine::SpillKeyName(h, k);
    }));
  }
  std::vector<Stream> streams;
  absl::flat_hash_map<std::string, size_t> index;
  for (const v1::LiveStream& p : c.streams()) {
    // Streams are declared to the engine in the order the checker meets them.
    if (p.engine_stream() != streams.size() ||
        static_cast<int>(p.engine_stream()) >= c.engine().streams_size() ||
        !index.try_emplace(p.name(), streams.size()).second) {
      return absl::DataLossError(
          fmt::format("checkpoint: stream \"{}\" is out of order or named twice", p.name()));
    }
    Stream s;
    s.name = p.name();
    s.id = p.engine_stream();
    s.closed = p.closed();
    if (p.has_watermark())
      s.watermark = Timestamp{p.watermark().physical(), p.watermark().logical()};
    s.delivered = p.delivered();
    s.committed = p.committed();
    s.clock_ns = p.clock_ns();
    streams.push_back(std::move(s));
  }
  const std::vector<TxnId> held_ids = h.HeldTxns();
  std::vector<engine::HeldTxn> held;
  held.reserve(held_ids.size());
  for (TxnId id : held_ids) {
    const uint16_t origin = h.txn(id).origin;
    if (origin >= streams.size()) {
      return absl::DataLossError(
          fmt::format("checkpoint: transaction {} comes from no stream", h.TxnLabel(id)));
    }
    held.push_back({.stream = streams[origin].id, .id = id});
  }
  auto engine = MakeEngine();
  RETURN_IF_ERROR(engine->RestoreCheckpoint(c.engine(), held));
  for (TxnId id : held_ids) {
    const Transaction& t = h.txn(id);
    if (t.committed() && t.has_commit && !engine->IsFinal(id)) {
      streams[t.origin].unfinal.push_back({t.commit, now_ms});
    }
  }
  SetEngine(std::move(engine));
  streams_ = std::move(streams);
  stream_index_ = std::move(index);
  started_ = true;
  ignored_headers_ = c.ignored_headers();
  return absl::OkStatus();
}

LiveChecker::Stream& LiveChecker::StreamFor(std::string_view name) {
  auto [it, inserted] = stream_index_.try_emplace(std::string(name), streams_.size());
  if (inserted) {
    Stream s;
    s.name = std::string(name);
    s.id = engine_->AddStream(s.name);
    streams_.push_back(std::move(s));
  }
  return streams_[it->second];
}

std::vector<TxnRefusal> LiveChecker::Apply(const v1::IngestBatch& batch,
                                           std::span<const uint32_t> accepted, int64_t now_ms) {
  StartIfNeeded(batch);
  std::vector<TxnRefusal> refused;
  const size_t stream_index = [&] {
    StreamFor(batch.stream());
    return stream_index_.find(batch.stream())->second;
  }();
  if (batch.has_header()) {
    if (live_.builder().txn_count() == 0) {
      if (absl::Status s = decoder_.ApplyInitialState(batch.header().initial()); !s.ok()) {
        ++ignored_headers_;
      }
    } else {
      ++ignored_headers_;
    }
  }
  scratch_.clear();
  for (uint32_t index : accepted) {
    if (index >= static_cast<uint32_t>(batch.txns_size())) continue;
    const v1::Transaction& t = batch.txns(static_cast<int>(index));
    absl::StatusOr<TxnId> id = decoder_.ApplyTxn(t, batch.seq());
    if (!id.ok()) {
      std::string name = t.id_case() == v1::Transaction::kIdInt ? fmt::format("{}", t.id_int())
                                                                : std::string(t.id_str());
      const auto& message = id.status().message();
      refused.push_back(TxnRefusal{.index = index,
                                   .txn_id = std::move(name),
                                   .detail = std::string(message.data(), message.size())});
      continue;
    }
    scratch_.push_back(*id);
    live_.builder().SetOrigin(*id, static_cast<uint16_t>(stream_index));
  }
  Stream& s = streams_[stream_index];
  if (batch.has_header()) {
    if (std::optional<int64_t> clock = TimestampClockNs(batch.header())) s.clock_ns = *clock;
  }
  std::optional<Timestamp> watermark;
  if (batch.has_watermark()) {
    watermark = Timestamp{batch.watermark().physical(), batch.watermark().logical()};
    if (!s.watermark || *watermark > *s.watermark) s.watermark = watermark;
  }
  engine_->Deliver(s.id, scratch_, watermark);
  const History& h = live_.history();
  for (TxnId id : scratch_) {
    const Transaction& t = h.txn(id);
    if (cutter_ != nullptr) cutter_->Add(h, id);
    ++s.delivered;
    if (t.committed()) ++s.committed;
    if (t.committed() && t.has_commit) s.unfinal.push_back({t.commit, now_ms});
  }
  if (batch.end_of_stream() && !s.closed) {
    s.closed = true;
    engine_->CloseStream(s.id);
  }
  // Forget what has become final, now and then, so the lists stay as short as the disorder.
  if (s.unfinal.size() >= 4096 && s.unfinal.size() % 4096 < scratch_.size()) {
    CollectFinal(now_ms, nullptr);
  }
  SealWindows();
  // Under a memory budget, the live history forgets what has become final and nobody holds.
  if (options_.engine.memory_budget > 0) live_.MaybeForget();
  return refused;
}

void LiveChecker::SealWindows() {
  if (cutter_ == nullptr || engine_ == nullptr) return;
  const History& h = live_.history();
  const bool all_closed =
      std::all_of(streams_.begin(), streams_.end(), [](const Stream& s) { return s.closed; });
  // Every commit at or below the final point has arrived, but one at the same physical time and
  // a higher logical part may still come: seal only up to the physical time before it.
  const Timestamp f = engine_->final_point();
  const Timestamp sealed = f == Timestamp::Min() || f.logical == Timestamp::Max().logical
                               ? f
                               : Timestamp{f.physical - 1, Timestamp::Max().logical};
  std::vector<windows::Window> windows = all_closed ? cutter_->Flush(h) : cutter_->Seal(h, sealed);
  for (windows::Window& w : windows) sealed_.push_back(std::move(w));
}

void LiveChecker::CollectFinal(int64_t now_ms, std::vector<int64_t>* latencies_ms) {
  if (engine_ == nullptr) return;
  const Timestamp f = engine_->final_point();
  for (Stream& s : streams_) {
    std::erase_if(s.unfinal, [&](const Stream::Unfinal& u) {
      if (u.commit > f) return false;
      if (latencies_ms != nullptr) latencies_ms->push_back(now_ms - u.arrival_ms);
      return true;
    });
  }
}

void LiveChecker::Tick() {
  if (engine_ == nullptr) return;
  engine_->Tick();
  SealWindows();
}

std::vector<store::ViolationRecord> LiveChecker::TakeViolations(int64_t now_unix_ms) {
  std::vector<store::ViolationRecord> out = std::exchange(rendered_, {});
  if (engine_ == nullptr) return out;
  for (const verdict::Violation& v : engine_->TakeFinalViolations()) out.push_back(Render(v, 0));
  for (store::ViolationRecord& r : out) r.finalised_unix_ms = now_unix_ms;
  return out;
}

store::ViolationRecord RenderViolation(const History& h, const verdict::Violation& v,
                                       absl::FunctionRef<std::string_view(TxnId)> stream_of) {
  store::ViolationRecord r;
  r.id = StableViolationId(h, v);
  r.checker = v.checker;
  r.level = verdict::IsolationLevelName(v.level);
  r.anomaly = verdict::AnomalyName(v.anomaly);
  if (v.ext_kind != verdict::ExtKind::kNone) r.ext_kind = verdict::ExtKindName(v.ext_kind);
  for (TxnId id : v.txns) {
    const std::string_view name = stream_of(id);
    if (!name.empty() && std::find(r.streams.begin(), r.streams.end(), name) == r.streams.end()) {
      r.streams.emplace_back(name);
    }
    r.txns.push_back({.id = verdict::TxnLabel(h, v, id), .stream = std::string(name)});
  }
  if (v.key.valid()) r.key = h.KeyToString(v.key);
  r.json = report::ViolationToJson(h, v);
  return r;
}

store::ViolationRecord LiveChecker::Render(const verdict::Violation& v, int64_t now_unix_ms) const {
  const History& h = live_.history();
  store::ViolationRecord r = RenderViolation(h, v, [&](TxnId id) -> std::string_view {
    return h.has_txn(id) ? stream_name(h.txn(id).origin) : std::string_view();
  });
  r.finalised_unix_ms = now_unix_ms;
  return r;
}

std::vector<LiveStreamStatus> LiveChecker::Streams() const {
  std::vector<LiveStreamStatus> out;
  if (engine_ == nullptr) return out;
  const Timestamp f = engine_->final_point();
  for (const Stream& s : streams_) {
    const auto pending = std::count_if(s.unfinal.begin(), s.unfinal.end(),
                                       [&](const Stream::Unfinal& u) { return u.commit > f; });
    out.push_back(LiveStreamStatus{.name = s.name,
                                   .closed = s.closed,
                                   .watermark = s.watermark,
                                   .clock_ns = s.clock_ns,
                                   .delivered = s.delivered,
                                   .committed = s.committed,
                                   .pending = static_cast<uint64_t>(pending)});
  }
  return out;
}

}  // namespace isowatch::monitor
