// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/replay_command.h"

#include <charconv>
#include <iostream>

#include <fmt/format.h>

#include "isowatch/cli/command.h"
#include "isowatch/cli/interrupt.h"
#include "isowatch/cli/read_flags.h"
#include "isowatch/collect/replay.h"
#include "isowatch/formats/history_file.h"
#include "isowatch/ingest/validate.h"

namespace isowatch::cli {

CLI::App* ReplayCommand::Register(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("replay", "Stream a history file to isowatchd, with simulated asynchrony");
  cmd->add_option("file", file_, "History file")->required();
  cmd->add_option("--to", to_, "isowatchd's gRPC address, HOST:PORT")->required();
  read_.Register(*cmd);
  channel_.Register(*cmd);
  cmd->add_option("--stream", stream_, "Stream id the daemon knows this replay by");
  cmd->add_option("--id-prefix", id_prefix_,
                  "Prefix every transaction id and session with this text (ids are unique across "
                  "the daemon's streams)");
  cmd->add_option("--batch", batch_, "Transactions per batch")->check(CLI::PositiveNumber);
  cmd->add_option("--sigma-ms", sigma_ms_, "Standard deviation of the delivery delay (ms)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--mean-ms", mean_ms_, "Mean delivery delay (ms)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", seed_, "Seed of the delays");
  cmd->add_option("--collect-rate", collect_rate_tps_,
                  "Simulated collection rate (transactions per second) the delays apply to")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--rate", rate_tps_, "Sending rate, transactions per second; 0 = unpaced")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--connect-timeout-ms", connect_timeout_ms_,
                  "How long to wait for the first connection to the daemon before giving up")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-watermarks", no_watermarks_,
                "Send no watermarks: the daemon finalises by timeout");
  cmd->add_flag("--quiet", quiet_, "Print nothing but errors");
  return cmd;
}

int ReplayCommand::Run() {
  auto read_options = read_.Options();
  if (!read_options.ok()) {
    std::cerr << "isowatch replay: " << read_options.status().message() << "\n";
    return kExitBadInput;
  }
  const formats::ReadOptions& options = *read_options;
  formats::FileFormat used = formats::FileFormat::kAuto;
  auto h = formats::ReadHistoryFile(file_, read_.format(), options, &used);
  if (!h.ok()) {
    std::cerr << "isowatch replay: " << h.status().message() << "\n";
    return kExitBadInput;
  }
  if (h->size() > 0 && !h->has_commit_timestamps()) {
    std::cerr << fmt::format(
        "isowatch replay: {} ({}) has no commit timestamps, and the daemon's online engine "
        "orders transactions by them; check it offline with `isowatch check` instead\n",
        file_, formats::FileFormatName(used));
    return kExitBadInput;
  }
  absl::StatusOr<ingest::ChannelAuth> auth = channel_.Auth();
  if (!auth.ok()) {
    std::cerr << "isowatch replay: " << auth.status().message() << "\n";
    return kExitBadInput;
  }
  collect::ReplayOptions replay;
  replay.target = to_;
  replay.auth = *std::move(auth);
  replay.stream = stream_;
  replay.delivery = sim::DeliveryOptions{.mean_ms = mean_ms_,
                                         .sigma_ms = sigma_ms_,
                                         .batch = batch_,
                                         .seed = seed_,
                                         .rate_tps = collect_rate_tps_,
                                         .watermarks = !no_watermarks_};
  replay.send_rate_tps = rate_tps_;
  replay.relabel.id_prefix = id_prefix_;
  replay.connect_timeout = absl::Milliseconds(connect_timeout_ms_);
  // Ctrl-C stops sending, waits for the acks of what was sent and leaves the stream open: the
  // daemon must not take the part sent for the whole history.
  replay.cancel = &CatchInterrupts();
  auto result = collect::Replay(*h, replay);
  if (!result.ok()) {
    std::cerr << "isowatch replay: " << channel_.Explain(result.status()).message() << "\n";
    return kExitBadInput;
  }
  if (!quiet_) {
    std::cout << fmt::format(
        "replayed {} transactions in {} batches to {} (stream {}) in {:.2f} s ({:.0f} "
        "transactions/s); {} reconnects, {} refusals\n",
        result->transactions, result->batches, to_, stream_, result->seconds,
        result->seconds > 0 ? static_cast<double>(result->transactions) / result->seconds : 0.0,
        result->reconnects, result->refusals.size());
    for (const v1::Refusal& r : result->refusals) {
      std::cout << fmt::format("  refused: batch {} #{} ({}): {}: {}\n", r.seq(), r.index(),
                               r.txn_id(), ingest::RefusalReasonName(r.reason()), r.detail());
    }
  }
  if (result->interrupted) {
    std::cerr << fmt::format(
        "isowatch replay: interrupted after {} of {} transactions; stream {} left open at batch "
        "{} (not ended: the daemon keeps waiting for the rest)\n",
        result->transactions, h->size(), stream_, result->durable_seq);
    return kExitBadInput;
  }
  if (!result->refusals.empty()) {
    uint64_t whole = 0;
    for (const v1::Refusal& r : result->refusals) whole += r.whole_batch() ? 1 : 0;
    std::cerr << fmt::format(
        "isowatch replay: the daemon refused {} transactions and {} whole batches of what was "
        "sent{}; what it refused is not checked\n",
        result->refusals.size() - whole, whole, quiet_ ? "" : " (listed above)");
    return kExitBadInput;
  }
  return kExitValid;
}

}  // namespace isowatch::cli
