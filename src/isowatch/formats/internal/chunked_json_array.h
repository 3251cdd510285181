// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the format readers: streaming access to the elements of a top-level JSON array.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/formats/internal/mapped_file.h"

namespace isowatch::formats::internal {

// A sequential source of bytes: a file or a buffer in memory. Not thread-safe.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `n` bytes into `dst`; returns how many were read, 0 at the end of the source.
  virtual absl::StatusOr<size_t> Read(char* dst, size_t n) = 0;
  // The number of bytes left, if known.
  virtual std::optional<uint64_t> SizeHint() const { return std::nullopt; }
  // The whole source in memory, to be read in place, followed by `padding` writable bytes, if the
  // source offers it (a large regular file, mapped); nullptr otherwise. Once it is given, Read
  // is not to be called.
  virtual std::unique_ptr<MappedFile> Map(size_t padding) {
    (void)padding;
    return nullptr;
  }
};

// Bytes held by the caller, which must outlive the source. Not thread-safe.
class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string_view data) : data_(data) {}
  absl::StatusOr<size_t> Read(char* dst, size_t n) override;
  std::optional<uint64_t> SizeHint() const override { return data_.size() - pos_; }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

// Whether a FileSource offers its file mapped into memory (ByteSource::Map).
enum class FileMapping : uint8_t {
  kAuto,    // a regular file of at least kMapMinBytes
  kNever,   // read(2) only
  kAlways,  // any regular file that is not empty
};
inline constexpr uint64_t kMapMinBytes = uint64_t{4} << 20;

// A file read with read(2), or mapped into memory as `mapping` says. Not thread-safe.
class FileSource : public ByteSource {
 public:
  // Errors: the file cannot be opened (NotFound, PermissionDenied, ...).
  static absl::StatusOr<std::unique_ptr<FileSource>> Open(const std::string& path,
                                                          FileMapping mapping = FileMapping::kAuto);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  absl::StatusOr<size_t> Read(char* dst, size_t n) override;
  std::optional<uint64_t> SizeHint() const override;
  // The whole file, if nothing was read yet and `mapping` says to map it.
  std::unique_ptr<MappedFile> Map(size_t padding) override;

 private:
  FileSource(int fd, std::string path, std::optional<uint64_t> size, FileMapping mapping)
      : fd_(fd), path_(std::move(path)), size_(size), mapping_(mapping) {}

  int fd_;
  std::string path_;
  std::optional<uint64_t> size_;  // for a regular file
  FileMapping mapping_;
  uint64_t read_ = 0;
};

// The bytes of a mapped file (from ByteSource::Map), for a reader that looks at them before it
// knows how to read them: a ChunkedJsonArray reads them in place (Map hands the mapping on, if
// nothing was read), other readers copy them with Read. Not thread-safe.
class MappedSource : public ByteSource {
 public:
  // `padding`: the padding `file` was mapped with.
  MappedSource(std::unique_ptr<MappedFile> file, size_t padding)
      : file_(std::move(file)), padding_(padding) {}

  // All the file's bytes, whatever was read of them.
  std::string_view bytes() const {
    return file_ == nullptr ? std::string_view() : std::string_view(file_->data(), file_->size());
  }
  absl::StatusOr<size_t> Read(char* dst, size_t n) override;
  std::optional<uint64_t> SizeHint() const override { return bytes().size() - pos_; }
  // The mapping, if nothing was read and it has the padding asked for.
  std::unique_ptr<MappedFile> Map(size_t padding) override;

 private:
  std::unique_ptr<MappedFile> file_;
  size_t padding_;
  size_t pos_ = 0;
};

// One element of the array, as bytes inside the splitter's buffer (from Next on a mapped source: a
// copy of them, which the splitter's positions and errors take as those bytes). Valid until the
// next call to ChunkedJsonArray::Next. The `padded_size` bytes from `data` are readable, as
// simdjson requires, and the ChunkedJsonArray::kPadding bytes right after the element are spaces
// (whatever follows it in the source), so that a parser that looks past a malformed element sees
// the same bytes wherever the chunk boundaries fall.
struct ArrayElement {
  const char* data = nullptr;
  size_t size = 0;
  size_t padded_size = 0;
  uint64_t offset = 0;  // byte offset of the element in the source
  uint64_t index = 0;   // position in the array, from 0
};

// Splits a top-level JSON array, read from a ByteSource in chunks, into its elements without
// parsing them: a small scanner follows strings, escapes and bracket nesting to find where each
// element ends (64 bytes at a time where it can). Only the current chunk is held; it grows when
// one element is larger than a chunk. A source that offers itself mapped (ByteSource::Map) is read
// in place instead: the buffer is then the rest of the mapping, whose start moves on a chunk at a
// time, the pages behind given back. Elements must be objects or arrays. The scanner checks the
// array's own punctuation (the opening '[', the ',' between elements, the closing ']' and that
// nothing but whitespace follows) and the nesting depth; it counts '{' and '[' alike, so the
// contents of the elements, bracket kinds included, are left to the caller's parser. A UTF-8 byte
// order mark before the array is skipped.
//
// Errors are InvalidArgument and start with "source:line:column: ". Not thread-safe.
class ChunkedJsonArray {
 public:
  static constexpr size_t kPadding = 64;  // bytes readable past the end of the data
  static constexpr int kMaxDepth = 1024;  // nesting limit inside one element
  static constexpr size_t kDefaultChunkSize = size_t{16} << 20;

