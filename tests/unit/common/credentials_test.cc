// SPDX-License-Identifier: Apache-2.0
#include "isowatch/common/credentials.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace isowatch {
namespace {

using ::testing::HasSubstr;

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("isowatch-credentials-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& contents) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(CredentialsTest, ReadsATokenWithoutTheWhitespaceAroundIt) {
  absl::StatusOr<std::string> token = ReadTokenFile(Write("t", "  s3cret-Token_1\n"), "auth");
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret-Token_1");
}

TEST_F(CredentialsTest, RefusesEmptyTokensTokensWithSpacesAndMissingFiles) {
  absl::StatusOr<std::string> empty = ReadTokenFile(Write("e", " \n\n"), "x.token_file");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("x.token_file"));
  EXPECT_EQ(ReadTokenFile(Write("z", ""), "t").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTokenFile(Write("s", "two words\n"), "t").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTokenFile(Write("c", "a\x01z"), "t").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> missing = ReadTokenFile((dir_ / "nothing").string(), "t");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadCredentialFile(Write("big", std::string((1 << 20) + 1, 'a')), "c").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TokensMatchTest, ComparesWholeTokens) {
  EXPECT_TRUE(TokensMatch("s3cret", "s3cret"));
  EXPECT_FALSE(TokensMatch("s3cres", "s3cret"));
  EXPECT_FALSE(TokensMatch("s3cre", "s3cret"));
  EXPECT_FALSE(TokensMatch("s3crett", "s3cret"));
  EXPECT_FALSE(TokensMatch("", "s3cret"));
  EXPECT_FALSE(TokensMatch(std::string("s3cret\0x", 8), "s3cret"));
}

TEST(BearerTokenTest, ParsesTheBearerScheme) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer abc"), "abc");
  EXPECT_EQ(BearerToken("BEARER   abc  "), "abc");
  EXPECT_EQ(BearerToken("Bearer"), std::nullopt);
  EXPECT_EQ(BearerToken("Bearer "), std::nullopt);
  EXPECT_EQ(BearerToken("Bearerabc"), std::nullopt);
  EXPECT_EQ(BearerToken("Basic YWJj"), std::nullopt);
  EXPECT_EQ(BearerToken(""), std::nullopt);
}

TEST_F(CredentialsTest, TlsFilesAreReadAndCheckedOnlyWhenEnabled) {
  absl::StatusOr<TlsCredentials> off = LoadTlsCredentials(TlsFiles{}, "grpc.tls");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->enabled());

  absl::StatusOr<TlsCredentials> missing = LoadTlsCredentials(
      TlsFiles{.cert_file = (dir_ / "none.pem").string(), .key_file = Write("k", "x")}, "grpc.tls");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("grpc.tls.cert_file"));

  absl::StatusOr<TlsCredentials> not_pem = LoadTlsCredentials(
      TlsFiles{.cert_file = Write("c.pem", "not a certificate\n"), .key_file = Write("k", "x")},
      "http.tls");
  EXPECT_EQ(not_pem.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(not_pem.status().message()),
      HasSubstr("http.tls.cert_file: " + (dir_ / "c.pem").string() + " holds no PEM certificate"));
}

}  // namespace
}  // namespace isowatch
