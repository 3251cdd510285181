// SPDX-License-Identifier: Apache-2.0
// Reader of Jepsen/Elle EDN histories (see edn.h and docs/history-format.md, "Jepsen / Elle
// EDN").
//
// internal::EdnParser hands out one operation map at a time as a small vector of nodes; this file
// picks the fields an operation needs out of it (comparing keyword bytes, without allocating),
// reads its micro-ops into an internal::ElleOps, and hands it to internal::ElleAssembler, which
// pairs invocations and completions into transactions (shared with the elle-cli JSON reader).
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/edn.h"
#include "isowatch/formats/internal/chunked_json_array.h"
#include "isowatch/formats/internal/edn_internal.h"
#include "isowatch/formats/internal/edn_parser.h"
#include "isowatch/formats/internal/edn_usual_op.h"
#include "isowatch/formats/internal/elle_history.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::formats {
namespace {

using internal::EdnKind;
using internal::EdnNode;
using internal::EdnParser;
using internal::ElleMicroOp;
using internal::ElleOp;
using internal::ElleOps;
using internal::ElleScalar;
using internal::ElleType;

// Reads the fields of operation maps into ElleOps.
class EdnOpReader {
 public:
  explicit EdnOpReader(const EdnParser& parser) : parser_(parser), nodes_(parser.nodes()) {}

  // Reads the current form's header fields into `op` (its micro-ops are left empty).
  absl::Status ReadHeader(ElleOp* op);
  // Reads the :value of the current form into op->ops.
  absl::Status ReadValue(ElleOp* op);

 private:
  absl::Status Error(const EdnNode& node, std::string_view message) const {
    return parser_.ErrorAt(node.offset, message);
  }
  absl::StatusOr<int64_t> Int(const EdnNode& node, std::string_view what) const;
  absl::StatusOr<std::optional<int64_t>> OptionalInt(const EdnNode& node,
                                                     std::string_view what) const;
  absl::Status Scalar(const EdnNode& node, std::string_view what, bool allow_keyword, ElleOps* ops,
                      ElleScalar* out) const;
  absl::Status MicroOp(uint32_t i, ElleOps* ops) const;

  const EdnParser& parser_;
  const std::vector<EdnNode>& nodes_;
  uint32_t value_ = 0;  // node of :value, 0 = none
};

absl::StatusOr<int64_t> EdnOpReader::Int(const EdnNode& node, std::string_view what) const {
  if (node.kind == EdnKind::kInt) return node.int_value;
  if (node.kind == EdnKind::kBigInt) {
    return Error(node, fmt::format("{} {} does not fit in 64 bits", what, node.text));
  }
  return Error(
      node, fmt::format("{} must be an integer, not a {}", what, internal::EdnKindName(node.kind)));
}

absl::StatusOr<std::optional<int64_t>> EdnOpReader::OptionalInt(const EdnNode& node,
                                                                std::string_view what) const {
  if (node.kind == EdnKind::kNil) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t v, Int(node, what));
  return std::optional<int64_t>(v);
}

