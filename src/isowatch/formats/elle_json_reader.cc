// SPDX-License-Identifier: Apache-2.0
// Reader of elle-cli JSON histories (see edn.h and docs/history-format.md, "elle-cli JSON").
//
// The document is either one JSON array of operation objects, split into elements by
// internal::ChunkedJsonArray, or one object per line. Each operation is parsed on its own with
// simdjson's DOM parser (one operation's DOM, never the file's) into an internal::ElleOp and
// handed to the internal::ElleAssembler the EDN reader uses too.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <simdjson.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/edn.h"
#include "isowatch/formats/internal/chunked_json_array.h"
#include "isowatch/formats/internal/elle_history.h"
#include "isowatch/formats/internal/elle_json_internal.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::formats {
namespace {

namespace dom = simdjson::dom;
using internal::ElleMicroOp;
using internal::ElleOp;
using internal::ElleOps;
using internal::ElleScalar;
using internal::ElleType;

// Drops a leading ':' (elle-cli's keywords may be written either way).
std::string_view Keyword(std::string_view s) { return !s.empty() && s[0] == ':' ? s.substr(1) : s; }

const char* TypeName(dom::element_type t) {
  switch (t) {
    case dom::element_type::ARRAY:
      return "an array";
    case dom::element_type::OBJECT:
      return "an object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
      return "an integer";
    case dom::element_type::DOUBLE:
      return "a number with a fraction or exponent";
    case dom::element_type::STRING:
      return "a string";
    case dom::element_type::BOOL:
      return "a boolean";
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  return "a value";
}

// Reads one operation object. Errors are plain messages; the caller adds the position.
class JsonOpReader {
 public:
  absl::Status ReadHeader(dom::element e, ElleOp* op);
  absl::Status ReadValue(ElleOp* op);

 private:
  static absl::Status Error(const std::string& message) {
    return absl::InvalidArgumentError(message);
  }
  static absl::StatusOr<std::optional<int64_t>> OptionalInt(dom::element e, std::string_view what);
  static absl::Status Scalar(dom::element e, std::string_view what, ElleOps* ops, ElleScalar* out);

  dom::element value_;
  bool has_value_ = false;
};

absl::StatusOr<std::optional<int64_t>> JsonOpReader::OptionalInt(dom::element e,
                                                                 std::string_view what) {
  if (e.is_null()) return std::optional<int64_t>();
  if (e.is_int64()) return std::optional<int64_t>(int64_t(e.get_int64().value_unsafe()));
  if (e.is_uint64()) return Error(fmt::format("{} does not fit in 64 bits", what));
  return Error(fmt::format("{} must be an integer, not {}", what, TypeName(e.type())));
}

absl::Status JsonOpReader::ReadHeader(dom::element e, ElleOp* op) {
  dom::object obj;
  if (e.get_object().get(obj)) {
    return Error(fmt::format("expected an operation object, found {}", TypeName(e.type())));
  }
  op->ClearFields();
  has_value_ = false;
  bool has_type = false;
  for (dom::key_value_pair field : obj) {
    const std::string_view name = field.key;
    dom::element v = field.value;
    if (name == "type") {
      std::string_view t;
      if (v.get_string().get(t)) return Error("\"type\" must be a string");
      const std::optional<ElleType> type = internal::ElleTypeNamed(Keyword(t));
      if (!type) {
        return Error(fmt::format("\"type\" must be invoke, ok, fail or info, not \"{}\"", t));
      }
      op->type = *type;
      has_type = true;
    } else if (name == "process") {
      if (v.is_int64()) {
        op->process_kind = ElleOp::Process::kInt;
        op->process = v.get_int64().value_unsafe();
      } else if (v.is_uint64()) {
        return Error("\"process\" does not fit in 64 bits");
      } else if (!v.is_null()) {
        op->process_kind = ElleOp::Process::kOther;
      }
    } else if (name == "f") {
      std::string_view f;
      if (!v.get_string().get(f) && Keyword(f) == "txn") {
        op->f = ElleOp::F::kTxn;
      } else if (!v.is_null()) {
        op->f = ElleOp::F::kOther;
      }
    } else if (name == "value") {
      value_ = v;
      has_value_ = true;
    } else if (name == "index") {
      ASSIGN_OR_RETURN(op->index, OptionalInt(v, "\"index\""));
    } else if (name == "time") {
      ASSIGN_OR_RETURN(op->time, OptionalInt(v, "\"time\""));
    } else if (name == "ts") {
      if (v.is_null()) continue;
      dom::object ts;
      if (v.get_object().get(ts)) return Error("\"ts\" must be an object {\"rts\", \"cts\"}");
      bool has_rts = false;
      for (dom::key_value_pair t : ts) {
        if (t.key == "rts") {
          ASSIGN_OR_RETURN(std::optional<int64_t> rts, OptionalInt(t.value, "\"rts\""));
          if (!rts) return Error("\"rts\" must be an integer, not null");
          op->rts = *rts;
          has_rts = true;
        } else if (t.key == "cts") {
          ASSIGN_OR_RETURN(op->cts, OptionalInt(t.value, "\"cts\""));
        }
      }
      if (!has_rts) return Error("\"ts\" without \"rts\"");
      op->has_ts = true;
    }
  }
  if (!has_type) return Error("an operation without \"type\"");
  return absl::OkStatus();
}

absl::Status JsonOpReader::Scalar(dom::element e, std::string_view what, ElleOps* ops,
                                  ElleScalar* out) {
  if (e.is_int64()) {
    *out = ElleScalar{.type = ElleScalar::Type::kInt, .i = e.get_int64().value_unsafe()};
    return absl::OkStatus();
  }
  if (e.is_uint64()) return Error(fmt::format("{} does not fit in 64 bits", what));
  std::string_view s;
  if (!e.get_string().get(s)) {
    *out = ops->AddBytes(ElleScalar::Type::kString, s);
    return absl::OkStatus();
  }
  return Error(fmt::format("{} must be an integer or a string, not {}", what, TypeName(e.type())));
}

absl::Status JsonOpReader::ReadValue(ElleOp* op) {
  if (!has_value_) return Error("a transaction without \"value\"");
  dom::array micro_ops;
  if (value_.get_array().get(micro_ops)) {
    return Error(fmt::format("a transaction's \"value\" must be an array of micro-ops, not {}",
                             TypeName(value_.type())));
  }
  ElleOps& ops = op->ops;
  for (dom::element m : micro_ops) {
    dom::array parts;
    if (m.get_array().get(parts) || parts.size() != 3) {
      return Error("a micro-op must be an array [f, k, v] of 3 elements");
    }
    dom::element f = parts.at(0).value_unsafe();
    dom::element k = parts.at(1).value_unsafe();
    dom::element v = parts.at(2).value_unsafe();
    std::string_view name;
    if (f.get_string().get(name)) {
      return Error(fmt::format("a micro-op's name must be a string, not {}", TypeName(f.type())));
    }
    ElleMicroOp micro;
    const std::string_view kw = Keyword(name);
    if (kw == "r") {
      micro.kind = ElleMicroOp::Kind::kRead;
    } else if (kw == "w") {
      micro.kind = ElleMicroOp::Kind::kWrite;
    } else if (kw == "append") {
      micro.kind = ElleMicroOp::Kind::kAppend;
    } else {
      return Error(fmt::format("unknown micro-op \"{}\" (expected r, w or append)", name));
    }
    RETURN_IF_ERROR(Scalar(k, "a key", &ops, &micro.key));
    dom::array list;
    if (v.is_null()) {
      if (micro.kind == ElleMicroOp::Kind::kAppend) return Error("an append of null");
    } else if (!v.get_array().get(list)) {
      if (micro.kind != ElleMicroOp::Kind::kRead) {
        return Error("only a read (r) may have an array as its value");
      }
      micro.list = true;
      micro.list_begin = static_cast<uint32_t>(ops.elements.size());
      for (dom::element x : list) {
        ElleScalar element;
        RETURN_IF_ERROR(Scalar(x, "a list element", &ops, &element));
        ops.elements.push_back(element);
      }
      micro.list_size = static_cast<uint32_t>(ops.elements.size()) - micro.list_begin;
    } else {
      RETURN_IF_ERROR(Scalar(v, "a value", &ops, &micro.value));
    }
    ops.ops.push_back(micro);
  }
  return absl::OkStatus();
}

// Turns one parsed element into an operation for the assembler.
class ElleJsonReader {
 public:
  ElleJsonReader(history::HistoryBuilder* builder, const ReadOptions& options,
                 std::string source_name)
      : builder_(builder),
        options_(options),
        source_name_(source_name),
        assembler_(builder, options, std::move(source_name)) {}

  // `data` has SIMDJSON_PADDING readable bytes after `size`, at `line` and `column` (1-based).
  absl::Status Take(const char* data, size_t size, uint64_t line, uint64_t column, uint64_t offset);
  internal::ElleAssembler& assembler() { return assembler_; }

 private:
  // `s` at the op being read, at `line` and `column`.
  absl::Status At(uint64_t line, uint64_t column, const absl::Status& s) const {
    return absl::InvalidArgumentError(fmt::format("{}:{}:{}: op #{}: {}", source_name_, line,
                                                  column, position_, std::string(s.message())));
  }

  history::HistoryBuilder* builder_;
  const ReadOptions& options_;
  std::string source_name_;
  internal::ElleAssembler assembler_;
  dom::parser parser_;
  JsonOpReader reader_;
  ElleOp op_;
  uint64_t position_ = 0;
};

absl::Status ElleJsonReader::Take(const char* data, size_t size, uint64_t line, uint64_t column,
                                  uint64_t offset) {
  dom::element e;
  if (auto error = parser_.parse(data, size, false).get(e)) {
    ++position_;
    return absl::InvalidArgumentError(fmt::format("{}:{}:{}: op #{}: not valid JSON: {}",
                                                  source_name_, line, column, position_ - 1,
                                                  simdjson::error_message(error)));
  }
  op_.offset = offset;
  op_.line = line;
  op_.position = position_;
  op_.text = std::string_view(data, size);
  absl::Status header = reader_.ReadHeader(e, &op_);
  if (!header.ok()) {
    absl::Status s = At(line, column, header);
    ++position_;
    if (!options_.lenient) return s;
    builder_->Note("malformed operations dropped", std::string(s.message()));
    return absl::OkStatus();
  }
  if (internal::ElleAssembler::IsClientTxn(op_)) {
    if (absl::Status s = reader_.ReadValue(&op_); !s.ok()) {
      const absl::Status positioned = At(line, column, s);
      ++position_;
      return assembler_.AddMalformed(op_, positioned);
    }
  }
  ++position_;
  return assembler_.Add(op_);
}

static_assert(internal::ChunkedJsonArray::kPadding >= simdjson::SIMDJSON_PADDING);

absl::Status ReadArray(internal::ByteSource* source, ElleJsonReader* reader,
                       const std::string& source_name) {
  internal::ChunkedJsonArray array(source, source_name, "op");
  internal::ArrayElement element;
  while (true) {
    ASSIGN_OR_RETURN(bool more, array.Next(&element));
    if (!more) return absl::OkStatus();
    const internal::ChunkedJsonArray::Position at = array.PositionOf(element.data);
    RETURN_IF_ERROR(reader->Take(element.data, element.size, at.line, at.column, element.offset));
  }
}

// JSON lines: one object per line (a trailing comma allowed), blank lines skipped.
absl::Status ReadLines(internal::ByteSource* source, ElleJsonReader* reader) {
  std::string buffer;
  std::string line;
  uint64_t line_number = 0;
  uint64_t offset = 0;
  size_t start = 0;
  bool eof = false;
  std::unique_ptr<char[]> chunk = std::make_unique_for_overwrite<char[]>(1 << 20);
  while (true) {
    size_t nl = buffer.find('\n', start);
    if (nl == std::string::npos && !eof) {
      buffer.erase(0, start);
      start = 0;
      ASSIGN_OR_RETURN(size_t got, source->Read(chunk.get(), 1 << 20));
      if (got == 0) eof = true;
      buffer.append(chunk.get(), got);
      continue;
    }
    if (nl == std::string::npos) nl = buffer.size();
    if (start >= buffer.size() && eof) return absl::OkStatus();
    ++line_number;
    std::string_view text(buffer.data() + start, nl - start);
    const uint64_t line_offset = offset;
    offset += nl - start + 1;
    start = nl + 1;
    size_t b = 0;
    if (line_number == 1 && text.substr(0, 3) == "\xEF\xBB\xBF") b = 3;
    while (b < text.size() && (text[b] == ' ' || text[b] == '\t')) ++b;
    size_t e = text.size();
    while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\r')) --e;
    if (e > b && text[e - 1] == ',') --e;
    if (e == b) continue;
    line.assign(text.substr(b, e - b));
    const size_t size = line.size();
    line.append(simdjson::SIMDJSON_PADDING, ' ');
    RETURN_IF_ERROR(reader->Take(line.data(), size, line_number, b + 1, line_offset + b));
  }
}

// The history once every op is read. `reader` builds into `builder`, which is given up.
absl::StatusOr<history::History> Finish(history::HistoryBuilder& builder, ElleJsonReader& reader,
                                        const std::string& source_name) {
  RETURN_IF_ERROR(reader.assembler().Finish());
  builder.set_format("elle-json", reader.assembler().dialect());
  absl::StatusOr<history::History> h = std::move(builder).Finish();
  if (!h.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", source_name, std::string(h.status().message())));
  }
  return h;
}

absl::StatusOr<history::History> ReadElleJson(internal::ByteSource* source,
                                              const std::string& source_name,
                                              const ReadOptions& options) {
  history::HistoryBuilder builder;
  builder.set_source(source_name);
  ElleJsonReader reader(&builder, options, source_name);
  // The first significant byte tells an array from JSON lines; it is handed back to the readers
  // through a source that replays what was looked at.
  class Replay : public internal::ByteSource {
   public:
    Replay(std::string head, internal::ByteSource* rest) : head_(std::move(head)), rest_(rest) {}
    absl::StatusOr<size_t> Read(char* dst, size_t n) override {
      if (pos_ < head_.size()) {
        const size_t k = std::min(n, head_.size() - pos_);
        std::memcpy(dst, head_.data() + pos_, k);
        pos_ += k;
        return k;
      }
      return rest_->Read(dst, n);
    }

   private:
    std::string head_;
    size_t pos_ = 0;
    internal::ByteSource* rest_;
  };
  // A mapped file is looked at in place, and read so if it is an array.
  if (std::unique_ptr<internal::MappedFile> file =
          source->Map(internal::ChunkedJsonArray::kPadding)) {
    internal::MappedSource mapped(std::move(file), internal::ChunkedJsonArray::kPadding);
    std::string_view bytes = mapped.bytes();
    if (bytes.starts_with("\xEF\xBB\xBF")) bytes.remove_prefix(3);
    const size_t at = bytes.find_first_not_of(" \n\r\t");
    if (at != std::string_view::npos && bytes[at] == '[') {
      RETURN_IF_ERROR(ReadArray(&mapped, &reader, source_name));
    } else {
      RETURN_IF_ERROR(ReadLines(&mapped, &reader));
    }
    return Finish(builder, reader, source_name);
  }
  std::string head;
  char first = 0;
  while (true) {
    char buf[4096];
    ASSIGN_OR_RETURN(size_t got, source->Read(buf, sizeof(buf)));
    if (got == 0) break;
    head.append(buf, got);
    size_t i = head.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
    while (i < head.size() &&
           (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) {
      ++i;
    }
    if (i < head.size()) {
      first = head[i];
      break;
    }
  }
  Replay replay(std::move(head), source);
  if (first == '[') {
    RETURN_IF_ERROR(ReadArray(&replay, &reader, source_name));
  } else {
    RETURN_IF_ERROR(ReadLines(&replay, &reader));
  }
  return Finish(builder, reader, source_name);
}

bool JsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

absl::StatusOr<history::History> internal::ReadElleJsonFileMapped(const std::string& path,
                                                                  const ReadOptions& options,
                                                                  FileMapping mapping) {
  ASSIGN_OR_RETURN(std::unique_ptr<FileSource> file, FileSource::Open(path, mapping));
  return ReadElleJson(file.get(), path, options);
}

absl::StatusOr<history::History> ReadElleJsonFile(const std::string& path,
                                                  const ReadOptions& options) {
  return internal::ReadElleJsonFileMapped(path, options, internal::FileMapping::kAuto);
}

absl::StatusOr<history::History> ReadElleJsonString(std::string_view data,
                                                    const ReadOptions& options,
                                                    std::string_view source) {
  internal::MemorySource memory(data);
  return ReadElleJson(&memory, std::string(source), options);
}

absl::Status SniffElleJson(std::string_view head) {
  size_t i = head.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  auto skip = [&] {
    while (i < head.size() && JsonSpace(head[i])) ++i;
  };
  skip();
  if (i == head.size()) return absl::InvalidArgumentError("empty");
  if (head[i] == '[') {
    ++i;
    skip();
    if (i < head.size() && head[i] == '[') {
      return absl::InvalidArgumentError("an array of arrays (dbcop sessions?), not of operations");
    }
  }
  if (i < head.size() && head[i] != '{') {
    return absl::InvalidArgumentError(
        fmt::format("not elle-cli JSON: expected an object, found '{}'", head[i]));
  }
  // The first object's member names, at its top level.
  ++i;
  bool type = false;
  while (true) {
    skip();
    if (i >= head.size()) break;
    if (head[i] == '}') break;
    if (head[i] != '"') {
      return absl::InvalidArgumentError("not JSON: expected a quoted member name");
    }
    const size_t name_start = ++i;
    while (i < head.size() && head[i] != '"') i += head[i] == '\\' ? 2 : 1;
    if (i >= head.size()) break;
    const std::string_view name = head.substr(name_start, i - name_start);
    ++i;
    if (name == "sts" || name == "cts" || name == "ops" || name == "tid") {
      return absl::InvalidArgumentError(
          fmt::format("a TimeKiller transaction (member \"{}\"), not an elle-cli operation", name));
    }
    if (name == "data" || name == "params") {
      return absl::InvalidArgumentError(
          fmt::format("a dbcop history (member \"{}\"), not an elle-cli operation", name));
    }
    if (name == "type") type = true;
    // Skip the value: strings and nesting, up to the ',' or '}' of this object.
    skip();
    if (i >= head.size() || head[i] != ':') {
      if (i >= head.size()) break;
      return absl::InvalidArgumentError("not JSON: expected ':' after a member name");
    }
    ++i;
    int depth = 0;
    while (i < head.size()) {
      const char c = head[i];
      if (c == '"') {
        ++i;
        while (i < head.size() && head[i] != '"') i += head[i] == '\\' ? 2 : 1;
        ++i;
        continue;
      }
      if (c == '[' || c == '{') ++depth;
      if (c == ']' || c == '}') {
        if (depth == 0) break;
        --depth;
      }
      if (c == ',' && depth == 0) {
        ++i;
        break;
      }
      ++i;
    }
    if (type) break;
  }
  if (type) return absl::OkStatus();
  return absl::InvalidArgumentError("not elle-cli JSON: the first object has no \"type\" member");
}

}  // namespace isowatch::formats
