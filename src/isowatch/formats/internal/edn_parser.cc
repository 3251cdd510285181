// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/edn_parser.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"

namespace isowatch::formats::internal {
namespace {

// What each byte is to the lexer, looked up once per byte: whitespace (commas included), and
// the delimiters that end a token (whitespace and the characters that start or end another form).
constexpr uint8_t kSpace = 1;
constexpr uint8_t kDelimiter = 2;
constexpr std::array<uint8_t, 256> kByteClass = [] {
  std::array<uint8_t, 256> c{};
  for (const char s : std::string_view(" ,\n\t\r\f\v")) {
    c[static_cast<unsigned char>(s)] = kSpace | kDelimiter;
  }
  for (const char d : std::string_view("()[]{}\";\\")) {
    c[static_cast<unsigned char>(d)] = kDelimiter;
  }
  return c;
}();

bool IsSpace(char c) { return (kByteClass[static_cast<unsigned char>(c)] & kSpace) != 0; }
bool IsDelimiter(char c) { return (kByteClass[static_cast<unsigned char>(c)] & kDelimiter) != 0; }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Parses 4 hex digits; false if they are not.
bool ParseHex4(const char* p, uint32_t* out) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v |= static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      v |= static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return false;
    }
  }
  *out = v;
  return true;
}

// Printable form of a byte for messages.
std::string Describe(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x21 && u < 0x7F) return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02x}", u);
}

const char* CollectionName(EdnKind kind) {
  switch (kind) {
    case EdnKind::kMap:
      return "map";
    case EdnKind::kVector:
      return "vector";
    case EdnKind::kList:
      return "list";
    case EdnKind::kSet:
      return "set";
    default:
      return "form";
  }
}

}  // namespace

const char* EdnKindName(EdnKind kind) {
  switch (kind) {
    case EdnKind::kNil:
      return "nil";
    case EdnKind::kBool:
      return "boolean";
    case EdnKind::kInt:
      return "integer";
    case EdnKind::kBigInt:
      return "integer beyond 64 bits";
    case EdnKind::kFloat:
      return "floating-point number";
    case EdnKind::kRatio:
      return "ratio";
    case EdnKind::kString:
      return "string";
    case EdnKind::kChar:
      return "character";
    case EdnKind::kKeyword:
      return "keyword";
    case EdnKind::kSymbol:
      return "symbol";
    case EdnKind::kMap:
      return "map";
    case EdnKind::kVector:
      return "vector";
    case EdnKind::kList:
      return "list";
    case EdnKind::kSet:
      return "set";
    case EdnKind::kTagged:
      return "tagged literal";
  }
  return "value";
}

EdnParser::EdnParser(ByteSource* source, std::string source_name, size_t chunk_size)
    : source_(source),
      source_name_(std::move(source_name)),
      chunk_size_(std::max<size_t>(chunk_size, 1)) {}

absl::Status EdnParser::Refill(size_t keep_from) {
  CountLinesTo(keep_from);
  const size_t kept = end_ - keep_from;
  if (kept > 0 && keep_from > 0) std::memmove(buffer_.get(), buffer_.get() + keep_from, kept);
  buffer_offset_ += keep_from;
  counted_to_ -= keep_from;
  pos_ -= std::min(pos_, keep_from);
  end_ = kept;
  // A chunk, or less when the source says it holds less (a small document needs no 4 MiB).
  size_t chunk = chunk_size_;
  if (std::optional<uint64_t> left = source_->SizeHint(); left && *left < chunk) {
    chunk = static_cast<size_t>(*left) + 1;
  }
  if (capacity_ - end_ < chunk) {
    // Grow to hold what is kept plus a chunk (doubling, so that a huge form costs O(n)).
    size_t capacity = std::max(capacity_ * 2, end_ + chunk);
    auto buffer = std::make_unique_for_overwrite<char[]>(capacity);
    if (end_ > 0) std::memcpy(buffer.get(), buffer_.get(), end_);
    buffer_ = std::move(buffer);
    capacity_ = capacity;
  }
  ASSIGN_OR_RETURN(size_t got, source_->Read(buffer_.get() + end_, capacity_ - end_));
  if (got == 0) eof_ = true;
  end_ += got;
  return absl::OkStatus();
}

