// SPDX-License-Identifier: Apache-2.0
// Reader of dbcop JSON histories, old and new (see dbcop.h and docs/history-format.md, "dbcop").
//
// The document is parsed with rapidjson's SAX reader, so that no DOM of the file is built: a
// stack of frames, one per open object or array, says what each value is from where it sits
// (wrapper, params, sessions, session, transaction, events, event). A transaction's events are
// gathered until its object closes (its "committed"/"success" member may come after them).
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <rapidjson/error/en.h>
#include <rapidjson/istreamwrapper.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/dbcop.h"
#include "isowatch/formats/internal/dbcop_builder.h"

namespace isowatch::formats {
namespace {

using internal::DbcopEvent;

enum class Role : uint8_t {
  kWrapper,
  kParams,
  kSkip,
  kSessions,
  kSession,
  kTxn,
  kEvents,
  kEventObject,  // old {"write", "variable", "value", "success"} or new {"Write"/"Read": ...}
  kTagBody,      // {"variable", "version"}
  kTuple,        // ["w"/"r", variable, version]
};

struct Frame {
  Role role;
  std::string key;     // the current member's name, in an object
  uint64_t index = 0;  // elements so far, in an array
};

// A scalar JSON value.
struct Scalar {
  enum Kind : uint8_t { kNull, kBool, kInt, kBigInt, kNegative, kDouble, kString } kind;
  bool b = false;
  int64_t i = 0;
  std::string_view s;
};

template <typename Stream>
class Handler {
 public:
  Handler(internal::DbcopBuilder* b, Stream* stream, std::string source, DbcopHeader* header)
      : b_(b), stream_(stream), source_(std::move(source)), header_(header) {}

  const absl::Status& error() const { return error_; }
  bool saw_new() const { return saw_new_; }

  bool Null() { return OnScalar({.kind = Scalar::kNull}); }
  bool Bool(bool v) { return OnScalar({.kind = Scalar::kBool, .b = v}); }
  bool Int(int v) { return Int64(v); }
  bool Uint(unsigned v) { return Int64(v); }
  bool Int64(int64_t v) {
    return OnScalar({.kind = v < 0 ? Scalar::kNegative : Scalar::kInt, .i = v});
  }
  bool Uint64(uint64_t v) {
    if (v > static_cast<uint64_t>(INT64_MAX)) return OnScalar({.kind = Scalar::kBigInt});
    return Int64(static_cast<int64_t>(v));
  }
  bool Double(double) { return OnScalar({.kind = Scalar::kDouble}); }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return Fail("unexpected number"); }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    return OnScalar({.kind = Scalar::kString, .s = std::string_view(s, n)});
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    stack_.back().key.assign(s, n);
    if (stack_.back().role == Role::kEventObject) {
      const std::string& k = stack_.back().key;
      if (k == "Write" || k == "Read") {
        if (event_tagged_) return Fail("an event with two tags");
        event_tagged_ = true;
        event_.write = k == "Write";
        saw_new_ = true;
      } else if (k == "write" || k == "variable" || k == "value" || k == "success") {
        saw_old_ = true;
      } else {
        return Fail(fmt::format("unexpected member \"{}\" in an event", k));
      }
    }
    return true;
  }
  bool StartObject() { return Open(true); }
  bool EndObject(rapidjson::SizeType) { return Close(); }
  bool StartArray() { return Open(false); }
  bool EndArray(rapidjson::SizeType) { return Close(); }

  bool Finish() {
    if (!have_data_) return Fail("no \"data\" member (the sessions)");
    if (saw_old_ && saw_new_) return Fail("the file mixes old and new event forms");
    return true;
  }

 private:
  bool Fail(std::string_view what) {
    if (error_.ok()) {
      error_ = absl::InvalidArgumentError(
          fmt::format("{}: byte {}: {}", source_, stream_->Tell(), what));
    }
    return false;
  }

  std::string_view Key() const { return stack_.back().key; }