absl::Status EdnOpReader::ReadHeader(ElleOp* op) {
  uint32_t map = 0;
  if (nodes_[0].kind == EdnKind::kTagged && nodes_.size() > 1 && nodes_[1].kind == EdnKind::kMap &&
      nodes_[0].text.find('.') != std::string_view::npos) {
    map = 1;  // a record literal, #jepsen.history.Op{...}
  } else if (nodes_[0].kind != EdnKind::kMap) {
    return Error(nodes_[0], fmt::format("expected an operation map, found a {}",
                                        internal::EdnKindName(nodes_[0].kind)));
  }
  op->ClearFields();
  value_ = 0;
  bool has_type = false;
  for (uint32_t k = map + 1; k < nodes_[map].end;) {
    const uint32_t v = nodes_[k].end;
    const uint32_t next = nodes_[v].end;
    const EdnNode& key = nodes_[k];
    const EdnNode& val = nodes_[v];
    if (key.kind == EdnKind::kKeyword) {
      const std::string_view name = key.text;
      if (name == ":type") {
        if (val.kind != EdnKind::kKeyword) {
          return Error(val, ":type must be :invoke, :ok, :fail or :info");
        }
        const std::optional<ElleType> type = internal::ElleTypeNamed(val.text.substr(1));
        if (!type) {
          return Error(val,
                       fmt::format(":type must be :invoke, :ok, :fail or :info, not {}", val.text));
        }
        op->type = *type;
        has_type = true;
      } else if (name == ":process") {
        if (val.kind == EdnKind::kInt) {
          op->process_kind = ElleOp::Process::kInt;
          op->process = val.int_value;
        } else if (val.kind == EdnKind::kBigInt) {
          return Error(val, fmt::format(":process {} does not fit in 64 bits", val.text));
        } else if (val.kind != EdnKind::kNil) {
          op->process_kind = ElleOp::Process::kOther;
        }
      } else if (name == ":f") {
        if (val.kind == EdnKind::kKeyword && val.text == ":txn") {
          op->f = ElleOp::F::kTxn;
        } else if (val.kind != EdnKind::kNil) {
          op->f = ElleOp::F::kOther;
          op->f_text = val.text;
        }
      } else if (name == ":value") {
        value_ = v;
      } else if (name == ":index") {
        ASSIGN_OR_RETURN(op->index, OptionalInt(val, ":index"));
      } else if (name == ":time") {
        ASSIGN_OR_RETURN(op->time, OptionalInt(val, ":time"));
      } else if (name == ":ts") {
        if (val.kind == EdnKind::kNil) {
          // No timestamps.
        } else if (val.kind != EdnKind::kMap) {
          return Error(val, ":ts must be a map {:rts R :cts C}");
        } else {
          bool has_rts = false;
          for (uint32_t tk = v + 1; tk < val.end;) {
            const uint32_t tv = nodes_[tk].end;
            if (nodes_[tk].kind == EdnKind::kKeyword && nodes_[tk].text == ":rts") {
              ASSIGN_OR_RETURN(op->rts, Int(nodes_[tv], ":rts"));
              has_rts = true;
            } else if (nodes_[tk].kind == EdnKind::kKeyword && nodes_[tk].text == ":cts") {
              ASSIGN_OR_RETURN(op->cts, OptionalInt(nodes_[tv], ":cts"));
            }
            tk = nodes_[tv].end;
          }
          if (!has_rts) return Error(val, ":ts without :rts");
          op->has_ts = true;
        }
      }
    }
    k = next;
  }
  if (!has_type) return Error(nodes_[map], "an operation map without :type");
  return absl::OkStatus();
}

absl::Status EdnOpReader::Scalar(const EdnNode& node, std::string_view what, bool allow_keyword,
                                 ElleOps* ops, ElleScalar* out) const {
  switch (node.kind) {
    case EdnKind::kInt:
      *out = ElleScalar{.type = ElleScalar::Type::kInt, .i = node.int_value};
      return absl::OkStatus();
    case EdnKind::kString:
      *out = ops->AddBytes(ElleScalar::Type::kString, node.text);
      return absl::OkStatus();
    case EdnKind::kKeyword:
      if (allow_keyword) {
        *out = ops->AddBytes(ElleScalar::Type::kKeyword, node.text);
        return absl::OkStatus();
      }
      break;
    case EdnKind::kBigInt:
      return Error(node, fmt::format("{} {} does not fit in 64 bits", what, node.text));
    default:
      break;
  }
  return Error(node,
               fmt::format("{} must be an integer{}or a string, not a {}", what,
                           allow_keyword ? ", a keyword " : " ", internal::EdnKindName(node.kind)));
}

