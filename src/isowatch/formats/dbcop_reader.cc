// SPDX-License-Identifier: Apache-2.0
// Reader of old dbcop bincode histories (see dbcop.h and docs/history-format.md, "dbcop").
//
// Layout, little-endian: params (5 x u64), info/start/end (u64 length + bytes), then a u64 count
// of sessions, each a u64 count of transactions, each a u64 count of events (18 bytes: write u8,
// variable u64, value u64, success u8) and a success u8. The file is read in blocks and parsed
// record by record; every count is bounded by the bytes left before anything is allocated for it.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/dbcop.h"
#include "isowatch/formats/internal/dbcop_builder.h"

namespace isowatch::formats {
namespace {

using internal::DbcopEvent;

constexpr uint64_t kEventSize = 18;

// Bytes of a file or of memory, read in order, with the position and the bytes left.
class Cursor {
 public:
  Cursor(std::string_view source, std::string_view data)
      : source_(source), mem_(data), size_(data.size()) {}
  Cursor(std::string_view source, std::istream* in, uint64_t size)
      : source_(source), in_(in), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  absl::Status Bytes(size_t n, char* out, std::string_view what) {
    if (left() < n) {
      return Error(fmt::format("{} needs {} bytes, {} left", what, n, left()));
    }
    if (in_ == nullptr) {
      std::memcpy(out, mem_.data() + pos_, n);
      pos_ += n;
      return absl::OkStatus();
    }
    // From a block of the file: an istream read per field (a byte or eight) cost more than
    // the rest of the reading.
    while (n > 0) {
      if (block_pos_ == block_.size()) RETURN_IF_ERROR(Refill());
      const size_t take = std::min(n, block_.size() - block_pos_);
      std::memcpy(out, block_.data() + block_pos_, take);
      block_pos_ += take;
      pos_ += take;
      out += take;
      n -= take;
    }
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> U64(std::string_view what) {
    unsigned char b[8];
    RETURN_IF_ERROR(Bytes(8, reinterpret_cast<char*>(b), what));
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
    return v;
  }
  absl::StatusOr<int64_t> I64(std::string_view what) {
    const uint64_t at = pos_;
    ASSIGN_OR_RETURN(uint64_t v, U64(what));
    if (v > static_cast<uint64_t>(INT64_MAX)) {
      return ErrorAt(at, fmt::format("{} {} overflows a signed 64-bit integer", what, v));
    }
    return static_cast<int64_t>(v);
  }
  absl::StatusOr<bool> Bool(std::string_view what) {
    const uint64_t at = pos_;
    char b = 0;
    RETURN_IF_ERROR(Bytes(1, &b, what));
    if (b != 0 && b != 1) {
      return ErrorAt(at, fmt::format("{} is byte {} (a bool is 0 or 1)", what,
                                     static_cast<unsigned>(static_cast<unsigned char>(b))));
    }
    return b == 1;
  }
  // A count of elements of at least `min_size` bytes each: at most what the bytes left can hold.
  absl::StatusOr<uint64_t> Count(uint64_t min_size, std::string_view what) {
    const uint64_t at = pos_;
    ASSIGN_OR_RETURN(uint64_t n, U64(what));
    if (n > left() / min_size) {
      return ErrorAt(at, fmt::format("{} {} cannot fit in the {} bytes left", what, n, left()));
    }
    return n;
  }
  absl::StatusOr<std::string> String(std::string_view what) {
    ASSIGN_OR_RETURN(uint64_t n, Count(1, fmt::format("length of {}", what)));
    std::string s(n, '\0');
    RETURN_IF_ERROR(Bytes(n, s.data(), what));
    return s;
  }
  // The next `n` bytes where they lie together in memory (the block read, or the data), or null
  // if they do not (yet) or are not there at all. Skip(n) moves past them.
  const char* Peek(size_t n) const {
    if (left() < n) return nullptr;
    if (in_ == nullptr) return mem_.data() + pos_;
    return block_.size() - block_pos_ >= n ? block_.data() + block_pos_ : nullptr;
  }
  // REQUIRES: Peek(n) was not null.
  void Skip(size_t n) {
    pos_ += n;
    if (in_ != nullptr) block_pos_ += n;
  }
  absl::Status Error(std::string_view what) const { return ErrorAt(pos_, what); }
  absl::Status ErrorAt(uint64_t at, std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("{}: byte {}: {}", source_, at, what));
  }

