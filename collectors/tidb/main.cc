// SPDX-License-Identifier: Apache-2.0
//
// isowatch-tidb: the TiDB collector (docs/collectors/tidb.md). Joins a workload's client log
// (start ts, reads, writes, outcome) with the TiCDC changefeed of its table (commit ts, committed
// rows), read from Kafka or a storage sink, and streams the joined transactions to isowatchd.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "isowatch/common/stop_signals.h"

#include "collectors/common/daemon_flags.h"
#include "collectors/tidb/cdc_input.h"
#include "collectors/tidb/collector.h"
#include "collectors/tidb/workload_command.h"

namespace {

std::atomic<bool> g_stop{false};

struct Flags {
  std::string data = "kv";
  std::string brokers;
  std::string topic;
  std::string group = "isowatch-tidb";
  std::string protocol = "canal-json";
  std::vector<std::string> kafka_config;
  std::string storage_dir;
  std::string storage_format = "csv";
  bool keep_open = false;
  int stall_s = 0;
  isowatch::collectors::DaemonFlags daemon;
  isowatch::tidb::CollectorOptions o;
};

isowatch::tidb::CdcInputFactory InputFactory(const Flags& f) {
  if (!f.storage_dir.empty()) {
    const auto format = f.storage_format == "canal-json"
                            ? isowatch::tidb::StorageSinkReader::Format::kCanalJson
                            : isowatch::tidb::StorageSinkReader::Format::kCsv;
    const std::string root = f.storage_dir;
    return [root, format](const std::string& /*resume: re-read from the start*/)
               -> absl::StatusOr<std::unique_ptr<isowatch::tidb::CdcInput>> {
      return std::make_unique<isowatch::tidb::StorageCdcInput>(root, format,
                                                               isowatch::tidb::StorageCsvOptions{});
    };
  }
  isowatch::tidb::KafkaSourceOptions ko{
      .brokers = f.brokers, .topic = f.topic, .group_id = f.group};
  for (const std::string& property : f.kafka_config) {
    const size_t eq = property.find('=');
    ko.properties.emplace_back(property.substr(0, eq), property.substr(eq + 1));
  }
  ko.protocol = f.protocol == "open"     ? isowatch::tidb::KafkaProtocol::kOpenProtocol
                : f.protocol == "simple" ? isowatch::tidb::KafkaProtocol::kSimple
                                         : isowatch::tidb::KafkaProtocol::kCanalJson;
  return
      [ko](const std::string& resume) { return isowatch::tidb::KafkaCdcInput::Create(ko, resume); };
}

// `workload`: the subcommand that was given, if any (its workload is the client source).
int Run(Flags& f, const CLI::App& app, isowatch::tidb::WorkloadCommand* workload) {
  isowatch::tidb::CollectorOptions o = f.o;
  o.join.data = f.data == "list" ? isowatch::history::DataModel::kList
                                 : isowatch::history::DataModel::kKeyValue;
  std::optional<isowatch::tidb::WorkloadOptions> wo;
  if (workload != nullptr) {
    absl::StatusOr<isowatch::tidb::WorkloadOptions> w = workload->Configure(app, o);
    if (!w.ok()) {
      fmt::print(stderr, "isowatch-tidb: {}\n", std::string(w.status().message()));
      return 2;
    }
    wo = *std::move(w);
    if (workload->bare() && !(f.daemon.to.empty() && f.storage_dir.empty() && f.brokers.empty())) {
      fmt::print(stderr,
                 "isowatch-tidb: --bare runs the workload alone: no --to, --storage-dir or "
                 "--kafka\n");
      return 2;
    }
    if (f.daemon.to.empty() && f.storage_dir.empty() && f.brokers.empty()) {
      return workload->RunRecordOnly(*wo, &g_stop);
    }
  } else if (o.client_log.empty()) {
    fmt::print(stderr, "isowatch-tidb: give --client-log FILE, or a subcommand\n");
    return 2;
  }
  if (f.daemon.to.empty()) {
    fmt::print(stderr, "isowatch-tidb: --to HOST:PORT (isowatchd's gRPC port) is required\n");
    return 2;
  }
  if (f.storage_dir.empty() == f.brokers.empty()) {
    fmt::print(stderr,
               "isowatch-tidb: give either --kafka BROKERS and --topic, or --storage-dir\n");
    return 2;
  }
  if (!f.brokers.empty() && f.topic.empty()) {
    fmt::print(stderr, "isowatch-tidb: --kafka needs --topic\n");
    return 2;
  }
  o.daemon.end_of_stream = o.daemon.end_of_stream && !f.keep_open;
  if (f.stall_s > 0) o.stall_timeout = absl::Seconds(f.stall_s);
  if (absl::Status s = isowatch::collectors::ApplyDaemonFlags(f.daemon, o.daemon); !s.ok()) {
    fmt::print(stderr, "isowatch-tidb: {}\n", std::string(s.message()));
    return 2;
  }
  std::unique_ptr<isowatch::tidb::WorkloadSource> source;
  if (wo) source = workload->MakeSource(*wo);
  absl::StatusOr<isowatch::tidb::CollectorResult> r =
      source != nullptr ? isowatch::tidb::RunCollector(o, *source, InputFactory(f), &g_stop)
                        : isowatch::tidb::RunCollector(o, InputFactory(f), &g_stop);
  if (!r.ok()) {
    fmt::print(stderr, "isowatch-tidb: {}\n", std::string(r.status().message()));
    return 1;
  }
  const isowatch::tidb::JoinerStats& j = r->join;
  fmt::print(
      "isowatch-tidb: run {} ({}), {} client records in {:.1f} s; sent {} in {} batches, {} "
      "refused; joined {}, client only {}, CDC only {}; unknown resolved committed {}, aborted "
      "{}; missing in CDC {}, write mismatches {}, commit ts mismatches {}, split commits {}, "
      "already sent {}; CDC refused {}, late rows {}, duplicate rows {}, foreign rows {}; "
      "release point {}, watermark {}; reconnects to isowatchd {}; commit to durable in "
      "isowatchd: p50 {:.3f} s, p99 {:.3f} s, max {:.3f} s; rows {}, acknowledgements failed "
      "{}\n",
      r->run, r->resumed ? "resumed" : "new", r->client_records, r->seconds, r->sent, r->batches,
      r->refusals, j.joined, j.client_only, j.cdc_only, j.unknown_committed, j.unknown_aborted,
      j.missing_in_cdc, j.write_mismatches, j.commit_ts_mismatches, j.split_commits, j.already_sent,
      r->rejected_cdc, r->late_rows, r->duplicate_rows, j.foreign_rows, r->release_point,
      r->watermark, r->daemon_reconnects, r->lag.p50, r->lag.p99, r->lag.max, r->rows,
      r->acknowledge_failures);
  if (source != nullptr) {
    fmt::print("isowatch-tidb: workload, {}\n",
               isowatch::tidb::WorkloadCommand::Summary(source->stats(), r->seconds));
  }
  const bool clean = r->refusals == 0 && j.write_mismatches == 0 && j.missing_in_cdc == 0 &&
                     j.split_commits == 0 && r->rejected_cdc == 0 && r->late_rows == 0;
  return clean ? 0 : 1;
}

}  // namespace

