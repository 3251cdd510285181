// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/chronos/chronos.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "isowatch/axioms/explain.h"
#include "isowatch/axioms/ext_rules.h"
#include "isowatch/axioms/read_walker.h"
#include "isowatch/axioms/snapshot_rules.h"
#include "isowatch/axioms/write_index.h"
#include "isowatch/checkers/chronos/internal/replay_plan.h"
#include "isowatch/common/strong_id.h"

namespace isowatch::checkers {
namespace {

using chronos::Event;
using chronos::KeyPart;
using chronos::MakePlan;
using chronos::ReplayPlan;
using enum chronos::Phase;

using history::History;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::Value;
using verdict::IsolationLevel;
using verdict::Violation;

// The committed list of every key of one KeyPart. A committed list is almost always a prefix of
// the history's list of the key (History::key_list: the longest list its reads saw), so each
// append is compared with the key's list as it is committed, and a list is kept as its length
// while they agree. A key whose committed list leaves its key list (an append the reads never
// saw, or one they saw elsewhere) keeps the elements from there on in a tail of its own; the
// reads that share the key list need only the length and where the two part (AgreesWithKeyList).
class CommittedLists {
 public:
  CommittedLists(const History& h, KeyPart part) : state_(h.key_count()) {
    for (uint32_t k = 0; k < h.key_count(); ++k) {
      if (!part.Has(k) || !h.key(KeyId(k)).is_list) continue;
      const std::span<const Value> list = h.key_list(KeyId(k));
      state_[k].list = list.data();
      state_[k].list_size = static_cast<uint32_t>(std::min<size_t>(list.size(), UINT32_MAX));
      for (const Value v : h.InitialList(KeyId(k))) push_back(k, v);
    }
  }

  void push_back(uint32_t k, Value v) {
    State& s = state_[k];
    if (s.agreed == kAgrees) [[likely]] {
      if (s.size < s.list_size && s.list[s.size] == v) [[likely]] {
        ++s.size;
        return;
      }
      s.agreed = s.size;
      s.tail = static_cast<uint32_t>(tails_.size());
      tails_.emplace_back();
    }
    tails_[s.tail].push_back(v);
    ++s.size;
  }

  // The committed list of `k`: a part of its key list, or (once it left it) a copy in `scratch`.
  std::span<const Value> Get(uint32_t k, std::vector<Value>& scratch) const {
    const State& s = state_[k];
    if (s.agreed == kAgrees) return {s.list, s.size};
    CopyPrefix(k, s.size, scratch);
    return scratch;
  }
  // Sets `out` to the first `n` elements of the committed list of `k`. REQUIRES: n <= size(k).
  void CopyPrefix(uint32_t k, uint64_t n, std::vector<Value>& out) const {
    const State& s = state_[k];
    const uint64_t shared = std::min(n, s.agreed);
    out.assign(s.list, s.list + shared);
    if (n > shared) {
      const std::vector<Value>& tail = tails_[s.tail];
      out.insert(out.end(), tail.begin(), tail.begin() + static_cast<ptrdiff_t>(n - shared));
    }
  }
  size_t size(uint32_t k) const { return state_[k].size; }

  // Whether the committed list of `k` and its key list agree on their first `n` elements.
  // REQUIRES: n <= both lengths.
  bool AgreesWithKeyList(uint32_t k, size_t n) const {
    const uint64_t agreed = state_[k].agreed;
    return agreed == kAgrees || n <= agreed;
  }

 private:
  static constexpr uint64_t kAgrees = UINT64_MAX;
  struct State {
    const Value* list = nullptr;  // the key list (History::key_list), which the check never changes
    uint32_t list_size = 0;       // held to 32 bits, as a list read's size is (Op::list_size)
    uint32_t tail = 0;            // once they part: the elements from `agreed` on are tails_[tail]
    uint64_t size = 0;
    uint64_t agreed = kAgrees;  // kAgrees, or how many first elements agree with the key list
  };

  std::vector<State> state_;
  std::vector<std::vector<Value>> tails_;
};

// The transactions open on each key (SI), in the order they opened. A key almost always has
// none or one (two open writers of a key are a violation), so the first is held in an array
// indexed by key and only the others apart: a write then costs one slot of memory, not a vector.
class OpenWriters {
 public:
  explicit OpenWriters(size_t keys) : first_(keys, kNone) {}