void EdnParser::CountLinesTo(size_t pos) {
  const char* base = buffer_.get();
  for (size_t i = counted_to_; i < pos;) {
    const void* nl = std::memchr(base + i, '\n', pos - i);
    if (nl == nullptr) break;
    const size_t at = static_cast<const char*>(nl) - base;
    ++lines_;
    last_newline_ = static_cast<int64_t>(Absolute(at));
    i = at + 1;
  }
  counted_to_ = std::max(counted_to_, pos);
}

std::string EdnParser::LineColumnAtBuffer(size_t pos) const {
  uint64_t lines = lines_;
  int64_t last = last_newline_;
  const char* base = buffer_.get();
  for (size_t i = counted_to_; i < pos && i < end_; ++i) {
    if (base[i] == '\n') {
      ++lines;
      last = static_cast<int64_t>(Absolute(i));
    }
  }
  const int64_t column = static_cast<int64_t>(Absolute(pos)) - last;
  return fmt::format("{}:{}", lines + 1, column);
}

std::string EdnParser::LineColumn(uint64_t offset) const {
  if (offset < buffer_offset_) return fmt::format("{}:?", form_line_);
  return LineColumnAtBuffer(static_cast<size_t>(offset - buffer_offset_));
}

absl::Status EdnParser::ErrorAt(uint64_t offset, std::string_view message) const {
  return absl::InvalidArgumentError(
      fmt::format("{}:{}: {}", source_name_, LineColumn(offset), message));
}

EdnParser::Result EdnParser::Fail(size_t pos, std::string message) {
  error_ = std::move(message);
  error_offset_ = Absolute(pos);
  return Result::kError;
}

EdnParser::Result EdnParser::NeedMoreOrFail(size_t pos, std::string_view what, size_t open_at) {
  if (!eof_) return Result::kNeedMore;
  return Fail(pos, fmt::format("unexpected end of input in the {} that starts at {}", what,
                               LineColumnAtBuffer(open_at)));
}

absl::StatusOr<bool> EdnParser::Next() {
  while (true) {
    Result result = Result::kOk;
    ASSIGN_OR_RETURN(bool got, NextOnce(&result));
    if (result == Result::kOk) return got;
    if (result == Result::kError) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: {}", source_name_, LineColumn(error_offset_), error_));
    }
    // kNeedMore: read more and parse the form again from its start.
    RETURN_IF_ERROR(Refill(pos_));
  }
}

absl::StatusOr<bool> EdnParser::NextOnce(Result* result) {
  if (buffer_ == nullptr) {
    if (eof_) return false;
    RETURN_IF_ERROR(Refill(0));
  }
  nodes_.clear();
  scratch_used_ = 0;
  size_t p = pos_;
  if (state_ == State::kStart) {
    if (p == 0 && buffer_offset_ == 0 && end_ < 3 && !eof_) {
      *result = Result::kNeedMore;
      return false;
    }
    if (buffer_offset_ == 0 && p == 0 && end_ >= 3 &&
        std::memcmp(buffer_.get(), "\xEF\xBB\xBF", 3) == 0) {
      p = 3;
      pos_ = 3;
    }
  }
  while (true) {
    *result = SkipSpace(&p);
    if (*result != Result::kOk) return false;
    if (p == end_) {
      // eof_ is set: SkipSpace would have asked for more otherwise.
      if (state_ == State::kWrapped) {
        *result = Fail(p, fmt::format("unexpected end of input in the top-level {} that starts at "
                                      "{}",
                                      wrap_close_ == ']' ? "vector" : "list", wrap_open_));
        return false;
      }
      pos_ = p;
      state_ = State::kDone;
      return false;
    }
    const char c = buffer_[p];
    if (state_ == State::kStart && (c == '[' || c == '(')) {
      CountLinesTo(p);
      wrapped_ = true;
      wrap_close_ = c == '[' ? ']' : ')';
      wrap_open_ = LineColumnAtBuffer(p);
      state_ = State::kWrapped;
      ++p;
      pos_ = p;
      continue;
    }
    if (state_ == State::kStart) state_ = State::kForms;
    if (state_ == State::kDone) {
      *result = Fail(p, fmt::format("expected the end of input after the top-level {}, found {}",
                                    wrap_close_ == ']' ? "vector" : "list", Describe(c)));
      return false;
    }
    if (state_ == State::kWrapped && c == wrap_close_) {
      state_ = State::kDone;
      ++p;
      pos_ = p;
      continue;
    }
    if (c == '#' && p + 1 < end_ && buffer_[p + 1] == '_') {
      // A discarded form at the top: parse it, drop it and go on.
      p += 2;
      *result = ParseForm(&p, 1);
      if (*result != Result::kOk) return false;
      nodes_.clear();
      scratch_used_ = 0;
      pos_ = p;
      continue;
    }
    CountLinesTo(p);
    const size_t start = p;
    usual_ = false;
    if (usual_reader_ != nullptr && c == '{') {
      const size_t n = usual_reader_(usual_context_, std::string_view(buffer_.get() + p, end_ - p));
      usual_ = n > 0;
      p += n;
    }
    if (!usual_) {
      *result = ParseForm(&p, 0);
      if (*result != Result::kOk) return false;
    }
    form_text_ = std::string_view(buffer_.get() + start, p - start);
    form_offset_ = Absolute(start);
    form_line_ = lines_ + 1;
    ++form_count_;
    pos_ = p;
    return true;
  }
}