  // `noun` names an element in messages ("transaction" gives "transaction #3").
  ChunkedJsonArray(ByteSource* source, std::string source_name, std::string noun,
                   size_t chunk_size = kDefaultChunkSize);
  ChunkedJsonArray(const ChunkedJsonArray&) = delete;
  ChunkedJsonArray& operator=(const ChunkedJsonArray&) = delete;

  // Stores the next element in `*element` and returns true, or returns false after the closing
  // ']' (and the whitespace after it) has been read.
  absl::StatusOr<bool> Next(ArrayElement* element);

  // For a caller that can find where an element ends by itself. Goes to the start of the next
  // element and returns true with `*window` holding the bytes buffered from there on (followed by
  // kPadding readable spaces; the element may end past them), or returns false after the closing
  // ']' as Next does. Then either Take (the element ends inside the window) or Next (to have the
  // element found and read in whole) must follow.
  absl::StatusOr<bool> Start(std::string_view* window);
  // After Start: the element is the first `size` bytes of the window. Stores it in `*element`
  // as Next would, except that the bytes after it are left as they are.
  void Take(size_t size, ArrayElement* element);

  // An InvalidArgument error "source:line:column: message" for a byte still in the buffer: any
  // byte of the element last returned by Next.
  absl::Status ErrorAt(const char* where, std::string_view message) const;
  // "line:column" (1-based; the column counts bytes) of a byte still in the buffer.
  std::string LineColumn(const char* where) const;
  // The same as numbers (both 1-based).
  struct Position {
    uint64_t line = 0;
    uint64_t column = 0;
  };
  Position PositionOf(const char* where) const;

  const std::string& source_name() const { return source_name_; }
  // Whether the windows Start gives are the source's own bytes (a mapped file), which stay
  // readable at the same addresses until the array is destroyed (the pages given back are read
  // again from the file).
  bool in_place() const { return mapped_ != nullptr; }

  // Stops counting the lines of the bytes it moves past, for a reader whose errors are never
  // shown (the parsing thread of a pipelined read, whose errors the one-thread read finds
  // again): positions in errors are then wrong. Call before the first element.
  void set_uncounted() { count_lines_ = false; }

 private:
  enum class State : uint8_t {
    kStart,         // before the '['
    kAfterOpen,     // after the '['
    kAfterElement,  // after an element
    kAfterComma,    // after a ','
    kInElement,     // inside an element
    kDone,          // after the ']'
  };
  enum class ScanResult : uint8_t { kNeedMore, kComplete, kError };

  // Makes room and reads more bytes, keeping those from `keep_from` on. Sets eof_ when the source
  // is exhausted and nothing was read.
  absl::Status Refill(size_t keep_from);
  // `where`, a byte of the buffer or of copy_, as a byte of the buffer.
  const char* InBuffer(const char* where) const;
  // Moves the buffer's first `n` bytes out of it, counting their lines (unless set_uncounted);
  // the caller moves the bytes.
  void Forget(size_t n);
  // Puts back the bytes that the spaces after the last element replaced.
  void Unhide();
  // For a mapped source: moves the buffer's start past the bytes before the current element
  // once they are a chunk or more, and gives back their pages.
  void Slide();
  // Skips what comes between elements (reading more as needed); true at the start of an element
  // (state_ == kInElement), false after the closing ']'.
  absl::StatusOr<bool> ToElement();
  // Scans the element from pos_; on kError, error_ holds the status.
  ScanResult ScanElement();
  // Scans [*p, *p + n) one byte at a time; true when the element ends (*p is then just past it).
  bool ScanBytes(const unsigned char** p, size_t n, ScanResult* result);
  absl::Status ErrorAtOffset(size_t buffer_offset, std::string_view message) const;
  std::string ElementName() const;

  ByteSource* source_;
  std::string source_name_;
  std::string noun_;
  size_t chunk_size_;

  // The buffer: owned_, or a window on mapped_ that starts at a page boundary.
  char* buffer_ = nullptr;
  std::unique_ptr<char[]> owned_;
  std::unique_ptr<MappedFile> mapped_;
  size_t capacity_ = 0;  // data bytes the buffer can hold (kPadding more are allocated)
  size_t end_ = 0;       // valid bytes in the buffer
  size_t pos_ = 0;       // next byte to look at
  bool eof_ = false;

  // Where the buffer starts in the source, and line bookkeeping for the bytes before it.
  uint64_t buffer_offset_ = 0;
  bool count_lines_ = true;
  uint64_t lines_before_ = 0;         // newlines before the buffer
  int64_t last_newline_before_ = -1;  // source offset of the last of them, or -1

  // Where PositionOf last counted lines to: its source offset, the newlines before it, and the
  // source offset of the last of them (-1 if none).
  mutable uint64_t counted_offset_ = 0;
  mutable uint64_t counted_lines_ = 0;
  mutable int64_t counted_last_newline_ = -1;

  // For a mapped source, the last element Next returned, copied with its padding, and where it
  // is in the buffer.
  std::unique_ptr<char[]> copy_;
  size_t copy_capacity_ = 0;
  const char* copy_of_ = nullptr;

  // The bytes that the spaces after the last element returned replaced, and where they go.
  char hidden_[kPadding];
  size_t hidden_offset_ = 0;
  bool hiding_ = false;

  State state_ = State::kStart;
  uint64_t next_index_ = 0;
  // Scanner state inside an element.
  size_t element_start_ = 0;
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_pending_ = false;
  absl::Status error_;
};

}  // namespace isowatch::formats::internal