  void Add(uint32_t k, uint64_t txn) {
    if (first_[k] == kNone) {
      first_[k] = txn;
    } else {
      more_[k].push_back(txn);
    }
  }
  // Calls f(txn) for each transaction open on `k`, in the order they opened.
  template <class F>
  void ForEach(uint32_t k, F f) const {
    if (first_[k] == kNone) return;
    f(first_[k]);
    if (more_.empty()) return;
    if (auto it = more_.find(k); it != more_.end()) {
      for (const uint64_t txn : it->second) f(txn);
    }
  }
  // Closes `txn` on `k`, if it is open there.
  void Remove(uint32_t k, uint64_t txn) {
    if (first_[k] == kNone) return;
    auto it = more_.empty() ? more_.end() : more_.find(k);
    std::vector<uint64_t>* more = it == more_.end() ? nullptr : &it->second;
    if (first_[k] == txn) {
      if (more == nullptr) {
        first_[k] = kNone;
        return;
      }
      first_[k] = more->front();
      more->erase(more->begin());
    } else if (more != nullptr) {
      if (auto at = std::find(more->begin(), more->end(), txn); at != more->end()) {
        more->erase(at);
      }
    }
    if (more != nullptr && more->empty()) more_.erase(it);
  }

 private:
  static constexpr uint64_t kNone = UINT64_MAX;
  std::vector<uint64_t> first_;
  absl::flat_hash_map<uint32_t, std::vector<uint64_t>> more_;  // after the first, in order
};

// The newest committed version of a register.
struct RegisterVersion {
  Value value;
  TxnId writer;  // invalid: the initial value
};

// One committed version of a key, kept for snapshot readers (SI with snapshots).
struct ChainEntry {
  uint64_t writer = 0;
  Value value;            // registers: the writer's final value
  uint64_t list_end = 0;  // lists: the length of the committed list with this version
};

// Walks a key's chain from its end towards older versions (axioms/snapshot_rules.h).
struct ChainCursor {
  const std::vector<ChainEntry>& chain;
  size_t at;  // the current entry; chain.size() before the first step
  bool Older(TxnId* writer) {
    if (at == 0) return false;
    --at;
    *writer = TxnId(chain[at].writer);
    return true;
  }
};

// Where a violation was found in the replay: the event, the step of the event's handling
// (kSessionStep, kReadStep, kConflictStep, kCommitStep, in the order they are taken) and the
// op. A run on one thread finds violations in this order; a run on several merges its parts'
// by it.
struct FoundAt {
  uint64_t event = 0;
  uint32_t step = 0;
  uint32_t op = 0;
  bool operator<(const FoundAt& o) const {
    if (event != o.event) return event < o.event;
    if (step != o.step) return step < o.step;
    return op < o.op;
  }
};
enum Step : uint32_t { kSessionStep = 0, kReadStep = 1, kConflictStep = 2, kCommitStep = 3 };

// What one part of a run found.
struct PartResult {
  ChronosResult result;
  std::vector<FoundAt> found_at;  // per violation; kept only when the run has several parts
};

// Replays a history in timestamp order, judging the keys of one KeyPart. Confined to the thread
// that runs it; owns only O(keys + open transactions) state: the newest version of each key, the
// transactions open per key, and the scratch state of the one transaction being checked. Reads
// the shared plan and `stop`, which it sets when the limits expire so that the other parts stop
// too.
class Replayer {
 public:
  Replayer(const History& h, IsolationLevel level, const CheckLimits* limits,
           const ReplayPlan& plan, KeyPart part, std::atomic<bool>* stop)
      : h_(h),
        level_(level),
        poller_(limits),
        plan_(plan),
        part_(part),
        stop_(stop),
        write_index_(h),
        walker_(h),
        registers_(h.key_count()),
        lists_(h, part),
        open_writers_(level == IsolationLevel::kSnapshotIsolation ? h.key_count() : 0),
        snapshots_(level == IsolationLevel::kSnapshotIsolation && h.has_snapshots()),
        chains_(snapshots_ ? h.key_count() : 0),
        slot_stamp_(h.key_count(), 0) {
    for (uint32_t k = 0; k < h.key_count(); ++k) {
      KeyId key(k);
      if (part_.Has(k) && !h.key(key).is_list) {
        registers_[k] = RegisterVersion{h.InitialValue(key), TxnId::Invalid()};
      }
    }
  }

