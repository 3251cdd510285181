// SPDX-License-Identifier: Apache-2.0
#include "isowatch/formats/internal/chunked_json_array.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include <fmt/format.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace isowatch::formats::internal {
namespace {

// Character classes for the element scanner.
enum CharClass : uint8_t {
  kOther = 0,
  kQuote = 1,
  kOpenObject = 2,
  kOpenArray = 3,
  kCloseObject = 4,
  kCloseArray = 5,
};

constexpr std::array<uint8_t, 256> MakeClassTable() {
  std::array<uint8_t, 256> t{};
  t['"'] = kQuote;
  t['{'] = kOpenObject;
  t['['] = kOpenArray;
  t['}'] = kCloseObject;
  t[']'] = kCloseArray;
  return t;
}
constexpr std::array<uint8_t, 256> kClass = MakeClassTable();

bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Counts the newlines in [p, p + n) and finds the last one (-1 if none).
void CountNewlines(const char* p, size_t n, uint64_t* count, int64_t* last) {
  *count = 0;
  *last = -1;
  const char* const begin = p;
  const char* const end = p + n;
  while (p < end) {
    const void* hit = std::memchr(p, '\n', static_cast<size_t>(end - p));
    if (hit == nullptr) break;
    p = static_cast<const char*>(hit);
    ++*count;
    *last = p - begin;
    ++p;
  }
}

// Shows a byte in a message: 'x' for printable ASCII, else its hex code.
std::string DescribeByte(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02x}", u);
}

}  // namespace

absl::StatusOr<size_t> MemorySource::Read(char* dst, size_t n) {
  size_t count = std::min(n, data_.size() - pos_);
  if (count > 0) std::memcpy(dst, data_.data() + pos_, count);
  pos_ += count;
  return count;
}

absl::StatusOr<std::unique_ptr<FileSource>> FileSource::Open(const std::string& path,
                                                             FileMapping mapping) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return absl::ErrnoToStatus(err, fmt::format("cannot open {}", path));
  }
  std::optional<uint64_t> size;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) size = static_cast<uint64_t>(st.st_size);
#ifdef POSIX_FADV_SEQUENTIAL
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  return std::unique_ptr<FileSource>(new FileSource(fd, path, size, mapping));
}

FileSource::~FileSource() { ::close(fd_); }

absl::StatusOr<size_t> FileSource::Read(char* dst, size_t n) {
  while (true) {
    ssize_t got = ::read(fd_, dst, n);
    if (got >= 0) {
      read_ += static_cast<uint64_t>(got);
      return static_cast<size_t>(got);
    }
    if (errno == EINTR) continue;
    int err = errno;
    return absl::ErrnoToStatus(err, fmt::format("cannot read {}", path_));
  }
}

std::unique_ptr<MappedFile> FileSource::Map(size_t padding) {
  if (!size_ || read_ > 0 || *size_ == 0 || *size_ > SIZE_MAX / 2) return nullptr;
  if (mapping_ == FileMapping::kNever ||
      (mapping_ == FileMapping::kAuto && *size_ < kMapMinBytes)) {
    return nullptr;
  }
  std::unique_ptr<MappedFile> mapped =
      MappedFile::Map(fd_, static_cast<size_t>(*size_), padding, path_);
  if (mapped != nullptr) read_ = *size_;
  return mapped;
}

absl::StatusOr<size_t> MappedSource::Read(char* dst, size_t n) {
  const std::string_view all = bytes();
  const size_t count = std::min(n, all.size() - pos_);
  if (count > 0) std::memcpy(dst, all.data() + pos_, count);
  pos_ += count;
  return count;
}

std::unique_ptr<MappedFile> MappedSource::Map(size_t padding) {
  if (pos_ > 0 || padding > padding_ || file_ == nullptr) return nullptr;
  pos_ = file_->size();
  return std::move(file_);
}

std::optional<uint64_t> FileSource::SizeHint() const {
  if (!size_) return std::nullopt;
  return *size_ > read_ ? *size_ - read_ : 0;
}

ChunkedJsonArray::ChunkedJsonArray(ByteSource* source, std::string source_name, std::string noun,
                                   size_t chunk_size)
    : source_(source),
      source_name_(std::move(source_name)),
      noun_(std::move(noun)),
      chunk_size_(std::max<size_t>(chunk_size, 1)) {}

