// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "isowatch/v1/ingest.pb.h"

namespace isowatch::ingest {

// An empty IngestBatch on a protobuf arena of its own, which the returned pointer owns: its
// transactions, operations and datums are carved out of a few large blocks and freed at once
// with the last copy of the pointer, instead of one heap allocation and one free each.
// `bytes_hint`: about how large the serialized batch will be (0 if unknown), to size the blocks.
std::shared_ptr<v1::IngestBatch> NewArenaBatch(size_t bytes_hint = 0);

// `wire` parsed into a batch on its own arena (NewArenaBatch), or null if it does not parse.
std::shared_ptr<v1::IngestBatch> ParseArenaBatch(std::string_view wire);

}  // namespace isowatch::ingest