  PartResult Run() {
    if (Expired(/*now=*/true)) return Incomplete();
    const std::vector<Event>& at_commit = plan_.at_commit;
    const std::vector<Event>& starts = plan_.starts;
    size_t c = 0;  // the next event of each run
    size_t s = 0;
    for (uint64_t i = 0; i < at_commit.size() + starts.size(); ++i) {
      if (Expired(/*now=*/false)) return Incomplete();
      // The earlier of the two runs' next events. (Events are distinct: each has its
      // transaction and phase.)
      const bool start = c == at_commit.size() || (s < starts.size() && starts[s] < at_commit[c]);
      const Event& e = start ? starts[s++] : at_commit[c++];
      found_at_.event = i;
      const TxnId t = e.txn();
      switch (e.phase()) {
        case kStart:
          CheckReads(t);
          if (level_ == IsolationLevel::kSnapshotIsolation) OpenWrites(t);
          ++open_;
          result_.stats.peak_ongoing = std::max(result_.stats.peak_ongoing, open_);
          break;
        case kPoint:
          CheckReads(t);
          if (level_ == IsolationLevel::kSnapshotIsolation) OpenWrites(t);
          Commit(t);
          break;
        case kCommit:
          if (level_ == IsolationLevel::kSerializable) {
            CheckReads(t);
          } else if (HasSnapshot(t)) {
            // A snapshot reader is checked at its commit: every version it may see is installed.
            CheckReads(t);
            CheckSnapshotConflicts(t);
          } else {
            --open_;
          }
          Commit(t);
          break;
      }
    }
    result_.stats.external_reads = walker_.external_reads();
    result_.stats.internal_reads = walker_.internal_reads();
    result_.stats.snapshot_unjudged += snapshot_unjudged_pairs_;
    return {std::move(result_), std::move(found_at_list_)};
  }

 private:
  // Whether the limits expired (polled now, or every so often), or another part saw them expire.
  bool Expired(bool now) {
    if (now ? poller_.ExpiredNow() : poller_.Expired()) {
      // Relaxed: a flag; the parts are joined before their results are read.
      stop_->store(true, std::memory_order_relaxed);
      return true;
    }
    return stop_->load(std::memory_order_relaxed);
  }

  // What a run the limits stopped returns: no verdict, only the counts so far.
  PartResult Incomplete() {
    result_.complete = false;
    result_.violations.clear();
    result_.stats.external_reads = walker_.external_reads();
    result_.stats.internal_reads = walker_.internal_reads();
    return {std::move(result_), {}};
  }

  // Whether `id` reads from a snapshot under SI (at SER the snapshot is not used).
  bool HasSnapshot(TxnId id) const { return snapshots_ && h_.has_snapshot(h_.txn(id)); }

  // Session, Int and Ext for transaction `t` against the current state.
  void CheckReads(TxnId id) {
    const Transaction& t = h_.txn(id);
    TxnId pred = plan_.committed_pred[id.value()];
    if (pred.valid() && part_.first()) {
      const std::optional<bool> broken = axioms::SessionBroken(h_, level_, id, pred);
      if (!broken) {
        ++result_.stats.snapshot_unjudged;
      } else if (*broken) {
        At(kSessionStep, 0);
        Emit(axioms::ExplainSession(h_, level_, id, pred));
      }
    }
    const bool snapshot = HasSnapshot(id);
    auto on_external = [&](uint32_t i, const Op& op, std::span<const Value> own) {
      At(kReadStep, i);
      if (snapshot) {
        CheckSnapshotRead(t, id, op, own);
      } else if (op.kind() == OpKind::kListRead) {
        CheckExternalList(id, op, own);
      } else {
        CheckExternalRegister(id, op);
      }
    };
    auto on_int = [&](Violation v) {
      At(kReadStep, walker_.current_op());
      Emit(std::move(v));
    };
    const std::span<const Op> ops = h_.ops(t);
    if (ops.size() <= kMaskOps) {
      walker_.WalkMasked(id, level_, part_.Mask(ops, /*writes_only=*/false), on_external, on_int);
    } else {
      walker_.Walk(
          id, level_, [&](KeyId key) { return part_.Has(key.value()); }, on_external, on_int);
    }
  }

