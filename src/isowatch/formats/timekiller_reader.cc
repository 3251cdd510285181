// SPDX-License-Identifier: Apache-2.0
// Reader of TimeKiller JSON histories (see timekiller.h).
//
// The history document is read in chunks by internal::ChunkedJsonArray, and each transaction
// object is parsed on its own, straight from the chunk buffer. A transaction of the usual shape
// (see TimeKillerParser::ParseUsualTxn) is read by a dedicated parser that also finds where it
// ends; any other, and any error, is left to the general parser: the array splitter delimits the
// element and simdjson's On-Demand API reads it. Both give the same result for what the dedicated
// parser accepts. A transaction's operations are collected in reusable vectors (its members may
// come in any order, so "ops" may precede "tid") and then handed to the HistoryBuilder.
//
// Semantics, beyond the format described in timekiller.h:
//  - "tid" and "sid" may be numbers (integers) or strings; 67 and "67" name the same id. The
//    numeric flag is kept so the writer emits numbers as numbers.
//  - "sts"/"cts" are {"p": P, "l": L}; each part is an int64 number or a decimal string; a missing
//    "l" is 0; extra members are ignored.
//  - Op types are compared case-insensitively: w/write, r/read, a/append.
//  - A read with "v": null (or without "v") is recorded as a read of the absent value. It stays
//    absent even when ReadOptions::initial_value is set (0 included): that value becomes the
//    history's default initial value, and checkers compare absent reads against it. For a list
//    key, the builder turns such a read into a read of the empty list; a key only ever read that
//    way counts as a list when every other key of the history is a list (it then gets an empty
//    initial list).
//  - A write with "v": null is accepted (the reference checker accepts it) and recorded as a
//    write of the absent value.
//  - A key is either a register (written, or read with a scalar) or a list (appended to, or read
//    with an array) for the whole history, the initial transaction included.
//  - All transactions are committed; the file order of a session's transactions is its session
//    order.
#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include <fmt/format.h>
#include <simdjson.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/internal/chunked_json_array.h"
#include "isowatch/formats/internal/timekiller_internal.h"
#include "isowatch/formats/timekiller.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::formats {
namespace {

using internal::FileSource;

namespace od = simdjson::ondemand;
using history::HistoryBuilder;
using history::Timestamp;
using history::Value;

constexpr size_t kSimdjsonPadding = simdjson::SIMDJSON_PADDING;
static_assert(internal::ChunkedJsonArray::kPadding >= kSimdjsonPadding);

enum class OpType : uint8_t { kWrite, kRead, kAppend };
// What an op's "v" held.
enum class ValueForm : uint8_t { kMissing, kNull, kInt, kList };

// An operation parsed but not yet given to the builder.
struct PendingOp {
  OpType type = OpType::kRead;
  ValueForm form = ValueForm::kMissing;
  int64_t key = 0;
  int64_t value = 0;
  uint32_t list_begin = 0;  // kList: the elements, in TimeKillerParser::elements_
  uint32_t list_size = 0;
  const char* where = nullptr;  // the op's '{'
};

// How a key has been used so far.
constexpr uint8_t kUsedAsRegister = 1;
constexpr uint8_t kUsedAsList = 2;

constexpr size_t kMinParserCapacity = size_t{64} << 10;

// ASCII case-insensitive equality with a lower-case `lower`.
bool EqualsLower(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

// Parses a decimal int64 (optional '-', digits only).
bool ParseDecimal(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *out, 10);
  return ec == std::errc() && ptr == end;
}

std::string_view TrimTrailingSpace(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// Shows text from the input in a message: printable ASCII as is, other bytes as \xHH, at most
// 40 bytes.
std::string Shown(std::string_view s) {
  std::string out;
  const size_t n = std::min<size_t>(s.size(), 40);
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (n < s.size()) out += "...";
  return out;
}

// The first byte of [p, end) that does not start a valid UTF-8 sequence, or nullptr.
const char* FindInvalidUtf8(const char* p, const char* end) {
  const auto* s = reinterpret_cast<const unsigned char*>(p);
  const auto* e = reinterpret_cast<const unsigned char*>(end);
  while (s < e) {
    const unsigned char c = *s;
    size_t n = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xbf;
    if (c < 0x80) {
      ++s;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return reinterpret_cast<const char*>(s);
    }
    if (static_cast<size_t>(e - s) <= n) return reinterpret_cast<const char*>(s);
    if (s[1] < lo || s[1] > hi) return reinterpret_cast<const char*>(s);
    for (size_t i = 2; i <= n; ++i) {
      if (s[i] < 0x80 || s[i] > 0xbf) return reinterpret_cast<const char*>(s);
    }
    s += n + 1;
  }
  return nullptr;
}

// The first control character inside a string in [p, end), or nullptr.
const char* FindUnescapedControl(const char* p, const char* end) {
  bool in_string = false;
  for (; p < end; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if (in_string) {
      if (c == '\\') {
        ++p;
      } else if (c == '"') {
        in_string = false;
      } else if (c < 0x20) {
        return p;
      }
    } else if (c == '"') {
      in_string = true;
    }
  }
  return nullptr;
}

// The name of `field`; unescaped (into the parser's string buffer) only if it has escapes.
[[gnu::always_inline]] inline simdjson::error_code FieldName(od::field& field,
                                                             std::string_view* name) {
  const char* raw = field.key().raw();
  size_t n = 0;
  while (raw[n] != '"' && raw[n] != '\\') ++n;
  if (raw[n] == '"') {
    *name = std::string_view(raw, n);
    return simdjson::SUCCESS;
  }
  return field.unescaped_key().get(*name);
}

// The text of the string `v`; unescaped only if it has escapes (stage 1 has already rejected
// unescaped control characters and bad UTF-8). INCORRECT_TYPE if `v` is not a string.
[[gnu::always_inline]] inline simdjson::error_code StringText(od::value& v,
                                                              std::string_view* text) {
  const std::string_view raw = v.raw_json_token();
  if (raw.empty() || raw[0] != '"') return simdjson::INCORRECT_TYPE;
  const char* s = raw.data() + 1;
  size_t n = 0;
  while (s[n] != '"' && s[n] != '\\') ++n;
  if (s[n] == '"') {
    *text = std::string_view(s, n);
    return simdjson::SUCCESS;
  }
  return v.get_string().get(*text);
}

// Whether the document has been read to its end.
bool AtEnd(od::document& doc) { return doc.current_location().error() == simdjson::OUT_OF_BOUNDS; }

// "line:column" of `where` in a document held whole from `begin`.
std::string LineColumnIn(const char* begin, const char* where) {
  uint64_t line = 1;
  const char* line_start = begin;
  for (const char* p = begin; p < where; ++p) {
    if (*p == '\n') {
      ++line;
      line_start = p + 1;
    }
  }
  return fmt::format("{}:{}", line, where - line_start + 1);
}

// Helpers of TimeKillerParser::ParseUsualTxn. They read from a transaction element, which ends
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
    uint64_t want = 0;
    std::memcpy(&want, s, N - 1);
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

// Parses TimeKiller transactions and initial-transaction documents into a HistoryBuilder. Errors
// are recorded as (position, message) and turned into a Status by the caller, which knows how to
// name positions. Not thread-safe.
class TimeKillerParser {
 public:
  TimeKillerParser(HistoryBuilder* builder, internal::TxnParsers parsers)
      : builder_(builder), usual_first_(parsers == internal::TxnParsers::kUsualFirst) {}

  // Reads the transaction array from `source`.
  absl::Status ReadHistory(internal::ByteSource* source, const std::string& source_name,
                           size_t chunk_size);
  // In a history whose keys are all lists, a key that is only ever read with null (or without
  // "v") is a list too: marks it so that the builder turns those reads into empty-list reads.
  void MarkUndecidedKeysAsLists();
  // Reads an initial-transaction document. `json` must have SIMDJSON_PADDING readable bytes
  // after its end.
  absl::Status ReadInitial(std::string_view json, const std::string& source_name);

 private:
  struct CachedKey {
    int64_t key = 0;
    KeyId id;  // invalid = empty slot
  };
  static constexpr int kKeyCacheBits = 12;
  static constexpr int64_t kMaxSmallKeys = int64_t{1} << 20;
  // Sizing: how many transactions are read before the builder is sized from them, and the
  // fewest bytes a transaction ({"tid":1,"sid":1,"sts":{"p":1},"cts":{"p":1},"ops":[]}) or an op
  // ({"t":"r","k":1},) can take.
  static constexpr uint64_t kSizingSample = 1000;
  static constexpr uint64_t kMinTxnBytes = 52;
  static constexpr uint64_t kMinOpBytes = 16;

  // Records an error at `where` and returns false.
  bool Fail(const char* where, std::string message) {
    fail_where_ = where;
    fail_message_ = std::move(message);
    return false;
  }
  // Records a simdjson error met while reading `what`.
  bool FailJson(const char* where, simdjson::error_code error, std::string_view what);
  // The raw text of `v` (for messages), or "" if it cannot be had.
  static std::string_view RawToken(od::value& v);
  static const char* Where(od::value& v, const char* fallback);

  // A transaction object; fills the fields below and ops_/elements_.
  bool ParseTxn(od::object& obj, const char* start);
  // The transaction object at `begin`, if it has the usual shape and ends before `limit`: the
  // five members once each, timestamps of integers or decimal strings, ids that are integers or
  // strings, ops {"t", "k", "v"} with integer keys and values, no "-0" and no integer of more
  // than 18 digits, no escapes nor non-ASCII bytes in strings, and members of other names only
  // with numbers, strings, true, false or null as values. Fills what ParseTxn fills and returns
  // the end of the object, or returns nullptr, leaving the transaction to ParseTxn, which accepts
  // everything this accepts, with the same meaning, and more. At least
  // ChunkedJsonArray::kPadding bytes past `limit` must be readable.
  const char* ParseUsualTxn(const char* begin, const char* limit);
  // ParseUsualTxn for the compact layout {"tid":T,"sid":S,"sts":{..},"cts":{..},"ops":[..]}.
  const char* ParseCompactTxn(const char* begin, const char* limit);
  // The elements of an "ops" array after its '[', and the ']'.
  bool ParseUsualOps(const char*& p, const char* end);
  bool ParseUsualOp(const char*& p, const char* end);
  // The "v" of an op, for ParseUsualOp.
  bool ParseUsualValue(const char*& p, const char* end, PendingOp* op);
  bool ParseId(od::value& v, const char* where, std::string_view name, std::string_view* text,
               bool* numeric);
  bool ParseHlc(od::value& v, const char* where, std::string_view name, Timestamp* ts);
  // The isowatch extension: "xid" (a positive integer) and "snapshot" ("xmin:xmax:xip,...").
  bool ParseXid(od::value& v, const char* where);
  bool ParseSnapshotText(od::value& v, const char* where);
  // Part `part` ("p" or "l") of timestamp `name`.
  bool ParseHlcPart(od::value& v, const char* where, std::string_view name, std::string_view part,
                    int64_t* out);
  // The "ops" array, into ops_ and elements_.
  bool ParseOps(od::value& v, const char* where);
  bool ParseOp(od::value& v, size_t index);
  bool ParseOpValue(od::value& v, const char* where, size_t index, PendingOp* op);
  // Gives the parsed transaction to the builder.
  bool EmitTxn(const char* start, uint64_t offset);
  // Reserves room in the builder for a source of `source_size` bytes whose first kSizingSample
  // transactions took `sample_bytes` bytes and had `sample_ops` ops.
  void ReserveFor(uint64_t source_size, uint64_t sample_bytes, uint64_t sample_ops);
  // Records how `key` is used; fails if it was used the other way before.
  bool UseKey(KeyId key, int64_t key_value, uint8_t use, size_t op_index, const char* where);
  // Turns a simdjson error from iterate() into a positioned failure.
  bool FailIterate(simdjson::error_code error, const char* begin, const char* end);
  // HistoryBuilder::IntKey through small_keys_ or key_cache_.
  KeyId InternKey(int64_t key) {
    if (static_cast<uint64_t>(key) < small_keys_.size()) {
      KeyId& id = small_keys_[static_cast<size_t>(key)];
      if (!id.valid()) id = builder_->IntKey(key);
      return id;
    }
    if (key >= 0 && key < kMaxSmallKeys) {
      small_keys_.resize(std::min<size_t>(
          std::max<size_t>({static_cast<size_t>(key) + 1, 2 * small_keys_.size(), 1024}),
          kMaxSmallKeys));
      return InternKey(key);
    }
    const size_t slot = static_cast<size_t>((static_cast<uint64_t>(key) * 0x9e3779b97f4a7c15ULL) >>
                                            (64 - kKeyCacheBits));
    CachedKey& cached = key_cache_[slot];
    if (cached.id.valid() && cached.key == key) return cached.id;
    cached.key = key;
    cached.id = builder_->IntKey(key);
    return cached.id;
  }

  HistoryBuilder* builder_;
  // Whether ReadHistory tries ParseUsualTxn before the general parser.
  bool usual_first_;
  od::parser parser_;
  const char* fail_where_ = nullptr;
  std::string fail_message_;

  // The transaction being parsed.
  std::string_view tid_;
  std::string_view sid_;
  bool tid_numeric_ = false;
  bool sid_numeric_ = false;
  Timestamp sts_;
  Timestamp cts_;
  bool has_sts_ = true;
  uint64_t xid_ = 0;
  bool has_snapshot_ = false;
  uint64_t xmin_ = 0;
  uint64_t xmax_ = 0;
  std::vector<uint64_t> xip_;
  std::vector<PendingOp> ops_;
  std::vector<int64_t> elements_;
  // Per key id: kUsedAsRegister / kUsedAsList bits.
  std::vector<uint8_t> key_use_;

  // The ids of keys 0 <= k < kMaxSmallKeys (invalid: not seen yet), the usual kind of key.
  std::vector<KeyId> small_keys_;
  // A direct-mapped cache in front of HistoryBuilder::IntKey for other keys: the keys of a
  // history repeat, and most accesses go to a few hot ones.
  std::vector<CachedKey> key_cache_ = std::vector<CachedKey>(size_t{1} << kKeyCacheBits);
};

std::string_view TimeKillerParser::RawToken(od::value& v) {
  return TrimTrailingSpace(v.raw_json_token());
}

const char* TimeKillerParser::Where(od::value& v, const char* fallback) {
  std::string_view raw = v.raw_json_token();
  return raw.data() == nullptr ? fallback : raw.data();
}

bool TimeKillerParser::FailJson(const char* where, simdjson::error_code error,
                                std::string_view what) {
  switch (error) {
    case simdjson::INCORRECT_TYPE:
    case simdjson::NUMBER_ERROR:
    case simdjson::NUMBER_OUT_OF_RANGE:
      return Fail(where, fmt::format("expected {}", what));
    default:
      return Fail(where, fmt::format("invalid JSON while reading {}: {}", what,
                                     simdjson::error_message(error)));
  }
}

bool TimeKillerParser::FailIterate(simdjson::error_code error, const char* begin, const char* end) {
  const char* where = begin;
  if (error == simdjson::UTF8_ERROR) {
    if (const char* bad = FindInvalidUtf8(begin, end)) where = bad;
    return Fail(where, "invalid UTF-8");
  }
  if (error == simdjson::UNESCAPED_CHARS) {
    if (const char* bad = FindUnescapedControl(begin, end)) where = bad;
    return Fail(where, "unescaped control character in a string");
  }
  return Fail(where, fmt::format("invalid JSON: {}", simdjson::error_message(error)));
}

bool TimeKillerParser::ParseId(od::value& v, const char* where, std::string_view name,
                               std::string_view* text, bool* numeric) {
  od::json_type type;
  if (auto error = v.type().get(type)) {
    return FailJson(where, error, fmt::format("\"{}\" to be an integer or a string", name));
  }
  if (type == od::json_type::string) {
    if (auto error = StringText(v, text)) {
      return FailJson(where, error, fmt::format("\"{}\" to be a valid string", name));
    }
    *numeric = false;
    return true;
  }
  if (type == od::json_type::number) {
    std::string_view raw = RawToken(v);
    if (!internal::IsJsonInteger(raw)) {
      return Fail(where, fmt::format("expected \"{}\" to be an integer or a string, found {}", name,
                                     Shown(raw)));
    }
    *text = raw;
    *numeric = true;
    return true;
  }
  return Fail(where, fmt::format("expected \"{}\" to be an integer or a string, found {}", name,
                                 Shown(RawToken(v))));
}

bool TimeKillerParser::ParseHlcPart(od::value& v, const char* where, std::string_view name,
                                    std::string_view part, int64_t* out) {
  od::json_type type;
  if (v.type().get(type) == simdjson::SUCCESS) {
    if (type == od::json_type::number) {
      if (v.get_int64().get(*out) == simdjson::SUCCESS) return true;
    } else if (type == od::json_type::string) {
      std::string_view s;
      if (StringText(v, &s) == simdjson::SUCCESS && ParseDecimal(s, out)) return true;
      return Fail(where, fmt::format("expected \"{}.{}\" to be a 64-bit integer or a decimal "
                                     "string, found \"{}\"",
                                     name, part, Shown(s)));
    }
  }
  return Fail(where,
              fmt::format("expected \"{}.{}\" to be a 64-bit integer or a decimal string, found {}",
                          name, part, Shown(RawToken(v))));
}

bool TimeKillerParser::ParseHlc(od::value& v, const char* where, std::string_view name,
                                Timestamp* ts) {
  od::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) {
    return Fail(where, fmt::format("expected \"{}\" to be an object {{\"p\", \"l\"}}, found {}",
                                   name, Shown(RawToken(v))));
  }
  bool has_p = false;
  bool has_l = false;
  ts->logical = 0;
  for (auto field_result : obj) {
    if (auto error = field_result.error()) {
      return FailJson(where, error, fmt::format("\"{}\" to be an object {{\"p\", \"l\"}}", name));
    }
    od::field& field = field_result.value_unsafe();
    const char* key_where = field.key().raw() - 1;
    std::string_view key;
    if (auto error = FieldName(field, &key)) {
      return FailJson(key_where, error, "a member name");
    }
    if (key == "p" || key == "l") {
      bool& seen = key == "p" ? has_p : has_l;
      if (seen) {
        return Fail(key_where, fmt::format("\"{}\" has two members \"{}\"", name, key));
      }
      seen = true;
      if (!ParseHlcPart(field.value(), key_where, name, key,
                        key == "p" ? &ts->physical : &ts->logical)) {
        return false;
      }
    }
  }
  if (!has_p) return Fail(where, fmt::format("\"{}\" has no \"p\"", name));
  return true;
}

bool TimeKillerParser::ParseOpValue(od::value& v, const char* where, size_t index, PendingOp* op) {
  od::json_type type;
  if (auto error = v.type().get(type)) {
    return FailJson(where, error, "\"v\" to be an integer, null or an array of integers");
  }
  switch (type) {
    case od::json_type::null: {
      bool is_null = false;
      if (v.is_null().get(is_null) != simdjson::SUCCESS || !is_null) {
        return Fail(where, fmt::format("op #{}: expected \"v\" to be an integer, null or an array "
                                       "of integers, found {}",
                                       index, Shown(RawToken(v))));
      }
      op->form = ValueForm::kNull;
      return true;
    }
    case od::json_type::number:
      if (v.get_int64().get(op->value) != simdjson::SUCCESS) {
        return Fail(where, fmt::format("op #{}: expected \"v\" to be a 64-bit integer, found {}",
                                       index, Shown(RawToken(v))));
      }
      op->form = ValueForm::kInt;
      return true;
    case od::json_type::array: {
      od::array array;
      if (auto error = v.get_array().get(array)) {
        return FailJson(where, error, "\"v\" to be an array of integers");
      }
      op->form = ValueForm::kList;
      op->list_begin = static_cast<uint32_t>(elements_.size());
      size_t element_index = 0;
      for (auto element_result : array) {
        if (auto error = element_result.error()) {
          return FailJson(where, error, fmt::format("op #{}: \"v\" to be an array", index));
        }
        od::value& element = element_result.value_unsafe();
        int64_t x = 0;
        if (element.get_int64().get(x) != simdjson::SUCCESS) {
          return Fail(Where(element, where),
                      fmt::format("op #{}: expected element {} of \"v\" to be a 64-bit integer, "
                                  "found {}",
                                  index, element_index, Shown(RawToken(element))));
        }
        elements_.push_back(x);
        ++element_index;
      }
      op->list_size = static_cast<uint32_t>(elements_.size() - op->list_begin);
      return true;
    }
    default:
      return Fail(where, fmt::format("op #{}: expected \"v\" to be an integer, null or an array of "
                                     "integers, found {}",
                                     index, Shown(RawToken(v))));
  }
}

bool TimeKillerParser::ParseOp(od::value& v, size_t index) {
  const char* op_where = Where(v, nullptr);
  od::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) {
    return Fail(op_where,
                fmt::format("op #{}: expected an object {{\"t\", \"k\", \"v\"}}, found {}", index,
                            Shown(RawToken(v))));
  }
  PendingOp op;
  op.where = op_where;
  std::string_view type_text;
  const char* type_where = nullptr;
  const char* key_member_where = nullptr;
  const char* value_where = nullptr;
  for (auto field_result : obj) {
    if (auto error = field_result.error()) {
      return FailJson(op_where, error, fmt::format("op #{} to be an object", index));
    }
    od::field& field = field_result.value_unsafe();
    const char* member_where = field.key().raw() - 1;
    std::string_view key;
    if (auto error = FieldName(field, &key)) {
      return FailJson(member_where, error, "a member name");
    }
    if (key.size() != 1) continue;
    const char** seen = nullptr;
    switch (key[0]) {
      case 't':
        seen = &type_where;
        break;
      case 'k':
        seen = &key_member_where;
        break;
      case 'v':
        seen = &value_where;
        break;
      default:
        continue;
    }
    if (*seen != nullptr) {
      return Fail(member_where, fmt::format("op #{}: two members \"{}\"", index, key));
    }
    *seen = member_where;
    od::value& value = field.value();
    switch (key[0]) {
      case 't':
        if (StringText(value, &type_text) != simdjson::SUCCESS) {
          return Fail(member_where, fmt::format("op #{}: expected \"t\" to be a string, found {}",
                                                index, Shown(RawToken(value))));
        }
        break;
      case 'k':
        if (value.get_int64().get(op.key) != simdjson::SUCCESS) {
          return Fail(member_where,
                      fmt::format("op #{}: expected \"k\" to be a 64-bit integer, found {}", index,
                                  Shown(RawToken(value))));
        }
        break;
      default:
        if (!ParseOpValue(value, member_where, index, &op)) return false;
        break;
    }
  }
  if (type_where == nullptr) return Fail(op_where, fmt::format("op #{}: missing \"t\"", index));
  if (key_member_where == nullptr) {
    return Fail(op_where, fmt::format("op #{}: missing \"k\"", index));
  }
  if (EqualsLower(type_text, "w") || EqualsLower(type_text, "write")) {
    op.type = OpType::kWrite;
  } else if (EqualsLower(type_text, "r") || EqualsLower(type_text, "read")) {
    op.type = OpType::kRead;
  } else if (EqualsLower(type_text, "a") || EqualsLower(type_text, "append")) {
    op.type = OpType::kAppend;
  } else {
    return Fail(type_where, fmt::format("op #{}: unknown op type \"{}\" (expected w, write, r, "
                                        "read, a or append)",
                                        index, Shown(type_text)));
  }
  if (op.type != OpType::kRead) {
    const char* what = op.type == OpType::kWrite ? "a write" : "an append";
    if (op.form == ValueForm::kMissing) {
      return Fail(op_where, fmt::format("op #{}: {} needs \"v\"", index, what));
    }
    if (op.form == ValueForm::kList) {
      return Fail(
          value_where,
          fmt::format("op #{}: the \"v\" of {} must be one integer, not an array", index, what));
    }
    if (op.type == OpType::kAppend && op.form == ValueForm::kNull) {
      return Fail(
          value_where,
          fmt::format("op #{}: the \"v\" of an append must be an integer, not null", index));
    }
  }
  ops_.push_back(op);
  return true;
}