// Only CLI11 throws (docs/style.md, item 4), and its parse errors are caught here.
// NOLINTNEXTLINE(bugprone-exception-escape)
int main(int argc, char** argv) {
  // SIGTERM and SIGINT end the run cleanly.
  isowatch::SetOnStopSignal(&g_stop);

  CLI::App app("isowatch-tidb: checks a TiDB database with isowatchd, from TiCDC's changefeed");
  Flags f;
  f.o.daemon.state_dir = "isowatch-tidb-state";
  app.add_option("--client-log", f.o.client_log,
                 "The workload's transactions (isowatch native history, JSON lines or binary)")
      ->check(CLI::ExistingFile);
  isowatch::collectors::AddDaemonFlags(app, f.daemon, f.o.daemon, /*to_required=*/false);
  app.add_option("--kafka", f.brokers, "Kafka bootstrap servers of the changefeed's topic");
  app.add_option("--topic", f.topic, "The changefeed's Kafka topic");
  app.add_option("--group", f.group, "Kafka consumer group (its committed offsets resume a run)");
  app.add_option("--kafka-config", f.kafka_config,
                 "A librdkafka consumer property NAME=VALUE (repeatable), e.g. for TLS or SASL")
      ->check([](const std::string& v) {
        return v.find('=') == std::string::npos || v.front() == '='
                   ? std::string("expected NAME=VALUE")
                   : std::string();
      });
  app.add_option("--protocol", f.protocol, "Kafka protocol: canal-json, open or simple")
      ->check(CLI::IsMember({"canal-json", "open", "simple"}));
  app.add_option("--storage-dir", f.storage_dir, "Directory a TiCDC storage sink writes to");
  app.add_option("--storage-format", f.storage_format, "Storage sink protocol: csv or canal-json")
      ->check(CLI::IsMember({"csv", "canal-json"}));
  app.add_option("--schema", f.o.join.schema, "Database of the workload's table");
  app.add_option("--table", f.o.join.table, "The workload's table (columns k, v, t)");
  app.add_option("--data", f.data, "Data model: kv (registers) or list (appends)")
      ->check(CLI::IsMember({"kv", "list"}));
  app.add_option("--stream", f.o.join.stream, "Name of the stream in isowatchd");
  app.add_flag("--keep-open", f.keep_open, "Do not end the stream when every record is sent");
  app.add_option("--stall-timeout-s", f.stall_s,
                 "Fail when the changefeed's release point does not move for this long while "
                 "records wait (0 = wait for ever)");
  // The subcommands drive a workload and take the collector's flags above too.
  app.fallthrough();
  isowatch::tidb::WorkloadCommand workload(app, /*canary=*/false);
  isowatch::tidb::WorkloadCommand canary(app, /*canary=*/true);
  CLI11_PARSE(app, argc, argv);
  if (workload.parsed()) return Run(f, app, &workload);
  if (canary.parsed()) return Run(f, app, &canary);
  return Run(f, app, nullptr);
}
