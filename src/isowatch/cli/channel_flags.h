// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <CLI/CLI.hpp>

#include "isowatch/ingest/channel_credentials.h"

namespace isowatch::cli {

// The flags of the commands that send to isowatchd's gRPC port (replay, demo): TLS, a client
// certificate and a token (docs/security.md). The token is read from a file, never given on the
// command line, where other users could see it.
class ChannelFlags {
 public:
  // Adds --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name and --token-file to `cmd`.
  void Register(CLI::App& cmd);
  // The channel's credentials. Errors: those of ingest::MakeChannelAuth.
  absl::StatusOr<ingest::ChannelAuth> Auth() const { return ingest::MakeChannelAuth(security_); }
  // Whether the channel uses TLS.
  bool tls() const;
  // `error` with a hint of what to check when a TLS connection could not be made.
  absl::Status Explain(absl::Status error) const;

 private:
  ingest::ChannelSecurity security_;
};

}  // namespace isowatch::cli
