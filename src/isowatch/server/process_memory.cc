// SPDX-License-Identifier: Apache-2.0
#include "isowatch/server/process_memory.h"

#include <fstream>
#include <unistd.h>

namespace isowatch::server {

std::optional<uint64_t> ProcessResidentMemoryBytes() {
  // statm: size resident shared text lib data dt, all in pages.
  std::ifstream statm("/proc/self/statm");
  uint64_t size_pages = 0;
  uint64_t resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return std::nullopt;
  const int64_t page_size = sysconf(_SC_PAGESIZE);
  if (page_size <= 0) return std::nullopt;
  return resident_pages * static_cast<uint64_t>(page_size);
}

}  // namespace isowatch::server