  void CheckExternalRegister(TxnId reader, const Op& op) {
    const RegisterVersion& current = registers_[op.key().value()];
    if (axioms::RegisterReadMatches(op.value(), current.value,
                                    !current.writer.valid() && h_.AbsentReadsInitial(op.key()))) {
      return;
    }
    Emit(axioms::RegisterViolation(h_, write_index_, level_, reader, op.key(), current.value,
                                   current.writer, op.value()));
  }

  void CheckExternalList(TxnId reader, const Op& op, std::span<const Value> own) {
    const uint32_t k = op.key().value();
    if (History::SharesKeyList(op)) {
      // The read is a prefix of the key's list: it matches if it is as long as the committed
      // list and the reader's appends, the committed list is that prefix of the key's list
      // (AgreesWithKeyList), and the appends follow it there.
      const size_t n = lists_.size(k);
      if (op.list_size() == n + own.size() && lists_.AgreesWithKeyList(k, n)) {
        if (own.empty()) return;
        const std::span<const Value> tail = h_.key_list(op.key()).subspan(n, own.size());
        if (std::equal(own.begin(), own.end(), tail.begin())) return;
      }
    }
    const std::span<const Value> committed = lists_.Get(k, committed_);
    auto observed = h_.list_elements(op);
    if (!History::SharesKeyList(op) && axioms::ListReadMatches(committed, own, observed)) return;
    Emit(axioms::ListViolation(h_, write_index_, level_, reader, op.key(), committed, own,
                               observed));
  }

  // EXT for a reader with a snapshot: the newest version of the key it sees (registers), or the
  // committed list it sees (lists), from the key's chain (axioms/snapshot_rules.h).
  void CheckSnapshotRead(const Transaction& t, TxnId reader, const Op& op,
                         std::span<const Value> own) {
    const KeyId key = op.key();
    const std::vector<ChainEntry>& chain = chains_[key.value()];
    ChainCursor c{chain, chain.size()};
    TxnId w;
    if (op.kind() != OpKind::kListRead) {
      switch (axioms::NewestVisible(h_, t, c, &w)) {
        case axioms::SnapshotStop::kVisible:
          if (!axioms::RegisterReadMatches(op.value(), chain[c.at].value, false)) {
            Emit(axioms::RegisterViolation(h_, write_index_, level_, reader, key, chain[c.at].value,
                                           w, op.value()));
          }
          return;
        case axioms::SnapshotStop::kUnknown:
          ++result_.stats.snapshot_unjudged;
          return;
        default: {
          const Value initial = h_.InitialValue(key);
          if (!axioms::RegisterReadMatches(op.value(), initial, h_.AbsentReadsInitial(key))) {
            Emit(axioms::RegisterViolation(h_, write_index_, level_, reader, key, initial,
                                           TxnId::Invalid(), op.value()));
          }
          return;
        }
      }
    }
    const axioms::SnapshotStop stop = axioms::VisibleWriters(h_, t, c, &visible_, &w);
    if (stop == axioms::SnapshotStop::kUnknown) {
      ++result_.stats.snapshot_unjudged;
      return;
    }
    if (stop == axioms::SnapshotStop::kBoundary) {
      lists_.CopyPrefix(key.value(), chain[c.at].list_end, committed_);
    } else {
      auto init = h_.InitialList(key);
      committed_.assign(init.begin(), init.end());
    }
    for (size_t i = visible_.size(); i-- > 0;) {
      axioms::AppendsOf(h_, visible_[i], key, &committed_);
    }
    auto observed = h_.list_elements(op);
    if (axioms::ListReadMatches(committed_, own, observed)) return;
    Emit(axioms::ListViolation(h_, write_index_, level_, reader, key, committed_, own, observed));
  }

  // NOCONFLICT for a writer with a snapshot: the writers of each key it writes that committed
  // before it and that its snapshot does not see.
  void CheckSnapshotConflicts(TxnId id) {
    const Transaction& t = h_.txn(id);
    const std::span<const Op> ops = h_.ops(id);
    BeginWalk(ops);
    ForOwnWrites(ops, /*backwards=*/false, [&](uint32_t i) {
      const Op& op = ops[i];
      const uint32_t k = op.key().value();
      if (!FirstWrite(ops, i, /*backwards=*/false)) return;
      At(kConflictStep, i);
      ChainCursor c{chains_[k], chains_[k].size()};
      axioms::ConcurrentWriters(
          h_, t, c, [&](TxnId u) { Emit(axioms::ExplainNoConflict(h_, u, id, op.key())); },
          &snapshot_unjudged_pairs_);
    });
  }