absl::Status EdnOpReader::MicroOp(uint32_t i, ElleOps* ops) const {
  const EdnNode& m = nodes_[i];
  if ((m.kind != EdnKind::kVector && m.kind != EdnKind::kList) || m.count != 3) {
    return Error(m, "a micro-op must be a vector [f k v] of 3 elements");
  }
  const EdnNode& f = nodes_[i + 1];
  const uint32_t k = f.end;
  const uint32_t v = nodes_[k].end;
  ElleMicroOp op;
  if (f.kind == EdnKind::kKeyword && f.text == ":r") {
    op.kind = ElleMicroOp::Kind::kRead;
  } else if (f.kind == EdnKind::kKeyword && f.text == ":w") {
    op.kind = ElleMicroOp::Kind::kWrite;
  } else if (f.kind == EdnKind::kKeyword && f.text == ":append") {
    op.kind = ElleMicroOp::Kind::kAppend;
  } else {
    return Error(f, fmt::format("unknown micro-op {} (expected :r, :w or :append)",
                                f.kind == EdnKind::kKeyword || f.kind == EdnKind::kSymbol
                                    ? std::string(f.text)
                                    : std::string(internal::EdnKindName(f.kind))));
  }
  RETURN_IF_ERROR(Scalar(nodes_[k], "a key", true, ops, &op.key));
  const EdnNode& val = nodes_[v];
  if (val.kind == EdnKind::kNil) {
    if (op.kind == ElleMicroOp::Kind::kAppend) return Error(val, "an :append of nil");
  } else if (val.kind == EdnKind::kVector || val.kind == EdnKind::kList) {
    if (op.kind != ElleMicroOp::Kind::kRead) {
      return Error(val, "only a read (:r) may have a sequence as its value");
    }
    op.list = true;
    op.list_begin = static_cast<uint32_t>(ops->elements.size());
    for (uint32_t e = v + 1; e < val.end; e = nodes_[e].end) {
      ElleScalar element;
      RETURN_IF_ERROR(Scalar(nodes_[e], "a list element", false, ops, &element));
      ops->elements.push_back(element);
    }
    op.list_size = val.count;
  } else {
    RETURN_IF_ERROR(Scalar(val, "a value", false, ops, &op.value));
  }
  ops->ops.push_back(op);
  return absl::OkStatus();
}

absl::Status EdnOpReader::ReadValue(ElleOp* op) {
  if (value_ == 0) {
    const uint32_t map = nodes_[0].kind == EdnKind::kTagged ? 1 : 0;
    return Error(nodes_[map], "a transaction without :value");
  }
  const EdnNode& value = nodes_[value_];
  if (value.kind != EdnKind::kVector && value.kind != EdnKind::kList) {
    return Error(value,
                 fmt::format("a transaction's :value must be a vector of micro-ops, not a {}",
                             internal::EdnKindName(value.kind)));
  }
  for (uint32_t i = value_ + 1; i < value.end; i = nodes_[i].end) {
    RETURN_IF_ERROR(MicroOp(i, &op->ops));
  }
  return absl::OkStatus();
}

// `usual_maps`: whether operation maps of the usual shape are read by ReadUsualEdnOp (always,
// but for the tests that compare it with the general parser).
absl::StatusOr<history::History> ReadEdn(internal::ByteSource* source, std::string source_name,
                                         const ReadOptions& options, size_t chunk_size,
                                         bool usual_maps) {
  history::HistoryBuilder builder;
  builder.set_source(source_name);
  if (std::optional<uint64_t> size = source->SizeHint(); size && *size > (1 << 20)) {
    // A transaction takes two lines of some 40 bytes or more, and a micro-op (`[:r 1 nil]`)
    // appears in both: room for about as many as the file can hold, so that the history's
    // arrays are not copied while they grow (HistoryBuilder::Reserve).
    builder.Reserve(static_cast<size_t>(*size / 80), static_cast<size_t>(*size / 22));
  }
  internal::ElleAssembler assembler(&builder, options, source_name);
  EdnParser parser(source, source_name, chunk_size);
  EdnOpReader reader(parser);
  ElleOp op;
  if (usual_maps) {
    parser.set_usual_reader(
        [](void* context, std::string_view text) {
          return internal::ReadUsualEdnOp(text, static_cast<ElleOp*>(context));
        },
        &op);
  }
  while (true) {
    ASSIGN_OR_RETURN(bool more, parser.Next());
    if (!more) break;
    op.offset = parser.offset();
    op.line = parser.line();
    op.position = parser.form_count() - 1;
    op.text = parser.text();
    if (parser.usual()) {
      // Read whole by ReadUsualEdnOp: a client transaction with its micro-ops.
      RETURN_IF_ERROR(assembler.Add(op));
      continue;
    }
    if (absl::Status s = reader.ReadHeader(&op); !s.ok()) {
      if (!options.lenient) return s;
      builder.Note("malformed operations dropped", std::string(s.message()));
      continue;
    }
    if (internal::ElleAssembler::IsClientTxn(op)) {
      if (absl::Status s = reader.ReadValue(&op); !s.ok()) {
        RETURN_IF_ERROR(assembler.AddMalformed(op, s));
        continue;
      }
    }
    RETURN_IF_ERROR(assembler.Add(op));
  }
  RETURN_IF_ERROR(assembler.Finish());
  builder.set_format("edn", assembler.dialect());
  absl::StatusOr<history::History> h = std::move(builder).Finish();
  if (!h.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", source_name, std::string(h.status().message())));
  }
  return h;
}

