// SPDX-License-Identifier: Apache-2.0
//
// Reader of ViperBench JSON lines (docs/history-format.md, "ViperBench JSON lines").
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

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include <fmt/format.h>
#include <simdjson.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/common/string_view.h"
#include "isowatch/formats/internal/viper_names.h"
#include "isowatch/formats/viper.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::formats {
namespace {

using history::HistoryBuilder;
using history::KeyBound;
using history::KeyValue;
using history::Value;
using simdjson::dom::element;
using simdjson::dom::element_type;

// Note kinds (docs/history-format.md lists them).
constexpr std::string_view kIneffective = "ineffective writes dropped (succ=false)";
constexpr std::string_view kJepFiles = "Jep*.log files ignored (pseudo-EDN, not read)";
constexpr std::string_view kOtherFiles = "other files ignored (not J<digits>.log)";
constexpr std::string_view kInitialNotAlone = "initial transaction not alone in its file";
constexpr std::string_view kFinal = "final-state transaction kept as an ordinary transaction";
constexpr std::string_view kMidTimestamps =
    "begin/commit response timestamps not kept (postBeginTS, preCommitTS)";
constexpr std::string_view kMopTimestamps = "per-operation timestamps not kept (reqTS, resTS)";
constexpr std::string_view kSecondaryKeys = "range record sk fields not kept";
constexpr std::string_view kTrailing = "insert/delete trailing fields not kept (ready, actual_f)";
constexpr std::string_view kUnknownMembers = "unknown members ignored";
constexpr std::string_view kDuplicateWrites = "duplicate writes of one (key, value)";
constexpr std::string_view kMalformed = "malformed transactions dropped";

// A key as the line wrote it.
struct RawKey {
  bool is_string = false;
  int64_t number = 0;
  std::string_view text;
};

struct RawRecord {
  RawKey key;
  int64_t value = 0;
};

// One mop, parsed and checked, before anything reaches the builder.
struct Mop {
  char kind = 'r';  // 'r', 'w', 'i', 'd', or 'g' for a range
  RawKey key;
  int64_t value = 0;
  int64_t read_value = 0;
  bool is_dead = false;
  bool succ = true;
  std::optional<RawKey> low, high;  // ranges; nullopt = unbounded
  std::vector<RawRecord> live, dead;
};

std::string Shorten(std::string s) {
  constexpr size_t kMax = 160;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

class Reader {
 public:
  Reader(const ReadOptions& options, std::string_view source) : options_(options), source_(source) {
    builder_.set_source(std::string(source));
    builder_.set_format("viper");
    builder_.set_time_unit("ms");
    if (options.initial_value) builder_.SetDefaultInitialValue(Value::Int(*options.initial_value));
  }

  void NoteFile(std::string_view name, bool is_jep) {
    builder_.Note(is_jep ? kJepFiles : kOtherFiles, name);
  }

  void BeginFile(std::string_view name) {
    file_ = name;
    stem_ = name.substr(0, name.size() - 4);  // without ".log"
    file_txns_ = 0;
    initial_here_ = false;
  }

  absl::Status Line(std::string_view line, uint64_t line_no) {
    if (line_no == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
    while (!line.empty() && IsSpace(line.back())) line.remove_suffix(1);
    while (!line.empty() && IsSpace(line.front())) line.remove_prefix(1);
    if (line.empty()) return absl::OkStatus();
    ++file_txns_;
    line_no_ = line_no;
    absl::Status status = Transaction(line);
    if (status.ok()) return status;
    if (builder_.txn_open()) builder_.AbandonTxn();
    if (!options_.lenient) return status;
    builder_.Note(kMalformed, common::StdView(status.message()));
    return absl::OkStatus();
  }

  absl::Status EndFile() {
    if (initial_here_ && file_txns_ > 1) {
      builder_.Note(kInitialNotAlone, fmt::format("{} holds {} transactions", file_, file_txns_));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<history::History> Finish() && {
    if (options_.init_txn && !init_found_) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: no transaction {} (the initial-transaction option)", source_, *options_.init_txn));
    }
    for (const auto& [key, value] : initial_) builder_.SetInitialRegister(key, value);
    for (const KeyValue& kv : initial_tombstones_) builder_.MarkTombstone(kv.key, kv.value);
    absl::StatusOr<history::History> h = std::move(builder_).Finish();
    if (!h.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {}", source_, common::StdView(h.status().message())));
    }
    return h;
  }

 private:
  static bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

  // Where in a transaction's JSON a value is, for messages: `base`, then `[index]` if any, then
  // `field`. Written out only for a message: formatting it for every value read cost more than
  // parsing the value.
  struct Path {
    Path(std::string_view b) : base(b) {}    // NOLINT(google-explicit-constructor)
    Path(const char* b) : base(b) {}         // NOLINT(google-explicit-constructor)
    Path(const std::string& b) : base(b) {}  // NOLINT(google-explicit-constructor)
    Path(std::string_view b, size_t i, std::string_view f = {}) : base(b), index(i), field(f) {}
    Path With(std::string_view f) const { return Path(base, index, f); }
    std::string str() const {
      return index == kNoIndex ? fmt::format("{}{}", base, field)
                               : fmt::format("{}[{}]{}", base, index, field);
    }
    static constexpr size_t kNoIndex = ~size_t{0};
    std::string_view base;
    size_t index = kNoIndex;
    std::string_view field;
  };

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("{}/{}:{}: {}", source_, file_, line_no_, what));
  }
  std::string Where() const { return fmt::format("{}:{}", file_, line_no_); }

  absl::StatusOr<int64_t> Int(element e, const Path& what) const {
    int64_t v = 0;
    if (e.type() == element_type::INT64 && e.get_int64().get(v) == simdjson::SUCCESS) return v;
    if (e.type() == element_type::UINT64) {
      return Error(
          fmt::format("{}: {} is out of the int64 range", what.str(), simdjson::minify(e)));
    }
    return Error(
        fmt::format("{}: expected an integer, not {}", what.str(), Shorten(simdjson::minify(e))));
  }

  absl::StatusOr<bool> Bool(element e, const Path& what) const {
    bool v = false;
    if (e.get_bool().get(v) != simdjson::SUCCESS) {
      return Error(fmt::format("{}: expected true or false, not {}", what.str(),
                               Shorten(simdjson::minify(e))));
    }
    return v;
  }

  // An integer or string key; integer and string keys never mix in one history.
  absl::StatusOr<RawKey> Key(element e, const Path& what) {
    RawKey key;
    if (e.type() == element_type::STRING) {
      key.is_string = true;
      key.text = std::string_view(e.get_string().value_unsafe());
    } else if (e.type() == element_type::INT64 || e.type() == element_type::UINT64) {
      ASSIGN_OR_RETURN(key.number, Int(e, what));
    } else {
      return Error(fmt::format("{}: expected an integer or string key, not {}", what.str(),
                               Shorten(simdjson::minify(e))));
    }
    if (!key_kind_) {
      key_kind_ = key.is_string;
      first_key_at_ = Where();
    } else if (*key_kind_ != key.is_string) {
      return Error(fmt::format("{}: {} key {}, but {} has {} keys (keys must not mix)", what.str(),
                               key.is_string ? "a string" : "an integer",
                               Shorten(simdjson::minify(e)), first_key_at_,
                               key.is_string ? "integer" : "string"));
    }
    return key;
  }

  // "nil" or null: unbounded.
  absl::StatusOr<std::optional<RawKey>> Bound(element e, const Path& what) {
    if (e.is_null()) return std::nullopt;
    if (e.type() == element_type::STRING &&
        std::string_view(e.get_string().value_unsafe()) == "nil") {
      return std::nullopt;
    }
    ASSIGN_OR_RETURN(RawKey key, Key(e, what));
    return std::optional<RawKey>(key);
  }

  absl::Status Records(element e, const Path& path, std::vector<RawRecord>& out) {
    const std::string what = path.str();
    simdjson::dom::array records;
    if (e.get_array().get(records) != simdjson::SUCCESS) {
      return Error(fmt::format("{}: expected an array of records", what));
    }
    size_t i = 0;
    for (element r : records) {
      const std::string at = fmt::format("{}[{}]", what, i++);
      simdjson::dom::object record;
      if (r.get_object().get(record) != simdjson::SUCCESS) {
        return Error(fmt::format("{}: expected a record {{\"id\": key, \"val\": value}}", at));
      }
      std::optional<element> id, val;
      for (auto field : record) {
        if (field.key == "id") {
          id = field.value;
        } else if (field.key == "val") {
          val = field.value;
        } else if (field.key == "sk") {
          builder_.Note(kSecondaryKeys, fmt::format("{}: {}", Where(), at));
        } else {
          builder_.Note(kUnknownMembers, fmt::format("{}: {}.{}", Where(), at, field.key));
        }
      }
      if (!id || !val) {
        return Error(fmt::format("{}: a record needs \"id\" and \"val\"", at));
      }
      RawRecord rec;
      ASSIGN_OR_RETURN(rec.key, Key(*id, Path(at).With(".id")));
      ASSIGN_OR_RETURN(rec.value, Int(*val, Path(at).With(".val")));
      out.push_back(rec);
    }
    return absl::OkStatus();
  }

  // ["r", K, V, is_dead] | ["w", K, V, succ] | ["i"|"d", K, V, read_v, is_dead, succ, ...] |
  // ["range", K1, K2, [live], [dead]].
  absl::Status TupleMop(simdjson::dom::array a, const Path& path, Mop& mop) {
    const absl::InlinedVector<element, 8> f(a.begin(), a.end());
    std::string_view type;
    if (f.empty() || f[0].get_string().get(type) != simdjson::SUCCESS) {
      return Error(
          fmt::format("{}: expected a mop [\"r\"|\"w\"|\"i\"|\"d\"|\"range\", ...]", path.str()));
    }
    auto arity = [&](size_t min, size_t max, std::string_view shape) -> absl::Status {
      if (f.size() < min || f.size() > max) {
        return Error(fmt::format("{}: expected {}, got {} elements", path.str(), shape, f.size()));
      }
      return absl::OkStatus();
    };
    if (type == "r" || type == "w") {
      RETURN_IF_ERROR(
          arity(4, 4, type == "r" ? "[\"r\", key, value, is_dead]" : "[\"w\", key, value, succ]"));
      mop.kind = type[0];
      ASSIGN_OR_RETURN(mop.key, Key(f[1], path.With(", key")));
      ASSIGN_OR_RETURN(mop.value, Int(f[2], path.With(", value")));
      ASSIGN_OR_RETURN(bool flag, Bool(f[3], path.With(", element 3")));
      if (type == "w") mop.succ = flag;
      return absl::OkStatus();
    }
    if (type == "i" || type == "d") {
      RETURN_IF_ERROR(arity(6, type == "i" ? 8 : 7,
                            fmt::format("[\"{}\", key, value, read_value, is_dead, succ{}]", type,
                                        type == "i" ? " (, ready, actual_f)" : " (, ready)")));
      mop.kind = type[0];
      ASSIGN_OR_RETURN(mop.key, Key(f[1], path.With(", key")));
      ASSIGN_OR_RETURN(mop.value, Int(f[2], path.With(", value")));
      ASSIGN_OR_RETURN(mop.read_value, Int(f[3], path.With(", read value")));
      ASSIGN_OR_RETURN(mop.is_dead, Bool(f[4], path.With(", is_dead")));
      ASSIGN_OR_RETURN(mop.succ, Bool(f[5], path.With(", succ")));
      if (f.size() > 6) builder_.Note(kTrailing, fmt::format("{}: {}", Where(), path.str()));
      return absl::OkStatus();
    }
    if (type == "range") {
      RETURN_IF_ERROR(arity(5, 5, "[\"range\", low, high, [live records], [dead records]]"));
      mop.kind = 'g';
      ASSIGN_OR_RETURN(mop.low, Bound(f[1], path.With(", low")));
      ASSIGN_OR_RETURN(mop.high, Bound(f[2], path.With(", high")));
      RETURN_IF_ERROR(Records(f[3], path.With(", live"), mop.live));
      return Records(f[4], path.With(", dead"), mop.dead);
    }
    return Error(fmt::format("{}: unknown mop type \"{}\" (expected r, w, i, d or range)",
                             path.str(), Shorten(std::string(type))));
  }

  // The JSON: 2 form: {"opType": ..., "key": ..., ...}.
  absl::Status ObjectMop(simdjson::dom::object o, const Path& path, Mop& mop) {
    std::optional<element> type_e, key, value, read_value, is_dead, succ, key1, key2, live, dead;
    bool timestamps = false;
    for (auto field : o) {
      std::optional<element>* slot = nullptr;
      if (field.key == "opType") slot = &type_e;
      if (field.key == "key") slot = &key;
      if (field.key == "value") slot = &value;
      if (field.key == "readValue") slot = &read_value;
      if (field.key == "isDead") slot = &is_dead;
      if (field.key == "succ") slot = &succ;
      if (field.key == "key1") slot = &key1;
      if (field.key == "key2") slot = &key2;
      if (field.key == "liveKVs") slot = &live;
      if (field.key == "deadKVs") slot = &dead;
      if (slot != nullptr) {
        if (slot->has_value()) return Error(fmt::format("{}: \"{}\" twice", path.str(), field.key));
        *slot = field.value;
      } else if (field.key == "reqTS" || field.key == "resTS") {
        const std::string where = fmt::format("{}.{}", path.str(), field.key);
        RETURN_IF_ERROR(Int(field.value, where).status());
        timestamps = true;
      } else {
        builder_.Note(kUnknownMembers, fmt::format("{}: {}.{}", Where(), path.str(), field.key));
      }
    }
    if (timestamps) builder_.Note(kMopTimestamps, fmt::format("{}: {}", Where(), path.str()));
    std::string_view type;
    if (!type_e || type_e->get_string().get(type) != simdjson::SUCCESS) {
      return Error(fmt::format("{}: expected \"opType\": \"r\", \"w\", \"i\", \"d\" or \"range\"",
                               path.str()));
    }
    auto need = [&](const std::optional<element>& e, std::string_view name) -> absl::Status {
      if (!e) return Error(fmt::format("{}: a \"{}\" mop needs \"{}\"", path.str(), type, name));
      return absl::OkStatus();
    };
    if (type == "range") {
      mop.kind = 'g';
      RETURN_IF_ERROR(need(key1, "key1"));
      RETURN_IF_ERROR(need(key2, "key2"));
      RETURN_IF_ERROR(need(live, "liveKVs"));
      RETURN_IF_ERROR(need(dead, "deadKVs"));
      ASSIGN_OR_RETURN(mop.low, Bound(*key1, path.With(".key1")));
      ASSIGN_OR_RETURN(mop.high, Bound(*key2, path.With(".key2")));
      RETURN_IF_ERROR(Records(*live, path.With(".liveKVs"), mop.live));
      return Records(*dead, path.With(".deadKVs"), mop.dead);
    }
    if (type != "r" && type != "w" && type != "i" && type != "d") {
      return Error(fmt::format("{}: unknown opType \"{}\" (expected r, w, i, d or range)",
                               path.str(), Shorten(std::string(type))));
    }
    mop.kind = type[0];
    RETURN_IF_ERROR(need(key, "key"));
    RETURN_IF_ERROR(need(value, "value"));
    ASSIGN_OR_RETURN(mop.key, Key(*key, path.With(".key")));
    ASSIGN_OR_RETURN(mop.value, Int(*value, path.With(".value")));
    if (type == "r") {
      if (is_dead) RETURN_IF_ERROR(Bool(*is_dead, path.With(".isDead")).status());
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(need(succ, "succ"));
    ASSIGN_OR_RETURN(mop.succ, Bool(*succ, path.With(".succ")));
    if (type == "w") return absl::OkStatus();
    RETURN_IF_ERROR(need(read_value, "readValue"));
    RETURN_IF_ERROR(need(is_dead, "isDead"));
    ASSIGN_OR_RETURN(mop.read_value, Int(*read_value, path.With(".readValue")));
    ASSIGN_OR_RETURN(mop.is_dead, Bool(*is_dead, path.With(".isDead")));
    return absl::OkStatus();
  }

  KeyId Intern(const RawKey& k) {
    return k.is_string ? builder_.BytesKey(k.text) : builder_.IntKey(k.number);
  }
  static Value ValueOf(int64_t v) { return v == 0 ? Value::Absent() : Value::Int(v); }

  absl::Status Transaction(std::string_view line) {
    element doc;
    if (auto error = parser_.parse(line.data(), line.size()).get(doc); error) {
      return Error(fmt::format("not JSON: {}", simdjson::error_message(error)));
    }
    simdjson::dom::object obj;
    if (doc.get_object().get(obj) != simdjson::SUCCESS) {
      return Error("expected a JSON object {\"value\": [...]}");
    }
    std::optional<element> value, ts[4], is_initial, is_final;
    static constexpr std::string_view kTs[4] = {"preBeginTS", "postBeginTS", "preCommitTS",
                                                "postCommitTS"};
    for (auto field : obj) {
      std::optional<element>* slot = nullptr;
      if (field.key == "value") slot = &value;
      if (field.key == "isInitial") slot = &is_initial;
      if (field.key == "isFinal") slot = &is_final;
      for (int i = 0; i < 4; ++i) {
        if (field.key == kTs[i]) slot = &ts[i];
      }
      if (slot == nullptr) {
        builder_.Note(kUnknownMembers, fmt::format("{}: {}", Where(), field.key));
        continue;
      }
      if (slot->has_value()) return Error(fmt::format("\"{}\" twice", field.key));
      *slot = field.value;
    }
    simdjson::dom::array mops_json;
    if (!value || value->get_array().get(mops_json) != simdjson::SUCCESS) {
      return Error("expected \"value\": [mop, ...]");
    }
    std::optional<int64_t> stamps[4];
    for (int i = 0; i < 4; ++i) {
      if (ts[i]) {
        ASSIGN_OR_RETURN(stamps[i], Int(*ts[i], kTs[i]));
      }
    }
    if (stamps[0].has_value() != stamps[3].has_value()) {
      return Error(stamps[0] ? "preBeginTS without postCommitTS"
                             : "postCommitTS without preBeginTS");
    }
    if (stamps[3] == history::Transaction::kNeverCompleted) {
      return Error(
          fmt::format("postCommitTS {} is out of range (it means never completed)", *stamps[3]));
    }
    bool initial = false;
    bool final = false;
    if (is_initial) {
      ASSIGN_OR_RETURN(initial, Bool(*is_initial, "isInitial"));
    }
    if (is_final) {
      ASSIGN_OR_RETURN(final, Bool(*is_final, "isFinal"));
    }
    const std::string id = fmt::format("{}:{}", stem_, line_no_);
    if (options_.init_txn && *options_.init_txn == id) {
      initial = true;
      init_found_ = true;
    }
    if (initial && final) return Error("a transaction both initial and final");

    mops_.clear();
    size_t i = 0;
    for (element m : mops_json) {
      const Path at("value", i++);
      Mop mop;
      simdjson::dom::array a;
      simdjson::dom::object o;
      if (m.get_array().get(a) == simdjson::SUCCESS) {
        RETURN_IF_ERROR(TupleMop(a, at, mop));
      } else if (m.get_object().get(o) == simdjson::SUCCESS) {
        RETURN_IF_ERROR(ObjectMop(o, at, mop));
      } else {
        return Error(fmt::format("{}: expected a mop (an array or an object)", at.str()));
      }
      if (mop.kind == 'w' || mop.kind == 'i' || (mop.kind == 'd' && mop.succ)) {
        if (mop.value == 0) {
          return Error(
              fmt::format("{}: writes 0, the value ViperBench reserves for null", at.str()));
        }
      }
      mops_.push_back(std::move(mop));
    }
    if (initial) return Initial();
    if (final && final_at_.empty()) {
      final_at_ = Where();
    } else if (final) {
      return Error(fmt::format("a second final-state transaction (the first is at {})", final_at_));
    }

    history::TxnHeader header{.id = id, .session = stem_, .source_offset = line_no_};
    if (stamps[0]) header.real_time = {{.invoke = *stamps[0], .complete = *stamps[3]}};
    if (absl::Status s = builder_.BeginTxn(header); !s.ok())
      return Error(common::StdView(s.message()));
    if (stamps[1] || stamps[2]) builder_.Note(kMidTimestamps, Where());
    if (final) builder_.Note(kFinal, Where());
    tombstones_.clear();
    writes_.clear();
    for (size_t m = 0; m < mops_.size(); ++m) {
      const Mop& mop = mops_[m];
      const KeyId key = mop.kind == 'g' ? KeyId() : Intern(mop.key);
      switch (mop.kind) {
        case 'r':
          builder_.Read(key, ValueOf(mop.value));
          break;
        case 'w':
          if (!mop.succ) {
            builder_.Note(kIneffective, fmt::format("{}: value[{}]", Where(), m));
            break;
          }
          builder_.Write(key, Value::Int(mop.value));
          writes_.push_back({key, Value::Int(mop.value)});
          break;
        case 'i':
        case 'd':
          builder_.Read(key, ValueOf(mop.read_value));
          if (mop.is_dead && mop.read_value != 0) {
            tombstones_.push_back({key, Value::Int(mop.read_value)});
          }
          if (!mop.succ) {
            builder_.Note(kIneffective, fmt::format("{}: value[{}]", Where(), m));
            break;
          }
          builder_.Write(key, Value::Int(mop.value));
          writes_.push_back({key, Value::Int(mop.value)});
          if (mop.kind == 'd') tombstones_.push_back({key, Value::Int(mop.value)});
          break;
        case 'g': {
          const KeyBound low = mop.low ? KeyBound::At(Intern(*mop.low)) : KeyBound::Unbounded();
          const KeyBound high = mop.high ? KeyBound::At(Intern(*mop.high)) : KeyBound::Unbounded();
          live_.clear();
          dead_.clear();
          for (const RawRecord& r : mop.live) live_.push_back({Intern(r.key), ValueOf(r.value)});
          for (const RawRecord& r : mop.dead) {
            dead_.push_back({Intern(r.key), ValueOf(r.value)});
            if (r.value != 0) tombstones_.push_back(dead_.back());
          }
          builder_.RangeRead(low, high, live_, dead_);
          break;
        }
      }
    }
    builder_.EndTxn();
    for (const KeyValue& kv : tombstones_) builder_.MarkTombstone(kv.key, kv.value);
    for (const KeyValue& kv : writes_) {
      if (!written_.insert(kv).second) builder_.Note(kDuplicateWrites, Where());
    }
    return absl::OkStatus();
  }

  // The initial state: successful writes, and unbounded ranges whose records become values.
  absl::Status Initial() {
    if (!initial_at_.empty()) {
      return Error(fmt::format("a second initial transaction (the first is at {})", initial_at_));
    }
    std::vector<std::pair<KeyId, Value>> values;
    std::vector<RawKey> raw;  // values[i]'s key as written, for errors
    std::vector<KeyValue> tombstones;
    auto add = [&](const RawKey& key, Value v) {
      values.emplace_back(Intern(key), v);
      raw.push_back(key);
    };
    for (size_t m = 0; m < mops_.size(); ++m) {
      const Mop& mop = mops_[m];
      if (mop.kind == 'w' && !mop.succ) {
        builder_.Note(kIneffective, fmt::format("{}: value[{}]", Where(), m));
      } else if (mop.kind == 'w') {
        add(mop.key, Value::Int(mop.value));
      } else if (mop.kind == 'g' && !mop.low && !mop.high) {
        for (const RawRecord& r : mop.live) add(r.key, ValueOf(r.value));
        for (const RawRecord& r : mop.dead) {
          add(r.key, ValueOf(r.value));
          if (r.value != 0) tombstones.push_back({values.back().first, values.back().second});
        }
      } else {
        return Error(fmt::format(
            "value[{}]: the initial transaction may hold only writes and unbounded ranges", m));
      }
    }
    absl::flat_hash_set<KeyId> seen;
    for (size_t v = 0; v < values.size(); ++v) {
      if (!seen.insert(values[v].first).second) {
        return Error(fmt::format("the initial transaction sets key {} twice",
                                 raw[v].is_string ? fmt::format("\"{}\"", raw[v].text)
                                                  : fmt::format("{}", raw[v].number)));
      }
    }
    initial_ = std::move(values);
    initial_tombstones_ = std::move(tombstones);
    initial_at_ = Where();
    initial_here_ = true;
    return absl::OkStatus();
  }

  const ReadOptions& options_;
  std::string source_;
  HistoryBuilder builder_;
  simdjson::dom::parser parser_;
  std::string file_;
  std::string stem_;
  uint64_t line_no_ = 0;
  size_t file_txns_ = 0;
  bool initial_here_ = false;
  std::optional<bool> key_kind_;  // true: string keys
  std::string first_key_at_;
  std::string initial_at_;
  std::string final_at_;
  bool init_found_ = false;
  std::vector<std::pair<KeyId, Value>> initial_;
  std::vector<KeyValue> initial_tombstones_;
  std::vector<Mop> mops_;
  std::vector<KeyValue> live_, dead_, tombstones_, writes_;
  absl::flat_hash_set<KeyValue> written_;
};

}  // namespace

namespace {

// Reads each line of `in`, a file's contents held in memory.
absl::Status ReadLines(Reader& reader, std::string_view data) {
  uint64_t line_no = 0;
  while (!data.empty()) {
    const size_t end = data.find('\n');
    const std::string_view line = data.substr(0, end);
    RETURN_IF_ERROR(reader.Line(line, ++line_no));
    if (end == std::string_view::npos) break;
    data.remove_prefix(end + 1);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<history::History> ReadViperFiles(const ViperFiles& files, const ReadOptions& options,
                                                std::string_view source) {
  if (!options.dialect.empty() && options.dialect != "viper") {
    return absl::InvalidArgumentError(fmt::format(
        "{}: unknown ViperBench dialect \"{}\" (expected \"viper\")", source, options.dialect));
  }
  Reader reader(options, source);
  std::vector<const std::pair<std::string, std::string>*> selected;
  for (const auto& file : files) {
    if (internal::IsViperLogName(file.first)) {
      selected.push_back(&file);
    } else {
      reader.NoteFile(file.first, internal::IsJepLogName(file.first));
    }
  }
  std::sort(selected.begin(), selected.end(), [](const auto* a, const auto* b) {
    return internal::ViperNameLess(a->first, b->first);
  });
  for (size_t i = 1; i < selected.size(); ++i) {
    if (selected[i]->first == selected[i - 1]->first) {
      return absl::InvalidArgumentError(
          fmt::format("{}: two files named {}", source, selected[i]->first));
    }
  }
  if (selected.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: no J<digits>.log file", source));
  }
  for (const auto* file : selected) {
    reader.BeginFile(file->first);
    RETURN_IF_ERROR(ReadLines(reader, file->second));
    RETURN_IF_ERROR(reader.EndFile());
  }
  return std::move(reader).Finish();
}

absl::StatusOr<history::History> ReadViperDir(const std::string& dir, const ReadOptions& options) {
  if (!options.dialect.empty() && options.dialect != "viper") {
    return absl::InvalidArgumentError(fmt::format(
        "{}: unknown ViperBench dialect \"{}\" (expected \"viper\")", dir, options.dialect));
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(fmt::format("{}: not a directory", dir));
  }
  Reader reader(options, dir);
  std::vector<std::string> selected;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (internal::IsViperLogName(name) && entry.is_regular_file(ec)) {
      selected.push_back(name);
    } else {
      reader.NoteFile(name, internal::IsJepLogName(name));
    }
  }
  if (ec) return absl::NotFoundError(fmt::format("{}: cannot list: {}", dir, ec.message()));
  if (selected.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: no J<digits>.log file", dir));
  }
  std::sort(selected.begin(), selected.end(), internal::ViperNameLess);
  std::string line;
  for (const std::string& name : selected) {
    std::ifstream in(std::filesystem::path(dir) / name, std::ios::binary);
    if (!in) return absl::NotFoundError(fmt::format("{}/{}: cannot open", dir, name));
    reader.BeginFile(name);
    uint64_t line_no = 0;
    while (std::getline(in, line)) RETURN_IF_ERROR(reader.Line(line, ++line_no));
    if (in.bad()) return absl::DataLossError(fmt::format("{}/{}: read failed", dir, name));
    RETURN_IF_ERROR(reader.EndFile());
  }
  return std::move(reader).Finish();
}

namespace {

// Whether `head`, the first bytes of a J<n>.log, starts a ViperBench line: '{' first, and the
// member "value" holding an array (unless the first line is longer than the head). Empty: blank.
std::optional<absl::Status> SniffHead(std::string_view name, std::string_view head, bool full) {
  if (head.starts_with("\xEF\xBB\xBF")) head.remove_prefix(3);
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return std::nullopt;  // blank so far: says nothing
  if (head[first] != '{') {
    return absl::InvalidArgumentError(
        fmt::format("{} does not start with '{{' (ViperBench lines are JSON objects)", name));
  }
  const std::string_view line = head.substr(first, head.find('\n', first) - first);
  for (size_t at = line.find("\"value\""); at != std::string_view::npos;
       at = line.find("\"value\"", at + 1)) {
    size_t i = line.find_first_not_of(" \t\r", at + 7);
    if (i == std::string_view::npos || line[i] != ':') continue;
    i = line.find_first_not_of(" \t\r", i + 1);
    if (i != std::string_view::npos && line[i] == '[') return absl::OkStatus();
  }
  if (full && line.size() == head.size() - first) return absl::OkStatus();  // cut short
  return absl::InvalidArgumentError(
      fmt::format("{}'s first line has no \"value\": [...] (ViperBench's mops)", name));
}

}  // namespace

absl::Status SniffViperDir(std::string_view dir_view) {
  const std::filesystem::path dir(dir_view);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::InvalidArgumentError("not a directory (ViperBench is a directory of J<n>.log)");
  }
  bool any = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!internal::IsViperLogName(name) || !entry.is_regular_file(ec)) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    char head[4096];
    in.read(head, sizeof head);
    const auto size = static_cast<size_t>(in.gcount());
    std::optional<absl::Status> fits =
        SniffHead(name, std::string_view(head, size), size == sizeof head);
    if (!fits) continue;
    RETURN_IF_ERROR(*fits);
    any = true;
  }
  if (ec) return absl::NotFoundError(fmt::format("cannot list the directory: {}", ec.message()));
  if (!any) return absl::InvalidArgumentError("no J<digits>.log file starting with '{'");
  return absl::OkStatus();
}

}  // namespace isowatch::formats