EdnParser::Result EdnParser::SkipSpace(size_t* p) {
  const char* b = buffer_.get();
  size_t i = *p;
  while (true) {
    while (i < end_ && IsSpace(b[i])) ++i;
    if (i == end_) {
      if (!eof_) return Result::kNeedMore;
      *p = i;
      return Result::kOk;
    }
    const bool comment = b[i] == ';' || (b[i] == '#' && i + 1 < end_ && b[i + 1] == '!');
    if (!comment) {
      *p = i;
      return Result::kOk;
    }
    const void* nl = std::memchr(b + i, '\n', end_ - i);
    if (nl == nullptr) {
      if (!eof_) return Result::kNeedMore;
      *p = end_;
      return Result::kOk;
    }
    i = static_cast<const char*>(nl) - b + 1;
  }
}

EdnParser::Result EdnParser::ParseForm(size_t* p, int depth) {
  if (depth >= kMaxDepth) {
    return Fail(*p, fmt::format("forms nested deeper than {} levels", kMaxDepth));
  }
  while (true) {
    Result r = SkipSpace(p);
    if (r != Result::kOk) return r;
    if (*p == end_) return Fail(*p, "unexpected end of input: expected a form");
    const size_t at = *p;
    const char c = buffer_[at];
    switch (c) {
      case '{':
        ++*p;
        return ParseCollection(p, depth, EdnKind::kMap, '}', at);
      case '[':
        ++*p;
        return ParseCollection(p, depth, EdnKind::kVector, ']', at);
      case '(':
        ++*p;
        return ParseCollection(p, depth, EdnKind::kList, ')', at);
      case '"':
        return ParseString(p);
      case '\\':
        return ParseChar(p);
      case '#': {
        if (at + 1 == end_) return NeedMoreOrFail(at, "dispatch", at);
        if (buffer_[at + 1] == '_') {
          // Discard: parse the next form and drop its nodes.
          *p = at + 2;
          const size_t keep = nodes_.size();
          r = ParseForm(p, depth + 1);
          if (r != Result::kOk) return r;
          nodes_.resize(keep);
          continue;
        }
        return ParseDispatch(p, depth);
      }
      case ')':
      case ']':
      case '}':
        return Fail(at, fmt::format("unexpected '{}'", c));
      default:
        return ParseToken(p);
    }
  }
}

