// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/channel_flags.h"

#include <string>

#include <fmt/format.h>

namespace isowatch::cli {

void ChannelFlags::Register(CLI::App& cmd) {
  cmd.add_flag("--tls", security_.tls,
               "Connect with TLS (implied by the other --tls-* flags and --token-file)");
  cmd.add_option("--tls-ca", security_.ca_file,
                 "CA bundle (PEM) that signed the daemon's certificate; default: the system's")
      ->check(CLI::ExistingFile);
  cmd.add_option("--tls-cert", security_.cert_file,
                 "Client certificate (PEM), for a daemon that asks for one (mutual TLS)")
      ->check(CLI::ExistingFile);
  cmd.add_option("--tls-key", security_.key_file, "Private key (PEM) of --tls-cert")
      ->check(CLI::ExistingFile);
  cmd.add_option("--tls-server-name", security_.server_name,
                 "Name the daemon's certificate must carry, when not the host of the address");
  cmd.add_option("--token-file", security_.token_file,
                 "File holding the bearer token the daemon asks for (needs TLS)")
      ->check(CLI::ExistingFile);
}

bool ChannelFlags::tls() const {
  return security_.tls || !security_.ca_file.empty() || !security_.cert_file.empty() ||
         !security_.token_file.empty() || !security_.server_name.empty();
}

absl::Status ChannelFlags::Explain(absl::Status error) const {
  if (!tls() || error.code() != absl::StatusCode::kUnavailable) return error;
  return absl::Status(
      error.code(),
      fmt::format("{} (with TLS: is the daemon's port TLS, is its certificate signed by "
                  "--tls-ca and made out to the host or --tls-server-name, and does it ask for "
                  "a client certificate, --tls-cert and --tls-key?)",
                  std::string(error.message())));
}

}  // namespace isowatch::cli