bool TimeKillerParser::ParseOps(od::value& v, const char* where) {
  od::array array;
  if (v.get_array().get(array) != simdjson::SUCCESS) {
    return Fail(where,
                fmt::format("expected \"ops\" to be an array, found {}", Shown(RawToken(v))));
  }
  size_t index = 0;
  for (auto op_result : array) {
    if (auto error = op_result.error()) {
      return FailJson(where, error, "\"ops\" to be an array of objects");
    }
    od::value& op_value = op_result.value_unsafe();
    if (!ParseOp(op_value, index)) return false;
    ++index;
  }
  return true;
}

bool TimeKillerParser::ParseUsualValue(const char*& p, const char* end, PendingOp* op) {
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
  ++p;
  op->form = ValueForm::kList;
  op->list_begin = static_cast<uint32_t>(elements_.size());
  usual::SkipSpace(p, end);
  if (*p == ']') {
    ++p;
  } else {
    while (true) {
      usual::SkipSpace(p, end);
      int64_t x = 0;
      if (!usual::Int(p, &x)) return false;
      elements_.push_back(x);
      usual::SkipSpace(p, end);
      if (*p == ',') {
        ++p;
      } else if (*p == ']') {
        ++p;
        break;
      } else {
        return false;
      }
    }
  }
  op->list_size = static_cast<uint32_t>(elements_.size() - op->list_begin);
  return true;
}

