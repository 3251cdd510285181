// SPDX-License-Identifier: Apache-2.0
//
// Reader of the native history format (docs/history-format.md). The input is pulled through a
// ZeroCopyInputStream one record at a time: a binary record is copied into one reused buffer and
// parsed from there, a JSON line is read into one reused string and parsed with protobuf's JSON
// mapping. A binary record holding a transaction of the usual shape is decoded without the
// generated parser (internal/native_usual_txn.h), and every other one with it. Each record goes
// straight into a HistoryBuilder, so at most one record is held.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include <fmt/format.h>
#include <google/protobuf/arena.h>
#include <google/protobuf/io/zero_copy_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/common/string_view.h"
#include "isowatch/formats/internal/native_usual_txn.h"
#include "isowatch/formats/native.h"
#include "isowatch/formats/proto_decoder.h"
#include "isowatch/history/history_builder.h"
#include "isowatch/v1/history.pb.h"

namespace isowatch::formats {
namespace {

namespace pb = ::isowatch::v1;
namespace io = ::google::protobuf::io;
using history::History;
using history::HistoryBuilder;
using history::Timestamp;
using history::TxnHeader;
using history::TxnStatus;
using history::Value;
using internal::UsualDatum;
using internal::UsualTxn;
using ::isowatch::KeyId;

// Leading whitespace longer than this cannot start a binary file that reads without error (its
// first record would be made of whitespace bytes only, and so have no version or id), so the
// input is then taken as JSON lines.
constexpr size_t kMaxBinaryLeadingWhitespace = 64;
// Bytes a binary length prefix (a varint32) takes at most.
constexpr int kMaxLengthPrefixBytes = 5;

// A ZeroCopyInputStream over bytes held by the caller, handed out in blocks that fit an int.
class ViewInputStream final : public io::ZeroCopyInputStream {
 public:
  explicit ViewInputStream(std::string_view data) : data_(data) {}

  bool Next(const void** data, int* size) override {
    if (pos_ == data_.size()) return false;
    size_t n = std::min(data_.size() - pos_, kBlock);
    *data = data_.data() + pos_;
    *size = static_cast<int>(n);
    pos_ += n;
    return true;
  }
  void BackUp(int count) override { pos_ -= static_cast<size_t>(count); }
  bool Skip(int count) override {
    size_t n = std::min(data_.size() - pos_, static_cast<size_t>(count));
    pos_ += n;
    return n == static_cast<size_t>(count);
  }
  int64_t ByteCount() const override { return static_cast<int64_t>(pos_); }

 private:
  static constexpr size_t kBlock = size_t{1} << 30;
  std::string_view data_;
  size_t pos_ = 0;
};

// Pulls bytes from a ZeroCopyInputStream and counts them.
class ByteSource {
 public:
  explicit ByteSource(io::ZeroCopyInputStream* in) : in_(in) {}

  // The next byte, or -1 at the end of the input.
  int Get() {
    if (!Fill()) return -1;
    ++offset_;
    return static_cast<unsigned char>(data_[pos_++]);
  }

  // Appends up to `n` bytes to `out`; returns how many there were.
  size_t Read(size_t n, std::string* out) {
    size_t got = 0;
    while (got < n && Fill()) {
      size_t take = std::min(n - got, size_ - pos_);
      out->append(data_ + pos_, take);
      pos_ += take;
      offset_ += take;
      got += take;
    }
    return got;
  }

  // The next `n` bytes where the stream's current chunk holds them all (consumed; valid until
  // the next call), or a view with no data when it does not (nothing consumed): the caller then
  // copies them with Read.
  std::string_view TakeInPlace(size_t n) {
    if (!Fill() || size_ - pos_ < n) return {};
    const std::string_view out(data_ + pos_, n);
    pos_ += n;
    offset_ += n;
    return out;
  }

  enum class LineResult { kLine, kEnd, kTooLong };
  // Reads through the next '\n' or the end of the input, appending the line without its '\n' to
  // `out`. kEnd: the input had ended before the call. kTooLong: the line exceeds `max` bytes.
  LineResult ReadLine(size_t max, std::string* out) {
    bool any = false;
    while (Fill()) {
      any = true;
      const char* begin = data_ + pos_;
      size_t available = size_ - pos_;
      const char* newline = static_cast<const char*>(std::memchr(begin, '\n', available));
      size_t take = newline != nullptr ? static_cast<size_t>(newline - begin) : available;
      if (out->size() + take > max) return LineResult::kTooLong;
      out->append(begin, take);
      pos_ += take;
      offset_ += take;
      if (newline != nullptr) {
        ++pos_;
        ++offset_;
        return LineResult::kLine;
      }
    }
    return any ? LineResult::kLine : LineResult::kEnd;
  }

