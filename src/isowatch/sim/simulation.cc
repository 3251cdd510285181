// SPDX-License-Identifier: Apache-2.0
#include "isowatch/sim/simulation.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"

namespace isowatch::sim {

namespace {

// A fault-free transaction never violates anything (faults only disturb what the faulty
// transaction reads, or, for a lost update, conflict with transactions that committed before
// it). Debug builds audit every transaction anyway, as a self-check; release builds audit only
// the faulty ones, which is all the ground truth needs.
#ifdef NDEBUG
constexpr bool kAuditFaultFree = false;
#else
constexpr bool kAuditFaultFree = true;
#endif

}  // namespace

using history::OpKind;
using history::Timestamp;
using history::TxnStatus;
using history::Value;

Simulation::Simulation(const WorkloadOptions& options)
    : options_(options),
      rng_(options.seed),
      chooser_(options.dist, options.keys, options.zipf_theta),
      store_(options.keys, options.data == history::DataModel::kList),
      auditor_(store_, log_, options.level, options.record_aborted),
      key_ids_(options.keys, KeyId::Invalid()),
      sessions_(options.sessions) {
  for (uint32_t i = 0; i < options_.sessions; ++i) {
    sessions_[i].index = i;
    sessions_[i].name = std::to_string(i);
  }
}

absl::StatusOr<SimResult> Simulation::Run() && {
  builder_.set_source(fmt::format("simulator seed {}", options_.seed));
  std::vector<uint32_t> active(sessions_.size());
  for (uint32_t i = 0; i < active.size(); ++i) active[i] = i;
  while (!active.empty()) {
    const size_t pick = rng_.Uniform(active.size());
    Session& s = sessions_[active[pick]];
    if (!s.busy) {
      if (!MayBegin()) {
        // With count_committed, an abort still in flight may call for one more transaction.
        if (options_.count_committed && busy_ > 0) continue;
        active[pick] = active.back();
        active.pop_back();
        continue;
      }
      Begin(s);
    } else if (s.txn.next < s.txn.plan.size()) {
      Execute(s.txn);
    } else {
      RETURN_IF_ERROR(Complete(s));
    }
  }
  ASSIGN_OR_RETURN(result_.history, std::move(builder_).Finish());
  return std::move(result_);
}

bool Simulation::MayBegin() const {
  if (options_.count_committed) return result_.committed + busy_ < options_.txns;
  return begun_ < options_.txns;
}

void Simulation::Begin(Session& s) {
  s.busy = true;
  ++busy_;
  OpenTxn& t = s.txn;
  t.handle = log_.Begin(s.index);
  ++begun_;
  t.seq = s.next_seq++;
  t.next = 0;
  t.fault = kNoFault;
  t.fired = false;
  t.keys_used = 0;
  t.ops.clear();
  t.list_pool.clear();
  t.plan.resize(options_.ops_per_txn);
  for (uint32_t i = 0; i < options_.ops_per_txn; ++i) {
    PlannedOp& op = t.plan[i];
    op.read = rng_.Bernoulli(options_.read_ratio);
    if (i > 0 && rng_.Bernoulli(options_.key_reuse_rate)) {
      op.key = t.plan[rng_.Uniform(i)].key;
    } else {
      op.key = DrawKey(!op.read);
    }
  }
  t.real_start = store_.Now();
  t.snapshot_ts = t.real_start;
  t.stale_ts = t.real_start;
  ChooseFault(s, t);
  log_.at(t.handle).start = t.snapshot_ts;
}

uint64_t Simulation::DrawKey(bool append) {
  const uint64_t slot = chooser_.Next(rng_);
  if (options_.max_appends_per_key == 0 || !Lists()) return slot;
  if (slot_key_.empty()) {
    slot_key_.resize(options_.keys);
    key_names_.resize(options_.keys);
    for (uint64_t i = 0; i < options_.keys; ++i) {
      slot_key_[i] = i;
      key_names_[i] = static_cast<int64_t>(i);
    }
    slot_generation_.assign(options_.keys, 0);
    slot_appends_.assign(options_.keys, 0);
  }
  const uint64_t key = slot_key_[slot];
  if (append && ++slot_appends_[slot] == options_.max_appends_per_key) {
    // The next key of the slot takes the next free index, so the store stays as large as the
    // keys in use, however many generations a hot slot goes through.
    ++slot_generation_[slot];
    slot_appends_[slot] = 0;
    const uint64_t next = key_names_.size();
    key_names_.push_back(static_cast<int64_t>(slot + options_.keys * slot_generation_[slot]));
    slot_key_[slot] = next;
    store_.EnsureKey(next);
    key_ids_.resize(next + 1, KeyId::Invalid());
  }
  return key;
}

void Simulation::ChooseFault(Session& s, OpenTxn& t) {
  for (const FaultSpec& spec : options_.faults) {
    if (t.handle < spec.from_txn) continue;
    if (!rng_.Bernoulli(spec.rate) || !Eligible(spec.fault, s, t)) continue;
    t.fault = static_cast<int>(spec.fault);
    break;
  }
  if (Has(t, Fault::kSessionOrder)) {
    // Start (and take the snapshot) while the session's predecessor is still committing.
    const TxnRecord& p = log_.at(*s.last_committed);
    t.snapshot_ts = p.start + static_cast<int64_t>(rng_.Uniform(p.commit - p.start));
    t.fired = true;
  } else if (Has(t, Fault::kStaleSnapshot)) {
    const int64_t lag = 1 + static_cast<int64_t>(rng_.Uniform(options_.max_stale_lag));
    t.stale_ts = std::max<int64_t>(0, t.real_start - lag);
  }
}

bool Simulation::Eligible(Fault f, const Session& s, const OpenTxn& t) const {
  // A read is external (the snapshot faults apply to it) if it is the first read of its key and,
  // for registers, the key was not written before; a read is repeatable if the key was read
  // before and not written.
  bool has_write = false;
  bool has_external_read = false;
  bool has_repeatable_read = false;
  for (size_t i = 0; i < t.plan.size(); ++i) {
    const PlannedOp& op = t.plan[i];
    if (!op.read) {
      has_write = true;
      continue;
    }
    bool read_before = false;
    bool written_before = false;
    for (size_t j = 0; j < i; ++j) {
      if (t.plan[j].key != op.key) continue;
      (t.plan[j].read ? read_before : written_before) = true;
    }
    if (!read_before && (Lists() || !written_before)) has_external_read = true;
    if (read_before && !written_before) has_repeatable_read = true;
  }
  switch (f) {
    case Fault::kLostUpdate:
      return has_write;
    case Fault::kStaleSnapshot:
      return has_external_read && t.real_start > 0;
    case Fault::kFracturedVisibility:
    case Fault::kAbortedRead:
      return has_external_read;
    case Fault::kIntermediateRead:
      return has_external_read && !Lists();
    case Fault::kSessionOrder:
      if (!s.last_committed) return false;
      return log_.at(*s.last_committed).start < log_.at(*s.last_committed).commit;
    case Fault::kNonRepeatableRead:
      return has_repeatable_read;
  }
  return false;
}

Simulation::KeyState& Simulation::Key(OpenTxn& t, uint64_t key) {
  for (size_t i = 0; i < t.keys_used; ++i) {
    if (t.keys[i].key == key) return t.keys[i];
  }
  if (t.keys_used == t.keys.size()) t.keys.emplace_back();
  KeyState& ks = t.keys[t.keys_used++];
  ks.key = key;
  ks.read = false;
  ks.wrote = false;
  ks.snapshot_read = false;
  ks.validate_from = 0;
  ks.view = Value::Absent();
  ks.final_value = 0;
  ks.intermediate = 0;
  ks.list_view.clear();
  ks.appends.clear();
  return ks;
}

void Simulation::Execute(OpenTxn& t) {
  const PlannedOp op = t.plan[t.next++];
  KeyState& ks = Key(t, op.key);
  if (op.read) {
    if (Lists()) {
      ReadList(t, ks);
    } else {
      ReadRegister(t, ks);
    }
    return;
  }
  const int64_t v = log_.NewValue(t.handle);
  ks.wrote = true;
  if (Lists()) {
    ks.appends.push_back(Value::Int(v));
    ks.list_view.push_back(Value::Int(v));
    t.ops.push_back(TxnOp{.kind = OpKind::kAppend, .key = op.key, .value = Value::Int(v)});
  } else {
    if (ks.final_value != 0 && ks.intermediate == 0) ks.intermediate = ks.final_value;
    ks.final_value = v;
    ks.view = Value::Int(v);
    t.ops.push_back(TxnOp{.kind = OpKind::kWrite, .key = op.key, .value = Value::Int(v)});
  }
}

void Simulation::ReadRegister(OpenTxn& t, KeyState& ks) {
  Value observed;
  if (ks.wrote) {
    observed = ks.view;  // its own write
  } else if (ks.read) {
    observed = ks.view;  // what it read before
    if (Has(t, Fault::kNonRepeatableRead) && !t.fired) {
      const MvStore::Version* newest = store_.Newest(ks.key);
      const Value latest = newest == nullptr ? Value::Absent() : newest->value();
      if (latest != observed) {
        observed = latest;
        t.fired = true;
        ks.validate_from = store_.Now();  // the store now believes this is what was read
      }
    }
  } else {
    observed = ExternalRegister(t, ks.key);
    ks.snapshot_read = true;
    ks.validate_from = t.real_start;
  }
  ks.read = true;
  ks.view = observed;
  t.ops.push_back(TxnOp{.kind = OpKind::kRead, .key = ks.key, .value = observed});
}

Value Simulation::ExternalRegister(OpenTxn& t, uint64_t key) {
  if (Has(t, Fault::kStaleSnapshot)) {
    t.fired = true;
    return store_.ReadRegister(key, t.stale_ts);
  }
  if (t.fault != kNoFault && !t.fired) {
    switch (static_cast<Fault>(t.fault)) {
      case Fault::kFracturedVisibility: {
        const MvStore::Version* v = store_.Visible(key, t.snapshot_ts);
        if (v != nullptr && log_.at(v->writer).write_keys >= 2) {
          t.fired = true;
          const MvStore::Version* prev = store_.Previous(key, v);
          return prev == nullptr ? Value::Absent() : prev->value();
        }
        break;
      }
      case Fault::kAbortedRead:
        if (auto a = store_.LastAbortedWrite(key)) {
          t.fired = true;
          return a->value;
        }
        break;
      case Fault::kIntermediateRead:
        if (const MvStore::Version* v = store_.VisibleWithIntermediate(key, t.snapshot_ts)) {
          t.fired = true;
          return Value::Int(v->intermediate);
        }
        break;
      default:
        break;
    }
  }
  return store_.ReadRegister(key, t.snapshot_ts);
}

void Simulation::ReadList(OpenTxn& t, KeyState& ks) {
  const auto offset = static_cast<uint32_t>(t.list_pool.size());
  if (ks.read) {
    // What it read before, then its appends since.
    if (Has(t, Fault::kNonRepeatableRead) && !t.fired && !ks.wrote) {
      auto latest = store_.ListThrough(ks.key, store_.Newest(ks.key));
      if (!std::equal(latest.begin(), latest.end(), ks.list_view.begin(), ks.list_view.end())) {
        t.fired = true;
        ks.validate_from = store_.Now();
        ks.list_view.assign(latest.begin(), latest.end());
      }
    }
    t.list_pool.insert(t.list_pool.end(), ks.list_view.begin(), ks.list_view.end());
  } else {
    // The snapshot, then its own appends so far.
    ExternalList(t, ks.key, t.list_pool);
    t.list_pool.insert(t.list_pool.end(), ks.appends.begin(), ks.appends.end());
    ks.list_view.assign(t.list_pool.begin() + offset, t.list_pool.end());
    ks.snapshot_read = true;
    ks.validate_from = t.real_start;
  }
  ks.read = true;
  t.ops.push_back(TxnOp{.kind = OpKind::kListRead,
                        .key = ks.key,
                        .list_offset = offset,
                        .list_size = static_cast<uint32_t>(t.list_pool.size() - offset)});
}

void Simulation::ExternalList(OpenTxn& t, uint64_t key, std::vector<Value>& out) {
  std::span<const Value> elements = store_.ReadList(key, t.snapshot_ts);
  if (Has(t, Fault::kStaleSnapshot)) {
    t.fired = true;
    elements = store_.ReadList(key, t.stale_ts);
  } else if (t.fault != kNoFault && !t.fired) {
    switch (static_cast<Fault>(t.fault)) {
      case Fault::kFracturedVisibility: {
        const MvStore::Version* v = store_.Visible(key, t.snapshot_ts);
        if (v != nullptr && log_.at(v->writer).write_keys >= 2) {
          t.fired = true;
          elements = store_.ListThrough(key, store_.Previous(key, v));
        }
        break;
      }
      case Fault::kAbortedRead:
        if (auto a = store_.LastAbortedWrite(key)) {
          t.fired = true;
          out.insert(out.end(), elements.begin(), elements.end());
          out.push_back(a->value);
          return;
        }
        break;
      default:
        break;
    }
  }
  out.insert(out.end(), elements.begin(), elements.end());
}

bool Simulation::Conflicts(const OpenTxn& t) const {
  // First committer wins, from the recorded start under SI (so the history's intervals are what
  // was enforced) and from the real one under SER.
  const int64_t from = Ser() ? t.real_start : t.snapshot_ts;
  for (size_t i = 0; i < t.keys_used; ++i) {
    const KeyState& ks = t.keys[i];
    if (ks.wrote && store_.LastCommit(ks.key) > from) return true;
  }
  if (!Ser()) return false;
  // OCC: nothing read may have changed since it was read.
  for (size_t i = 0; i < t.keys_used; ++i) {
    const KeyState& ks = t.keys[i];
    if (ks.snapshot_read && store_.LastCommit(ks.key) > ks.validate_from) return true;
  }
  return false;
}

absl::Status Simulation::Complete(Session& s) {
  OpenTxn& t = s.txn;
  s.busy = false;
  --busy_;
  bool has_writes = false;
  uint32_t write_keys = 0;
  for (size_t i = 0; i < t.keys_used; ++i) {
    if (t.keys[i].wrote) {
      has_writes = true;
      ++write_keys;
    }
  }
  bool abort = rng_.Bernoulli(options_.client_abort_rate);
  if (!abort && has_writes && Conflicts(t)) {
    if (Has(t, Fault::kLostUpdate)) {
      t.fired = true;  // commits although the concurrency control refuses it
    } else {
      abort = true;
    }
  }
  // Registers: the last write of each key is final; list appends always are.
  for (size_t i = 0; i < t.keys_used; ++i) {
    const KeyState& ks = t.keys[i];
    if (ks.final_value != 0) log_.MarkFinal(ks.final_value);
    for (Value e : ks.appends) log_.MarkFinal(e.as_int());
  }

  TxnRecord& rec = log_.at(t.handle);
  if (abort) {
    rec.status = TxnStatus::kAborted;
    ++result_.aborted;
    for (size_t i = 0; i < t.keys_used; ++i) {
      const KeyState& ks = t.keys[i];
      if (!ks.wrote) continue;
      store_.RecordAbortedWrite(ks.key, Lists() ? ks.appends.back() : Value::Int(ks.final_value),
                                t.handle);
    }
    if (!options_.record_aborted) return absl::OkStatus();
    rec.id = ++next_id_;
    return Record(s, t);
  }

  rec.status = TxnStatus::kCommitted;
  rec.commit = has_writes ? store_.Tick() : rec.start;  // read-only: commit == start
  rec.write_keys = write_keys;
  rec.id = ++next_id_;
  ++result_.committed;
  if (t.fault != kNoFault && t.fired) ++result_.injected[t.fault];

  findings_.clear();
  if (t.fault != kNoFault || kAuditFaultFree) {
    auditor_.Audit(t.handle, s.last_committed, t.ops, t.list_pool, findings_);
  }
  if (!findings_.empty()) {
    if (t.fault == kNoFault) {
      return absl::InternalError(
          fmt::format("simulator bug: fault-free transaction {} (seed {}) violates {} on key {}",
                      rec.id, options_.seed, verdict::AnomalyName(findings_[0].anomaly),
                      findings_[0].key ? KeyName(static_cast<uint64_t>(*findings_[0].key)) : -1));
    }
    for (ExpectedViolation& e : findings_) {
      e.cause = static_cast<Fault>(t.fault);
      if (e.key) e.key = KeyName(static_cast<uint64_t>(*e.key));
      result_.expected.push_back(std::move(e));
    }
  }

  for (size_t i = 0; i < t.keys_used; ++i) {
    const KeyState& ks = t.keys[i];
    if (!ks.wrote) continue;
    if (Lists()) {
      store_.InstallList(ks.key, rec.commit, t.handle, ks.appends);
    } else {
      store_.InstallRegister(ks.key, rec.commit, t.handle, ks.final_value, ks.intermediate);
    }
  }
  s.last_committed = t.handle;
  return Record(s, t);
}

absl::Status Simulation::Record(const Session& s, const OpenTxn& t) {
  const TxnRecord& rec = log_.at(t.handle);
  const std::string id = std::to_string(rec.id);
  history::TxnHeader header{.id = id,
                            .id_numeric = true,
                            .session = s.name,
                            .session_numeric = true,
                            .seq = t.seq,
                            .status = rec.status,
                            .start = Timestamp{rec.start, 0},
                            .source_offset = rec.id};
  if (rec.status == TxnStatus::kCommitted) header.commit = Timestamp{rec.commit, 0};
  RETURN_IF_ERROR(builder_.BeginTxn(header));
  for (const TxnOp& op : t.ops) {
    KeyId& key = key_ids_[op.key];
    if (!key.valid()) key = builder_.IntKey(KeyName(op.key));
    switch (op.kind) {
      case OpKind::kRead:
        builder_.Read(key, op.value);
        break;
      case OpKind::kWrite:
        builder_.Write(key, op.value);
        break;
      case OpKind::kAppend:
        builder_.Append(key, op.value);
        break;
      case OpKind::kListRead:
        builder_.ListRead(
            key, std::span<const Value>(t.list_pool).subspan(op.list_offset, op.list_size));
        break;
    }
  }
  builder_.EndTxn();
  return absl::OkStatus();
}

}  // namespace isowatch::sim