  bool OnScalar(const Scalar& v) {
    if (stack_.empty()) return Fail("expected an object or an array");
    Frame& f = stack_.back();
    ++f.index;
    switch (f.role) {
      case Role::kSkip:
        return true;
      case Role::kWrapper:
        if (Key() == "info" || Key() == "start" || Key() == "end") {
          if (v.kind != Scalar::kString) return Fail(fmt::format("\"{}\" is not a string", Key()));
          if (header_ != nullptr) {
            std::string& field = Key() == "info"    ? header_->info
                                 : Key() == "start" ? header_->start
                                                    : header_->end;
            field.assign(v.s);
          }
          return true;
        }
        if (Key() == "data") return Fail("\"data\" is not an array of sessions");
        b_->builder().Note("unknown members ignored", fmt::format("\"{}\"", Key()));
        return true;
      case Role::kParams: {
        if (v.kind != Scalar::kInt) return true;
        if (header_ == nullptr) return true;
        const uint64_t n = static_cast<uint64_t>(v.i);
        if (Key() == "id") header_->id = n;
        if (Key() == "n_node") header_->n_node = n;
        if (Key() == "n_variable") header_->n_variable = n;
        if (Key() == "n_transaction") header_->n_transaction = n;
        if (Key() == "n_event") header_->n_event = n;
        return true;
      }
      case Role::kTxn:
        if (Key() == "committed" || Key() == "success") {
          if (v.kind != Scalar::kBool) return Fail(fmt::format("\"{}\" is not a bool", Key()));
          (Key() == "committed" ? saw_new_ : saw_old_) = true;
          txn_success_ = v.b;
          return true;
        }
        if (Key() == "events") return Fail("\"events\" is not an array");
        b_->builder().Note("unknown members ignored", fmt::format("\"{}\"", Key()));
        return true;
      case Role::kEventObject:
        if (event_tagged_) return Fail("expected an object after the event's tag");
        if (Key() == "write" || Key() == "success") {
          if (v.kind != Scalar::kBool) return Fail(fmt::format("\"{}\" is not a bool", Key()));
          (Key() == "write" ? event_.write : event_.success) = v.b;
          (Key() == "write" ? have_kind_ : have_success_) = true;
          return true;
        }
        if (Key() == "variable") return Number(v, "variable", &event_.variable, false);
        return Number(v, "value", nullptr, false);
      case Role::kTagBody:
        if (Key() == "variable") return Number(v, "variable", &event_.variable, false);
        if (Key() == "version") return Number(v, "version", nullptr, !event_.write);
        return Fail(fmt::format("unexpected member \"{}\" in an event", Key()));
      case Role::kTuple:
        if (f.index == 1) {
          if (v.kind != Scalar::kString || (v.s != "w" && v.s != "r")) {
            return Fail("an event tuple starts with \"w\" or \"r\"");
          }
          event_.write = v.s == "w";
          have_kind_ = true;
          return true;
        }
        if (f.index == 2) return Number(v, "variable", &event_.variable, false);
        if (f.index == 3) return Number(v, "version", nullptr, !event_.write);
        return Fail("an event tuple has three elements");
      default:
        return Fail("unexpected value");
    }
  }

  // A variable (into `out`) or a value/version (into event_.value); null allowed when `nullable`.
  bool Number(const Scalar& v, std::string_view what, int64_t* out, bool nullable) {
    if (v.kind == Scalar::kNull && nullable) {
      event_.value.reset();
      have_value_ = true;
      return true;
    }
    if (v.kind == Scalar::kBigInt) {
      return Fail(fmt::format("{} overflows a signed 64-bit integer", what));
    }
    if (v.kind == Scalar::kNegative) return Fail(fmt::format("negative {}", what));
    if (v.kind != Scalar::kInt) {
      return Fail(
          fmt::format("{} is not a non-negative integer{}", what, nullable ? " or null" : ""));
    }
    if (out != nullptr) {
      *out = v.i;
      have_variable_ = true;
    } else {
      event_.value = v.i;
      have_value_ = true;
    }
    return true;
  }

  bool Open(bool object) {
    Role role = Role::kSkip;
    if (stack_.empty()) {
      if (object) {
        role = Role::kWrapper;
      } else {
        role = Role::kSessions;
        have_data_ = true;
      }
    } else {
      Frame& f = stack_.back();
      ++f.index;
      switch (f.role) {
        case Role::kSkip:
          break;
        case Role::kWrapper:
          if (Key() == "data") {
            if (object) return Fail("\"data\" is not an array of sessions");
            role = Role::kSessions;
            have_data_ = true;
          } else if (Key() == "params" && object) {
            role = Role::kParams;
          } else {
            b_->builder().Note("unknown members ignored", fmt::format("\"{}\"", Key()));
          }
          break;
        case Role::kParams:
          break;
        case Role::kSessions:
          if (object) return Fail("expected a session (an array of transactions)");
          role = Role::kSession;
          b_->StartSession();
          if (header_ != nullptr) ++header_->sessions;
          session_at_ = stream_->Tell();
          txns_in_session_ = 0;
          break;
        case Role::kSession:
          if (!object) return Fail("expected a transaction (an object)");
          role = Role::kTxn;
          events_.clear();
          txn_success_ = true;
          txn_at_ = stream_->Tell();
          break;
        case Role::kTxn:
          if (Key() == "events" && !object) {
            role = Role::kEvents;
          } else if (Key() == "events") {
            return Fail("\"events\" is not an array");
          } else {
            b_->builder().Note("unknown members ignored", fmt::format("\"{}\"", Key()));
          }
          break;
        case Role::kEvents:
          role = object ? Role::kEventObject : Role::kTuple;
          event_ = DbcopEvent();
          event_tagged_ = have_kind_ = have_success_ = have_variable_ = have_value_ = false;
          if (!object) saw_new_ = true;
          break;
        case Role::kEventObject:
          if (!event_tagged_ || !object) return Fail("unexpected container in an event");
          role = Role::kTagBody;
          break;
        default:
          return Fail("unexpected container");
      }
    }
    stack_.push_back({.role = role});
    return true;
  }