bool TimeKillerParser::ParseUsualOp(const char*& p, const char* end) {
  usual::SkipSpace(p, end);
  if (*p != '{') return false;
  PendingOp op;
  op.where = p;
  std::string_view type_text;
  bool has_type = false;
  bool has_key = false;
  // First the compact form {"t":"x","k":K,"v":V} or {"t":"x","k":K}, byte by byte.
  const char* q = p;
  const size_t elements_before = elements_.size();
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
          ok = ParseUsualValue(q, end, &op);
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
    elements_.resize(elements_before);
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
          if (has_value || !ParseUsualValue(p, end, &op)) return false;
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
  ops_.push_back(op);
  return true;
}

bool TimeKillerParser::ParseUsualOps(const char*& p, const char* end) {
  usual::SkipSpace(p, end);
  if (*p == ']') {
    ++p;
    return true;
  }
  while (true) {
    if (!ParseUsualOp(p, end)) return false;
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

const char* TimeKillerParser::ParseCompactTxn(const char* p, const char* end) {
  if (!usual::Match(p, "{\"tid\":")) return nullptr;
  p += 7;
  if (!usual::Id(p, end, &tid_, &tid_numeric_) || !usual::Match(p, ",\"sid\":")) return nullptr;
  p += 7;
  if (!usual::Id(p, end, &sid_, &sid_numeric_) || !usual::Match(p, ",\"sts\":")) return nullptr;
  p += 7;
  if (!usual::Hlc(p, end, &sts_) || !usual::Match(p, ",\"cts\":")) return nullptr;
  p += 7;
  if (!usual::Hlc(p, end, &cts_) || !usual::Match(p, ",\"ops\":[")) return nullptr;
  p += 8;
  if (!ParseUsualOps(p, end) || *p != '}') return nullptr;
  ++p;
  if (p > end || sts_ > cts_) return nullptr;
  return p;
}

const char* TimeKillerParser::ParseUsualTxn(const char* begin, const char* end) {
  enum Member : unsigned { kTid = 1, kSid = 2, kSts = 4, kCts = 8, kOps = 16 };
  ops_.clear();
  elements_.clear();
  has_sts_ = true;
  xid_ = 0;
  has_snapshot_ = false;
  if (const char* compact_end = ParseCompactTxn(begin, end)) return compact_end;
  // Any other layout.
  ops_.clear();
  elements_.clear();
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
        if (!usual::Id(p, end, &tid_, &tid_numeric_)) return nullptr;
        break;
      case kSid:
        if (!usual::Id(p, end, &sid_, &sid_numeric_)) return nullptr;
        break;
      case kSts:
        if (!usual::Hlc(p, end, &sts_)) return nullptr;
        break;
      case kCts:
        if (!usual::Hlc(p, end, &cts_)) return nullptr;
        break;
      default:
        if (*p != '[') return nullptr;
        ++p;
        if (!ParseUsualOps(p, end)) return nullptr;
        break;
    }
    if (!usual::AfterMember(p, end, &more)) return nullptr;
  }
  if (seen != (kTid | kSid | kSts | kCts | kOps) || p > end || sts_ > cts_) return nullptr;
  return p;
}

