// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes to the pgoutput decoder and transaction assembler
// (collectors/postgres/pgoutput.h, pgoutput_assembler.h). The input is a sequence of messages,
// each an unsigned 16-bit big-endian length and that many bytes (a short last one is cut). Every
// message goes through one assembler, as a replication session would feed it; nothing may crash,
// and a completed transaction must be consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "collectors/postgres/internal/wire.h"
#include "collectors/postgres/pgoutput.h"
#include "collectors/postgres/pgoutput_assembler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  (void)isowatch::pg::ParseLsn(input);
  isowatch::pg::internal::WireReader reader(input);
  isowatch::pg::PgoutputAssembler assembler;
  uint16_t length;
  while (reader.ReadUint16(&length)) {
    const std::string_view rest = reader.ReadRest();
    const std::string_view message = rest.substr(0, length);
    reader = isowatch::pg::internal::WireReader(rest.substr(message.size()));
    auto txn = assembler.Feed(message);
    if (!txn.ok() || !txn->has_value()) continue;
    if ((*txn)->end_lsn < (*txn)->commit_lsn) std::abort();
    for (const isowatch::pg::DecodedChange& change : (*txn)->changes) {
      if (change.column_names.size() != change.values.size()) std::abort();
    }
  }
  return 0;
}
