// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "absl/status/status.h"
#include <CLI/CLI.hpp>

#include "isowatch/ingest/channel_credentials.h"

#include "collectors/common/daemon_options.h"

namespace isowatch::collectors {

// The command-line flags every collector has for reaching isowatchd, as given, before
// ApplyDaemonFlags turns them into DaemonOptions. A plain value.
struct DaemonFlags {
  std::string to;
  ingest::ChannelSecurity security;
  int progress_ms = 0;
};

// Adds to `app` the flags of DaemonFlags and DaemonOptions: --to (required when `to_required`),
// --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name, --token-file (docs/security.md),
// --state-dir, --batch and --progress-ms. `flags` and `options` must outlive the parse; the
// defaults are what they hold when this is called.
void AddDaemonFlags(CLI::App& app, DaemonFlags& flags, DaemonOptions& options, bool to_required);

// Sets options.target, options.auth (reading the TLS and token files) and
// options.progress_interval from `flags`. Errors: as ingest::MakeChannelAuth (a file that
// cannot be read or is not what it should be, a certificate without its key).
absl::Status ApplyDaemonFlags(const DaemonFlags& flags, DaemonOptions& options);

}  // namespace isowatch::collectors