bool TimeKillerParser::ParseXid(od::value& v, const char* where) {
  std::string_view raw = RawToken(v);
  if (v.get_uint64().get(xid_) != simdjson::SUCCESS || xid_ == 0) {
    return Fail(where, fmt::format("expected \"xid\" to be a positive 64-bit integer, found {}",
                                   Shown(raw)));
  }
  return true;
}

bool TimeKillerParser::ParseSnapshotText(od::value& v, const char* where) {
  std::string_view text;
  if (StringText(v, &text) != simdjson::SUCCESS) {
    return Fail(where, fmt::format("expected \"snapshot\" to be a string \"xmin:xmax:xip,...\", "
                                   "found {}",
                                   Shown(RawToken(v))));
  }
  if (absl::Status s = history::ParseSnapshot(text, &xmin_, &xmax_, &xip_); !s.ok()) {
    return Fail(where, std::string(s.message()));
  }
  has_snapshot_ = true;
  return true;
}

bool TimeKillerParser::ParseTxn(od::object& obj, const char* start) {
  ops_.clear();
  elements_.clear();
  xid_ = 0;
  has_snapshot_ = false;
  const char* tid_where = nullptr;
  const char* sid_where = nullptr;
  const char* sts_where = nullptr;
  const char* cts_where = nullptr;
  const char* ops_where = nullptr;
  const char* xid_where = nullptr;
  const char* snapshot_where = nullptr;
  for (auto field_result : obj) {
    if (auto error = field_result.error()) {
      return FailJson(start, error, "a transaction object");
    }
    od::field& field = field_result.value_unsafe();
    const char* member_where = field.key().raw() - 1;
    std::string_view key;
    if (auto error = FieldName(field, &key)) {
      return FailJson(member_where, error, "a member name");
    }
    if (key.size() != 3 && key != "snapshot") continue;
    const char** seen = nullptr;
    if (key == "snapshot") {
      seen = &snapshot_where;
    } else if (key == "xid") {
      seen = &xid_where;
    } else if (key == "tid") {
      seen = &tid_where;
    } else if (key == "sid") {
      seen = &sid_where;
    } else if (key == "sts") {
      seen = &sts_where;
    } else if (key == "cts") {
      seen = &cts_where;
    } else if (key == "ops") {
      seen = &ops_where;
    } else {
      continue;
    }
    if (*seen != nullptr) return Fail(member_where, fmt::format("two members \"{}\"", key));
    *seen = member_where;
    od::value& value = field.value();
    bool ok = true;
    if (seen == &tid_where) {
      ok = ParseId(value, member_where, "tid", &tid_, &tid_numeric_);
    } else if (seen == &sid_where) {
      ok = ParseId(value, member_where, "sid", &sid_, &sid_numeric_);
    } else if (seen == &sts_where) {
      ok = ParseHlc(value, member_where, "sts", &sts_);
    } else if (seen == &cts_where) {
      ok = ParseHlc(value, member_where, "cts", &cts_);
    } else if (seen == &xid_where) {
      ok = ParseXid(value, member_where);
    } else if (seen == &snapshot_where) {
      ok = ParseSnapshotText(value, member_where);
    } else {
      ok = ParseOps(value, member_where);
    }
    if (!ok) return false;
  }
  if (tid_where == nullptr) return Fail(start, "missing \"tid\"");
  if (sid_where == nullptr) return Fail(start, "missing \"sid\"");
  if (sts_where != nullptr && snapshot_where != nullptr) {
    return Fail(snapshot_where,
                "a transaction with both \"sts\" and \"snapshot\" (a snapshot replaces the start)");
  }
  if (sts_where == nullptr && snapshot_where == nullptr) {
    return Fail(start, "missing \"sts\" (or an isowatch \"snapshot\")");
  }
  if (cts_where == nullptr) return Fail(start, "missing \"cts\"");
  if (ops_where == nullptr) return Fail(start, "missing \"ops\"");
  has_sts_ = sts_where != nullptr;
  if (has_sts_ && sts_ > cts_) {
    return Fail(sts_where,
                fmt::format("\"sts\" {} is after \"cts\" {}", sts_.ToString(), cts_.ToString()));
  }
  return true;
}

