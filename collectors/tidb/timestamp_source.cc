// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/timestamp_source.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include <fmt/format.h>

#include "collectors/tidb/internal/json_fields.h"

namespace isowatch::tidb {
namespace {

constexpr std::string_view kLastTxnInfo = "tidb_last_txn_info";

SqlError AnswerError(std::string what) {
  return SqlError{.code = 0, .message = std::move(what), .info = ErrorInfo{}};
}

class TidbClock : public SessionClock {
 public:
  TsoResult StartTs(MysqlConn* conn) override {
    QueryResult r = conn->Query("SELECT @@tidb_current_ts");
    if (!r.ok()) return TsoResult{.error = std::move(r.error)};
    Tso ts = 0;
    if (r.rows.size() != 1 || r.rows[0].empty() || !r.rows[0][0] ||
        !absl::SimpleAtoi(*r.rows[0][0], &ts) || ts == 0) {
      return TsoResult{.error = AnswerError("@@tidb_current_ts gave no timestamp")};
    }
    return TsoResult{.ts = ts};
  }

  CommitTsResult AfterCommit(MysqlConn* conn, bool /*wrote*/) override {
    QueryResult r = conn->Query("SELECT @@tidb_last_txn_info");
    if (!r.ok()) return CommitTsResult{.error = std::move(r.error)};
    if (r.rows.size() != 1 || r.rows[0].empty() || !r.rows[0][0]) {
      return CommitTsResult{.error = AnswerError("@@tidb_last_txn_info is empty")};
    }
    absl::StatusOr<LastTxnInfo> info = ParseLastTxnInfo(*r.rows[0][0]);
    if (!info.ok())
      return CommitTsResult{.error = AnswerError(std::string(info.status().message()))};
    return CommitTsResult{.info = *std::move(info)};
  }
};

class TidbTimestamps : public TimestampSource {
 public:
  std::unique_ptr<SessionClock> NewSession() override { return std::make_unique<TidbClock>(); }
  bool tidb() const override { return true; }
};

class FakeClock : public SessionClock {
 public:
  explicit FakeClock(std::shared_ptr<FakeTso> oracle) : oracle_(std::move(oracle)) {}

  TsoResult StartTs(MysqlConn* /*conn*/) override {
    start_ = oracle_->Next();
    commit_ = 0;
    return TsoResult{.ts = start_};
  }
  void BeforeCommit() override { commit_ = oracle_->Next(); }
  CommitTsResult AfterCommit(MysqlConn* /*conn*/, bool wrote) override {
    return CommitTsResult{.info =
                              LastTxnInfo{.start_ts = start_, .commit_ts = wrote ? commit_ : 0}};
  }

 private:
  std::shared_ptr<FakeTso> oracle_;
  Tso start_ = 0;
  Tso commit_ = 0;
};

class FakeTimestamps : public TimestampSource {
 public:
  explicit FakeTimestamps(std::shared_ptr<FakeTso> oracle) : oracle_(std::move(oracle)) {}
  std::unique_ptr<SessionClock> NewSession() override {
    return std::make_unique<FakeClock>(oracle_);
  }
  bool tidb() const override { return false; }

 private:
  std::shared_ptr<FakeTso> oracle_;
};

}  // namespace

absl::StatusOr<LastTxnInfo> ParseLastTxnInfo(std::string_view json) {
  simdjson::dom::parser parser;
  absl::StatusOr<simdjson::dom::element> doc = internal::ParseJson(parser, json, kLastTxnInfo);
  if (!doc.ok()) return doc.status();
  absl::StatusOr<simdjson::dom::object> o = internal::AsObject(*doc, kLastTxnInfo, "");
  if (!o.ok()) return o.status();
  LastTxnInfo info;
  std::optional<simdjson::dom::element> start = internal::Member(*o, "start_ts");
  if (!start) return internal::FieldError(kLastTxnInfo, "start_ts", "missing");
  absl::StatusOr<Tso> s = internal::AsTso(*start, kLastTxnInfo, "start_ts");
  if (!s.ok()) return s.status();
  info.start_ts = *s;
  if (std::optional<simdjson::dom::element> commit = internal::Member(*o, "commit_ts");
      commit && !commit->is_null()) {
    uint64_t zero = 1;
    if (!(commit->get_uint64().get(zero) == simdjson::SUCCESS && zero == 0)) {
      absl::StatusOr<Tso> c = internal::AsTso(*commit, kLastTxnInfo, "commit_ts");
      if (!c.ok()) return c.status();
      info.commit_ts = *c;
    }
  }
  absl::StatusOr<std::string> mode =
      internal::OptionalString(*o, "txn_commit_mode", kLastTxnInfo, "txn_commit_mode");
  if (!mode.ok()) return mode.status();
  info.commit_mode = *std::move(mode);
  absl::StatusOr<std::string> error = internal::OptionalString(*o, "error", kLastTxnInfo, "error");
  if (!error.ok()) return error.status();
  info.error = *std::move(error);
  return info;
}

std::unique_ptr<TimestampSource> MakeTidbTimestamps() { return std::make_unique<TidbTimestamps>(); }

FakeTso::FakeTso(std::function<int64_t()> now_ms) : now_ms_(std::move(now_ms)) {
  if (!now_ms_) now_ms_ = [] { return absl::ToUnixMillis(absl::Now()); };
}

Tso FakeTso::Next() {
  const int64_t now = std::max<int64_t>(now_ms_(), 0);
  absl::MutexLock lock(&mu_);
  last_ = std::max(MakeTso(static_cast<uint64_t>(now), 0), last_ + 1);
  return last_;
}

std::unique_ptr<TimestampSource> MakeFakeTimestamps(std::shared_ptr<FakeTso> oracle) {
  return std::make_unique<FakeTimestamps>(std::move(oracle));
}

}  // namespace isowatch::tidb
