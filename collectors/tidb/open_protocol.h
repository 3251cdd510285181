// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "collectors/tidb/cdc_event.h"

// TiCDC's open protocol (`protocol=open-protocol`): docs/collectors/tidb.md, "Open protocol".
// Decoding only: no I/O, no state.

namespace isowatch::tidb {

// Decodes one Kafka message: `key` is an 8-byte big-endian protocol version (1) followed by
// events, each an 8-byte big-endian length and that many bytes of key JSON; `value` holds as
// many events, each an 8-byte length and the value JSON (a resolved event's value is empty).
// The i-th key pairs with the i-th value. Returns the events in message order:
//  - key "t":1, a row: a RowChange at key "ts" on "scm"."tbl"; value "d" is a delete, "u"
//    with "p" an update with its previous row, "u" alone an insert (or an update from a
//    changefeed that sends no old values: the protocol does not tell them apart); key
//    columns are those marked "h": true or with the handle-key flag (0x02); a binary column
//    (flag 0x01) of a string or blob type is base64 and is decoded;
//  - "t":2, a DDL: a SchemaChange with the value's "q";
//  - "t":3, a resolved event: a Watermark at "ts".
// Errors: UNIMPLEMENTED for a key marked only-handle-key ("ohk") or claim-check ("ccl"): the
// row is not in the message. INVALID_ARGUMENT for everything else, naming the byte offset in
// the key or value and the event's index: a version other than 1, a length that runs past the
// end, trailing bytes, a different number of keys and values, malformed JSON.
absl::StatusOr<std::vector<CdcEvent>> DecodeOpenProtocol(std::string_view key,
                                                         std::string_view value);

}  // namespace isowatch::tidb
