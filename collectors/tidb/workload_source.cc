// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/workload_source.h"

#include <utility>

#include <spdlog/spdlog.h>

#include "isowatch/common/status_macros.h"

namespace isowatch::tidb {

WorkloadSource::WorkloadSource(WorkloadOptions options, std::shared_ptr<TimestampSource> timestamps,
                               std::string client_log, bool reset_on_first_run)
    : options_(std::move(options)),
      timestamps_(std::move(timestamps)),
      client_log_path_(std::move(client_log)),
      reset_on_first_run_(reset_on_first_run),
      header_(CollectorHeader(options_.data)) {}

WorkloadSource::~WorkloadSource() { Stop(); }

absl::Status WorkloadSource::Start(uint32_t run) {
  options_.shape.run = run;
  if (!client_log_path_.empty()) {
    ASSIGN_OR_RETURN(log_, ClientLogWriter::Create(client_log_path_, header_));
  }
  workload_ = std::make_unique<Workload>(options_, timestamps_, [this](v1::Transaction t) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(t));
  });
  RETURN_IF_ERROR(workload_->Prepare(/*reset=*/reset_on_first_run_ && run == 1));
  workload_->Start();
  return absl::OkStatus();
}

absl::StatusOr<ClientSource::Polled> WorkloadSource::Poll() {
  Polled p;
  if (workload_ == nullptr) return p;
  // In this order: a session hands a record over before it moves its floor or ends.
  const bool done = workload_->done();
  p.floor = workload_->Floor();
  {
    absl::MutexLock lock(&mu_);
    p.txns.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
    queue_.clear();
  }
  records_ += p.txns.size();
  if (log_ != nullptr) {
    for (const v1::Transaction& t : p.txns) RETURN_IF_ERROR(log_->Write(t));
    if (!p.txns.empty()) RETURN_IF_ERROR(log_->Flush());
  }
  if (done && !done_) {
    done_ = true;
    workload_->Wait();
    absl::StatusOr<Tso> end = workload_->FreshTs();
    if (end.ok()) {
      end_ts_ = *end;
    } else {
      spdlog::warn("no timestamp after the workload's end: {}", end.status().ToString());
    }
  }
  p.done = done_;
  p.end_ts = end_ts_;
  return p;
}

void WorkloadSource::Stop() {
  if (workload_ != nullptr) workload_->Stop();
}

}  // namespace isowatch::tidb
