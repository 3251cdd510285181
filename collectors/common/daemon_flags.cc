// SPDX-License-Identifier: Apache-2.0
#include "collectors/common/daemon_flags.h"

#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace isowatch::collectors {

void AddDaemonFlags(CLI::App& app, DaemonFlags& flags, DaemonOptions& options, bool to_required) {
  CLI::Option* to = app.add_option("--to", flags.to, "isowatchd's gRPC ingest address, HOST:PORT");
  if (to_required) to->required();
  // The token is read from a file, never given on the command line, where others could see it.
  app.add_flag("--tls", flags.security.tls,
               "Connect to isowatchd with TLS (implied by the other --tls-* flags and "
               "--token-file)");
  app.add_option("--tls-ca", flags.security.ca_file,
                 "CA bundle (PEM) that signed isowatchd's certificate; default: the system's")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-cert", flags.security.cert_file,
                 "Client certificate (PEM), for an isowatchd that asks for one (mutual TLS)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", flags.security.key_file, "Private key (PEM) of --tls-cert")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-server-name", flags.security.server_name,
                 "Name isowatchd's certificate must carry, when not the host of --to");
  app.add_option("--token-file", flags.security.token_file,
                 "File holding the bearer token isowatchd asks for (needs TLS)")
      ->check(CLI::ExistingFile);
  app.add_option("--state-dir", options.state_dir,
                 "Directory of the collector's state, for restarts (created if missing)");
  app.add_option("--batch", options.batch_size, "Transactions per batch sent to isowatchd")
      ->check(CLI::Range(1, 100000));
  app.add_option("--progress-ms", flags.progress_ms, "Print progress this often (0 = never)");
}

absl::Status ApplyDaemonFlags(const DaemonFlags& flags, DaemonOptions& options) {
  options.target = flags.to;
  if (flags.progress_ms > 0) options.progress_interval = absl::Milliseconds(flags.progress_ms);
  absl::StatusOr<ingest::ChannelAuth> auth = ingest::MakeChannelAuth(flags.security);
  if (!auth.ok()) return auth.status();
  options.auth = *std::move(auth);
  return absl::OkStatus();
}

}  // namespace isowatch::collectors