bool TimeKillerParser::UseKey(KeyId key, int64_t key_value, uint8_t use, size_t op_index,
                              const char* where) {
  if (key.value() >= key_use_.size()) key_use_.resize(key.value() + 1, 0);
  uint8_t& used = key_use_[key.value()];
  if ((used | use) == (kUsedAsRegister | kUsedAsList)) {
    return Fail(where,
                use == kUsedAsList
                    ? fmt::format("op #{}: key {} is used as a list here (appended to or read as "
                                  "an array) but as a register elsewhere",
                                  op_index, key_value)
                    : fmt::format("op #{}: key {} is used as a register here (written or read as "
                                  "a scalar) but as a list elsewhere",
                                  op_index, key_value));
  }
  used |= use;
  return true;
}

bool TimeKillerParser::EmitTxn(const char* start, uint64_t offset) {
  history::TxnHeader header{.id = tid_,
                            .id_numeric = tid_numeric_,
                            .session = sid_,
                            .session_numeric = sid_numeric_,
                            .start = has_sts_ ? std::optional<Timestamp>(sts_) : std::nullopt,
                            .commit = cts_,
                            .source_offset = offset,
                            .xid = xid_};
  if (has_snapshot_) header.snapshot = history::SnapshotView{xmin_, xmax_, xip_};
  if (absl::Status s = builder_->BeginTxn(header); !s.ok()) {
    return Fail(start, std::string(s.message()));
  }
  for (size_t i = 0; i < ops_.size(); ++i) {
    const PendingOp& op = ops_[i];
    const KeyId key = InternKey(op.key);
    if (key.value() >= key_use_.size()) key_use_.resize(key.value() + 1, 0);
    uint8_t use = 0;
    if (op.type == OpType::kAppend || op.form == ValueForm::kList) {
      use = kUsedAsList;
    } else if (op.type == OpType::kWrite || op.form == ValueForm::kInt) {
      use = kUsedAsRegister;
    }
    if (use != 0 && !UseKey(key, op.key, use, i, op.where)) {
      builder_->AbandonTxn();
      return false;
    }
    switch (op.type) {
      case OpType::kWrite:
        builder_->Write(key, op.form == ValueForm::kInt ? Value::Int(op.value) : Value::Absent());
        break;
      case OpType::kAppend:
        builder_->Append(key, Value::Int(op.value));
        break;
      case OpType::kRead:
        if (op.form == ValueForm::kList) {
          builder_->ListReadBegin(key);
          for (uint32_t e = 0; e < op.list_size; ++e) {
            builder_->ListReadElement(Value::Int(elements_[op.list_begin + e]));
          }
          builder_->ListReadEnd();
        } else {
          builder_->Read(key, op.form == ValueForm::kInt ? Value::Int(op.value) : Value::Absent());
        }
        break;
    }
  }
  builder_->EndTxn();
  return true;
}

