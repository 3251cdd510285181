// SPDX-License-Identifier: Apache-2.0
#include "collectors/postgres/replication_feed.h"

#include <memory>
#include <utility>

#include "isowatch/common/status_macros.h"

#include "collectors/postgres/replication.h"

namespace isowatch::pg {
namespace {

class LogicalFeed : public CommitFeed {
 public:
  explicit LogicalFeed(std::unique_ptr<LogicalStream> stream) : stream_(std::move(stream)) {}

  absl::StatusOr<std::optional<DecodedTxn>> Next(absl::Duration timeout) override {
    return stream_->Next(timeout);
  }
  void Confirm(Lsn lsn) override { stream_->Confirm(lsn); }
  absl::Status KeepAlive() override { return stream_->SendStatus(); }

 private:
  std::unique_ptr<LogicalStream> stream_;
};

ReplicationOptions ToReplication(const FeedOptions& o) {
  ReplicationOptions r;
  r.dsn = o.dsn;
  r.slot = o.slot;
  r.publication = o.publication;
  r.tables = o.tables;
  return r;
}

}  // namespace

CommitFeedFactory LogicalFeedFactory(FeedOptions options) {
  return [options = std::move(options)]() -> absl::StatusOr<std::unique_ptr<CommitFeed>> {
    ASSIGN_OR_RETURN(std::unique_ptr<LogicalStream> stream,
                     LogicalStream::Open(ToReplication(options)));
    return std::unique_ptr<CommitFeed>(std::make_unique<LogicalFeed>(std::move(stream)));
  };
}

absl::Status DropFeedSlot(const FeedOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<LogicalStream> stream,
                   LogicalStream::Open(ToReplication(options)));
  return stream->DropSlot();
}

}  // namespace isowatch::pg
