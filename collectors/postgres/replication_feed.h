// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

#include "collectors/postgres/collector.h"

namespace isowatch::pg {

struct FeedOptions {
  std::string dsn;
  std::string slot = "isowatch";
  std::string publication = "isowatch";
  // Tables the publication covers (schema public).
  std::vector<std::string> tables;
};

// Opens logical decoding (replication.h) on `options.slot`, creating the publication and the
// slot when missing: each call is a new connection that starts after the slot's confirmed
// position.
CommitFeedFactory LogicalFeedFactory(FeedOptions options);

// Drops the replication slot (and the WAL it holds back).
absl::Status DropFeedSlot(const FeedOptions& options);

}  // namespace isowatch::pg
