// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/formats/read_options.h"
#include "isowatch/history/history.h"
#include "isowatch/v1/history.pb.h"

namespace isowatch::formats {

// The native history format (docs/history-format.md): a sequence of isowatch.v1.HistoryRecord
// messages, a Header first and then one Transaction each, in one of two encodings:
//  - binary: each record as a varint length followed by the serialized message;
//  - JSON lines: each record as one line of the protobuf JSON mapping.
// Readers stream record by record. Errors (InvalidArgument) name the source and the record
// number and byte offset (binary) or line (JSON lines).
enum class NativeEncoding { kBinary, kJsonLines };

// The format version written in, and required of, the Header.
inline constexpr uint32_t kNativeFormatVersion = 1;
// The largest record read or written: a binary record's serialized message, or one JSON line.
inline constexpr size_t kNativeMaxRecordSize = size_t{64} << 20;

// Reads a native file, detecting the encoding from its first byte other than whitespace ('{' =
// JSON lines, with the exception in docs/history-format.md, section 4). The file is
// read through a stream, never held whole. The Header is optional (without one, the initial state
// is the default). options.initial_value sets the default register value unless the Header sets
// one.
absl::StatusOr<history::History> ReadNativeFile(const std::string& path,
                                                const ReadOptions& options);
// Reads a native history held in memory; `source` names it in errors.
absl::StatusOr<history::History> ReadNativeString(std::string_view data, const ReadOptions& options,
                                                  std::string_view source);

// Writes `h`: a Header (version 1, the initial state, metadata {"producer": "isowatch"}), then
// every transaction in input order with its sequence number, status, timestamps, operations and
// range reads (the tombstones in the Header's initial state).
// Reading the output gives back the same history. Errors (InvalidArgument): what the format
// cannot hold (a write of an absent value, a list element that is absent, an id or session that
// is not UTF-8, a record over kNativeMaxRecordSize). Unavailable: the stream failed.
absl::Status WriteNative(const history::History& h, NativeEncoding encoding, std::ostream& out);

// The isowatch.v1 messages of a history, as WriteNative writes them: the header (version,
// initial state) and one transaction. The daemon's collectors send these.
absl::Status EncodeHeader(const history::History& h, v1::Header* header);
absl::Status EncodeTxn(const history::History& h, TxnId id, v1::Transaction* out);

// True if `head`, the first bytes of a file, starts the way a native binary file does and no
// text document can: a varint length L, the tag of HistoryRecord.header or .txn, and a varint
// inner length that makes the record exactly L bytes. For callers that tell formats apart by
// content: a binary file whose first record has a payload of 91 bytes starts with '[' (0x5b), one
// of 123 bytes with '{' (0x7b).
bool LooksLikeNativeBinary(std::string_view head);

}  // namespace isowatch::formats