absl::Status TimeKillerParser::ReadHistory(internal::ByteSource* source,
                                           const std::string& source_name, size_t chunk_size) {
  const std::optional<uint64_t> source_size = source->SizeHint();
  internal::ChunkedJsonArray array(source, source_name, "transaction", chunk_size);
  internal::ArrayElement element;
  uint64_t ops_read = 0;
  while (true) {
    std::string_view window;
    ASSIGN_OR_RETURN(bool more, array.Start(&window));
    if (!more) break;
    // Most transactions are read by ParseUsualTxn straight from the buffer; the rest are first
    // delimited by the array splitter.
    const char* usual_end =
        usual_first_ ? ParseUsualTxn(window.data(), window.data() + window.size()) : nullptr;
    if (usual_end != nullptr) {
      array.Take(static_cast<size_t>(usual_end - window.data()), &element);
    } else {
      ASSIGN_OR_RETURN(more, array.Next(&element));
      if (!more) break;
    }
    const char* start = element.data;
    const char* end = element.data + element.size;
    auto failure = [&]() {
      return array.ErrorAt(fail_where_ != nullptr ? fail_where_ : start,
                           fmt::format("transaction #{}: {}", element.index, fail_message_));
    };
    if (*start != '{') {
      return array.ErrorAt(
          start, fmt::format("transaction #{}: expected an object, found an array", element.index));
    }
    // A transaction that did not fit in the window may still be a usual one.
    if (usual_end == nullptr &&
        (!usual_first_ || element.size <= window.size() || ParseUsualTxn(start, end) != end)) {
      if (parser_.capacity() < element.size) {
        size_t capacity = std::max({element.size, 2 * parser_.capacity(), kMinParserCapacity});
        if (auto error = parser_.allocate(capacity)) {
          return array.ErrorAt(
              start, fmt::format("transaction #{}: cannot parse {} bytes: {}", element.index,
                                 element.size, simdjson::error_message(error)));
        }
      }
      od::document doc;
      if (auto error = parser_.iterate(start, element.size, element.padded_size).get(doc)) {
        FailIterate(error, start, end);
        return failure();
      }
      od::object obj;
      if (auto error = doc.get_object().get(obj)) {
        FailJson(start, error, "a transaction object");
        return failure();
      }
      if (!ParseTxn(obj, start)) return failure();
      if (!AtEnd(doc)) {
        Fail(start, "unexpected content after the transaction object");
        return failure();
      }
    }
    if (!EmitTxn(start, element.offset)) return failure();
    ops_read += ops_.size();
    if (element.index + 1 == kSizingSample && source_size) {
      ReserveFor(*source_size, element.offset + element.size, ops_read);
    }
  }
  return absl::OkStatus();
}

