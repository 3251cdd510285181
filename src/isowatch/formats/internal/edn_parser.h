// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the EDN reader: a streaming lexer and parser of EDN
// (https://github.com/edn-format/edn) that hands out the file's forms one at a time.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/formats/internal/chunked_json_array.h"

namespace isowatch::formats::internal {

enum class EdnKind : uint8_t {
  kNil,
  kBool,     // int_value 0 or 1
  kInt,      // int_value; `big` if written with the N suffix
  kBigInt,   // an integer outside int64 (text holds it as written)
  kFloat,    // text as written (with M, or ##Inf, ##-Inf, ##NaN)
  kRatio,    // text as written
  kString,   // text: the decoded contents
  kChar,     // text: the character, UTF-8
  kKeyword,  // text: with its leading ':'
  kSymbol,
  kMap,  // 2 * n children: key, value, key, value, ...
  kVector,
  kList,
  kSet,
  kTagged,  // text: the tag (without '#'); one child
};

const char* EdnKindName(EdnKind kind);

// One value of a form. A form is a vector of nodes in pre-order: a collection's children follow
// it, and `end` is the index just past its subtree, so the next sibling of node i is nodes[i.end].
struct EdnNode {
  EdnKind kind = EdnKind::kNil;
  bool big = false;
  uint32_t end = 0;
  uint32_t count = 0;  // children of a collection (a map counts keys and values)
  int64_t int_value = 0;
  std::string_view text;
  uint64_t offset = 0;  // byte offset of the node's first byte in the source
};

// Reads the forms of an EDN document from a ByteSource, in chunks: only the current chunk (grown
// while one form is larger) and the current form's nodes are held.
//
// The document is either a sequence of forms, each handed out by Next, or exactly one vector or
// list, whose elements Next hands out instead (then nothing but whitespace and comments may
// follow it). Whitespace includes commas; `;` (and `#!`) comments run to the end of the line;
// `#_` discards the next form; a UTF-8 byte order mark at the start is skipped. Nesting is
// limited to kMaxDepth.
//
// Errors are InvalidArgument, "source:line:column: message" (1-based; the column counts bytes).
// Not thread-safe.
class EdnParser {
 public:
  static constexpr size_t kDefaultChunkSize = size_t{4} << 20;
  static constexpr int kMaxDepth = 256;

  EdnParser(ByteSource* source, std::string source_name, size_t chunk_size = kDefaultChunkSize);
  EdnParser(const EdnParser&) = delete;
  EdnParser& operator=(const EdnParser&) = delete;

  // Parses the next form; false at the end of the document.
  absl::StatusOr<bool> Next();

  // A reader of the usual top-level map (e.g. ReadUsualEdnOp, with its context): Next offers it
  // each top-level form that starts with '{' before parsing it. If it takes the form (returns its
  // length; it must decline a form not wholly in the text it is given, which is the rest of the
  // buffer), the form has no nodes and usual() is true; otherwise the form is parsed as always.
  using UsualReader = size_t (*)(void* context, std::string_view text);
  void set_usual_reader(UsualReader reader, void* context) {
    usual_reader_ = reader;
    usual_context_ = context;
  }
  // Whether the usual reader took the current form.
  bool usual() const { return usual_; }

  // The current form (valid until the next call to Next): nodes()[0] is its root.
  const std::vector<EdnNode>& nodes() const { return nodes_; }
  // Its bytes as written.
  std::string_view text() const { return form_text_; }
  uint64_t offset() const { return form_offset_; }
  uint64_t line() const { return form_line_; }
  // Forms handed out so far, the current one included.
  uint64_t form_count() const { return form_count_; }
  // Whether the document is one top-level vector or list whose elements are the forms.
  bool wrapped() const { return wrapped_; }

  // "line:column" of a byte of the current form, given by its source offset.
  std::string LineColumn(uint64_t offset) const;
  // InvalidArgument "source:line:column: message" at a byte of the current form.
  absl::Status ErrorAt(uint64_t offset, std::string_view message) const;
  const std::string& source_name() const { return source_name_; }

 private:
  enum class State : uint8_t { kStart, kForms, kWrapped, kDone };
  enum class Result : uint8_t { kOk, kNeedMore, kError };

  // Reads more, keeping the bytes from buffer offset `keep_from` on.
  absl::Status Refill(size_t keep_from);
  // Counts the newlines before buffer offset `pos`.
  void CountLinesTo(size_t pos);
  absl::StatusOr<bool> NextOnce(Result* result);
  // Skips whitespace and comments from *p; kNeedMore if the buffer ends first (and more may
  // come).
  Result SkipSpace(size_t* p);
  // Parses one form at *p into nodes_ (a discarded form is parsed and dropped).
  Result ParseForm(size_t* p, int depth);
  Result ParseCollection(size_t* p, int depth, EdnKind kind, char close, size_t open_at);
  Result ParseString(size_t* p);
  Result ParseChar(size_t* p);
  Result ParseToken(size_t* p);
  Result ParseDispatch(size_t* p, int depth);
  // Finds the end of a token starting at `p`; kNeedMore if it may go on past the buffer.
  Result TokenEnd(size_t p, size_t* end) const;
  Result Fail(size_t pos, std::string message);
  Result NeedMoreOrFail(size_t pos, std::string_view what, size_t open_at);
  std::string LineColumnAtBuffer(size_t pos) const;
  uint64_t Absolute(size_t pos) const { return buffer_offset_ + pos; }

  ByteSource* source_;
  std::string source_name_;
  size_t chunk_size_;

  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
  size_t end_ = 0;
  size_t pos_ = 0;
  bool eof_ = false;
  uint64_t buffer_offset_ = 0;

  // Newlines before buffer offset counted_to_, and the source offset of the last (-1: none).
  size_t counted_to_ = 0;
  uint64_t lines_ = 0;
  int64_t last_newline_ = -1;

  State state_ = State::kStart;
  bool wrapped_ = false;
  char wrap_close_ = 0;
  std::string wrap_open_;  // line:column of the wrapping bracket

  UsualReader usual_reader_ = nullptr;
  void* usual_context_ = nullptr;
  bool usual_ = false;

  std::vector<EdnNode> nodes_;
  std::deque<std::string> scratch_;  // decoded strings with escapes
  size_t scratch_used_ = 0;
  std::string_view form_text_;
  uint64_t form_offset_ = 0;
  uint64_t form_line_ = 0;
  uint64_t form_count_ = 0;

  std::string error_;
  uint64_t error_offset_ = 0;
};

}  // namespace isowatch::formats::internal