absl::Status ChunkedJsonArray::Refill(size_t keep_from) {
  if (buffer_ == nullptr) {
    mapped_ = source_->Map(kPadding);
    if (mapped_ != nullptr) {
      buffer_ = mapped_->data();
      capacity_ = end_ = mapped_->size();
      eof_ = true;
      std::memset(buffer_ + end_, ' ', kPadding);
      return absl::OkStatus();
    }
    capacity_ = chunk_size_;
    if (std::optional<uint64_t> hint = source_->SizeHint()) {
      // One byte more than the source holds, so that a single read also sees its end.
      capacity_ = static_cast<size_t>(std::min<uint64_t>(capacity_, *hint + 1));
    }
    owned_.reset(new char[capacity_ + kPadding]);
    buffer_ = owned_.get();
    std::memset(buffer_ + capacity_, ' ', kPadding);
  } else if (keep_from > 0) {
    Forget(keep_from);
    std::memmove(buffer_, buffer_ + keep_from, end_);
  }
  if (end_ == capacity_) {
    // The kept bytes fill the buffer: one element is larger than it.
    size_t new_capacity = std::max(capacity_ * 2, std::min<size_t>(chunk_size_, 4096));
    std::unique_ptr<char[]> bigger(new char[new_capacity + kPadding]);
    std::memcpy(bigger.get(), buffer_, end_);
    std::memset(bigger.get() + new_capacity, ' ', kPadding);
    owned_ = std::move(bigger);
    buffer_ = owned_.get();
    capacity_ = new_capacity;
  }
  while (end_ < capacity_) {
    absl::StatusOr<size_t> got = source_->Read(buffer_ + end_, capacity_ - end_);
    if (!got.ok()) return got.status();
    if (*got == 0) {
      eof_ = true;
      break;
    }
    end_ += *got;
  }
  // Keep the padding after the data deterministic.
  std::memset(buffer_ + end_, ' ', std::min<size_t>(kPadding, capacity_ + kPadding - end_));
  return absl::OkStatus();
}

std::string ChunkedJsonArray::ElementName() const {
  return fmt::format("{} #{}", noun_, next_index_);
}

void ChunkedJsonArray::Forget(size_t n) {
  if (count_lines_) {
    uint64_t lines = 0;
    int64_t last = -1;
    CountNewlines(buffer_, n, &lines, &last);
    lines_before_ += lines;
    if (last >= 0) last_newline_before_ = static_cast<int64_t>(buffer_offset_) + last;
  }
  end_ -= n;
  pos_ -= n;
  if (state_ == State::kInElement) element_start_ -= n;
  buffer_offset_ += n;
}

void ChunkedJsonArray::Slide() {
  const size_t before = state_ == State::kInElement ? element_start_ : pos_;
  if (before < chunk_size_) return;
  // Whole pages, so that the buffer stays page-aligned and every page behind it can go.
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t n = before / page * page;
  if (n == 0) return;
  Forget(n);
  mapped_->Drop(buffer_, n);
  buffer_ += n;
  capacity_ -= n;
}

void ChunkedJsonArray::Unhide() {
  if (hiding_) {
    std::memcpy(buffer_ + hidden_offset_, hidden_, kPadding);
    hiding_ = false;
  }
}

