// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "collectors/tidb/cdc_event.h"

// TiCDC's canal-json protocol with the TiDB extension (`enable-tidb-extension=true`):
// docs/collectors/tidb.md, "canal-json". Decoding only: no I/O, no state.

namespace isowatch::tidb {

// Decodes one canal-json message (one Kafka message value, or one line of a storage-sink
// `.json` file):
//  - INSERT, UPDATE, DELETE: one RowChange per element of `data` (TiCDC sends one), with
//    `old[i]` as the previous row of an UPDATE; key columns from `pkNames`; the commit ts from
//    `_tidb.commitTs`;
//  - `isDdl: true`: a SchemaChange at `_tidb.commitTs`;
//  - TIDB_WATERMARK: a Watermark at `_tidb.watermarkTs`.
// Errors:
//  - FAILED_PRECONDITION: a row or DDL message without `_tidb.commitTs`, a watermark without
//    `_tidb.watermarkTs` (the changefeed does not set enable-tidb-extension; `es` is only the
//    physical part of the commit ts and cannot stand in for it);
//  - UNIMPLEMENTED: a message that carries only the handle key (`_tidb.onlyHandleKey`) or
//    points to external storage (`_tidb.claimCheckLocation`): the row itself is not there;
//  - INVALID_ARGUMENT: anything else malformed, naming the field.
absl::StatusOr<std::vector<CdcEvent>> DecodeCanalJson(std::string_view message);

}  // namespace isowatch::tidb
