// SPDX-License-Identifier: Apache-2.0
// Reader of Cobra client logs (see cobra.h and docs/history-format.md, "Cobra logs").
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/cobra.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::formats {
namespace {

using history::HistoryBuilder;
using history::TxnHeader;
using history::Value;

constexpr int64_t kFenceA = 0x23332333;
constexpr int64_t kFenceB = 0x66666666;
constexpr int64_t kMissing = 0xadeafbee;

int64_t BigEndian(std::string_view b, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  return static_cast<int64_t>(v);
}

bool Reserved(int64_t wid) { return wid == kCobraInit || wid == kCobraNull || wid == kMissing; }

// Receives the records of a file that ParseFile found well-formed so far.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual absl::Status Begin(int64_t id, int64_t ts, uint64_t offset) = 0;
  virtual absl::Status Write(int64_t wid, int64_t key, int64_t value, uint64_t offset) = 0;
  virtual absl::Status Read(int64_t writer, int64_t wid, int64_t key, int64_t value,
                            uint64_t offset) = 0;
  virtual absl::Status Commit(int64_t ts, uint64_t offset) = 0;
  // A record of `tag` with `id` (the transaction id of an S, the write id of a W or R) comes a
  // few records later: a hint, so that what the sink will look up is in the cache by then.
  virtual void Ahead(char /*tag*/, int64_t /*id*/) {}
};

// Record sizes: S and C take 9 bytes, or 17 with a timestamp (`sc`); 0 for an unknown tag.
size_t RecordSize(char tag, size_t sc) {
  switch (tag) {
    case 'S':
    case 'C':
      return sc;
    case 'W':
      return 25;
    case 'R':
      return 33;
    case 'A':
      return 9;
    default:
      return 0;
  }
}

// Returns `r` with the sink's error from ParseFile.
#define ISOWATCH_COBRA_SINK(expr)                               \
  do {                                                          \
    if (absl::Status sink_status = (expr); !sink_status.ok()) { \
      r.status = std::move(sink_status);                        \
      return r;                                                 \
    }                                                           \
  } while (false)

// Records of each kind, for reserving.
struct RecordCounts {
  uint64_t txns = 0;  // S records
  uint64_t writes = 0;
  uint64_t reads = 0;

  RecordCounts& operator+=(const RecordCounts& o) {
    txns += o.txns;
    writes += o.writes;
    reads += o.reads;
    return *this;
  }
};

struct ParseResult {
  absl::Status status;
  bool open_at_end = false;  // status is OK but a transaction was left open
  int64_t open_id = 0;
  uint64_t open_offset = 0;
  RecordCounts counts;  // of the records walked
};

// Walks the records of `bytes` (file `name`), with 17-byte S/C when `time_order`. With `head`,
// a record cut by the end of the bytes is not an error (the bytes are a file's beginning).
ParseResult ParseFile(std::string_view name, std::string_view bytes, bool time_order,
                      RecordSink* sink, bool head = false) {
  ParseResult r;
  auto fail = [&](uint64_t at, std::string_view what) {
    r.status = absl::InvalidArgumentError(fmt::format("{}: byte {}: {}", name, at, what));
    return r;
  };
  const size_t sc = time_order ? 17 : 9;
  bool open = false;
  int64_t open_id = 0;
  uint64_t open_at = 0;
  size_t pos = 0;
  // Where the hints to the sink have reached: up to kAheadBytes past the record being read.
  constexpr size_t kAheadBytes = 512;
  size_t ahead = 0;
  while (pos < bytes.size()) {
    while (sink != nullptr && ahead < bytes.size() && ahead < pos + kAheadBytes) {
      const size_t n = RecordSize(bytes[ahead], sc);
      if (n == 0 || bytes.size() - ahead < n) {
        ahead = bytes.size();  // the walk below reports it
        break;
      }
      if (bytes[ahead] == 'S' || bytes[ahead] == 'W') {
        sink->Ahead(bytes[ahead], BigEndian(bytes, ahead + 1));
      } else if (bytes[ahead] == 'R') {
        sink->Ahead('R', BigEndian(bytes, ahead + 9));
      }
      ahead += n;
    }
    const char tag = bytes[pos];
    size_t size = 0;
    switch (tag) {
      case 'S':
      case 'C':
        size = sc;
        break;
      case 'W':
        size = 25;
        break;
      case 'R':
        size = 33;
        break;
      case 'A':
        size = 9;
        break;
      default:
        return fail(pos, fmt::format("unknown record tag 0x{:02x} (expected S, C, W or R)",
                                     static_cast<uint8_t>(tag)));
    }
    if (bytes.size() - pos < size) {
      if (head) return r;
      return fail(pos, fmt::format("truncated {} record ({} bytes, {} left)", tag, size,
                                   bytes.size() - pos));
    }
    const size_t p = pos + 1;
    switch (tag) {
      case 'S':
        if (open) {
          return fail(pos, fmt::format("S of transaction {} inside transaction {} (from byte {})",
                                       BigEndian(bytes, p), open_id, open_at));
        }
        open = true;
        ++r.counts.txns;
        open_id = BigEndian(bytes, p);
        open_at = pos;
        if (sink)
          ISOWATCH_COBRA_SINK(sink->Begin(open_id, time_order ? BigEndian(bytes, p + 8) : 0, pos));
        break;
      case 'C':
        if (!open) return fail(pos, "C record outside a transaction");
        if (BigEndian(bytes, p) != open_id) {
          return fail(pos, fmt::format("C of transaction {} closes transaction {} (from byte {})",
                                       BigEndian(bytes, p), open_id, open_at));
        }
        open = false;
        if (sink) ISOWATCH_COBRA_SINK(sink->Commit(time_order ? BigEndian(bytes, p + 8) : 0, pos));
        break;
      case 'W':
        if (!open) return fail(pos, "W record outside a transaction");
        ++r.counts.writes;
        if (sink) {
          ISOWATCH_COBRA_SINK(sink->Write(BigEndian(bytes, p), BigEndian(bytes, p + 8),
                                          BigEndian(bytes, p + 16), pos));
        }
        break;
      case 'R':
        if (!open) return fail(pos, "R record outside a transaction");
        ++r.counts.reads;
        if (sink) {
          ISOWATCH_COBRA_SINK(sink->Read(BigEndian(bytes, p), BigEndian(bytes, p + 8),
                                         BigEndian(bytes, p + 16), BigEndian(bytes, p + 24), pos));
        }
        break;
      default:
        return fail(pos, "A (abort) record: the library never writes one; not supported");
    }
    pos += size;
  }
  if (open) {
    r.open_at_end = true;
    r.open_id = open_id;
    r.open_offset = open_at;
  }
  return r;
}

#undef ISOWATCH_COBRA_SINK

bool IsLogName(std::string_view name) { return name.starts_with('T') && name.ends_with(".log"); }

// Maps ids (transaction ids, write ids) to non-zero numbers: the ids from 0 to a bound that
// grows with the ids added in an array indexed by the id, the others in a hash table. Where ids
// are numbered from a small start, as a counter numbers them, a log's ids meet the array about
// in order, where a hash table's accesses go all over memory, each a cache miss: those were 40 %
// of the reading (bench/README.md, "Reading history formats"). Ids spread over 64 bits go to
// the hash table, as all of them did before.
//
// Invariant: an id below dense_.size() is never in sparse_. Thread-compatible.
class IdTable {
 public:
  // `expected`: about how many ids will be added.
  explicit IdTable(uint64_t expected) : expected_(expected) {}

  // The number of `id`, or 0.
  uint32_t Find(int64_t id) const {
    const auto u = static_cast<uint64_t>(id);
    if (u < dense_.size()) return dense_[u];
    auto it = sparse_.find(id);
    return it == sparse_.end() ? 0 : it->second;
  }
  // Brings the array's slot of `id`, if it has one, into the cache.
  void Prefetch(int64_t id) const {
    const auto u = static_cast<uint64_t>(id);
    if (u < dense_.size()) __builtin_prefetch(&dense_[u]);
  }
  // Gives `id` the number `n` unless it has one; returns the number it had before, or 0.
  // REQUIRES: n != 0.
  uint32_t Insert(int64_t id, uint32_t n) {
    ++added_;
    const auto u = static_cast<uint64_t>(id);
    if (u < dense_.size() || Cover(u)) {
      uint32_t& slot = dense_[u];
      const uint32_t before = slot;
      if (before == 0) slot = n;
      return before;
    }
    auto [it, inserted] = sparse_.try_emplace(id, n);
    return inserted ? 0 : it->second;
  }

 private:
  // Extends the array over `id` if that keeps it within 16 bytes an id added or expected.
  bool Cover(uint64_t id) {
    const uint64_t budget = 4 * (std::max(added_, expected_) + 1024);
    if (id >= budget) return false;
    const size_t size = std::min<size_t>(std::max<size_t>(2 * dense_.size(), id + 1), budget);
    dense_.resize(size, 0);
    absl::erase_if(sparse_, [this](const std::pair<const int64_t, uint32_t>& e) {
      const auto u = static_cast<uint64_t>(e.first);
      if (u >= dense_.size()) return false;
      dense_[u] = e.second;
      return true;
    });
    return true;
  }

  uint64_t expected_ = 0;
  uint64_t added_ = 0;
  std::vector<uint32_t> dense_;
  absl::flat_hash_map<int64_t, uint32_t> sparse_;
};

// Finds where a record is by walking the logs again: the first S record of a transaction, or
// the n-th R record (from 0). Only for a message, so that the reading need not keep every
// record's position.
class RecordFinder : public RecordSink {
 public:
  static RecordFinder FirstBegin(int64_t id) { return RecordFinder(false, id, 0); }
  static RecordFinder NthRead(uint64_t n) { return RecordFinder(true, 0, n); }

  // The file (as an index into `files`) and byte offset of the record, or nullopt.
  std::optional<std::pair<uint32_t, uint64_t>> Find(
      std::string_view source, const std::vector<const NamedFiles::value_type*>& files,
      bool time_order) {
    for (size_t i = 0; i < files.size(); ++i) {
      const ParseResult r = ParseFile(source, files[i]->second, time_order, this);
      if (found_) return std::pair(static_cast<uint32_t>(i), offset_);
      if (!r.status.ok()) break;
    }
    return std::nullopt;
  }

  absl::Status Begin(int64_t id, int64_t /*ts*/, uint64_t offset) override {
    return !reads_ && id == id_ ? Found(offset) : absl::OkStatus();
  }
  absl::Status Write(int64_t /*wid*/, int64_t /*key*/, int64_t /*value*/,
                     uint64_t /*offset*/) override {
    return absl::OkStatus();
  }
  absl::Status Read(int64_t /*writer*/, int64_t /*wid*/, int64_t /*key*/, int64_t /*value*/,
                    uint64_t offset) override {
    return reads_ && seen_++ == n_ ? Found(offset) : absl::OkStatus();
  }
  absl::Status Commit(int64_t /*ts*/, uint64_t /*offset*/) override { return absl::OkStatus(); }

 private:
  RecordFinder(bool reads, int64_t id, uint64_t n) : reads_(reads), id_(id), n_(n) {}
  // Stops the walk.
  absl::Status Found(uint64_t offset) {
    found_ = true;
    offset_ = offset;
    return absl::CancelledError("found");
  }

  bool reads_;
  int64_t id_;
  uint64_t n_;
  uint64_t seen_ = 0;
  bool found_ = false;
  uint64_t offset_ = 0;
};

using NamedFile = NamedFiles::value_type;

class CobraReader : public RecordSink {
 public:
  CobraReader(const ReadOptions& options, std::string source, CobraExtras* extras)
      : options_(options), source_(std::move(source)), extras_(extras) {}

  absl::StatusOr<history::History> Read(const NamedFiles& all) && {
    // The logs by name, as pointers: a copy of their bytes would cost as much as reading them.
    std::vector<const NamedFile*>& files = files_;
    for (const NamedFile& f : all) {
      if (IsLogName(f.first)) files.push_back(&f);
    }
    std::sort(files.begin(), files.end(),
              [](const NamedFile* a, const NamedFile* b) { return a->first < b->first; });
    ASSIGN_OR_RETURN(time_order_, DecideMode(files));
    // Room for every transaction and operation the logs hold, counted by DecideMode, so that the
    // history's arrays are not copied as they grow, and transaction ids met out of order (a
    // session's log at a time) are interned through the direct-mapped table from the start.
    builder_.Reserve(counts_.txns, counts_.writes + counts_.reads);
    txn_seen_ = IdTable(counts_.txns);
    writer_of_ = IdTable(counts_.writes);
    txn_ids_.reserve(counts_.txns);
    builder_.set_source(source_);
    builder_.set_format("cobra", time_order_ ? "time-order" : "plain");
    if (time_order_) builder_.set_time_unit("ms");
    if (extras_ != nullptr) {
      *extras_ = CobraExtras();
      extras_->time_order = time_order_;
    }
    for (const NamedFile* file : files) {
      const auto& [name, bytes] = *file;
      file_ = name;
      file_names_.push_back(name);
      session_ = name.substr(0, name.size() - 4);
      ParseResult r = ParseFile(Where(name), bytes, time_order_, this);
      RETURN_IF_ERROR(r.status);
      if (r.open_at_end) {
        const std::string what = fmt::format("{}: byte {}: transaction {} open at end of file",
                                             Where(name), r.open_offset, r.open_id);
        if (!options_.lenient) return absl::InvalidArgumentError(what);
        builder_.Note("transactions open at end of file dropped", what);
        ops_.clear();
      }
    }
    RETURN_IF_ERROR(ResolveWriters());
    absl::StatusOr<history::History> h = std::move(builder_).Finish();
    if (!h.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {}", source_, std::string(h.status().message())));
    }
    return h;
  }

  // The tables are larger than the cache (4M write ids in the 1M bench history), and though a
  // log's ids meet them about in order, they meet a new cache line each time.
  void Ahead(char tag, int64_t id) override {
    if (tag == 'S') {
      txn_seen_.Prefetch(id);
    } else {
      writer_of_.Prefetch(id);
    }
  }

  absl::Status Begin(int64_t id, int64_t ts, uint64_t offset) override {
    if (txn_seen_.Insert(id, 1) != 0) {
      const std::optional<std::pair<uint32_t, uint64_t>> first =
          RecordFinder::FirstBegin(id).Find(source_, files_, time_order_);
      return absl::InvalidArgumentError(
          fmt::format("{}: byte {}: transaction {} again (first at {})", Where(file_), offset, id,
                      first ? Describe(first->first, first->second) : "?"));
    }
    if (txn_ids_.size() >= UINT32_MAX) {
      return absl::ResourceExhaustedError(
          fmt::format("{}: byte {}: more than {} transactions", Where(file_), offset, UINT32_MAX));
    }
    txn_ids_.push_back(id);
    txn_id_ = id;
    start_ts_ = ts;
    start_offset_ = offset;
    ops_.clear();
    return absl::OkStatus();
  }

  absl::Status Write(int64_t wid, int64_t key, int64_t value, uint64_t offset) override {
    if (wid == kCobraDelete) {
      const int64_t synthetic = -(++deletes_);
      if (extras_ != nullptr) extras_->delete_hash[synthetic] = value;
      ops_.push_back({Kind::kWrite, key, synthetic});
      return absl::OkStatus();
    }
    if (wid <= 0 || Reserved(wid)) {
      return absl::InvalidArgumentError(
          fmt::format("{}: byte {}: write with the reserved or non-positive write id {:#x}",
                      Where(file_), offset, wid));
    }
    // The writer by its number, its position among the S records, from 1.
    if (writer_of_.Insert(wid, static_cast<uint32_t>(txn_ids_.size())) != 0) {
      builder_.Note("duplicate write ids",
                    fmt::format("{} byte {}: write id {:#x}", file_, offset, wid));
    }
    if (extras_ != nullptr) extras_->value_hash.try_emplace(wid, value);
    ops_.push_back({Kind::kWrite, key, wid});
    return absl::OkStatus();
  }

  absl::Status Read(int64_t writer, int64_t wid, int64_t key, int64_t value,
                    uint64_t offset) override {
    const uint64_t ordinal = reads_seen_++;
    if (writer == kCobraInit && (wid == kFenceA || wid == kFenceB)) {
      builder_.Note("GC fence reads dropped", fmt::format("{} byte {}", file_, offset));
      return absl::OkStatus();
    }
    if (writer == kCobraInit && wid == kCobraInit) {
      if (extras_ != nullptr) extras_->init_hash.try_emplace(key, value);
      ops_.push_back({Kind::kInitRead, key, 0});
      return absl::OkStatus();
    }
    if (writer == kCobraNull && wid == kCobraNull) {
      ops_.push_back({Kind::kNullRead, key, 0});
      return absl::OkStatus();
    }
    if (wid == kCobraDelete) {
      builder_.Note("reads of deleted values, not judged",
                    fmt::format("{} byte {}: key {}", file_, offset, key));
      ops_.push_back({Kind::kUnknownRead, key, 0});
      return absl::OkStatus();
    }
    if (wid <= 0 || Reserved(wid) || Reserved(writer)) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: byte {}: read of write id {:#x} by writer {:#x} (reserved or non-positive)",
          Where(file_), offset, wid, writer));
    }
    if (extras_ != nullptr) {
      extras_->value_hash.try_emplace(wid, value);
      extras_->claimed_writer.try_emplace(wid, writer);
    }
    // Checked against the write id's writer now if it was written before, else at the end.
    if (const uint32_t w = writer_of_.Find(wid); w != 0) {
      if (txn_ids_[w - 1] != writer) misnamed_.Add(ordinal, wid, writer, txn_ids_[w - 1]);
    } else {
      reads_.push_back({wid, writer, ordinal});
    }
    ops_.push_back({Kind::kRead, key, wid});
    return absl::OkStatus();
  }

  absl::Status Commit(int64_t ts, uint64_t offset) override {
    const std::string id = std::to_string(txn_id_);
    TxnHeader header;
    header.id = id;
    header.id_numeric = true;
    header.id_new = true;  // Begin refused a repeated one
    header.session = session_;
    header.source_offset = start_offset_;
    if (time_order_) {
      if (ts < start_ts_) {
        return absl::InvalidArgumentError(
            fmt::format("{}: byte {}: commit time {} before start time {}", Where(file_), offset,
                        ts, start_ts_));
      }
      header.real_time = TxnHeader::RealTime{start_ts_, ts};
    }
    RETURN_IF_ERROR(builder_.BeginTxn(header));
    for (const Op& op : ops_) {
      const KeyId key = builder_.IntKey(op.key);
      switch (op.kind) {
        case Kind::kWrite:
          builder_.Write(key, Value::Int(op.value));
          break;
        case Kind::kRead:
          builder_.Read(key, Value::Int(op.value));
          break;
        case Kind::kInitRead:
          builder_.SetInitialRegister(key, Value::Int(kCobraInit));
          builder_.Read(key, Value::Int(kCobraInit));
          break;
        case Kind::kNullRead:
          builder_.Read(key, Value::Absent());
          break;
        case Kind::kUnknownRead:
          builder_.UnknownRead(key);
          break;
      }
    }
    builder_.EndTxn();
    ops_.clear();
    return absl::OkStatus();
  }

 private:
  enum class Kind : uint8_t { kWrite, kRead, kInitRead, kNullRead, kUnknownRead };
  struct Op {
    Kind kind;
    int64_t key;
    int64_t value;
  };
  // A read of a write id no transaction had written yet when it was read; `ordinal` counts the
  // R records before it.
  struct PendingRead {
    int64_t wid;
    int64_t claimed;
    uint64_t ordinal;
  };
  // The reads of one kind that a note counts, and the first of them in the order of the logs.
  struct ReadNote {
    uint64_t count = 0;
    uint64_t ordinal = UINT64_MAX;
    int64_t wid = 0;
    int64_t claimed = 0;
    int64_t writer = 0;

    void Add(uint64_t at, int64_t w, int64_t c, int64_t by) {
      ++count;
      if (at < ordinal) *this = ReadNote{count, at, w, c, by};
    }
  };

  std::string Where(std::string_view file) const { return fmt::format("{}/{}", source_, file); }
  std::string Describe(uint32_t file, uint64_t offset) const {
    return fmt::format("{} byte {}", file_names_[file], offset);
  }

  // 9-byte or 17-byte S/C records: the mode every non-empty file fits. Sets counts_ to the
  // records of the files read in that mode.
  absl::StatusOr<bool> DecideMode(const std::vector<const NamedFile*>& files) {
    const std::string& d = options_.dialect;
    if (!d.empty() && d != "plain" && d != "time-order") {
      return absl::InvalidArgumentError(
          fmt::format("{}: unknown Cobra dialect \"{}\" (plain or time-order)", source_, d));
    }
    if (!d.empty()) {
      const bool time_order = d == "time-order";
      for (const NamedFile* f : files) {
        ParseResult r = ParseFile(Where(f->first), f->second, time_order, nullptr);
        RETURN_IF_ERROR(r.status);
        counts_ += r.counts;
      }
      return time_order;
    }
    bool plain = true, timed = true;
    absl::Status plain_error;
    RecordCounts plain_counts;
    RecordCounts timed_counts;
    for (const NamedFile* f : files) {
      const auto& [name, bytes] = *f;
      ParseResult p = ParseFile(Where(name), bytes, false, nullptr);
      ParseResult t = ParseFile(Where(name), bytes, true, nullptr);
      // An open transaction at the end fits a mode less well than balanced records; in lenient
      // mode it still fits when nothing else does.
      const bool p_ok = p.status.ok() && (!p.open_at_end || options_.lenient);
      const bool t_ok = t.status.ok() && (!t.open_at_end || options_.lenient);
      if (!p_ok && plain_error.ok()) {
        plain_error = p.status.ok() ? absl::InvalidArgumentError(fmt::format(
                                          "{}: byte {}: transaction {} open at end of file",
                                          Where(name), p.open_offset, p.open_id))
                                    : p.status;
      }
      plain = plain && p_ok;
      timed = timed && t_ok;
      plain_counts += p.counts;
      timed_counts += t.counts;
    }
    if (plain && timed) {
      bool any = false;
      for (const NamedFile* f : files) any = any || !f->second.empty();
      if (!any) return false;
      return absl::InvalidArgumentError(fmt::format(
          "{}: the logs read both with plain (9-byte) and time-order (17-byte) S/C records; "
          "say which with the dialect",
          source_));
    }
    if (plain) {
      counts_ = plain_counts;
      return false;
    }
    if (timed) {
      counts_ = timed_counts;
      return true;
    }
    return plain_error;
  }

  // The notes on reads whose write id no transaction wrote, or another transaction than the
  // read names: counted in any order, their first examples those of the logs' order.
  absl::Status ResolveWriters() {
    ReadNote unwritten;
    for (const PendingRead& r : reads_) {
      if (const uint32_t w = writer_of_.Find(r.wid); w == 0) {
        unwritten.Add(r.ordinal, r.wid, r.claimed, 0);
      } else if (txn_ids_[w - 1] != r.claimed) {
        misnamed_.Add(r.ordinal, r.wid, r.claimed, txn_ids_[w - 1]);
      }
    }
    reads_.clear();
    const bool unwritten_first = unwritten.ordinal < misnamed_.ordinal;
    for (int i = 0; i < 2; ++i) {
      const ReadNote& n = (i == 0) == unwritten_first ? unwritten : misnamed_;
      if (n.count == 0) continue;
      const std::optional<std::pair<uint32_t, uint64_t>> at =
          RecordFinder::NthRead(n.ordinal).Find(source_, files_, time_order_);
      if (!at) return absl::InternalError(fmt::format("{}: a read the logs lost", source_));
      const std::string where = Describe(at->first, at->second);
      const std::string_view kind = &n == &unwritten
                                        ? "reads of a write id no transaction wrote"
                                        : "reads naming another writer than the write id's";
      builder_.Note(
          kind, &n == &unwritten
                    ? fmt::format("{}: write id {:#x} (writer {} named)", where, n.wid, n.claimed)
                    : fmt::format("{}: write id {:#x} names {}, written by {}", where, n.wid,
                                  n.claimed, n.writer));
      for (uint64_t k = 1; k < n.count; ++k) builder_.Note(kind, "");
    }
    return absl::OkStatus();
  }

  const ReadOptions& options_;
  std::string source_;
  CobraExtras* extras_;
  HistoryBuilder builder_;
  bool time_order_ = false;
  std::string file_;
  std::vector<std::string> file_names_;
  std::string session_;
  int64_t txn_id_ = 0;
  int64_t start_ts_ = 0;
  uint64_t start_offset_ = 0;
  int64_t deletes_ = 0;
  RecordCounts counts_;
  std::vector<Op> ops_;
  std::vector<const NamedFile*> files_;  // the logs, in the order read
  IdTable txn_seen_{0};                  // transaction ids met in S records
  std::vector<int64_t> txn_ids_;         // the S records' transaction ids, in order
  IdTable writer_of_{0};                 // write id -> its first writer's S record, from 1
  uint64_t reads_seen_ = 0;              // R records
  std::vector<PendingRead> reads_;
  ReadNote misnamed_;
};

}  // namespace

