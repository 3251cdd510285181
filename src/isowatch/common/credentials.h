// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace isowatch {

// The files a TLS server needs (docs/security.md): its certificate chain and private key (PEM),
// and, for mutual TLS, the CA bundle (PEM) that must have signed the clients' certificates.
// Empty cert_file: no TLS. A plain value.
struct TlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // empty: clients need no certificate

  bool enabled() const { return !cert_file.empty(); }
  bool operator==(const TlsFiles&) const = default;
};

// What TLS files hold, read and checked (LoadTlsCredentials): PEM text. Empty cert_chain: no TLS.
// A plain value.
struct TlsCredentials {
  std::string cert_chain;
  std::string private_key;
  std::string client_ca;  // empty: clients need no certificate

  bool enabled() const { return !cert_chain.empty(); }
};

// Reads the files of `files` (none when TLS is off) and checks that they parse as PEM, that the
// key is the certificate's, and that the CA bundle holds at least one certificate. `what` names
// the files' group in messages ("grpc.tls": "grpc.tls.key_file: ..."). Errors: those of
// ReadCredentialFile, and InvalidArgument for a file that is not what it should be.
absl::StatusOr<TlsCredentials> LoadTlsCredentials(const TlsFiles& files, std::string_view what);

// The contents of a certificate, key or CA file. `what` names the file in messages
// ("grpc.tls.cert"). Errors: NotFound, PermissionDenied (cannot be read), InvalidArgument (empty,
// or over 1 MiB: no PEM file is that large).
absl::StatusOr<std::string> ReadCredentialFile(const std::string& path, std::string_view what);

// The bearer token in a token file: its contents without the whitespace around them (a file
// written with `echo` ends with a newline). Errors: those of ReadCredentialFile, and
// InvalidArgument for a token that is empty or holds characters other than the visible ASCII
// ones a header value carries unquoted (space and control characters included).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, std::string_view what);

// Whether a presented token equals the expected one, in time that depends on neither: both are
// hashed (SHA-256) and the digests compared with CRYPTO_memcmp, so that neither the position of
// the first differing byte nor the token's length shows in the time taken.
bool TokensMatch(std::string_view presented, std::string_view expected);

// The token of an `Authorization: Bearer <token>` header value (the scheme's case ignored), or
// nullopt for another scheme or a malformed value.
std::optional<std::string_view> BearerToken(std::string_view authorization);

}  // namespace isowatch
