// SPDX-License-Identifier: Apache-2.0
#include "isowatch/common/credentials.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <sstream>

#include <fmt/format.h>

namespace isowatch {

namespace {

constexpr std::streamoff kMaxCredentialFileBytes = std::streamoff{1} << 20;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::array<unsigned char, SHA256_DIGEST_LENGTH> Digest(std::string_view text) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return digest;
}

// OpenSSL's objects, freed when they go out of scope.
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The first certificate of a PEM text, or null.
std::unique_ptr<X509, X509Free> FirstCertificate(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  if (bio == nullptr) return nullptr;
  return std::unique_ptr<X509, X509Free>(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

}  // namespace

absl::StatusOr<TlsCredentials> LoadTlsCredentials(const TlsFiles& files, std::string_view what) {
  TlsCredentials out;
  if (!files.enabled()) return out;
  const std::string cert_what = fmt::format("{}.cert_file", what);
  const std::string key_what = fmt::format("{}.key_file", what);
  const std::string ca_what = fmt::format("{}.client_ca_file", what);
  absl::StatusOr<std::string> cert = ReadCredentialFile(files.cert_file, cert_what);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadCredentialFile(files.key_file, key_what);
  if (!key.ok()) return key.status();
  std::unique_ptr<X509, X509Free> certificate = FirstCertificate(*cert);
  if (certificate == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {} holds no PEM certificate", cert_what, files.cert_file));
  }
  Bio key_bio = MemoryBio(*key);
  std::unique_ptr<EVP_PKEY, KeyFree> private_key(
      key_bio == nullptr ? nullptr
                         : PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (private_key == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        fmt::format("{}: {} holds no PEM private key (an encrypted key is not supported)", key_what,
                    files.key_file));
  }
  if (X509_check_private_key(certificate.get(), private_key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(fmt::format("{}: the key in {} is not the key of {}",
                                                  key_what, files.key_file, files.cert_file));
  }
  ERR_clear_error();
  out.cert_chain = *std::move(cert);
  out.private_key = *std::move(key);
  if (!files.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadCredentialFile(files.client_ca_file, ca_what);
    if (!ca.ok()) return ca.status();
    if (FirstCertificate(*ca) == nullptr) {
      ERR_clear_error();
      return absl::InvalidArgumentError(
          fmt::format("{}: {} holds no PEM certificate", ca_what, files.client_ca_file));
    }
    out.client_ca = *std::move(ca);
  }
  return out;
}

absl::StatusOr<std::string> ReadCredentialFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    const int error = errno;
    if (error == ENOENT)
      return absl::NotFoundError(fmt::format("{}: no such file: {}", what, path));
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot read {}: {}", what, path, std::strerror(error)));
  }
  const std::streamoff size = in.tellg();
  if (size > kMaxCredentialFileBytes) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {} is {} bytes, more than a credential file holds", what, path, size));
  }
  in.seekg(0);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::PermissionDeniedError(fmt::format("{}: cannot read {}", what, path));
  std::string contents = std::move(text).str();
  if (contents.empty())
    return absl::InvalidArgumentError(fmt::format("{}: {} is empty", what, path));
  return contents;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, std::string_view what) {
  absl::StatusOr<std::string> contents = ReadCredentialFile(path, what);
  if (!contents.ok()) return contents.status();
  std::string_view token = *contents;
  while (!token.empty() && IsSpace(token.front())) token.remove_prefix(1);
  while (!token.empty() && IsSpace(token.back())) token.remove_suffix(1);
  if (token.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: {} holds no token", what, path));
  }
  for (char c : token) {
    if (c < '!' || c > '~') {
      return absl::InvalidArgumentError(
          fmt::format("{}: the token in {} holds a space or a character that is not visible ASCII",
                      what, path));
    }
  }
  return std::string(token);
}

bool TokensMatch(std::string_view presented, std::string_view expected) {
  const auto a = Digest(presented);
  const auto b = Digest(expected);
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::optional<std::string_view> BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() || authorization[kScheme.size()] != ' ') {
    return std::nullopt;
  }
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if ((authorization[i] | 0x20) != kScheme[i]) return std::nullopt;
  }
  std::string_view token = authorization.substr(kScheme.size() + 1);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.empty()) return std::nullopt;
  return token;
}

}  // namespace isowatch
