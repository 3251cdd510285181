// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/channel_credentials.h"

#include <fmt/format.h>

#include "isowatch/common/credentials.h"
#include "isowatch/common/status_macros.h"

namespace isowatch::ingest {

absl::StatusOr<ChannelAuth> MakeChannelAuth(const ChannelSecurity& security) {
  ChannelAuth auth;
  const bool tls = security.tls || !security.ca_file.empty() || !security.cert_file.empty() ||
                   !security.key_file.empty() || !security.token_file.empty() ||
                   !security.server_name.empty();
  if (!tls) return auth;
  if (security.cert_file.empty() != security.key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate and its key go together: give both files or neither");
  }
  grpc::SslCredentialsOptions options;
  if (!security.ca_file.empty()) {
    ASSIGN_OR_RETURN(options.pem_root_certs, ReadCredentialFile(security.ca_file, "the CA file"));
  }
  if (!security.cert_file.empty()) {
    ASSIGN_OR_RETURN(
        const TlsCredentials client,
        LoadTlsCredentials(TlsFiles{.cert_file = security.cert_file, .key_file = security.key_file},
                           "the client's tls"));
    options.pem_cert_chain = client.cert_chain;
    options.pem_private_key = client.private_key;
  }
  auth.credentials = grpc::SslCredentials(options);
  if (!security.token_file.empty()) {
    ASSIGN_OR_RETURN(const std::string token, ReadTokenFile(security.token_file, "the token file"));
    auth.credentials =
        grpc::CompositeChannelCredentials(auth.credentials, grpc::AccessTokenCredentials(token));
  }
  auth.server_name = security.server_name;
  return auth;
}

}  // namespace isowatch::ingest
