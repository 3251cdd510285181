// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

#include "collectors/tidb/cdc_event.h"

namespace isowatch::tidb {

// Decodes TiCDC's simple protocol (`protocol = "simple"`, `encoding-format = "json"`):
// docs/collectors/tidb.md, "Simple protocol". One event per message:
//  - INSERT, UPDATE, DELETE: a RowChange at `commitTs`; `data` is the new row (insert,
//    update), `old` the previous row (update) or the deleted one (delete);
//  - WATERMARK: a Watermark at `commitTs`;
//  - CREATE, ALTER, ERASE, RENAME, TRUNCATE, CINDEX, DINDEX, QUERY: a SchemaChange;
//  - BOOTSTRAP: no event (counted in bootstraps()).
// The messages of rows do not name the key columns; BOOTSTRAP and DDL messages carry the
// table's schema (`tableSchema`), which this decoder keeps, per table, to fill
// RowChange::key_columns from (the primary key, else the first unique index without nullable
// columns). Until a table's schema has been seen, its rows have no key columns.
//
// Errors: INVALID_ARGUMENT for malformed messages (naming the field), a version other than 1
// or an unknown type; UNIMPLEMENTED for a row carrying only its handle key (`handleKeyOnly`)
// or stored elsewhere (`claimCheckLocation`). A failed message leaves the schema cache as it
// was.
//
// Thread-compatible.
class SimpleProtocolDecoder {
 public:
  absl::StatusOr<std::vector<CdcEvent>> Decode(std::string_view message);

  // How many BOOTSTRAP messages were decoded.
  uint64_t bootstraps() const { return bootstraps_; }

  // The key columns known for `schema`.`table`; nullptr when no schema was seen.
  const std::vector<std::string>* KeyColumns(const std::string& schema,
                                             const std::string& table) const;

 private:
  absl::flat_hash_map<std::pair<std::string, std::string>, std::vector<std::string>> keys_;
  uint64_t bootstraps_ = 0;
};

}  // namespace isowatch::tidb
