// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/arena_batch.h"

#include <algorithm>

#include <google/protobuf/arena.h>

namespace isowatch::ingest {
namespace {

// The parsed messages take a few times the bytes of their encoding.
constexpr size_t kBytesPerWireByte = 4;
constexpr size_t kMinBlock = size_t{4} << 10;
constexpr size_t kMaxBlock = size_t{1} << 20;

struct ArenaBatch {
  explicit ArenaBatch(const google::protobuf::ArenaOptions& options) : arena(options) {}
  google::protobuf::Arena arena;
  v1::IngestBatch* batch = nullptr;
};

}  // namespace

std::shared_ptr<v1::IngestBatch> NewArenaBatch(size_t bytes_hint) {
  google::protobuf::ArenaOptions options;
  options.start_block_size = std::clamp(bytes_hint * kBytesPerWireByte, kMinBlock, kMaxBlock);
  options.max_block_size = kMaxBlock;
  auto holder = std::make_shared<ArenaBatch>(options);
  holder->batch = google::protobuf::Arena::CreateMessage<v1::IngestBatch>(&holder->arena);
  return std::shared_ptr<v1::IngestBatch>(holder, holder->batch);
}

std::shared_ptr<v1::IngestBatch> ParseArenaBatch(std::string_view wire) {
  std::shared_ptr<v1::IngestBatch> batch = NewArenaBatch(wire.size());
  if (!batch->ParseFromArray(wire.data(), static_cast<int>(wire.size()))) return nullptr;
  return batch;
}

}  // namespace isowatch::ingest