bool IsSpace(char c) {
  return c == ' ' || c == ',' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

// Skips a byte order mark, whitespace and ';' comments from `*i`.
void SkipSpace(std::string_view s, size_t* i) {
  if (*i == 0 && s.substr(0, 3) == "\xEF\xBB\xBF") *i = 3;
  while (*i < s.size()) {
    if (IsSpace(s[*i])) {
      ++*i;
    } else if (s[*i] == ';') {
      const size_t nl = s.find('\n', *i);
      *i = nl == std::string_view::npos ? s.size() : nl + 1;
    } else {
      break;
    }
  }
}

std::string Shown(std::string_view s, size_t i) {
  if (i >= s.size()) return "the end of the data";
  const auto u = static_cast<unsigned char>(s[i]);
  if (u >= 0x21 && u < 0x7F) return fmt::format("'{}'", s[i]);
  return fmt::format("byte 0x{:02x}", u);
}

}  // namespace

namespace internal {

absl::StatusOr<history::History> ReadEdnStringChunked(std::string_view data,
                                                      const ReadOptions& options,
                                                      std::string_view source, size_t chunk_size,
                                                      bool usual_maps) {
  MemorySource memory(data);
  return ReadEdn(&memory, std::string(source), options, chunk_size, usual_maps);
}

}  // namespace internal

absl::StatusOr<history::History> ReadEdnFile(const std::string& path, const ReadOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<internal::FileSource> file, internal::FileSource::Open(path));
  return ReadEdn(file.get(), path, options, EdnParser::kDefaultChunkSize, true);
}

absl::StatusOr<history::History> ReadEdnString(std::string_view data, const ReadOptions& options,
                                               std::string_view source) {
  return internal::ReadEdnStringChunked(data, options, source, EdnParser::kDefaultChunkSize);
}

absl::Status SniffEdn(std::string_view head) {
  // The shape of the start: '{' (or '[{', '({', a record literal '#ns.Record{') and a keyword.
  size_t i = 0;
  SkipSpace(head, &i);
  if (i == head.size()) return absl::InvalidArgumentError("no EDN form (empty or only comments)");
  if (head[i] == '[' || head[i] == '(') {
    ++i;
    SkipSpace(head, &i);
  }
  if (i < head.size() && head[i] == '#' && i + 1 < head.size() && head[i + 1] != '_' &&
      head[i + 1] != '{') {
    while (i < head.size() && head[i] != '{' && !IsSpace(head[i])) ++i;
  }
  if (i < head.size() && head[i] != '{') {
    return absl::InvalidArgumentError(
        fmt::format("not an EDN operation map: starts with {}", Shown(head, i)));
  }
  if (i < head.size()) {
    ++i;
    SkipSpace(head, &i);
    if (i < head.size() && head[i] != ':' && head[i] != '}') {
      return absl::InvalidArgumentError(
          fmt::format("not an EDN operation map: its first key starts with {}, not a keyword ':'",
                      Shown(head, i)));
    }
  }
  // Then the first form, if the head holds it whole, must be an operation map with :type.
  internal::MemorySource memory(head);
  EdnParser parser(&memory, "head", head.size() + 1);
  absl::StatusOr<bool> got = parser.Next();
  if (!got.ok()) {
    if (absl::StrContains(got.status().message(), "unexpected end of input")) {
      return absl::OkStatus();  // cut off by the end of the head
    }
    return absl::InvalidArgumentError(
        fmt::format("not EDN: {}", std::string(got.status().message())));
  }
  if (!*got) return absl::InvalidArgumentError("no EDN form (empty or only comments)");
  const std::vector<EdnNode>& nodes = parser.nodes();
  const uint32_t map = nodes[0].kind == EdnKind::kTagged && nodes.size() > 1 ? 1 : 0;
  if (nodes[map].kind != EdnKind::kMap) {
    return absl::InvalidArgumentError(fmt::format("not a Jepsen history: the first form is a {}",
                                                  internal::EdnKindName(nodes[map].kind)));
  }
  for (uint32_t k = map + 1; k < nodes[map].end; k = nodes[nodes[k].end].end) {
    if (nodes[k].kind == EdnKind::kKeyword && nodes[k].text == ":type") return absl::OkStatus();
  }
  return absl::InvalidArgumentError("not a Jepsen history: the first operation map has no :type");
}

}  // namespace isowatch::formats
