// SPDX-License-Identifier: Apache-2.0
#include "isowatch/ingest/server_credentials.h"

#include <optional>
#include <string_view>
#include <utility>

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_metadata_processor.h>

namespace isowatch::ingest {

namespace {

constexpr char kAuthorization[] = "authorization";

// Lets a call through only with the token. Called by gRPC for each call, before its handler.
// Thread-safe (immutable).
class BearerTokenProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit BearerTokenProcessor(std::string token) : token_(std::move(token)) {}

  // The check is a hash and a comparison: it runs on the thread that received the call.
  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* /*context*/,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* /*response_metadata*/) override {
    auto it = auth_metadata.find(kAuthorization);
    if (it == auth_metadata.end()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this server needs a bearer token (metadata authorization: Bearer "
                          "TOKEN)");
    }
    const std::string_view value(it->second.data(), it->second.size());
    const std::optional<std::string_view> token = BearerToken(value);
    if (!token || !TokensMatch(*token, token_)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong bearer token");
    }
    // The handlers never see the token.
    consumed_auth_metadata->emplace(std::string(kAuthorization), std::string(value));
    return grpc::Status::OK;
  }

 private:
  const std::string token_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerSecurity& security) {
  if (!security.tls.enabled()) {
    if (!security.token.empty()) {
      return absl::InvalidArgumentError("a gRPC bearer token needs TLS");
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions options(
      security.tls.client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                     : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = security.tls.client_ca;
  options.pem_key_cert_pairs.push_back(
      {.private_key = security.tls.private_key, .cert_chain = security.tls.cert_chain});
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(options);
  if (!security.token.empty()) {
    credentials->SetAuthMetadataProcessor(std::make_shared<BearerTokenProcessor>(security.token));
  }
  return credentials;
}

}  // namespace isowatch::ingest