void TimeKillerParser::ReserveFor(uint64_t source_size, uint64_t sample_bytes,
                                  uint64_t sample_ops) {
  if (sample_bytes == 0 || source_size <= 2 * sample_bytes) return;
  // The sample's proportions, with some slack, but never more than the smallest transactions
  // and ops could fill: the reservation is an estimate, and the history still grows past it.
  const double scale = 1.03 * static_cast<double>(source_size) / static_cast<double>(sample_bytes);
  const uint64_t max_txns = source_size / kMinTxnBytes;
  const uint64_t max_ops = source_size / kMinOpBytes;
  const auto txns =
      static_cast<uint64_t>(std::min(scale * kSizingSample, static_cast<double>(max_txns)));
  const auto ops = static_cast<uint64_t>(
      std::min(scale * static_cast<double>(sample_ops), static_cast<double>(max_ops)));
  builder_->Reserve(static_cast<size_t>(txns), static_cast<size_t>(ops));
}

void TimeKillerParser::MarkUndecidedKeysAsLists() {
  bool any_list = false;
  for (uint8_t use : key_use_) {
    if (use & kUsedAsRegister) return;
    if (use & kUsedAsList) any_list = true;
  }
  if (!any_list) return;
  for (size_t k = 0; k < key_use_.size(); ++k) {
    // An empty initial list is what an unlisted list starts with anyway.
    if (key_use_[k] == 0) builder_->SetInitialList(KeyId(static_cast<uint32_t>(k)), {});
  }
}