absl::StatusOr<bool> ChunkedJsonArray::Next(ArrayElement* element) {
  Unhide();
  if (mapped_ != nullptr) Slide();
  if (state_ != State::kInElement) {
    absl::StatusOr<bool> more = ToElement();
    if (!more.ok() || !*more) return more;
  }
  while (true) {
    switch (ScanElement()) {
      case ScanResult::kComplete:
        element->data = buffer_ + element_start_;
        element->size = pos_ - element_start_;
        element->padded_size = capacity_ + kPadding - element_start_;
        element->offset = buffer_offset_ + element_start_;
        element->index = next_index_++;
        state_ = State::kAfterElement;
        if (mapped_ != nullptr) {
          // Spaces written after it in the mapping would copy the page (copy on write): the
          // element is copied to the side instead, with its spaces.
          const size_t padded = element->size + kPadding;
          if (copy_capacity_ < padded) {
            copy_capacity_ = std::max(padded, 2 * copy_capacity_);
            copy_ = std::make_unique_for_overwrite<char[]>(copy_capacity_);
          }
          std::memcpy(copy_.get(), element->data, element->size);
          std::memset(copy_.get() + element->size, ' ', kPadding);
          copy_of_ = element->data;
          element->data = copy_.get();
          element->padded_size = padded;
          return true;
        }
        hidden_offset_ = pos_;
        std::memcpy(hidden_, buffer_ + pos_, kPadding);
        std::memset(buffer_ + pos_, ' ', kPadding);
        hiding_ = true;
        return true;
      case ScanResult::kError:
        return error_;
      case ScanResult::kNeedMore:
        if (eof_) {
          return ErrorAtOffset(
              element_start_,
              fmt::format("{}: truncated: the input ends inside it", ElementName()));
        }
        if (absl::Status s = Refill(element_start_); !s.ok()) return s;
        continue;
    }
  }
}

absl::StatusOr<bool> ChunkedJsonArray::Start(std::string_view* window) {
  Unhide();
  if (mapped_ != nullptr) Slide();
  if (state_ != State::kInElement) {
    absl::StatusOr<bool> more = ToElement();
    if (!more.ok() || !*more) return more;
  }
  *window = std::string_view(buffer_ + element_start_, end_ - element_start_);
  return true;
}

void ChunkedJsonArray::Take(size_t size, ArrayElement* element) {
  element->data = buffer_ + element_start_;
  element->size = size;
  element->padded_size = capacity_ + kPadding - element_start_;
  element->offset = buffer_offset_ + element_start_;
  element->index = next_index_++;
  pos_ = element_start_ + size;
  state_ = State::kAfterElement;
}

absl::StatusOr<bool> ChunkedJsonArray::ToElement() {
  while (true) {
    // Between elements: skip whitespace (and a byte order mark at the very start).
    if (state_ == State::kStart && buffer_offset_ + pos_ == 0) {
      if (end_ < 3 && !eof_) {
        if (absl::Status s = Refill(0); !s.ok()) return s;
        continue;
      }
      if (end_ >= 3 && std::memcmp(buffer_, "\xEF\xBB\xBF", 3) == 0) pos_ = 3;
    }
    while (pos_ < end_ && IsJsonSpace(buffer_[pos_])) ++pos_;
    if (pos_ == end_) {
      if (!eof_) {
        if (absl::Status s = Refill(pos_); !s.ok()) return s;
        continue;
      }
      switch (state_) {
        case State::kStart:
          return ErrorAtOffset(pos_, fmt::format("empty input: expected '[' starting an array of "
                                                 "{}s",
                                                 noun_));
        case State::kAfterOpen:
        case State::kAfterComma:
          return ErrorAtOffset(
              pos_,
              fmt::format("truncated: the input ends before {} or the closing ']'", ElementName()));
        case State::kAfterElement:
          return ErrorAtOffset(
              pos_, fmt::format("truncated: the input ends after {} {} without the closing ']'",
                                noun_, next_index_ - 1));
        case State::kDone:
          return false;
        case State::kInElement:
          break;
      }
    }
    const char c = buffer_[pos_];
    auto start_element = [&] {
      element_start_ = pos_;
      depth_ = 0;
      in_string_ = false;
      escape_pending_ = false;
      state_ = State::kInElement;
    };
    switch (state_) {
      case State::kStart:
        if (c != '[') {
          return ErrorAtOffset(pos_, fmt::format("expected '[' starting an array of {}s, found {}",
                                                 noun_, DescribeByte(c)));
        }
        ++pos_;
        state_ = State::kAfterOpen;
        break;
      case State::kAfterOpen:
      case State::kAfterComma:
        if (c == '{' || c == '[') {
          start_element();
          return true;
        } else if (c == ']' && state_ == State::kAfterOpen) {
          ++pos_;
          state_ = State::kDone;
        } else if (c == ']') {
          return ErrorAtOffset(pos_, fmt::format("expected {} after ',', found ']' (a trailing "
                                                 "comma)",
                                                 ElementName()));
        } else {
          return ErrorAtOffset(pos_, fmt::format("{}: expected an object, found {}", ElementName(),
                                                 DescribeByte(c)));
        }
        break;
      case State::kAfterElement:
        if (c == ',') {
          ++pos_;
          state_ = State::kAfterComma;
        } else if (c == ']') {
          ++pos_;
          state_ = State::kDone;
        } else {
          return ErrorAtOffset(pos_, fmt::format("expected ',' or ']' after {} #{}, found {}",
                                                 noun_, next_index_ - 1, DescribeByte(c)));
        }
        break;
      case State::kDone:
        return ErrorAtOffset(
            pos_, fmt::format("unexpected {} after the closing ']' of the array", DescribeByte(c)));
      case State::kInElement:
        break;
    }
  }
}