  bool Close() {
    const Role role = stack_.back().role;
    stack_.pop_back();
    switch (role) {
      case Role::kSession:
        b_->EndSession(session_at_);
        return true;
      case Role::kTxn: {
        absl::Status s = b_->AddTxn(events_, txn_success_, txn_at_);
        if (!s.ok()) return Fail(std::string(s.message()));
        ++txns_in_session_;
        return true;
      }
      case Role::kEventObject:
      case Role::kTuple:
        if (!(have_kind_ || event_tagged_) || !have_variable_ || !have_value_) {
          return Fail("incomplete event (needs its kind, variable and value)");
        }
        if (event_.write && !event_.value) return Fail("a write of null");
        events_.push_back(event_);
        return true;
      default:
        return true;
    }
  }

  internal::DbcopBuilder* b_;
  Stream* stream_;
  std::string source_;
  DbcopHeader* header_;
  absl::Status error_;
  std::vector<Frame> stack_;
  bool have_data_ = false;
  bool saw_old_ = false;
  bool saw_new_ = false;
  uint64_t session_at_ = 0;
  uint64_t txns_in_session_ = 0;
  uint64_t txn_at_ = 0;
  bool txn_success_ = true;
  std::vector<DbcopEvent> events_;
  DbcopEvent event_;
  bool event_tagged_ = false;
  bool have_kind_ = false;
  bool have_success_ = false;
  bool have_variable_ = false;
  bool have_value_ = false;
};

template <typename Stream>
absl::StatusOr<history::History> ReadJson(Stream& stream, const ReadOptions& options,
                                          std::string_view source, DbcopHeader* header) {
  internal::DbcopBuilder b(options, std::string(source), "dbcop-json", "");
  DbcopHeader seen;
  Handler<Stream> handler(&b, &stream, std::string(source), &seen);
  rapidjson::Reader reader;
  rapidjson::ParseResult ok =
      reader.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseStopWhenDoneFlag>(stream,
                                                                                       handler);
  if (!handler.error().ok()) return handler.error();
  if (!ok) {
    return absl::InvalidArgumentError(fmt::format("{}: byte {}: {}", source, ok.Offset(),
                                                  rapidjson::GetParseError_En(ok.Code())));
  }
  // Only whitespace may follow the document.
  while (stream.Peek() != '\0') {
    const char c = stream.Peek();
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
      return absl::InvalidArgumentError(
          fmt::format("{}: byte {}: text after the document", source, stream.Tell()));
    }
    stream.Take();
  }
  if (!handler.Finish()) return handler.error();
  b.set_dialect(handler.saw_new() ? "new" : "old");
  if (header != nullptr) *header = std::move(seen);
  return std::move(b).Finish();
}

}  // namespace

absl::StatusOr<history::History> ReadDbcopJsonString(std::string_view data,
                                                     const ReadOptions& options,
                                                     std::string_view source, DbcopHeader* header) {
  if (data.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        fmt::format("{}: byte {}: NUL byte in JSON", source, data.find('\0')));
  }
  rapidjson::MemoryStream stream(data.data(), data.size());
  return ReadJson(stream, options, source, header);
}

absl::StatusOr<history::History> ReadDbcopJsonFile(const std::string& path,
                                                   const ReadOptions& options,
                                                   DbcopHeader* header) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open", path));
  rapidjson::IStreamWrapper stream(in);
  return ReadJson(stream, options, path, header);
}

absl::Status SniffDbcopJson(std::string_view head) {
  size_t i = head.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  auto skip = [&] {
    while (i < head.size() &&
           (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) {
      ++i;
    }
  };
  skip();
  if (i == head.size()) return absl::InvalidArgumentError("not dbcop JSON: empty");
  if (head[i] == '{') {
    if (head.find("\"data\"", i) == std::string_view::npos) {
      return absl::InvalidArgumentError("not dbcop JSON: an object without a \"data\" member");
    }
    return absl::OkStatus();
  }
  if (head[i] != '[') return absl::InvalidArgumentError("not dbcop JSON: not an object or array");
  ++i;
  skip();
  if (i < head.size() && head[i] == '[') return absl::OkStatus();
  return absl::InvalidArgumentError(
      "not dbcop JSON: an array whose first element is not a session (an array)");
}

}  // namespace isowatch::formats