  // Registers `t` as open on each key it writes (SI).
  void OpenWrites(TxnId id) {
    const std::span<const Op> ops = h_.ops(id);
    BeginWalk(ops);
    ForOwnWrites(ops, /*backwards=*/false, [&](uint32_t i) {
      if (FirstWrite(ops, i, /*backwards=*/false)) {
        open_writers_.Add(ops[i].key().value(), id.value());
      }
    });
  }

  // Installs `t`'s writes; under SI, reports NOCONFLICT with every other transaction still open
  // on a key it writes, and closes it on those keys.
  void Commit(TxnId id) {
    auto ops = h_.ops(id);
    BeginWalk(ops);
    ForOwnWrites(ops, /*backwards=*/false, [&](uint32_t i) {
      const Op& op = ops[i];
      const uint32_t k = op.key().value();
      if (op.kind() == OpKind::kAppend) {
        lists_.push_back(k, op.value());
      } else {
        registers_[k] = RegisterVersion{op.value(), id};
      }
      if (level_ != IsolationLevel::kSnapshotIsolation ||
          !FirstWrite(ops, i, /*backwards=*/false)) {
        return;
      }
      At(kCommitStep, i);
      open_writers_.ForEach(k, [&](uint64_t other) {
        if (other != id.value()) Emit(axioms::ExplainNoConflict(h_, id, TxnId(other), op.key()));
      });
      // A transaction with a snapshot was never open.
      open_writers_.Remove(k, id.value());
    });
    if (snapshots_) RecordVersions(id, ops);
  }

  // Appends `id`'s version of each key it writes to the key's chain (SI with snapshots).
  void RecordVersions(TxnId id, std::span<const Op> ops) {
    BeginWalk(ops);
    // Backwards: a register's final write comes first.
    ForOwnWrites(ops, /*backwards=*/true, [&](uint32_t i) {
      const Op& op = ops[i];
      const uint32_t k = op.key().value();
      if (!FirstWrite(ops, i, /*backwards=*/true)) return;
      chains_[k].push_back(
          ChainEntry{.writer = id.value(), .value = op.value(), .list_end = lists_.size(k)});
    });
  }

  // Calls f(i) for each write ops[i] on a key of this part, in order (or, `backwards`, in
  // reverse order). A transaction of at most kMaskOps ops is walked by the mask of those writes
  // (KeyPart::Mask).
  template <class F>
  void ForOwnWrites(std::span<const Op> ops, bool backwards, F f) const {
    if (ops.size() <= kMaskOps) {
      uint64_t mask = part_.Mask(ops, /*writes_only=*/true);
      while (mask != 0) {
        const int i = backwards ? 63 - std::countl_zero(mask) : std::countr_zero(mask);
        mask &= ~(uint64_t{1} << i);
        f(static_cast<uint32_t>(i));
      }
      return;
    }
    for (size_t n = 0; n < ops.size(); ++n) {
      const size_t i = backwards ? ops.size() - 1 - n : n;
      if (ops[i].is_write() && part_.Has(ops[i].key().value())) f(static_cast<uint32_t>(i));
    }
  }

  // Whether write ops[i] is the first write of its key in a walk of `ops` (forwards, or
  // backwards), so that each key a transaction writes is handled once per walk. A short
  // transaction is scanned, which touches no memory beyond its ops; a longer one marks its keys in
  // slot_stamp_, after BeginWalk. REQUIRES: ops[i].is_write().
  static constexpr size_t kScanOps = 32;
  // The most ops of a transaction walked by a mask of its ops (KeyPart::Mask).
  static constexpr size_t kMaskOps = 64;
  void BeginWalk(std::span<const Op> ops) {
    if (ops.size() > kScanOps) ++stamp_;
  }
  bool FirstWrite(std::span<const Op> ops, size_t i, bool backwards) {
    const KeyId key = ops[i].key();
    if (ops.size() > kScanOps) {
      uint32_t& stamp = slot_stamp_[key.value()];
      if (stamp == stamp_) return false;
      stamp = stamp_;
      return true;
    }
    const size_t begin = backwards ? i + 1 : 0;
    const size_t end = backwards ? ops.size() : i;
    for (size_t j = begin; j < end; ++j) {
      if (ops[j].key() == key && ops[j].is_write()) return false;
    }
    return true;
  }

