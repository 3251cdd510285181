// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "isowatch/history/history.h"
#include "isowatch/v1/history.pb.h"

#include "collectors/tidb/cdc_event.h"

namespace isowatch::tidb {

// Where the collector takes the client's records from (docs/collectors/tidb.md): a client log
// read whole (OpenClientLog), or a workload run in the collector's process (WorkloadSource).
// Used from the collector's thread only.
class ClientSource {
 public:
  virtual ~ClientSource() = default;

  // The stream's header, the daemon's first batch.
  virtual const v1::Header& header() const = 0;
  // Whether records come while the collector runs (a workload) rather than all at once.
  virtual bool live() const = 0;
  // Starts producing records. `run` is the collector's run number (1 on a first run, whose
  // table a workload empties first).
  virtual absl::Status Start(uint32_t run) = 0;

  struct Polled {
    // New records, each session's in order of seq.
    std::vector<v1::Transaction> txns;
    // Every transaction that starts at or below `floor` has been handed out (by this Poll or an
    // earlier one).
    Tso floor = 0;
    // No record will come any more. `end_ts`: a TSO taken after every transaction ended (0: not
    // known).
    bool done = false;
    Tso end_ts = 0;
  };
  // What came since the last Poll; does not wait. Errors are fatal (a client log that cannot be
  // written, say).
  virtual absl::StatusOr<Polled> Poll() = 0;
  // Stops producing (a workload's sessions finish their current transaction and end). Idempotent.
  virtual void Stop() = 0;
};

// The header of a stream of `data` records from the collector: version, metadata data_model,
// source and producer.
v1::Header CollectorHeader(history::DataModel data);

// A client log file (the native history format, docs/history-format.md), read whole: the first
// Poll hands out every record and is done. Its header is the file's, with the metadata of
// CollectorHeader. Errors: those of reading the file.
absl::StatusOr<std::unique_ptr<ClientSource>> OpenClientLog(const std::string& path,
                                                            history::DataModel data);

}  // namespace isowatch::tidb