EdnParser::Result EdnParser::ParseCollection(size_t* p, int depth, EdnKind kind, char close,
                                             size_t open_at) {
  const size_t index = nodes_.size();
  nodes_.push_back(EdnNode{.kind = kind, .offset = Absolute(open_at)});
  uint32_t count = 0;
  while (true) {
    Result r = SkipSpace(p);
    if (r != Result::kOk) return r;
    if (*p == end_) return NeedMoreOrFail(*p, CollectionName(kind), open_at);
    const char c = buffer_[*p];
    if (c == close) {
      ++*p;
      break;
    }
    if (c == ')' || c == ']' || c == '}') {
      return Fail(*p, fmt::format("expected '{}' to close the {} that starts at {}, found '{}'",
                                  close, CollectionName(kind), LineColumnAtBuffer(open_at), c));
    }
    if (c == '#' && *p + 1 < end_ && buffer_[*p + 1] == '_') {
      // A discard right before the closing bracket leaves no form: handle it here.
      *p += 2;
      const size_t keep = nodes_.size();
      r = ParseForm(p, depth + 1);
      if (r != Result::kOk) return r;
      nodes_.resize(keep);
      continue;
    }
    if (c == '#' && *p + 1 == end_) return NeedMoreOrFail(*p, CollectionName(kind), open_at);
    r = ParseForm(p, depth + 1);
    if (r != Result::kOk) return r;
    ++count;
  }
  if (kind == EdnKind::kMap && count % 2 != 0) {
    return Fail(open_at, "a map with an odd number of forms (a key without a value)");
  }
  nodes_[index].count = count;
  nodes_[index].end = static_cast<uint32_t>(nodes_.size());
  return Result::kOk;
}

EdnParser::Result EdnParser::ParseString(size_t* p) {
  const size_t open_at = *p;
  const char* b = buffer_.get();
  size_t i = open_at + 1;
  // Fast path: no escape before the closing quote.
  while (i < end_ && b[i] != '"' && b[i] != '\\') ++i;
  if (i == end_) return NeedMoreOrFail(i, "string", open_at);
  EdnNode node{.kind = EdnKind::kString, .offset = Absolute(open_at)};
  if (b[i] == '"') {
    node.text = std::string_view(b + open_at + 1, i - open_at - 1);
    node.end = static_cast<uint32_t>(nodes_.size() + 1);
    nodes_.push_back(node);
    *p = i + 1;
    return Result::kOk;
  }
  if (scratch_used_ == scratch_.size()) scratch_.emplace_back();
  std::string& out = scratch_[scratch_used_++];
  out.assign(b + open_at + 1, i - open_at - 1);
  while (true) {
    if (i == end_) return NeedMoreOrFail(i, "string", open_at);
    const char c = b[i];
    if (c == '"') break;
    if (c != '\\') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 == end_) return NeedMoreOrFail(i, "string", open_at);
    const char e = b[i + 1];
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out.push_back(e);
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'u': {
        if (i + 6 > end_) return NeedMoreOrFail(i, "string", open_at);
        uint32_t cp = 0;
        if (!ParseHex4(b + i + 2, &cp)) return Fail(i, "\\u must be followed by 4 hex digits");
        if (cp >= 0xD800 && cp < 0xDC00) {
          // A high surrogate: a low one must follow.
          if (i + 12 > end_) return NeedMoreOrFail(i, "string", open_at);
          uint32_t low = 0;
          if (b[i + 6] != '\\' || b[i + 7] != 'u' || !ParseHex4(b + i + 8, &low) || low < 0xDC00 ||
              low >= 0xE000) {
            return Fail(i, "a \\u high surrogate without its low surrogate");
          }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          i += 6;
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          return Fail(i, "a \\u low surrogate without its high surrogate");
        }
        AppendUtf8(cp, &out);
        i += 6;
        continue;
      }
      default:
        return Fail(i, fmt::format("unknown escape \\{} in a string", e));
    }
    i += 2;
  }
  node.text = out;
  node.end = static_cast<uint32_t>(nodes_.size() + 1);
  nodes_.push_back(node);
  *p = i + 1;
  return Result::kOk;
}

EdnParser::Result EdnParser::TokenEnd(size_t p, size_t* end) const {
  const char* b = buffer_.get();
  while (p < end_ && !IsDelimiter(b[p])) ++p;
  if (p == end_ && !eof_) return Result::kNeedMore;
  *end = p;
  return Result::kOk;
}

