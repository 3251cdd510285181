// SPDX-License-Identifier: Apache-2.0
// The parser of transactions of the usual shape (timekiller_usual_txn.h): it reads the bytes
// itself, with the scanning helpers below, and gives up (to the general parser) on anything else.
#include "isowatch/formats/internal/timekiller_usual_txn.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "isowatch/formats/internal/timekiller_text.h"
#include "isowatch/formats/internal/timekiller_txn.h"
#include "isowatch/history/timestamp.h"

namespace isowatch::formats::internal {
namespace {

using history::Timestamp;

// Helpers of ParseUsualTxn. They read from a transaction element, which ends
// with its closing '}' and is followed by at least ChunkedJsonArray::kPadding readable bytes
// (spaces), so a few bytes may be looked at past `end` without a check.
namespace usual {

[[gnu::always_inline]] inline bool IsSpace(char c) {
  // Most bytes looked at are not spaces: one comparison rules them out.
  return static_cast<unsigned char>(c) <= ' ' && (c == ' ' || c == '\n' || c == '\r' || c == '\t');
}

// Whether the bytes at `p` are those of the literal `s` (at most 8 of them). Reads 8 bytes.
template <size_t N>
[[gnu::always_inline]] inline bool Match(const char* p, const char (&s)[N]) {
  static_assert(N >= 2 && N - 1 <= 8);
  if constexpr (std::endian::native == std::endian::little) {
    uint64_t word = 0;
    std::memcpy(&word, p, 8);
    // Byte by byte, which the compiler folds into a constant (a memcpy of the literal into
    // `want` was not folded: it went through the stack, and the load of a word written in
    // smaller parts stalled).
    uint64_t want = 0;
    for (size_t i = 0; i + 1 < N; ++i) {
      want |= uint64_t{static_cast<unsigned char>(s[i])} << (8 * i);
    }
    constexpr uint64_t kMask = N - 1 == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * (N - 1))) - 1;
    return (word & kMask) == want;
  } else {
    return std::memcmp(p, s, N - 1) == 0;
  }
}

[[gnu::always_inline]] inline void SkipSpace(const char*& p, const char* end) {
  while (p < end && IsSpace(*p)) ++p;
}

// Skips whitespace and then `c`.
[[gnu::always_inline]] inline bool Consume(const char*& p, const char* end, char c) {
  SkipSpace(p, end);
  if (*p != c) return false;
  ++p;
  return true;
}

// After a member's value: skips ',' (true, *more = true) or the object's closing '}' (true,
// *more = false).
[[gnu::always_inline]] inline bool AfterMember(const char*& p, const char* end, bool* more) {
  SkipSpace(p, end);
  if (*p == ',') {
    ++p;
    *more = true;
    return true;
  }
  if (*p == '}') {
    ++p;
    *more = false;
    return true;
  }
  return false;
}

[[gnu::always_inline]] inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// An integer -?(0|[1-9][0-9]*) of at most 18 digits (so that it fits in an int64 without
// checks). What follows it is checked by the caller: a digit, '.' or exponent cannot follow a
// valid value there.
[[gnu::always_inline]] inline bool Int(const char*& p, int64_t* out) {
  const bool negative = *p == '-';
  const char* digits = p + (negative ? 1 : 0);
  auto d = static_cast<unsigned>(static_cast<unsigned char>(*digits) - '0');
  if (d > 9) return false;
  if (d == 0) {
    // "0"; "-0" and leading zeros are left to the general parser.
    if (negative) return false;
    p = digits + 1;
    *out = 0;
    return true;
  }
  if constexpr (std::endian::native == std::endian::little) {
    // Up to 7 digits at once: bit 7 of byte i of `nondigit` is set if byte i of the number is
    // not a digit (a carry out of a non-digit byte can only disturb the bytes after it).
    uint64_t word = 0;
    std::memcpy(&word, digits, 8);
    const uint64_t x = word ^ 0x3030303030303030ULL;
    const uint64_t nondigit = ((x + 0x7676767676767676ULL) | x) & 0x8080808080808080ULL;
    if (nondigit != 0) {
      const int n = std::countr_zero(nondigit) >> 3;  // 1 to 7: the first byte is a digit
      // The digit values, most significant first, in the top n bytes; then pairs, quads, all.
      uint64_t v = x << (64 - 8 * n);
      v = (v * 10 + (v >> 8)) & 0x00FF00FF00FF00FFULL;
      v = (v * 100 + (v >> 16)) & 0x0000FFFF0000FFFFULL;
      v = (v * 10000 + (v >> 32)) & 0xFFFFFFFFULL;
      p = digits + n;
      *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
      return true;
    }
  }
  uint64_t v = d;
  const char* q = digits + 1;
  while ((d = static_cast<unsigned>(static_cast<unsigned char>(*q) - '0')) <= 9) {
    v = v * 10 + d;
    ++q;
  }
  if (q - digits > 18) return false;
  p = q;
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

// A string without escapes, control characters or non-ASCII bytes; `p` is at its opening quote.
[[gnu::always_inline]] inline bool PlainString(const char*& p, const char* end,
                                               std::string_view* text) {
  const char* const s = p + 1;
  const char* q = s;
  while (q < end) {
    const auto c = static_cast<unsigned char>(*q);
    if (c == '"') {
      *text = std::string_view(s, static_cast<size_t>(q - s));
      p = q + 1;
      return true;
    }
    if (c == '\\' || c < 0x20 || c >= 0x80) return false;
    ++q;
  }
  return false;
}

// A member name without escapes and the ':' after it.
[[gnu::always_inline]] inline bool Name(const char*& p, const char* end, std::string_view* name) {
  SkipSpace(p, end);
  if (*p != '"' || !PlainString(p, end, name)) return false;
  return Consume(p, end, ':');
}

// Whether `name` is the three bytes `s` (comparing byte by byte is faster than the general
// comparison for such short names).
[[gnu::always_inline]] inline bool Is3(std::string_view name, const char (&s)[4]) {
  return name.size() == 3 && name[0] == s[0] && name[1] == s[1] && name[2] == s[2];
}

// A value that the general parser ignores, at `p`: a number, a plain string, true, false or null.
// Returns its end, or nullptr. (Kept out of line, and so without references to the caller's
// cursor, which would then have to live in memory.)
[[gnu::noinline]] const char* SkipScalar(const char* p, const char* end) {
  switch (*p) {
    case '"': {
      std::string_view text;
      return PlainString(p, end, &text) ? p : nullptr;
    }
    case 't':
      return std::memcmp(p, "true", 4) == 0 ? p + 4 : nullptr;
    case 'f':
      return std::memcmp(p, "false", 5) == 0 ? p + 5 : nullptr;
    case 'n':
      return std::memcmp(p, "null", 4) == 0 ? p + 4 : nullptr;
    default:
      break;
  }
  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  const char* q = p;
  if (*q == '-') ++q;
  if (*q == '0') {
    ++q;
  } else if (*q >= '1' && *q <= '9') {
    while (IsDigit(*q)) ++q;
  } else {
    return nullptr;
  }
  if (*q == '.') {
    ++q;
    if (!IsDigit(*q)) return nullptr;
    while (IsDigit(*q)) ++q;
  }
  if (*q == 'e' || *q == 'E') {
    ++q;
    if (*q == '+' || *q == '-') ++q;
    if (!IsDigit(*q)) return nullptr;
    while (IsDigit(*q)) ++q;
  }
  return q <= end ? q : nullptr;
}

// A transaction or session id: a plain string, or an integer -?(0|[1-9][0-9]*) kept as text.
[[gnu::always_inline]] inline bool Id(const char*& p, const char* end, std::string_view* text,
                                      bool* numeric) {
  if (*p == '"') {
    *numeric = false;
    return PlainString(p, end, text);
  }
  const char* const start = p;
  const char* q = p + (*p == '-' ? 1 : 0);
  if (*q < '1' || *q > '9') {
    // "0" alone is fine; "-0" and leading zeros are left to the general parser.
    if (*q != '0' || q != p || IsDigit(q[1])) return false;
  }
  ++q;
  while (IsDigit(*q)) ++q;
  *text = std::string_view(start, static_cast<size_t>(q - start));
  *numeric = true;
  p = q;
  return true;
}

// A part of a timestamp: an integer (as Int) or a string of an optional '-' and 1 to 18 digits.
[[gnu::always_inline]] inline bool HlcPart(const char*& p, int64_t* out) {
  if (*p != '"') return Int(p, out);
  const char* q = p + 1;
  const bool negative = *q == '-';
  if (negative) ++q;
  const char* const digits = q;
  uint64_t v = 0;
  unsigned d = 0;
  while ((d = static_cast<unsigned>(static_cast<unsigned char>(*q) - '0')) <= 9) {
    v = v * 10 + d;
    ++q;
  }
  if (*q != '"' || q == digits || q - digits > 18) return false;
  p = q + 1;
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

// A timestamp {"p": P, "l": L} with parts as HlcPart reads them, "l" optional, other members
// scalars.
[[gnu::always_inline]] inline bool Hlc(const char*& p, const char* end, Timestamp* ts) {
  if (*p != '{') return false;
  // First the compact form {"p":P,"l":L}.
  if (Match(p, "{\"p\":")) {
    const char* q = p + 5;
    if (HlcPart(q, &ts->physical) && Match(q, ",\"l\":")) {
      q += 5;
      if (HlcPart(q, &ts->logical) && *q == '}') {
        p = q + 1;
        return true;
      }
    }
  }
  ++p;
  bool has_p = false;
  bool has_l = false;
  ts->logical = 0;
  bool more = true;
  while (more) {
    std::string_view name;
    if (!Name(p, end, &name)) return false;
    SkipSpace(p, end);
    if (name.size() == 1 && name[0] == 'p') {
      if (has_p || !HlcPart(p, &ts->physical)) return false;
      has_p = true;
    } else if (name.size() == 1 && name[0] == 'l') {
      if (has_l || !HlcPart(p, &ts->logical)) return false;
      has_l = true;
    } else if ((p = SkipScalar(p, end)) == nullptr) {
      return false;
    }
    if (!AfterMember(p, end, &more)) return false;
  }
  return has_p;
}

}  // namespace usual

// Unless kDefer is kNo, a non-empty list of digits and commas only, at `p` (its '['), is left as
// text (ListForm::kText, copied into txn->list_text; or ListForm::kTextInPlace), and true is
// returned; else false, and the list is to be parsed. Finds the list's end 16 (or, without SSE2, 8)
// bytes at a time: the first byte that is neither a digit nor a comma must be its ']'.
template <DeferLists kDefer>
bool DeferList(const char*& p, const char* end, ParsedTxn* txn, PendingOp* op) {
  if constexpr (kDefer == DeferLists::kNo) {
    return false;
  } else {
    const char* const text = p + 1;
    const char* q = text;
#if defined(__SSE2__)
    // 16 bytes at a time: a byte is a digit if it is above '/' and below ':' (bytes from 0x80
    // are negative to the signed comparisons, so not digits).
    const __m128i below_zero = _mm_set1_epi8('0' - 1);
    const __m128i above_nine = _mm_set1_epi8('9' + 1);
    const __m128i comma = _mm_set1_epi8(',');
    while (true) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
      const __m128i digit =
          _mm_and_si128(_mm_cmpgt_epi8(v, below_zero), _mm_cmplt_epi8(v, above_nine));
      const auto other = static_cast<unsigned>(
          ~_mm_movemask_epi8(_mm_or_si128(digit, _mm_cmpeq_epi8(v, comma))) & 0xFFFF);
      if (other != 0) {
        q += std::countr_zero(other);
        break;
      }
      q += 16;
      // Past the window: left to the parsing below, which stops there.
      if (q > end) return false;
    }
#else
    static_assert(std::endian::native == std::endian::little);
    while (true) {
      uint64_t word = 0;
      std::memcpy(&word, q, 8);
      // As in usual::Int: the lowest set bit of `nondigit` is exact (a carry out of a byte can
      // only disturb the bytes above it); `comma` is exact in every byte.
      const uint64_t x = word ^ 0x3030303030303030ULL;
      const uint64_t nondigit = ((x + 0x7676767676767676ULL) | x) & 0x8080808080808080ULL;
      const uint64_t y = word ^ 0x2C2C2C2C2C2C2C2CULL;
      const uint64_t comma =
          ~(((y & 0x7F7F7F7F7F7F7F7FULL) + 0x7F7F7F7F7F7F7F7FULL) | y) & 0x8080808080808080ULL;
      const uint64_t other = nondigit & ~comma;
      if (other != 0) {
        q += std::countr_zero(other) >> 3;
        break;
      }
      q += 8;
      // Past the window: left to the parsing below, which stops there.
      if (q > end) return false;
    }
#endif
    if (*q != ']' || q == text || q > end || q - op->where > UINT32_MAX) return false;
    op->form = ValueForm::kList;
    op->list_size = static_cast<uint32_t>(q - text);
    if constexpr (kDefer == DeferLists::kInPlace) {
      op->list_form = ListForm::kTextInPlace;
      op->list_begin = static_cast<uint32_t>(text - op->where);
    } else {
      std::vector<char>& texts = txn->list_text;
      op->list_form = ListForm::kText;
      op->list_begin = static_cast<uint32_t>(texts.size());
      texts.insert(texts.end(), text, q);
    }
    p = q + 1;
    return true;
  }
}

// The "v" of an op, for ParseUsualOp.
template <DeferLists kDefer>
bool ParseUsualValue(const char*& p, const char* end, ParsedTxn* txn, PendingOp* op) {
  if (*p == 'n') {
    if (!usual::Match(p, "null")) return false;
    p += 4;
    op->form = ValueForm::kNull;
    return true;
  }
  if (*p != '[') {
    op->form = ValueForm::kInt;
    return usual::Int(p, &op->value);
  }
  if (DeferList<kDefer>(p, end, txn, op)) return true;
  op->form = ValueForm::kList;
  op->list_form = ListForm::kElements;
  std::vector<int64_t>& elements = txn->elements;
  op->list_begin = static_cast<uint32_t>(elements.size());
  // A local cursor, which the compiler keeps in a register (`p` is stored back once).
  const char* q = p + 1;
  usual::SkipSpace(q, end);
  if (*q == ']') {
    ++q;
  } else {
    while (true) {
      usual::SkipSpace(q, end);
      int64_t x = 0;
      if (!usual::Int(q, &x)) return false;
      elements.push_back(x);
      usual::SkipSpace(q, end);
      if (*q == ',') {
        ++q;
      } else if (*q == ']') {
        ++q;
        break;
      } else {
        return false;
      }
    }
  }
  p = q;
  op->list_size = static_cast<uint32_t>(elements.size() - op->list_begin);
  return true;
}

// One element of an "ops" array, into txn->ops (which ends with what was read of it if it is
// not of the usual shape).
template <DeferLists kDefer>
bool ParseUsualOp(const char*& p, const char* end, ParsedTxn* txn) {
  usual::SkipSpace(p, end);
  if (*p != '{') return false;
  // Filled in place: a copy into txn->ops would load the record in words just written in smaller
  // parts, which stalls. (If the op is not of the usual shape, neither is the transaction, which
  // the caller then drops.)
  PendingOp& op = txn->ops.emplace_back();
  op.where = p;
  std::string_view type_text;
  bool has_type = false;
  bool has_key = false;
  // First the compact form {"t":"x","k":K,"v":V} or {"t":"x","k":K}, byte by byte.
  const char* q = p;
  const size_t elements_before = txn->elements.size();
  const size_t list_text_before = txn->list_text.size();
  if (usual::Match(q, "{\"t\":\"") && usual::Match(q + 7, "\",\"k\":")) {
    type_text = std::string_view(q + 6, 1);
    q += 13;
    if (usual::Int(q, &op.key)) {
      if (*q == '}') {
        has_type = has_key = true;
      } else if (usual::Match(q, ",\"v\":")) {
        q += 5;
        bool ok = true;
        if (usual::Match(q, "null")) {
          q += 4;
          op.form = ValueForm::kNull;
        } else if (*q == '[') {
          ok = ParseUsualValue<kDefer>(q, end, txn, &op);
        } else {
          op.form = ValueForm::kInt;
          ok = usual::Int(q, &op.value);
        }
        if (ok && *q == '}') has_type = has_key = true;
      }
    }
  }
  if (has_type) {
    p = q + 1;
  } else {
    // Any other layout.
    txn->elements.resize(elements_before);
    txn->list_text.resize(list_text_before);
    op = PendingOp{.where = p};
    ++p;
    bool has_value = false;
    bool more = true;
    while (more) {
      std::string_view name;
      if (!usual::Name(p, end, &name)) return false;
      usual::SkipSpace(p, end);
      switch (name.size() == 1 ? name[0] : 0) {
        case 't':
          if (has_type || *p != '"' || !usual::PlainString(p, end, &type_text)) return false;
          has_type = true;
          break;
        case 'k':
          if (has_key || !usual::Int(p, &op.key)) return false;
          has_key = true;
          break;
        case 'v':
          if (has_value || !ParseUsualValue<kDefer>(p, end, txn, &op)) return false;
          has_value = true;
          break;
        default:
          if ((p = usual::SkipScalar(p, end)) == nullptr) return false;
          break;
      }
      if (!usual::AfterMember(p, end, &more)) return false;
    }
  }
  if (!has_type || !has_key) return false;
  if (type_text.size() == 1) {
    // Upper and lower case: 'W' | 0x20 == 'w', and no other byte maps to 'w', 'r' or 'a'.
    switch (type_text[0] | 0x20) {
      case 'w':
        op.type = OpType::kWrite;
        break;
      case 'r':
        op.type = OpType::kRead;
        break;
      case 'a':
        op.type = OpType::kAppend;
        break;
      default:
        return false;
    }
  } else if (EqualsLower(type_text, "write")) {
    op.type = OpType::kWrite;
  } else if (EqualsLower(type_text, "read")) {
    op.type = OpType::kRead;
  } else if (EqualsLower(type_text, "append")) {
    op.type = OpType::kAppend;
  } else {
    return false;
  }
  if (op.type != OpType::kRead && (op.form == ValueForm::kMissing || op.form == ValueForm::kList ||
                                   (op.type == OpType::kAppend && op.form == ValueForm::kNull))) {
    return false;
  }
  return true;
}

// The elements of an "ops" array after its '[', and the ']'.
template <DeferLists kDefer>
bool ParseUsualOps(const char*& p, const char* end, ParsedTxn* txn) {
  usual::SkipSpace(p, end);
  if (*p == ']') {
    ++p;
    return true;
  }
  while (true) {
    if (!ParseUsualOp<kDefer>(p, end, txn)) return false;
    usual::SkipSpace(p, end);
    if (*p == ',') {
      ++p;
    } else if (*p == ']') {
      ++p;
      return true;
    } else {
      return false;
    }
  }
}

// ParseUsualTxn for the compact layout {"tid":T,"sid":S,"sts":{..},"cts":{..},"ops":[..]}.
template <DeferLists kDefer>
const char* ParseCompactTxn(const char* p, const char* end, ParsedTxn* txn) {
  if (!usual::Match(p, "{\"tid\":")) return nullptr;
  p += 7;
  if (!usual::Id(p, end, &txn->tid, &txn->tid_numeric) || !usual::Match(p, ",\"sid\":"))
    return nullptr;
  p += 7;
  if (!usual::Id(p, end, &txn->sid, &txn->sid_numeric) || !usual::Match(p, ",\"sts\":"))
    return nullptr;
  p += 7;
  if (!usual::Hlc(p, end, &txn->sts) || !usual::Match(p, ",\"cts\":")) return nullptr;
  p += 7;
  if (!usual::Hlc(p, end, &txn->cts) || !usual::Match(p, ",\"ops\":[")) return nullptr;
  p += 8;
  if (!ParseUsualOps<kDefer>(p, end, txn) || *p != '}') return nullptr;
  ++p;
  if (p > end || txn->sts > txn->cts) return nullptr;
  return p;
}

template <DeferLists kDefer>
const char* ParseUsualTxnAs(const char* begin, const char* end, ParsedTxn* txn) {
  enum Member : unsigned { kTid = 1, kSid = 2, kSts = 4, kCts = 8, kOps = 16 };
  txn->ops.clear();
  txn->elements.clear();
  txn->list_text.clear();
  txn->has_sts = true;
  txn->xid = 0;
  txn->has_snapshot = false;
  if (const char* compact_end = ParseCompactTxn<kDefer>(begin, end, txn)) return compact_end;
  // Any other layout.
  txn->ops.clear();
  txn->elements.clear();
  txn->list_text.clear();
  const char* p = begin;
  if (*p != '{') return nullptr;
  ++p;
  unsigned seen = 0;
  bool more = true;
  while (more) {
    usual::SkipSpace(p, end);
    unsigned member = 0;
    if (p[0] == '"' && p[4] == '"') {
      const std::string_view name(p + 1, 3);
      if (usual::Is3(name, "tid")) {
        member = kTid;
      } else if (usual::Is3(name, "sid")) {
        member = kSid;
      } else if (usual::Is3(name, "sts")) {
        member = kSts;
      } else if (usual::Is3(name, "cts")) {
        member = kCts;
      } else if (usual::Is3(name, "ops")) {
        member = kOps;
      }
    }
    if (member == 0) {
      // Another member (its name is read in whole, so that a bad one is left to ParseTxn).
      std::string_view name;
      if (!usual::Name(p, end, &name)) return nullptr;
      // The isowatch extension (an xid and a snapshot) is read by ParseTxn.
      if (name == "xid" || name == "snapshot") return nullptr;
      usual::SkipSpace(p, end);
      if ((p = usual::SkipScalar(p, end)) == nullptr) return nullptr;
      if (!usual::AfterMember(p, end, &more)) return nullptr;
      continue;
    }
    p += 5;
    if (!usual::Consume(p, end, ':')) return nullptr;
    usual::SkipSpace(p, end);
    if ((seen & member) != 0) return nullptr;
    seen |= member;
    switch (member) {
      case kTid:
        if (!usual::Id(p, end, &txn->tid, &txn->tid_numeric)) return nullptr;
        break;
      case kSid:
        if (!usual::Id(p, end, &txn->sid, &txn->sid_numeric)) return nullptr;
        break;
      case kSts:
        if (!usual::Hlc(p, end, &txn->sts)) return nullptr;
        break;
      case kCts:
        if (!usual::Hlc(p, end, &txn->cts)) return nullptr;
        break;
      default:
        if (*p != '[') return nullptr;
        ++p;
        if (!ParseUsualOps<kDefer>(p, end, txn)) return nullptr;
        break;
    }
    if (!usual::AfterMember(p, end, &more)) return nullptr;
  }
  if (seen != (kTid | kSid | kSts | kCts | kOps) || p > end || txn->sts > txn->cts) return nullptr;
  return p;
}

}  // namespace

const char* ParseUsualTxn(const char* begin, const char* end, ParsedTxn* txn, DeferLists defer) {
  switch (defer) {
    case DeferLists::kNo:
      break;
    case DeferLists::kCopy:
      return ParseUsualTxnAs<DeferLists::kCopy>(begin, end, txn);
    case DeferLists::kInPlace:
      return ParseUsualTxnAs<DeferLists::kInPlace>(begin, end, txn);
  }
  return ParseUsualTxnAs<DeferLists::kNo>(begin, end, txn);
}

}  // namespace isowatch::formats::internal