  // Where the next violations are found: step `step`, op `op` of the current event.
  void At(Step step, uint32_t op) {
    found_at_.step = step;
    found_at_.op = op;
  }

  void Emit(Violation v) {
    v.level = level_;
    result_.violations.push_back(std::move(v));
    if (part_.count > 1) found_at_list_.push_back(found_at_);
  }

  const History& h_;
  IsolationLevel level_;
  LimitPoller poller_;
  const ReplayPlan& plan_;
  KeyPart part_;
  std::atomic<bool>* stop_;
  FoundAt found_at_;                    // where the replay is
  std::vector<FoundAt> found_at_list_;  // per violation, when there are several parts
  axioms::WriteIndex write_index_;
  axioms::ReadWalker walker_;
  std::vector<RegisterVersion> registers_;
  CommittedLists lists_;
  OpenWriters open_writers_;
  // SI with snapshots: per key, every committed version in commit order.
  bool snapshots_;
  std::vector<std::vector<ChainEntry>> chains_;
  std::vector<TxnId> visible_;
  std::vector<Value> committed_;
  uint64_t snapshot_unjudged_pairs_ = 0;
  size_t open_ = 0;

  // Deduplicates keys within one transaction's writes (FirstWrite): key -> stamp of the last
  // visit, for transactions longer than kScanOps.
  uint32_t stamp_ = 0;
  std::vector<uint32_t> slot_stamp_;

  ChronosResult result_;
};

// How many parts a run of `options` on `h` is split into.
uint32_t PartCount(const History& h, const ChronosOptions& options) {
  uint32_t threads = std::min(options.threads, kMaxThreads);
  if (threads == 0) {
    if (h.size() < kParallelMinTxns) return 1;
    threads = std::clamp<uint32_t>(std::thread::hardware_concurrency(), 1, kMaxAutoThreads);
  }
  // Parts without keys would only repeat the work of part 0.
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(threads, h.key_count())));
}

}  // namespace

ChronosResult RunChronos(const History& h, const ChronosOptions& options) {
  std::atomic<bool> stop{false};
  LimitPoller poller(options.limits);
  if (poller.ExpiredNow()) {
    ChronosResult incomplete;
    incomplete.complete = false;
    return incomplete;
  }
  const uint32_t parts = PartCount(h, options);
  const ReplayPlan plan = MakePlan(h, options.level, parts);
  std::vector<PartResult> found(parts);
  auto run = [&](uint32_t index) {
    found[index] = Replayer(h, options.level, options.limits, plan,
                            KeyPart{.index = index, .count = parts, .owner = &plan.owner}, &stop)
                       .Run();
  };
  {
    std::vector<std::jthread> threads;
    threads.reserve(parts - 1);
    for (uint32_t i = 1; i < parts; ++i) threads.emplace_back(run, i);
    run(0);
  }  // joins
  if (parts == 1) {
    found[0].result.stats.transactions_checked = plan.transactions_checked;
    found[0].result.stats.transactions_skipped = plan.transactions_skipped;
    return std::move(found[0].result);
  }
  ChronosResult out;
  out.stats = found[0].result.stats;
  out.stats.transactions_checked = plan.transactions_checked;
  out.stats.transactions_skipped = plan.transactions_skipped;
  // Part 0 judged the sessions and counted the open transactions; every part judged its keys.
  std::vector<std::pair<FoundAt, size_t>> order;  // (where, index in `all`)
  std::vector<Violation> all;
  for (uint32_t p = 0; p < parts; ++p) {
    PartResult& r = found[p];
    if (!r.result.complete) out.complete = false;
    if (p > 0) {
      out.stats.snapshot_unjudged += r.result.stats.snapshot_unjudged;
      out.stats.external_reads += r.result.stats.external_reads;
      out.stats.internal_reads += r.result.stats.internal_reads;
    }
    for (size_t i = 0; i < r.result.violations.size(); ++i) {
      order.emplace_back(r.found_at[i], all.size());
      all.push_back(std::move(r.result.violations[i]));
    }
  }
  if (!out.complete) return out;
  // Stable: violations found at the same place come from one part, in its order.
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  out.violations.reserve(all.size());
  for (const auto& [at, i] : order) out.violations.push_back(std::move(all[i]));
  return out;
}

}  // namespace isowatch::checkers
