// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <deque>

#include "absl/status/status.h"

#include "collectors/tidb/cdc_event.h"
#include "collectors/tidb/client_source.h"
#include "collectors/tidb/joiner.h"
#include "collectors/tidb/txn_grouper.h"

namespace isowatch::tidb {

// Feeds the joiner from a client source and the changefeed so that the joiner never decides
// ahead of the client (docs/collectors/tidb.md, "The join", live sources): the release point it
// is given is the changefeed's, lowered to just above the client's floor (every transaction
// starting at or below the floor has been handed out), and changefeed transactions committed at
// or above that point wait here. Then a row always finds its client record if the client has
// one, and a record is never decided after the watermark passed it. A client log is all in at
// the first Pump, and gates nothing. Single-threaded (the collector's loop).
class ClientFeed {
 public:
  // `source` and `joiner` are the caller's and outlive the feed.
  ClientFeed(ClientSource& source, Joiner& joiner) : source_(source), joiner_(joiner) {}

  // Adds the source's new records to the joiner, and seals it once the source is done. Errors:
  // the source's (fatal), a record the joiner refuses.
  absl::Status Pump();
  // A changefeed transaction released by the grouper.
  void AddCdc(const CdcTxn& txn);
  // The release point to give Joiner::Take for the changefeed's `cdc_release_point`; the
  // changefeed transactions below it are added to the joiner first.
  Tso ReleasePoint(Tso cdc_release_point);

  // Every record is in and the joiner sealed.
  bool done() const { return joiner_.sealed(); }
  uint64_t records() const { return records_; }
  Tso floor() const { return floor_; }
  size_t held() const { return held_.size(); }

 private:
  ClientSource& source_;
  Joiner& joiner_;
  Tso floor_ = 0;
  uint64_t records_ = 0;
  std::deque<CdcTxn> held_;
};

}  // namespace isowatch::tidb