bool ChunkedJsonArray::ScanBytes(const unsigned char** p_inout, size_t n, ScanResult* result) {
  const unsigned char* p = *p_inout;
  const unsigned char* const end = p + n;
  while (p < end) {
    const unsigned char c = *p++;
    if (escape_pending_) {
      escape_pending_ = false;
      continue;
    }
    if (in_string_) {
      if (c == '"') {
        in_string_ = false;
      } else if (c == '\\') {
        escape_pending_ = true;
      }
      continue;
    }
    switch (kClass[c]) {
      case kOther:
        break;
      case kQuote:
        in_string_ = true;
        break;
      case kOpenObject:
      case kOpenArray:
        if (depth_ == kMaxDepth) {
          error_ = ErrorAtOffset(
              static_cast<size_t>(p - 1 - reinterpret_cast<const unsigned char*>(buffer_)),
              fmt::format("{}: nested deeper than {} levels", ElementName(), kMaxDepth));
          *result = ScanResult::kError;
          *p_inout = p;
          return true;
        }
        ++depth_;
        break;
      default:
        // A closing bracket; the element starts with an opening one, so depth_ > 0 here.
        if (--depth_ == 0) {
          *result = ScanResult::kComplete;
          *p_inout = p;
          return true;
        }
        break;
    }
  }
  *p_inout = p;
  return false;
}

namespace {

// Bit i of the result: byte i of the 64-byte block at `p` is one of the bytes selected.
struct BlockMasks {
  uint64_t quote = 0;
  uint64_t backslash = 0;
  uint64_t open = 0;   // '{' or '['
  uint64_t close = 0;  // '}' or ']'
};

#if defined(__SSE2__)
BlockMasks ClassifyBlock(const unsigned char* p) {
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i case_bit = _mm_set1_epi8(0x20);
  // '[' | 0x20 == '{' and ']' | 0x20 == '}', and no other byte maps to either.
  const __m128i open = _mm_set1_epi8('{');
  const __m128i close = _mm_set1_epi8('}');
  BlockMasks m;
  for (int i = 0; i < 4; ++i) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + ptrdiff_t{16} * i));
    const __m128i folded = _mm_or_si128(v, case_bit);
    const int shift = 16 * i;
    m.quote |=
        static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote))))
        << shift;
    m.backslash |= static_cast<uint64_t>(
                       static_cast<uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, backslash))))
                   << shift;
    m.open |= static_cast<uint64_t>(
                  static_cast<uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, open))))
              << shift;
    m.close |= static_cast<uint64_t>(
                   static_cast<uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, close))))
               << shift;
  }
  return m;
}
#else
BlockMasks ClassifyBlock(const unsigned char* p) {
  BlockMasks m;
  for (int i = 0; i < 64; ++i) {
    const uint64_t bit = uint64_t{1} << i;
    switch (p[i]) {
      case '"':
        m.quote |= bit;
        break;
      case '\\':
        m.backslash |= bit;
        break;
      case '{':
      case '[':
        m.open |= bit;
        break;
      case '}':
      case ']':
        m.close |= bit;
        break;
      default:
        break;
    }
  }
  return m;
}
#endif

// The number of bits set (without relying on a popcnt instruction being available).
int CountBits(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return static_cast<int>((x * 0x0101010101010101ULL) >> 56);
}

// Bit i of the result: the XOR of bits 0..i of x.
uint64_t PrefixXor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}

}  // namespace