absl::StatusOr<history::History> ReadCobraFiles(const NamedFiles& files, const ReadOptions& options,
                                                std::string_view source, CobraExtras* extras) {
  return CobraReader(options, std::string(source), extras).Read(files);
}

absl::StatusOr<history::History> ReadCobraDir(const std::string& path, const ReadOptions& options,
                                              CobraExtras* extras) {
  std::error_code ec;
  NamedFiles files;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(ec) || !IsLogName(name)) continue;
    // Read straight into the string that keeps the bytes (through a stringstream they were
    // copied twice more).
    std::ifstream in(entry.path(), std::ios::binary | std::ios::ate);
    std::string bytes;
    if (in) {
      const std::streamoff size = in.tellg();
      in.seekg(0);
      if (size > 0) {
        bytes.resize(static_cast<size_t>(size));
        in.read(bytes.data(), size);
      }
    }
    if (!in) return absl::DataLossError(fmt::format("{}/{}: cannot read", path, name));
    files.emplace_back(name, std::move(bytes));
  }
  if (ec) return absl::NotFoundError(fmt::format("{}: {}", path, ec.message()));
  return ReadCobraFiles(files, options, path, extras);
}

absl::Status SniffCobra(std::string_view head) {
  if (head.size() < 9 || head[0] != 'S') {
    return absl::InvalidArgumentError("not a Cobra log: does not start with an S record");
  }
  ParseResult plain = ParseFile("", head, false, nullptr, /*head=*/true);
  if (plain.status.ok()) return absl::OkStatus();
  ParseResult timed = ParseFile("", head, true, nullptr, /*head=*/true);
  if (timed.status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("not a Cobra log: {}", std::string(plain.status.message())));
}

}  // namespace isowatch::formats