  // Bytes consumed so far.
  uint64_t offset() const { return offset_; }

  // Gives the bytes fetched but not consumed back to the stream.
  void Release() {
    if (pos_ < size_) in_->BackUp(static_cast<int>(size_ - pos_));
    data_ = nullptr;
    pos_ = size_ = 0;
  }

 private:
  bool Fill() {
    while (pos_ == size_) {
      const void* data = nullptr;
      int size = 0;
      if (!in_->Next(&data, &size)) return false;
      data_ = static_cast<const char*>(data);
      size_ = static_cast<size_t>(size);
      pos_ = 0;
    }
    return true;
  }

  io::ZeroCopyInputStream* in_;
  const char* data_ = nullptr;
  size_t size_ = 0;
  size_t pos_ = 0;
  uint64_t offset_ = 0;
};

bool IsJsonSpace(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Decides the encoding from the start of `in`, consuming at most kMaxBinaryLeadingWhitespace + 1
// bytes, which are appended to `prefix`: JSON lines when the first byte other than whitespace is
// '{' not followed by LF or 0x12 (the start of a binary record of 123 bytes is '{' and then the
// tag of the record's header or txn field, 0x0a or 0x12), when the leading whitespace is too long
// for a binary file, or when there is nothing but whitespace; binary otherwise.
NativeEncoding DetectEncoding(io::ZeroCopyInputStream* in, std::string* prefix) {
  ByteSource src(in);
  NativeEncoding encoding = NativeEncoding::kJsonLines;
  int c = src.Get();
  while (c >= 0 && IsJsonSpace(c) && prefix->size() < kMaxBinaryLeadingWhitespace) {
    prefix->push_back(static_cast<char>(c));
    c = src.Get();
  }
  if (c >= 0) prefix->push_back(static_cast<char>(c));
  if (c == '{') {
    int next = src.Get();
    if (next >= 0) prefix->push_back(static_cast<char>(next));
    if (next == '\n' || next == 0x12) encoding = NativeEncoding::kBinary;
  } else if (c >= 0 && !IsJsonSpace(c)) {
    encoding = NativeEncoding::kBinary;
  }
  src.Release();
  return encoding;
}

// Where a record is in the input.
struct Position {
  bool json = false;
  uint64_t record = 0;  // 1-based
  uint64_t line = 0;    // 1-based; JSON lines only
  uint64_t offset = 0;  // byte offset of the record's length prefix, or of the line
};

std::string Where(const Position& p) {
  if (p.json) return fmt::format("line {}", p.line);
  return fmt::format("record {} at byte {}", p.record, p.offset);
}

// Turns records into a history.
class Decoder {
 public:
  Decoder(const ReadOptions& options, std::string_view source) : source_(source) {
    builder_.set_source(std::string(source));
    builder_.set_format("native");
    if (options.initial_value) builder_.SetDefaultInitialValue(Value::Int(*options.initial_value));
  }

  const std::string& source() const { return source_; }

  // Makes room in the history for what a file of `bytes` bytes holds, about: a binary record
  // takes some 35 bytes per operation and 300 per transaction of 8 operations, JSON two to four
  // times that. Reserving spares the copies of growing the history's arrays step by step, which
  // on a large file cost more than the parse (bench/README.md, "Reading history formats").
  void ReserveFor(uint64_t bytes, NativeEncoding encoding) {
    if (bytes < (uint64_t{1} << 20)) return;
    const uint64_t scale = encoding == NativeEncoding::kBinary ? 1 : 3;
    builder_.Reserve(static_cast<size_t>(bytes / (300 * scale)),
                     static_cast<size_t>(bytes / (35 * scale)));
  }

  absl::Status Error(const Position& pos, std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("{}: {}: {}", source_, Where(pos), what));
  }

  absl::Status Apply(const pb::HistoryRecord& record, const Position& pos) {
    absl::Status status;
    switch (record.record_case()) {
      case pb::HistoryRecord::kHeader:
        status = ApplyHeader(record.header(), pos);
        break;
      case pb::HistoryRecord::kTxn:
        status = ApplyTxn(record.txn(), pos);
        break;
      case pb::HistoryRecord::RECORD_NOT_SET:
        status = absl::InvalidArgumentError("expected a record holding a header or a txn");
        break;
    }
    if (!status.ok()) return Error(pos, common::StdView(status.message()));
    return absl::OkStatus();
  }

  // A transaction DecodeUsualTxn read: added as ProtoDecoder::ApplyTxn adds the same record
  // parsed by the generated code (its refusals were declined by the decoding), with the same
  // keys and byte strings interned in the same order.
  absl::Status ApplyUsual(const UsualTxn& t, const Position& pos) {
    txn_seen_ = true;
    TxnHeader header;
    if (t.id_numeric) {
      const fmt::format_int text(t.id_int);
      id_.assign(text.data(), text.size());
      header.id = id_;
      header.id_numeric = true;
    } else {
      header.id = t.id_str;
    }
    switch (t.session) {
      case UsualTxn::Session::kInt: {
        const fmt::format_int text(t.session_int);
        session_.assign(text.data(), text.size());
        header.session = session_;
        header.session_numeric = true;
        break;
      }
      case UsualTxn::Session::kStr:
        header.session = t.session_str;
        break;
      case UsualTxn::Session::kNone:
        header.session = "";
        break;
    }
    if (t.has_seq) header.seq = t.seq;
    switch (t.status) {
      case pb::Transaction::ABORTED:
        header.status = TxnStatus::kAborted;
        break;
      case pb::Transaction::UNKNOWN:
        header.status = TxnStatus::kUnknown;
        break;
      default:  // STATUS_UNSPECIFIED or COMMITTED
        header.status = TxnStatus::kCommitted;
        break;
    }
    if (t.has_start) header.start = Timestamp{t.start_physical, t.start_logical};
    if (t.has_commit) header.commit = Timestamp{t.commit_physical, t.commit_logical};
    header.source_offset = pos.offset;
    header.xid = t.xid;
    if (absl::Status status = builder_.BeginTxn(header); !status.ok()) {
      return Error(pos, common::StdView(status.message()));
    }
    for (const internal::UsualOp& op : t.ops) {
      const KeyId key = op.key.kind == UsualDatum::Kind::kInt ? builder_.IntKey(op.key.i)
                                                              : builder_.BytesKey(op.key.bytes);
      switch (op.kind) {
        case pb::Operation::READ:
          if (op.unknown) {
            builder_.UnknownRead(key);
          } else {
            builder_.Read(key, ValueOf(op.value));
          }
          break;
        case pb::Operation::WRITE:
          builder_.Write(key, ValueOf(op.value));
          break;
        case pb::Operation::APPEND:
          builder_.Append(key, ValueOf(op.value));
          break;
        default:  // LIST_READ
          if (op.unknown) {
            builder_.UnknownRead(key);
            break;
          }
          elements_.clear();
          for (uint32_t i = 0; i < op.elements_count; ++i) {
            elements_.push_back(ValueOf(t.elements[op.elements_begin + i]));
          }
          builder_.ListRead(key, elements_);
          break;
      }
    }
    builder_.EndTxn();
    return absl::OkStatus();
  }

  absl::StatusOr<History> Finish() && {
    absl::StatusOr<History> h = std::move(builder_).Finish();
    if (!h.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {}", source_, common::StdView(h.status().message())));
    }
    return h;
  }

 private:
  absl::Status ApplyHeader(const pb::Header& header, const Position& pos) {
    if (header_seen_) {
      return absl::InvalidArgumentError(
          fmt::format("a second header (the header is at {}); a file holds one", header_where_));
    }
    if (txn_seen_) {
      return absl::InvalidArgumentError(
          "a header after transactions; the header must be the first record");
    }
    header_seen_ = true;
    header_where_ = Where(pos);
    if (header.version() != kNativeFormatVersion) {
      return absl::InvalidArgumentError(
          fmt::format("unsupported format version {} (expected version {})", header.version(),
                      kNativeFormatVersion));
    }
    builder_.set_time_unit(header.time_unit());
    return proto_.ApplyInitialState(header.initial());
  }

  absl::Status ApplyTxn(const pb::Transaction& t, const Position& pos) {
    txn_seen_ = true;
    return proto_.ApplyTxn(t, pos.offset).status();
  }

  Value ValueOf(const UsualDatum& d) {
    switch (d.kind) {
      case UsualDatum::Kind::kInt:
        return Value::Int(d.i);
      case UsualDatum::Kind::kBytes:
        return builder_.BytesValue(d.bytes);
      case UsualDatum::Kind::kNone:
        break;
    }
    return Value::Absent();
  }

  std::string source_;
  HistoryBuilder builder_;
  ProtoDecoder proto_{builder_};
  bool header_seen_ = false;
  bool txn_seen_ = false;
  std::string header_where_;
  // ApplyUsual's buffers, reused.
  std::string id_;
  std::string session_;
  std::vector<Value> elements_;
};

// `usual_txns`: records of the usual shape are read by DecodeUsualTxn (always, but in tests).
absl::Status ReadBinary(ByteSource& src, Decoder& decoder, bool usual_txns) {
  // Each record is parsed into an arena whose first block is reused from record to record, so
  // that parsing allocates nothing for records that fit it (a transaction of a few dozen
  // operations does): a message reused without one frees and allocates its oneof fields anew.
  std::vector<char> first_block(size_t{1} << 16);
  google::protobuf::ArenaOptions arena_options;
  arena_options.initial_block = first_block.data();
  arena_options.initial_block_size = first_block.size();
  google::protobuf::Arena arena(arena_options);
  std::string buffer;
  UsualTxn usual;
  Position pos;
  while (true) {
    pos.offset = src.offset();
    int c = src.Get();
    if (c < 0) return absl::OkStatus();
    ++pos.record;
    uint64_t length = 0;
    for (int i = 0;; ++i) {
      length |= static_cast<uint64_t>(c & 0x7f) << (7 * i);
      if ((c & 0x80) == 0) break;
      if (i + 1 == kMaxLengthPrefixBytes) {
        return decoder.Error(pos, "malformed length prefix: a varint32 takes at most 5 bytes");
      }
      c = src.Get();
      if (c < 0) {
        return decoder.Error(
            pos, "truncated length prefix: the input ends inside the varint32 record length");
      }
    }
    if (length > kNativeMaxRecordSize) {
      return decoder.Error(pos, fmt::format("oversized record: {} bytes, over the limit of {}",
                                            length, kNativeMaxRecordSize));
    }
    // Parsed where the stream holds it, or from a copy when it spans two of its chunks.
    std::string_view bytes = src.TakeInPlace(static_cast<size_t>(length));
    if (bytes.data() == nullptr) {
      buffer.clear();
      size_t got = src.Read(static_cast<size_t>(length), &buffer);
      if (got < length) {
        return decoder.Error(pos, fmt::format("the record length {} runs past the end of the "
                                              "input ({} bytes remain)",
                                              length, got));
      }
      bytes = buffer;
    }
    if (usual_txns && internal::DecodeUsualTxn(bytes, &usual)) {
      RETURN_IF_ERROR(decoder.ApplyUsual(usual, pos));
      continue;
    }
    arena.Reset();
    auto* record = google::protobuf::Arena::CreateMessage<pb::HistoryRecord>(&arena);
    if (!record->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return decoder.Error(
          pos, fmt::format("unparsable record: {} bytes that are not an isowatch.v1.HistoryRecord",
                           length));
    }
    RETURN_IF_ERROR(decoder.Apply(*record, pos));
  }
}

// JSON lines: the names that are not fields are skipped, so a newer writer's fields do not stop
// this reader. But with that option protobuf's parser also reads an unknown enum name as the
// enum's default, which for Transaction.status would mean COMMITTED: look for that case.
absl::Status ParseJsonLine(const std::string& line, pb::HistoryRecord* record) {
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  if (google::protobuf::util::JsonStringToMessage(line, record, strict).ok()) {
    return absl::OkStatus();
  }
  google::protobuf::util::JsonParseOptions lenient;
  lenient.ignore_unknown_fields = true;
  record->Clear();
  google::protobuf::util::Status status =
      google::protobuf::util::JsonStringToMessage(line, record, lenient);
  if (!status.ok()) {
    // The parser's message goes on with the text around the error and a caret under it: keep the
    // first line only.
    std::string_view message(status.message().data(), status.message().size());
    message = message.substr(0, message.find('\n'));
    return absl::InvalidArgumentError(
        fmt::format("not an isowatch.v1.HistoryRecord in the protobuf JSON mapping: {}", message));
  }
  if (record->has_txn() && record->txn().status() == pb::Transaction::STATUS_UNSPECIFIED) {
    google::protobuf::Struct generic;
    if (google::protobuf::util::JsonStringToMessage(line, &generic).ok()) {
      auto txn = generic.fields().find("txn");
      if (txn != generic.fields().end() && txn->second.has_struct_value()) {
        const auto& fields = txn->second.struct_value().fields();
        auto status_field = fields.find("status");
        if (status_field != fields.end() && status_field->second.has_string_value() &&
            status_field->second.string_value() != "STATUS_UNSPECIFIED") {
          return absl::InvalidArgumentError(fmt::format(
              "unknown transaction status \"{}\" (expected COMMITTED, ABORTED or UNKNOWN)",
              status_field->second.string_value()));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReadJsonLines(ByteSource& src, Decoder& decoder) {
  pb::HistoryRecord record;
  std::string line;
  Position pos;
  pos.json = true;
  while (true) {
    pos.offset = src.offset();
    line.clear();
    ByteSource::LineResult result = src.ReadLine(kNativeMaxRecordSize, &line);
    if (result == ByteSource::LineResult::kEnd) return absl::OkStatus();
    ++pos.line;
    if (result == ByteSource::LineResult::kTooLong) {
      return decoder.Error(pos, fmt::format("oversized record: a line over the limit of {} bytes",
                                            kNativeMaxRecordSize));
    }
    if (std::all_of(line.begin(), line.end(), [](char c) { return IsJsonSpace(c); })) continue;
    ++pos.record;
    if (absl::Status status = ParseJsonLine(line, &record); !status.ok()) {
      return decoder.Error(pos, common::StdView(status.message()));
    }
    RETURN_IF_ERROR(decoder.Apply(record, pos));
  }
}

// Reads a whole native history from `in`. `file`, if not null, is the stream under `in`, checked
// for read errors.
absl::StatusOr<History> ReadStream(io::ZeroCopyInputStream* in, const io::FileInputStream* file,
                                   uint64_t size, const ReadOptions& options,
                                   std::string_view source, bool usual_txns = true) {
  std::string prefix;
  NativeEncoding encoding = DetectEncoding(in, &prefix);
  ViewInputStream prefix_stream(prefix);
  io::ZeroCopyInputStream* const parts[] = {&prefix_stream, in};
  io::ConcatenatingInputStream whole(parts, 2);
  ByteSource src(&whole);
  Decoder decoder(options, source);
  decoder.ReserveFor(size, encoding);
  absl::Status status = encoding == NativeEncoding::kBinary ? ReadBinary(src, decoder, usual_txns)
                                                            : ReadJsonLines(src, decoder);
  if (file != nullptr && file->GetErrno() != 0) {
    return absl::ErrnoToStatus(file->GetErrno(),
                               fmt::format("{}: read failed at byte {}", source, src.offset()));
  }
  RETURN_IF_ERROR(status);
  return std::move(decoder).Finish();
}

}  // namespace

absl::StatusOr<History> ReadNativeFile(const std::string& path, const ReadOptions& options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, fmt::format("{}: cannot open", path));
  struct stat st {};
  const uint64_t size =
      ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  io::FileInputStream file(fd, 1 << 16);
  file.SetCloseOnDelete(true);
  return ReadStream(&file, &file, size, options, path);
}

bool LooksLikeNativeBinary(std::string_view head) {
  // A varint of at most 5 bytes at `pos`; 0 bytes used if there is none.
  auto varint = [&head](size_t pos, uint64_t* value) -> size_t {
    *value = 0;
    for (size_t i = 0; i < 5 && pos + i < head.size(); ++i) {
      const auto byte = static_cast<unsigned char>(head[pos + i]);
      *value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) return i + 1;
    }
    return 0;
  };
  uint64_t length = 0;
  const size_t n = varint(0, &length);
  if (n == 0 || n >= head.size()) return false;
  const auto tag = static_cast<unsigned char>(head[n]);
  if (tag != 0x0a && tag != 0x12) return false;
  uint64_t inner = 0;
  const size_t m = varint(n + 1, &inner);
  // The record is the tag, the inner length and the inner message, exactly.
  return m != 0 && length >= 2 && inner == length - 1 - m;
}

absl::StatusOr<History> ReadNativeString(std::string_view data, const ReadOptions& options,
                                         std::string_view source) {
  ViewInputStream in(data);
  return ReadStream(&in, nullptr, data.size(), options, source);
}

namespace internal {

absl::StatusOr<History> ReadNativeStringWith(std::string_view data, const ReadOptions& options,
                                             std::string_view source, bool usual_txns) {
  ViewInputStream in(data);
  return ReadStream(&in, nullptr, data.size(), options, source, usual_txns);
}

}  // namespace internal

}  // namespace isowatch::formats
