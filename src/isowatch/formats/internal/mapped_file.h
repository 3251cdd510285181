// SPDX-License-Identifier: Apache-2.0
#pragma once

// Private to the format readers: a regular file's bytes mapped into memory, to be read in place.

#include <cstddef>
#include <memory>
#include <string>

namespace isowatch::formats::internal {

// The first `size` bytes of an open regular file, mapped privately and writably (a write changes
// the mapped copy of its page only, never the file), followed by `padding` writable bytes that
// start as zeros. Reading a large file in place saves copying it from the kernel's cache.
//
// A file that shrinks while it is mapped cannot be read past its new end: the kernel raises
// SIGBUS at the first touch of such a page. While any MappedFile lives, a handler turns that
// signal, for an address inside one of them, into a message naming the program and the file on
// stderr and exit status 2 (what the command line gives for input it cannot read) instead of a
// crash. Other SIGBUS signals go to the handler installed before, or end the process as they
// would have.
//
// The bytes may be read from any thread; Drop is not thread-safe.
class MappedFile {
 public:
  // The mapping of `fd`'s first `size` bytes (size > 0), or nullptr if the system refuses it, or
  // too many files are mapped at once: the caller then reads the file instead. `path` names the
  // file in the message above.
  static std::unique_ptr<MappedFile> Map(int fd, size_t size, size_t padding,
                                         const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }

  // Gives back the memory of the whole pages inside [p, p + bytes), a range of the file's bytes.
  // Their contents are the file's again if they are touched later (writes to them are lost).
  void Drop(const char* p, size_t bytes);

 private:
  MappedFile(char* data, size_t size, size_t length, int slot)
      : data_(data), size_(size), length_(length), slot_(slot) {}

  char* data_;
  size_t size_;
  size_t length_;  // bytes mapped in all, the padding's pages included
  int slot_;       // where the SIGBUS handler finds this mapping
};

}  // namespace isowatch::formats::internal