EdnParser::Result EdnParser::ParseChar(size_t* p) {
  const size_t at = *p;
  if (at + 1 >= end_) return NeedMoreOrFail(at, "character", at);
  // The first character after '\' is taken whatever it is; letters may follow (\newline).
  size_t first_end = at + 2;
  while (first_end < end_ && (static_cast<unsigned char>(buffer_[first_end]) & 0xC0) == 0x80) {
    ++first_end;  // the rest of a UTF-8 sequence
  }
  size_t end = first_end;
  if (first_end == end_ && !eof_) return Result::kNeedMore;
  if (!IsDelimiter(buffer_[at + 1])) {
    Result r = TokenEnd(first_end, &end);
    if (r != Result::kOk) return r;
  }
  const std::string_view name(buffer_.get() + at + 1, end - at - 1);
  std::string_view value;
  static constexpr std::pair<std::string_view, std::string_view> kNamed[] = {
      {"newline", "\n"}, {"space", " "},      {"tab", "\t"},
      {"return", "\r"},  {"backspace", "\b"}, {"formfeed", "\f"},
  };
  if (end == first_end) {
    value = name;
  } else {
    for (const auto& [n, v] : kNamed) {
      if (name == n) value = v;
    }
    if (value.empty()) {
      uint32_t cp = 0;
      if (name.size() == 5 && name[0] == 'u' && ParseHex4(name.data() + 1, &cp)) {
        if (scratch_used_ == scratch_.size()) scratch_.emplace_back();
        std::string& out = scratch_[scratch_used_++];
        out.clear();
        AppendUtf8(cp, &out);
        value = out;
      } else {
        return Fail(at, fmt::format("unknown character literal \\{}", name));
      }
    }
  }
  nodes_.push_back(EdnNode{.kind = EdnKind::kChar,
                           .end = static_cast<uint32_t>(nodes_.size() + 1),
                           .text = value,
                           .offset = Absolute(at)});
  *p = end;
  return Result::kOk;
}

EdnParser::Result EdnParser::ParseToken(size_t* p) {
  const size_t at = *p;
  size_t end = at;
  Result r = TokenEnd(at, &end);
  if (r != Result::kOk) return r;
  const char* b = buffer_.get();
  const std::string_view token(b + at, end - at);
  EdnNode node{.end = static_cast<uint32_t>(nodes_.size() + 1), .offset = Absolute(at)};
  const char c = token[0];
  const auto uc = static_cast<unsigned char>(c);
  if (uc < 0x20 || uc == 0x7F || c == '@' || c == '^' || c == '`' || c == '~' || c == '\'') {
    return Fail(at, fmt::format("unexpected {}", Describe(c)));
  }
  const bool sign = (c == '+' || c == '-');
  if (IsDigit(c) || (sign && token.size() > 1 && IsDigit(token[1]))) {
    size_t i = sign ? 1 : 0;
    const bool negative = c == '-';
    uint64_t magnitude = 0;
    bool overflow = false;
    const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    uint64_t base = 10;
    if (i + 2 < token.size() + 1 && token[i] == '0' && i + 1 < token.size() &&
        (token[i + 1] == 'x' || token[i + 1] == 'X')) {
      base = 16;  // Clojure's hexadecimal integers, as in #object[... 0x1f2e ...]
      i += 2;
    }
    const size_t digits_start = i;
    for (; i < token.size(); ++i) {
      uint64_t d = 0;
      const char t = token[i];
      if (IsDigit(t)) {
        d = static_cast<uint64_t>(t - '0');
      } else if (base == 16 && t >= 'a' && t <= 'f') {
        d = static_cast<uint64_t>(t - 'a') + 10;
      } else if (base == 16 && t >= 'A' && t <= 'F') {
        d = static_cast<uint64_t>(t - 'A') + 10;
      } else {
        break;
      }
      // Checked without a division per digit: the integers of a history are most of its tokens.
      uint64_t next = 0;
      if (!overflow && (__builtin_mul_overflow(magnitude, base, &next) ||
                        __builtin_add_overflow(next, d, &next) || next > limit)) {
        overflow = true;
      }
      if (!overflow) magnitude = next;
    }
    if (base == 16 && (i == digits_start || i != token.size())) {
      return Fail(at, fmt::format("malformed number '{}'", token));
    }
    const std::string_view rest = token.substr(i);
    if (rest.empty() || rest == "N") {
      node.big = !rest.empty();
      node.text = token;
      if (overflow) {
        node.kind = EdnKind::kBigInt;
      } else {
        node.kind = EdnKind::kInt;
        node.int_value =
            negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
      }
      nodes_.push_back(node);
      *p = end;
      return Result::kOk;
    }
    if (rest[0] == '/') {
      const std::string_view den = rest.substr(1);
      if (den.empty() || !std::all_of(den.begin(), den.end(), IsDigit)) {
        return Fail(at, fmt::format("malformed ratio '{}'", token));
      }
      node.kind = EdnKind::kRatio;
      node.text = token;
      nodes_.push_back(node);
      *p = end;
      return Result::kOk;
    }
    // A float: digits [. digits] [e [+-] digits] [M].
    size_t j = 0;
    std::string_view f = rest;
    bool ok = true;
    if (j < f.size() && f[j] == '.') {
      ++j;
      while (j < f.size() && IsDigit(f[j])) ++j;
    }
    if (j < f.size() && (f[j] == 'e' || f[j] == 'E')) {
      ++j;
      if (j < f.size() && (f[j] == '+' || f[j] == '-')) ++j;
      const size_t digits = j;
      while (j < f.size() && IsDigit(f[j])) ++j;
      ok = j > digits;
    }
    if (j < f.size() && f[j] == 'M') ++j;
    if (!ok || j != f.size() || j == 0) {
      return Fail(at, fmt::format("malformed number '{}'", token));
    }
    node.kind = EdnKind::kFloat;
    node.text = token;
    nodes_.push_back(node);
    *p = end;
    return Result::kOk;
  }
  if (c == ':') {
    if (token.size() == 1) return Fail(at, "a keyword without a name");
    if (token.back() == ':' || token[1] == '/') {
      return Fail(at, fmt::format("malformed keyword '{}'", token));
    }
    node.kind = EdnKind::kKeyword;
  } else if (token == "nil") {
    node.kind = EdnKind::kNil;
  } else if (token == "true" || token == "false") {
    node.kind = EdnKind::kBool;
    node.int_value = token == "true" ? 1 : 0;
  } else {
    node.kind = EdnKind::kSymbol;
  }
  for (char t : token) {
    const auto u = static_cast<unsigned char>(t);
    if (u < 0x20 || u == 0x7F) {
      return Fail(at, fmt::format("unexpected {} in '{}'", Describe(t), token.substr(0, 40)));
    }
  }
  node.text = token;
  nodes_.push_back(node);
  *p = end;
  return Result::kOk;
}