absl::Status TimeKillerParser::ReadInitial(std::string_view json, const std::string& source_name) {
  const char* begin = json.data();
  const char* end = json.data() + json.size();
  auto failure = [&]() {
    return absl::InvalidArgumentError(fmt::format(
        "{}:{}: initial transaction: {}", source_name,
        LineColumnIn(begin, fail_where_ != nullptr ? fail_where_ : begin), fail_message_));
  };
  ops_.clear();
  elements_.clear();
  od::document doc;
  if (auto error =
          parser_.iterate(json.data(), json.size(), json.size() + kSimdjsonPadding).get(doc)) {
    FailIterate(error, begin, end);
    return failure();
  }
  od::json_type type;
  if (auto error = doc.type().get(type)) {
    FailJson(begin, error, "a JSON object with \"ops\"");
    return failure();
  }
  if (type != od::json_type::object) {
    Fail(begin, "expected a JSON object with \"ops\"");
    return failure();
  }
  od::object obj;
  if (auto error = doc.get_object().get(obj)) {
    FailJson(begin, error, "a JSON object with \"ops\"");
    return failure();
  }
  const char* ops_where = nullptr;
  for (auto field_result : obj) {
    if (auto error = field_result.error()) {
      FailJson(begin, error, "an object");
      return failure();
    }
    od::field& field = field_result.value_unsafe();
    const char* member_where = field.key().raw() - 1;
    std::string_view key;
    if (auto error = FieldName(field, &key)) {
      FailJson(member_where, error, "a member name");
      return failure();
    }
    if (key != "ops") continue;
    if (ops_where != nullptr) {
      Fail(member_where, "two members \"ops\"");
      return failure();
    }
    ops_where = member_where;
    od::value& value = field.value();
    if (!ParseOps(value, member_where)) return failure();
  }
  if (!AtEnd(doc)) {
    Fail(begin, "unexpected content after the object");
    return failure();
  }
  if (ops_where == nullptr) {
    Fail(begin, "missing \"ops\"");
    return failure();
  }

  // Registers: the last write wins. Lists: the appends, in order.
  std::vector<KeyId> list_keys;
  absl::flat_hash_map<KeyId, std::vector<Value>> lists;
  for (size_t i = 0; i < ops_.size(); ++i) {
    const PendingOp& op = ops_[i];
    if (op.type == OpType::kRead) continue;
    const KeyId key = InternKey(op.key);
    const bool is_list = op.type == OpType::kAppend;
    if (!UseKey(key, op.key, is_list ? kUsedAsList : kUsedAsRegister, i, op.where)) {
      return failure();
    }
    if (is_list) {
      auto [it, inserted] = lists.try_emplace(key);
      if (inserted) list_keys.push_back(key);
      it->second.push_back(Value::Int(op.value));
    } else {
      builder_->SetInitialRegister(
          key, op.form == ValueForm::kInt ? Value::Int(op.value) : Value::Absent());
    }
  }
  for (KeyId key : list_keys) builder_->SetInitialList(key, lists[key]);
  ops_.clear();
  elements_.clear();
  return absl::OkStatus();
}

// The initial-transaction document, padded for simdjson, with the name used in messages.
struct InitialDoc {
  std::string padded;  // the document followed by SIMDJSON_PADDING spaces
  size_t size = 0;
  std::string name;
};

InitialDoc MakeInitialDoc(std::string_view json, std::string name) {
  InitialDoc doc;
  doc.padded.reserve(json.size() + kSimdjsonPadding);
  doc.padded.append(json);
  doc.padded.append(kSimdjsonPadding, ' ');
  doc.size = json.size();
  doc.name = std::move(name);
  return doc;
}

absl::StatusOr<InitialDoc> LoadInitialDoc(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<internal::FileSource> file, internal::FileSource::Open(path));
  InitialDoc doc;
  doc.name = path;
  doc.padded.resize(static_cast<size_t>(file->SizeHint().value_or(0)) + kSimdjsonPadding);
  while (true) {
    if (doc.padded.size() - doc.size < kSimdjsonPadding + 4096) {
      doc.padded.resize(doc.padded.size() * 2 + 4096);
    }
    ASSIGN_OR_RETURN(size_t got, file->Read(doc.padded.data() + doc.size,
                                            doc.padded.size() - kSimdjsonPadding - doc.size));
    if (got == 0) break;
    doc.size += got;
  }
  doc.padded.resize(doc.size);
  doc.padded.append(kSimdjsonPadding, ' ');
  return doc;
}

absl::StatusOr<history::History> ReadTimeKiller(internal::ByteSource* source,
                                                std::string source_name, const ReadOptions& options,
                                                const InitialDoc* initial, size_t chunk_size,
                                                internal::TxnParsers parsers) {
  HistoryBuilder builder;
  builder.set_source(source_name);
  if (options.initial_value) builder.SetDefaultInitialValue(Value::Int(*options.initial_value));
  TimeKillerParser parser(&builder, parsers);
  if (initial != nullptr) {
    RETURN_IF_ERROR(
        parser.ReadInitial(std::string_view(initial->padded.data(), initial->size), initial->name));
  }
  RETURN_IF_ERROR(parser.ReadHistory(source, source_name, chunk_size));
  parser.MarkUndecidedKeysAsLists();
  absl::StatusOr<history::History> h = std::move(builder).Finish();
  if (!h.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", source_name, std::string(h.status().message())));
  }
  return h;
}

}  // namespace

namespace internal {

absl::StatusOr<history::History> ReadTimeKillerStringChunked(
    std::string_view json, const ReadOptions& options, std::string_view source,
    std::string_view initial_txn_json, size_t chunk_size, TxnParsers parsers) {
  std::optional<InitialDoc> initial;
  if (!initial_txn_json.empty()) {
    initial = MakeInitialDoc(initial_txn_json, fmt::format("{} (initial transaction)", source));
  } else if (!options.initial_txn_path.empty()) {
    ASSIGN_OR_RETURN(initial, LoadInitialDoc(options.initial_txn_path));
  }
  MemorySource memory(json);
  return ReadTimeKiller(&memory, std::string(source), options, initial ? &*initial : nullptr,
                        chunk_size, parsers);
}

absl::StatusOr<history::History> ReadTimeKillerFileChunked(const std::string& path,
                                                           const ReadOptions& options,
                                                           size_t chunk_size, TxnParsers parsers) {
  std::optional<InitialDoc> initial;
  if (!options.initial_txn_path.empty()) {
    ASSIGN_OR_RETURN(initial, LoadInitialDoc(options.initial_txn_path));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<FileSource> file, FileSource::Open(path));
  return ReadTimeKiller(file.get(), path, options, initial ? &*initial : nullptr, chunk_size,
                        parsers);
}

}  // namespace internal

absl::StatusOr<history::History> ReadTimeKillerFile(const std::string& path,
                                                    const ReadOptions& options) {
  return internal::ReadTimeKillerFileChunked(path, options,
                                             internal::ChunkedJsonArray::kDefaultChunkSize);
}

absl::StatusOr<history::History> ReadTimeKillerString(std::string_view json,
                                                      const ReadOptions& options,
                                                      std::string_view source,
                                                      std::string_view initial_txn_json) {
  return internal::ReadTimeKillerStringChunked(json, options, source, initial_txn_json,
                                               internal::ChunkedJsonArray::kDefaultChunkSize);
}

}  // namespace isowatch::formats