ChunkedJsonArray::ScanResult ChunkedJsonArray::ScanElement() {
  const auto* const base = reinterpret_cast<const unsigned char*>(buffer_);
  const unsigned char* p = base + pos_;
  const unsigned char* const end = base + end_;
  ScanResult result = ScanResult::kNeedMore;
  while (end - p >= 64) {
    const BlockMasks m = ClassifyBlock(p);
    if (m.backslash != 0 || escape_pending_) {
      // Escapes are rare: take this block one byte at a time.
      if (ScanBytes(&p, 64, &result)) break;
      continue;
    }
    // Bit i set: byte i is inside a string (an opening quote counts as inside, a closing one as
    // outside). Brackets there do not count.
    const uint64_t in_string = PrefixXor(m.quote) ^ (in_string_ ? ~uint64_t{0} : 0);
    const uint64_t open = m.open & ~in_string;
    const uint64_t close = m.close & ~in_string;
    const int opens = CountBits(open);
    const int closes = CountBits(close);
    if (depth_ - closes > 0 && depth_ + opens <= kMaxDepth) {
      // The element cannot end, nor nest too deep, in this block.
      depth_ += opens - closes;
      in_string_ = (in_string >> 63) != 0;
      p += 64;
      continue;
    }
    // Follow the brackets one by one.
    uint64_t brackets = open | close;
    bool done = false;
    while (brackets != 0) {
      const int i = std::countr_zero(brackets);
      brackets &= brackets - 1;
      if ((open >> i) & 1) {
        if (depth_ == kMaxDepth) {
          error_ = ErrorAtOffset(
              static_cast<size_t>(p + i - base),
              fmt::format("{}: nested deeper than {} levels", ElementName(), kMaxDepth));
          result = ScanResult::kError;
          done = true;
          break;
        }
        ++depth_;
      } else if (--depth_ == 0) {
        in_string_ = false;
        p += i + 1;
        result = ScanResult::kComplete;
        done = true;
        break;
      }
    }
    if (done) break;
    in_string_ = (in_string >> 63) != 0;
    p += 64;
  }
  if (result == ScanResult::kNeedMore) ScanBytes(&p, static_cast<size_t>(end - p), &result);
  pos_ = static_cast<size_t>(p - base);
  return result;
}

const char* ChunkedJsonArray::InBuffer(const char* where) const {
  if (copy_ != nullptr && where >= copy_.get() && where < copy_.get() + copy_capacity_) {
    return copy_of_ + (where - copy_.get());
  }
  return where;
}

ChunkedJsonArray::Position ChunkedJsonArray::PositionOf(const char* where) const {
  const size_t offset = static_cast<size_t>(InBuffer(where) - buffer_);
  const uint64_t source_offset = buffer_offset_ + offset;
  // From where the last call counted to, if that is in the buffer and not past `where`: a
  // reader that asks for every element's position then counts each byte once.
  size_t from = 0;
  uint64_t lines = lines_before_;
  int64_t last = last_newline_before_;
  if (counted_offset_ >= buffer_offset_ && counted_offset_ <= source_offset) {
    from = static_cast<size_t>(counted_offset_ - buffer_offset_);
    lines = counted_lines_;
    last = counted_last_newline_;
  }
  uint64_t more = 0;
  int64_t at = -1;
  CountNewlines(buffer_ + from, offset - from, &more, &at);
  lines += more;
  if (at >= 0) last = static_cast<int64_t>(buffer_offset_ + from) + at;
  // Not past the spaces that hide the bytes after the last element: they may hide newlines.
  if (!hiding_ || offset <= hidden_offset_) {
    counted_offset_ = source_offset;
    counted_lines_ = lines;
    counted_last_newline_ = last;
  }
  return {.line = lines + 1,
          .column = static_cast<uint64_t>(static_cast<int64_t>(source_offset) - last)};
}

std::string ChunkedJsonArray::LineColumn(const char* where) const {
  const Position p = PositionOf(where);
  return fmt::format("{}:{}", p.line, p.column);
}

absl::Status ChunkedJsonArray::ErrorAtOffset(size_t buffer_offset, std::string_view message) const {
  return ErrorAt(buffer_ + buffer_offset, message);
}

absl::Status ChunkedJsonArray::ErrorAt(const char* where, std::string_view message) const {
  return absl::InvalidArgumentError(
      fmt::format("{}:{}: {}", source_name_, LineColumn(where), message));
}

}  // namespace isowatch::formats::internal