EdnParser::Result EdnParser::ParseDispatch(size_t* p, int depth) {
  const size_t at = *p;
  const char c = buffer_[at + 1];
  if (c == '{') {
    *p = at + 2;
    return ParseCollection(p, depth, EdnKind::kSet, '}', at);
  }
  if (c == '#') {
    // ##Inf, ##-Inf, ##NaN.
    size_t end = at;
    Result r = TokenEnd(at + 2, &end);
    if (r != Result::kOk) return r;
    const std::string_view name(buffer_.get() + at + 2, end - at - 2);
    if (name != "Inf" && name != "-Inf" && name != "NaN") {
      return Fail(at, fmt::format("unknown symbolic value ##{}", name));
    }
    nodes_.push_back(EdnNode{.kind = EdnKind::kFloat,
                             .end = static_cast<uint32_t>(nodes_.size() + 1),
                             .text = std::string_view(buffer_.get() + at, end - at),
                             .offset = Absolute(at)});
    *p = end;
    return Result::kOk;
  }
  if (IsDelimiter(c) || c == '#') {
    return Fail(at, fmt::format("'#' followed by {}: expected a tag, '{{' or '_'", Describe(c)));
  }
  // A tagged literal: #tag form (#inst "...", #uuid "...", #object[...], #ns.Record{...}).
  size_t end = at;
  Result r = TokenEnd(at + 1, &end);
  if (r != Result::kOk) return r;
  const size_t index = nodes_.size();
  nodes_.push_back(EdnNode{.kind = EdnKind::kTagged,
                           .count = 1,
                           .text = std::string_view(buffer_.get() + at + 1, end - at - 1),
                           .offset = Absolute(at)});
  *p = end;
  r = SkipSpace(p);
  if (r != Result::kOk) return r;
  if (*p == end_) return Fail(*p, "unexpected end of input: a tag without its form");
  r = ParseForm(p, depth + 1);
  if (r != Result::kOk) return r;
  nodes_[index].end = static_cast<uint32_t>(nodes_.size());
  return Result::kOk;
}

}  // namespace isowatch::formats::internal