 private:
  // The next block of the file (callers never ask past size_, so there is one).
  absl::Status Refill() {
    const auto n = static_cast<size_t>(std::min<uint64_t>(kBlockSize, left()));
    block_.resize(n);
    block_pos_ = 0;
    if (!in_->read(block_.data(), static_cast<std::streamsize>(n))) {
      block_.clear();
      return absl::DataLossError(fmt::format("{}: read error at byte {}", source_, pos_));
    }
    return absl::OkStatus();
  }

  static constexpr size_t kBlockSize = size_t{1} << 16;
  std::string source_;
  std::string_view mem_;
  std::istream* in_ = nullptr;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
  std::string block_;  // file bytes from pos_ - block_pos_
  size_t block_pos_ = 0;
};

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

absl::StatusOr<DbcopHeader> ReadHeader(Cursor& in) {
  DbcopHeader h;
  ASSIGN_OR_RETURN(h.id, in.U64("params.id"));
  ASSIGN_OR_RETURN(h.n_node, in.U64("params.n_node"));
  ASSIGN_OR_RETURN(h.n_variable, in.U64("params.n_variable"));
  ASSIGN_OR_RETURN(h.n_transaction, in.U64("params.n_transaction"));
  ASSIGN_OR_RETURN(h.n_event, in.U64("params.n_event"));
  ASSIGN_OR_RETURN(h.info, in.String("info"));
  ASSIGN_OR_RETURN(h.start, in.String("start"));
  ASSIGN_OR_RETURN(h.end, in.String("end"));
  return h;
}

uint64_t LittleEndian(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// The `n` events and the success flag of a transaction from `p` (n * kEventSize + 1 bytes), or
// false if any field is out of its range (then the reader reads them one field at a time, to
// say which and where).
bool ParseEvents(const char* p, uint64_t n, std::vector<DbcopEvent>& events, bool* success) {
  events.resize(n);
  for (uint64_t e = 0; e < n; ++e, p += kEventSize) {
    const auto write = static_cast<uint8_t>(p[0]);
    const uint64_t variable = LittleEndian(p + 1);
    const uint64_t value = LittleEndian(p + 9);
    const auto ok = static_cast<uint8_t>(p[17]);
    if ((write | ok) > 1 || ((variable | value) >> 63) != 0) return false;
    events[e] = DbcopEvent{.write = write == 1,
                           .variable = static_cast<int64_t>(variable),
                           .value = static_cast<int64_t>(value),
                           .success = ok == 1};
  }
  const auto flag = static_cast<uint8_t>(*p);
  if (flag > 1) return false;
  *success = flag == 1;
  return true;
}

absl::StatusOr<history::History> ReadBincode(Cursor& in, const ReadOptions& options,
                                             std::string_view source, DbcopHeader* out) {
  internal::DbcopBuilder b(options, std::string(source), "dbcop-bincode", "");
  // Every event takes 18 bytes, and a transaction of this file's usual size some 150.
  if (in.left() >= (uint64_t{1} << 20)) b.Reserve(in.left() / 64, in.left() / kEventSize);
  ASSIGN_OR_RETURN(DbcopHeader header, ReadHeader(in));
  for (const std::string* s : {&header.info, &header.start, &header.end}) {
    if (!ValidUtf8(*s)) {
      b.builder().Note("header strings not UTF-8", fmt::format("\"{}\"", *s));
    }
  }
  ASSIGN_OR_RETURN(uint64_t sessions, in.Count(8, "session count"));
  header.sessions = sessions;
  std::vector<DbcopEvent> events;
  for (uint64_t s = 0; s < sessions; ++s) {
    b.StartSession();
    const uint64_t session_at = in.pos();
    ASSIGN_OR_RETURN(uint64_t txns, in.Count(9, "transaction count"));
    for (uint64_t t = 0; t < txns; ++t) {
      const uint64_t at = in.pos();
      ASSIGN_OR_RETURN(uint64_t n, in.Count(kEventSize, "event count"));
      bool success = false;
      if (const char* p = in.Peek(n * kEventSize + 1);
          p != nullptr && ParseEvents(p, n, events, &success)) {
        in.Skip(n * kEventSize + 1);
        RETURN_IF_ERROR(b.AddTxn(events, success, at));
        continue;
      }
      events.clear();
      events.reserve(n);
      for (uint64_t e = 0; e < n; ++e) {
        DbcopEvent ev;
        ASSIGN_OR_RETURN(ev.write, in.Bool("event write flag"));
        ASSIGN_OR_RETURN(ev.variable, in.I64("variable"));
        ASSIGN_OR_RETURN(int64_t value, in.I64("value"));
        ev.value = value;
        ASSIGN_OR_RETURN(ev.success, in.Bool("event success flag"));
        events.push_back(ev);
      }
      ASSIGN_OR_RETURN(success, in.Bool("transaction success flag"));
      RETURN_IF_ERROR(b.AddTxn(events, success, at));
    }
    b.EndSession(session_at);
  }
  if (in.left() > 0) {
    const std::string what = fmt::format("{} bytes after the last session", in.left());
    if (!options.lenient) return in.Error(what);
    b.builder().Note("trailing bytes ignored", fmt::format("byte {}: {}", in.pos(), what));
  }
  if (out != nullptr) *out = std::move(header);
  return std::move(b).Finish();
}

}  // namespace

absl::StatusOr<history::History> ReadDbcopBincodeString(std::string_view data,
                                                        const ReadOptions& options,
                                                        std::string_view source,
                                                        DbcopHeader* header) {
  Cursor in(source, data);
  return ReadBincode(in, options, source, header);
}

absl::StatusOr<history::History> ReadDbcopBincodeFile(const std::string& path,
                                                      const ReadOptions& options,
                                                      DbcopHeader* header) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return absl::NotFoundError(fmt::format("{}: cannot open", path));
  const std::streamoff size = file.tellg();
  file.seekg(0);
  if (size < 0 || !file) return absl::DataLossError(fmt::format("{}: cannot size", path));
  Cursor in(path, &file, static_cast<uint64_t>(size));
  return ReadBincode(in, options, path, header);
}

absl::Status SniffDbcopBincode(std::string_view head) {
  // The smallest history: the 40-byte parameters, three empty strings and a session count.
  constexpr size_t kSmallest = 40 + 3 * 8 + 8;
  if (head.size() < kSmallest) {
    return absl::InvalidArgumentError(
        fmt::format("not dbcop bincode: {} bytes, shorter than the smallest history ({})",
                    head.size(), kSmallest));
  }
  Cursor in("", head);
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<uint64_t> param = in.U64("params");
    // Counts of nodes, variables, transactions and events; text reads as huge numbers.
    if (!param.ok() || *param > (uint64_t{1} << 40)) {
      return absl::InvalidArgumentError("not dbcop bincode: implausible header parameters");
    }
  }
  for (const char* what : {"info", "start", "end"}) {
    absl::StatusOr<uint64_t> n = in.U64(what);
    if (!n.ok()) return absl::OkStatus();  // the head ends in the header: nothing against it
    if (*n > (uint64_t{1} << 20)) {
      return absl::InvalidArgumentError(
          fmt::format("not dbcop bincode: {} string length {} is implausible", what, *n));
    }
    const std::string_view s = head.substr(in.pos(), std::min<uint64_t>(*n, in.left()));
    for (char c : s) {
      if (static_cast<unsigned char>(c) < 0x20) {
        return absl::InvalidArgumentError(
            fmt::format("not dbcop bincode: {} string holds control bytes", what));
      }
    }
    if (*n > in.left()) return absl::OkStatus();
    std::string skip(*n, '\0');
    if (!in.Bytes(*n, skip.data(), what).ok()) return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> sessions = in.U64("sessions");
  if (sessions.ok() && *sessions > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError("not dbcop bincode: implausible session count");
  }
  return absl::OkStatus();
}

}  // namespace isowatch::formats
