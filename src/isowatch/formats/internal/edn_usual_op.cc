// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/edn_usual_op.h"

#include <cstdint>
#include <optional>
#include <string_view>

namespace isowatch::formats::internal {
namespace {

bool IsUsualSpace(char c) { return c == ' ' || c == ',' || c == '\n' || c == '\t' || c == '\r'; }

// What may follow a token in a usual form (EDN delimiters; others, like ';', are declined).
bool EndsToken(char c) { return IsUsualSpace(c) || c == ']' || c == '}'; }

bool IsKeywordStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool IsKeywordByte(char c) {
  return IsKeywordStart(c) || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// A cursor over the text; every method either reads what it names and returns true, or returns
// false (the form is then declined, whatever the cursor's position).
class Cursor {
 public:
  explicit Cursor(std::string_view text)
      : begin_(text.data()), p_(begin_), end_(p_ + text.size()) {}

  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }

  // Skips spaces; false at the end of the text (a usual form never ends there).
  bool Space() {
    while (p_ < end_ && IsUsualSpace(*p_)) ++p_;
    return p_ < end_;
  }
  bool Eat(char c) {
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  char Peek() const { return *p_; }  // REQUIRES: Space() returned true

  // A keyword :name (letters, digits, '-', '_'; a letter first), with its ':'.
  bool Keyword(std::string_view* out) {
    const char* start = p_;
    if (end_ - p_ < 2 || p_[0] != ':' || !IsKeywordStart(p_[1])) return false;
    p_ += 2;
    while (p_ < end_ && IsKeywordByte(*p_)) ++p_;
    if (!TokenEnded()) return Back(start);
    *out = std::string_view(start, static_cast<size_t>(p_ - start));
    return true;
  }
  // A decimal integer of at most 18 digits (so it cannot overflow), without a leading zero or
  // '+'.
  bool Int(int64_t* out) {
    const char* start = p_;
    const bool negative = p_ < end_ && *p_ == '-';
    if (negative) ++p_;
    const char* digits = p_;
    int64_t v = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9' && p_ - digits < 18) {
      v = v * 10 + (*p_ - '0');
      ++p_;
    }
    const ptrdiff_t n = p_ - digits;
    if (n == 0 || (n > 1 && *digits == '0') || !TokenEnded()) return Back(start);
    *out = negative ? -v : v;
    return true;
  }
  bool Nil() { return Word("nil"); }
  bool Word(std::string_view w) {
    if (static_cast<size_t>(end_ - p_) < w.size() || std::string_view(p_, w.size()) != w) {
      return false;
    }
    p_ += w.size();
    return TokenEnded() || Back(p_ - w.size());
  }
  bool OptionalInt(std::optional<int64_t>* out) {
    if (Nil()) {
      out->reset();
      return true;
    }
    int64_t v = 0;
    if (!Int(&v)) return false;
    *out = v;
    return true;
  }
  // A value that ReadHeader ignores: an integer, nil, true, false, a keyword or a string without
  // escapes.
  bool SkipSimple() {
    int64_t i = 0;
    std::string_view k;
    if (Int(&i) || Nil() || Word("true") || Word("false") || Keyword(&k)) return true;
    const char* start = p_;
    if (!Eat('"')) return false;
    while (p_ < end_ && *p_ != '"') {
      if (*p_ == '\\') return Back(start);
      ++p_;
    }
    return (Eat('"') && TokenEnded()) || Back(start);
  }

 private:
  // Whether the token just read ends here; at the end of the text it might go on.
  bool TokenEnded() const { return p_ < end_ && EndsToken(*p_); }
  // Goes back to `to` and fails: every reader leaves the cursor where it was when it fails.
  bool Back(const char* to) {
    p_ = to;
    return false;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
};

// [:r k v], [:w k v] or [:append k v], as EdnOpReader::MicroOp reads them.
bool MicroOp(Cursor& c, ElleOps* ops) {
  std::string_view f;
  if (!c.Eat('[') || !c.Space() || !c.Keyword(&f) || !c.Space()) return false;
  ElleMicroOp m;
  if (f == ":r") {
    m.kind = ElleMicroOp::Kind::kRead;
  } else if (f == ":w") {
    m.kind = ElleMicroOp::Kind::kWrite;
  } else if (f == ":append") {
    m.kind = ElleMicroOp::Kind::kAppend;
  } else {
    return false;
  }
  std::string_view keyword;
  if (c.Int(&m.key.i)) {
    m.key.type = ElleScalar::Type::kInt;
  } else if (c.Keyword(&keyword)) {
    m.key = ops->AddBytes(ElleScalar::Type::kKeyword, keyword);
  } else {
    return false;
  }
  if (!c.Space()) return false;
  if (c.Nil()) {
    if (m.kind == ElleMicroOp::Kind::kAppend) return false;
  } else if (c.Peek() == '[') {
    if (m.kind != ElleMicroOp::Kind::kRead) return false;
    c.Eat('[');
    m.list = true;
    m.list_begin = static_cast<uint32_t>(ops->elements.size());
    while (true) {
      if (!c.Space()) return false;
      if (c.Eat(']')) break;
      ElleScalar e{.type = ElleScalar::Type::kInt};
      if (!c.Int(&e.i)) return false;
      ops->elements.push_back(e);
    }
    m.list_size = static_cast<uint32_t>(ops->elements.size()) - m.list_begin;
  } else {
    m.value.type = ElleScalar::Type::kInt;
    if (!c.Int(&m.value.i)) return false;
  }
  if (!c.Space() || !c.Eat(']')) return false;
  ops->ops.push_back(m);
  return true;
}

// {:rts R :cts C}, each once, R an integer, C an integer or nil.
bool Ts(Cursor& c, ElleOp* op) {
  bool has_rts = false;
  bool has_cts = false;
  if (!c.Eat('{')) return false;
  while (true) {
    if (!c.Space()) return false;
    if (c.Eat('}')) break;
    std::string_view key;
    if (!c.Keyword(&key) || !c.Space()) return false;
    if (key == ":rts" && !has_rts) {
      if (!c.Int(&op->rts)) return false;
      has_rts = true;
    } else if (key == ":cts" && !has_cts) {
      if (!c.OptionalInt(&op->cts)) return false;
      has_cts = true;
    } else {
      return false;
    }
  }
  op->has_ts = true;
  return has_rts;
}

enum Seen : uint32_t {
  kType = 1,
  kF = 2,
  kProcess = 4,
  kIndex = 8,
  kTime = 16,
  kTs = 32,
  kValue = 64,
};

}  // namespace

size_t ReadUsualEdnOp(std::string_view text, ElleOp* op) {
  Cursor c(text);
  if (!c.Eat('{')) return 0;
  op->ClearFields();
  uint32_t seen = 0;
  // Each known key once: a second would leave the general parser to say which one counts.
  auto first = [&seen](Seen key) {
    if ((seen & key) != 0) return false;
    seen |= key;
    return true;
  };
  while (true) {
    if (!c.Space()) return 0;
    if (c.Eat('}')) break;
    std::string_view key;
    if (!c.Keyword(&key) || !c.Space()) return 0;
    if (key == ":type") {
      std::string_view name;
      if (!first(kType) || !c.Keyword(&name)) return 0;
      const std::optional<ElleType> type = ElleTypeNamed(name.substr(1));
      if (!type) return 0;
      op->type = *type;
    } else if (key == ":f") {
      std::string_view f;
      if (!first(kF)) return 0;
      if (c.Keyword(&f)) {
        if (f != ":txn") return 0;
        op->f = ElleOp::F::kTxn;
      } else if (!c.Nil()) {
        return 0;
      }
    } else if (key == ":process") {
      if (!first(kProcess)) return 0;
      if (c.Int(&op->process)) {
        op->process_kind = ElleOp::Process::kInt;
      } else if (!c.Nil()) {
        return 0;
      }
    } else if (key == ":index") {
      if (!first(kIndex) || !c.OptionalInt(&op->index)) return 0;
    } else if (key == ":time") {
      if (!first(kTime) || !c.OptionalInt(&op->time)) return 0;
    } else if (key == ":ts") {
      if (!first(kTs)) return 0;
      if (!c.Nil() && !Ts(c, op)) return 0;
    } else if (key == ":value") {
      if (!first(kValue) || !c.Eat('[')) return 0;
      while (true) {
        if (!c.Space()) return 0;
        if (c.Eat(']')) break;
        if (!MicroOp(c, &op->ops)) return 0;
      }
    } else if (!c.SkipSimple()) {
      return 0;
    }
  }
  if ((seen & kType) == 0 || (seen & kValue) == 0) return 0;
  return c.consumed();
}

}  // namespace isowatch::formats::internal
