// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/client_feed.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "isowatch/common/status_macros.h"

namespace isowatch::tidb {

absl::Status ClientFeed::Pump() {
  if (joiner_.sealed()) return absl::OkStatus();
  ASSIGN_OR_RETURN(ClientSource::Polled p, source_.Poll());
  for (v1::Transaction& t : p.txns) {
    RETURN_IF_ERROR(joiner_.AddClient(std::move(t)));
    ++records_;
  }
  floor_ = std::max(floor_, p.floor);
  if (p.done) {
    joiner_.SealClients(p.end_ts);
    floor_ = std::numeric_limits<Tso>::max();
  }
  return absl::OkStatus();
}

void ClientFeed::AddCdc(const CdcTxn& txn) {
  if (held_.empty() && txn.commit_ts <= floor_) {
    joiner_.AddCdc(txn);
  } else {
    held_.push_back(txn);
  }
}

Tso ClientFeed::ReleasePoint(Tso cdc_release_point) {
  const Tso limit =
      floor_ == std::numeric_limits<Tso>::max() ? floor_ : floor_ + 1;  // above the floor
  const Tso r = std::min(cdc_release_point, limit);
  while (!held_.empty() && held_.front().commit_ts < r) {
    joiner_.AddCdc(held_.front());
    held_.pop_front();
  }
  return r;
}

}  // namespace isowatch::tidb
