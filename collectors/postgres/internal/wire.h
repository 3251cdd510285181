// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

// Big-endian integers and NUL-terminated strings, as the PostgreSQL wire protocol encodes them.

namespace isowatch::pg::internal {

// Reads a byte string front to back. Every read fails (returns false and leaves its output
// unchanged) rather than run past the end. Thread-compatible; does not own the bytes.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : bytes_(bytes) {}

  size_t remaining() const { return bytes_.size() - pos_; }
  size_t position() const { return pos_; }

  bool ReadUint8(uint8_t* out) { return ReadBigEndian(out); }
  bool ReadUint16(uint16_t* out) { return ReadBigEndian(out); }
  bool ReadUint32(uint32_t* out) { return ReadBigEndian(out); }
  bool ReadUint64(uint64_t* out) { return ReadBigEndian(out); }
  bool ReadInt32(int32_t* out) {
    uint32_t u = 0;
    if (!ReadUint32(&u)) return false;
    *out = static_cast<int32_t>(u);
    return true;
  }
  bool ReadInt64(int64_t* out) {
    uint64_t u = 0;
    if (!ReadUint64(&u)) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }

  // A NUL-terminated string (the NUL is consumed, not returned).
  bool ReadCString(std::string* out) {
    const size_t end = bytes_.find('\0', pos_);
    if (end == std::string_view::npos) return false;
    out->assign(bytes_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }

  // Exactly `n` bytes.
  bool ReadBytes(size_t n, std::string* out) {
    if (remaining() < n) return false;
    out->assign(bytes_.substr(pos_, n));
    pos_ += n;
    return true;
  }

  // Everything left.
  std::string_view ReadRest() {
    std::string_view rest = bytes_.substr(pos_);
    pos_ = bytes_.size();
    return rest;
  }

 private:
  template <typename T>
  bool ReadBigEndian(T* out) {
    if (remaining() < sizeof(T)) return false;
    T value = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      value = static_cast<T>((value << 8) | static_cast<uint8_t>(bytes_[pos_ + i]));
    }
    pos_ += sizeof(T);
    *out = value;
    return true;
  }

  std::string_view bytes_;
  size_t pos_ = 0;
};

// Appends `value` to `out` in big-endian order.
template <typename T>
void AppendBigEndian(T value, std::string* out) {
  for (size_t i = sizeof(T); i > 0; --i) {
    out->push_back(static_cast<char>((static_cast<uint64_t>(value) >> (8 * (i - 1))) & 0xff));
  }
}

// Appends `s` and a terminating NUL.
inline void AppendCString(std::string_view s, std::string* out) {
  out->append(s);
  out->push_back('\0');
}

}  // namespace isowatch::pg::internal
