// SPDX-License-Identifier: Apache-2.0
#include "isowatch/server/http_api.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "isowatch/common/credentials.h"
#include "isowatch/common/string_view.h"
#include "isowatch/store/violation_record.h"

namespace isowatch::server {

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void String(JsonWriter& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

void Key(JsonWriter& w, std::string_view s) {
  w.Key(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

std::string ToString(const rapidjson::StringBuffer& buffer) {
  return std::string(buffer.GetString(), buffer.GetSize());
}

// The HTTP status an error from a provider maps to.
int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kFailedPrecondition:
      return 503;
    default:
      return 500;
  }
}

// {"error": message, "parameter": parameter} (the parameter only when there is one).
HttpResponse JsonError(int status, std::string_view message, std::string_view parameter = {}) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  Key(w, "error");
  String(w, message);
  if (!parameter.empty()) {
    Key(w, "parameter");
    String(w, parameter);
  }
  w.EndObject();
  return HttpResponse::Json(status, ToString(buffer));
}

// Milliseconds since the Unix epoch as RFC 3339 in UTC with millisecond precision.
std::string FormatUnixMillis(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

// A time parameter: an integer is milliseconds since the Unix epoch, anything else must be
// RFC 3339 ("2024-05-01T12:00:00Z", "2024-05-01T14:00:00.250+02:00").
std::optional<int64_t> ParseTimeParam(std::string_view value) {
  if (value.empty()) return std::nullopt;
  bool integer = std::all_of(value.begin() + (value.front() == '-' ? 1 : 0), value.end(),
                             [](char c) { return c >= '0' && c <= '9'; }) &&
                 value != "-";
  if (integer) {
    int64_t ms = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
    if (ec != std::errc() || ptr != value.data() + value.size()) return std::nullopt;
    return ms;
  }
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, std::string(value), &time, &error)) {
    return std::nullopt;
  }
  return absl::ToUnixMillis(time);
}

struct ViolationQuery {
  store::ViolationFilter filter;
  size_t limit = 0;
  std::string page_token;
};

struct ParamError {
  std::string parameter;
  std::string message;
};

constexpr std::array<std::string_view, 8> kViolationParams = {
    "level", "anomaly", "checker", "stream", "since", "until", "limit", "page_token"};
constexpr std::array<std::string_view, 6> kSummaryParams = {"level", "anomaly", "checker",
                                                            "scope", "limit",   "page_token"};

// Unknown, repeated or empty parameters are errors (except an empty page_token, which means the
// first page).
template <size_t N>
std::optional<ParamError> CheckParams(const HttpRequest& request,
                                      const std::array<std::string_view, N>& known) {
  for (const auto& [name, value] : request.query) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return ParamError{name, fmt::format("unknown parameter '{}'", name)};
    }
    if (request.ParamCount(name) > 1) {
      return ParamError{name, fmt::format("parameter '{}' is given more than once", name)};
    }
    if (value.empty() && name != "page_token") {
      return ParamError{name, fmt::format("parameter '{}' is empty", name)};
    }
  }
  return std::nullopt;
}

// The `limit` parameter: the default when absent, lowered to the maximum when larger.
std::variant<size_t, ParamError> ParseLimit(const HttpRequest& request,
                                            const HttpApi::Options& options) {
  auto v = request.Param("limit");
  if (!v) return options.default_limit;
  uint64_t limit = 0;
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), limit);
  bool parsed = ec == std::errc() && ptr == v->data() + v->size();
  if (ec == std::errc::result_out_of_range && ptr == v->data() + v->size()) {
    limit = options.max_limit;
    parsed = true;
  }
  if (!parsed || limit == 0) {
    return ParamError{"limit",
                      fmt::format("parameter 'limit' must be an integer from 1 to {}, not '{}'",
                                  options.max_limit, *v)};
  }
  return static_cast<size_t>(std::min<uint64_t>(limit, options.max_limit));
}

// Reads the query parameters of /api/v1/violations.
std::variant<ViolationQuery, ParamError> ParseViolationQuery(const HttpRequest& request,
                                                             const HttpApi::Options& options) {
  if (std::optional<ParamError> error = CheckParams(request, kViolationParams)) return *error;
  ViolationQuery query;
  if (auto v = request.Param("level")) query.filter.level = std::string(*v);
  if (auto v = request.Param("anomaly")) query.filter.anomaly = std::string(*v);
  if (auto v = request.Param("checker")) query.filter.checker = std::string(*v);
  if (auto v = request.Param("stream")) query.filter.stream = std::string(*v);
  for (std::string_view name : {"since", "until"}) {
    auto v = request.Param(name);
    if (!v) continue;
    std::optional<int64_t> ms = ParseTimeParam(*v);
    if (!ms) {
      return ParamError{std::string(name),
                        fmt::format("parameter '{}' must be RFC 3339 (2024-05-01T12:00:00Z) or "
                                    "milliseconds since the Unix epoch, not '{}'",
                                    name, *v)};
    }
    (name == "since" ? query.filter.since_unix_ms : query.filter.until_unix_ms) = *ms;
  }
  std::variant<size_t, ParamError> limit = ParseLimit(request, options);
  if (const auto* error = std::get_if<ParamError>(&limit)) return *error;
  query.limit = std::get<size_t>(limit);
  if (auto v = request.Param("page_token")) query.page_token = std::string(*v);
  return query;
}

struct SummaryQuery {
  store::SummaryFilter filter;
  size_t limit = 0;
  std::string page_token;
};

// Reads the query parameters of /api/v1/summaries.
std::variant<SummaryQuery, ParamError> ParseSummaryQuery(const HttpRequest& request,
                                                         const HttpApi::Options& options) {
  if (std::optional<ParamError> error = CheckParams(request, kSummaryParams)) return *error;
  SummaryQuery query;
  if (auto v = request.Param("level")) query.filter.level = std::string(*v);
  if (auto v = request.Param("anomaly")) query.filter.anomaly = std::string(*v);
  if (auto v = request.Param("checker")) query.filter.checker = std::string(*v);
  if (auto v = request.Param("scope")) {
    for (store::SummaryScope scope :
         {store::SummaryScope::kKey, store::SummaryScope::kTxn, store::SummaryScope::kKind}) {
      if (*v == store::SummaryScopeName(scope)) query.filter.scope = scope;
    }
    if (!query.filter.scope) {
      return ParamError{"scope",
                        fmt::format("parameter 'scope' must be key, txn or kind, not '{}'", *v)};
    }
  }
  std::variant<size_t, ParamError> limit = ParseLimit(request, options);
  if (const auto* error = std::get_if<ParamError>(&limit)) return *error;
  query.limit = std::get<size_t>(limit);
  if (auto v = request.Param("page_token")) query.page_token = std::string(*v);
  return query;
}

void WriteSummarised(JsonWriter& w, const store::SummarisedViolation& v) {
  w.StartObject();
  Key(w, "id");
  String(w, v.id);
  Key(w, "finalised");
  String(w, FormatUnixMillis(v.finalised_unix_ms));
  Key(w, "finalised_unix_ms");
  w.Int64(v.finalised_unix_ms);
  Key(w, "txns");
  w.StartArray();
  for (const std::string& t : v.txns) String(w, t);
  w.EndArray();
  w.EndObject();
}

void WriteSummary(JsonWriter& w, const store::ViolationSummary& s) {
  w.StartObject();
  Key(w, "scope");
  String(w, store::SummaryScopeName(s.scope));
  Key(w, "checker");
  String(w, s.checker);
  Key(w, "level");
  String(w, s.level);
  Key(w, "anomaly");
  String(w, s.anomaly);
  if (s.scope == store::SummaryScope::kKey) {
    Key(w, "key");
    String(w, s.subject);
  } else if (s.scope == store::SummaryScope::kTxn) {
    Key(w, "txn");
    String(w, s.subject);
    Key(w, "txn_stream");
    String(w, s.stream);
  }
  Key(w, "kept");
  w.Uint64(s.kept);
  Key(w, "summarised");
  w.Uint64(s.summarised);
  Key(w, "first");
  WriteSummarised(w, s.first);
  Key(w, "last");
  WriteSummarised(w, s.last);
  Key(w, "streams");
  w.StartArray();
  for (const std::string& stream : s.streams) String(w, stream);
  w.EndArray();
  w.EndObject();
}

// One violation: the record's fields, then the members of its JSON object that the record's
// fields do not already give.
void WriteViolation(JsonWriter& w, const store::ViolationRecord& record) {
  static constexpr std::array<std::string_view, 7> kOwnKeys = {
      "id", "checker", "level", "anomaly", "ext_kind", "streams", "finalised"};
  w.StartObject();
  Key(w, "id");
  String(w, record.id);
  Key(w, "checker");
  String(w, record.checker);
  Key(w, "level");
  String(w, record.level);
  Key(w, "anomaly");
  String(w, record.anomaly);
  if (!record.ext_kind.empty()) {
    Key(w, "ext_kind");
    String(w, record.ext_kind);
  }
  Key(w, "streams");
  w.StartArray();
  for (const std::string& stream : record.streams) String(w, stream);
  w.EndArray();
  Key(w, "finalised");
  String(w, FormatUnixMillis(record.finalised_unix_ms));
  Key(w, "finalised_unix_ms");
  w.Int64(record.finalised_unix_ms);
  rapidjson::Document detail;
  detail.Parse(record.json.data(), record.json.size());
  if (!detail.HasParseError() && detail.IsObject()) {
    // An index loop: comparing rapidjson's member iterators is ambiguous in C++20 for clang.
    for (rapidjson::SizeType i = 0; i < detail.MemberCount(); ++i) {
      const auto& member = *(detail.MemberBegin() + i);
      std::string_view name(member.name.GetString(), member.name.GetStringLength());
      if (name == "finalised_unix_ms" ||
          std::find(kOwnKeys.begin(), kOwnKeys.end(), name) != kOwnKeys.end()) {
        continue;
      }
      Key(w, name);
      member.value.Accept(w);
    }
  } else if (!record.json.empty()) {
    // A record whose detail cannot be read still shows its indexed fields.
    Key(w, "detail_error");
    String(w, "the stored detail of this violation is not a JSON object");
  }
  w.EndObject();
}

// A finite number, or null (JSON has no NaN or infinity).
void Number(JsonWriter& w, double value) {
  if (std::isfinite(value)) {
    w.Double(value);
  } else {
    w.Null();
  }
}

void WriteStream(JsonWriter& w, const StreamStatus& stream) {
  w.StartObject();
  Key(w, "name");
  String(w, stream.name);
  Key(w, "watermark");
  if (stream.watermark) {
    w.StartObject();
    Key(w, "physical");
    w.Int64(stream.watermark->physical);
    Key(w, "logical");
    w.Int64(stream.watermark->logical);
    w.EndObject();
  } else {
    w.Null();
  }
  Key(w, "lag_seconds");
  if (stream.lag_seconds) {
    Number(w, *stream.lag_seconds);
  } else {
    w.Null();
  }
  Key(w, "closed");
  w.Bool(stream.closed);
  Key(w, "pending_transactions");
  w.Uint64(stream.pending_transactions);
  Key(w, "ingested_transactions");
  w.Uint64(stream.ingested_transactions);
  Key(w, "committed_transactions");
  w.Uint64(stream.committed_transactions);
  Key(w, "acked_sequence");
  w.Uint64(stream.acked_sequence);
  w.EndObject();
}

void WriteCounts(JsonWriter& w, const StatusCounts& c) {
  w.StartObject();
  for (const auto& [name, value] : std::initializer_list<std::pair<std::string_view, uint64_t>>{
           {"ingested_transactions", c.ingested_transactions},
           {"refused_transactions", c.refused_transactions},
           {"duplicate_batches", c.duplicate_batches},
           {"queued_batches", c.queued_batches},
           {"violations", c.violations},
           {"violations_stored", c.violations_stored},
           {"violations_summarised", c.violations_summarised},
           {"provisional_verdicts", c.provisional_verdicts},
           {"flip_flops", c.flip_flops},
           {"reported_flip_flops", c.reported_flip_flops},
           {"late_arrivals", c.late_arrivals},
           {"horizon_misses", c.horizon_misses}}) {
    Key(w, name);
    w.Uint64(value);
  }
  w.EndObject();
}

void WriteMemory(JsonWriter& w, const MemoryStatus& m) {
  w.StartObject();
  for (const auto& [name, value] : std::initializer_list<std::pair<std::string_view, uint64_t>>{
           {"resident_bytes", m.resident_bytes},
           {"engine_bytes", m.engine_bytes},
           {"history_bytes", m.history_bytes},
           {"spill_bytes", m.spill_bytes},
           {"budget_bytes", m.budget_bytes},
           {"retained_versions", m.retained_versions},
           {"retained_transactions", m.retained_transactions},
           {"retained_provisional_reads", m.retained_provisional_reads},
           {"rocksdb_bytes", m.rocksdb_bytes}}) {
    Key(w, name);
    w.Uint64(value);
  }
  Key(w, "rocksdb");
  w.StartObject();
  for (const RocksDbMemoryStatus& db : m.rocksdb) {
    Key(w, db.db);
    w.StartObject();
    for (const auto& [name, value] : std::initializer_list<std::pair<std::string_view, uint64_t>>{
             {"memtables", db.memtables},
             {"table_readers", db.table_readers},
             {"block_cache", db.block_cache}}) {
      Key(w, name);
      w.Uint64(value);
    }
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
}

void WriteFindings(JsonWriter& w, const FindingsStatus& f) {
  w.StartObject();
  Key(w, "state");
  String(w, f.state);
  for (const auto& [name, value] : std::initializer_list<std::pair<std::string_view, uint64_t>>{
           {"summaries", f.summaries},
           {"store_bytes", f.store_bytes},
           {"max_store_bytes", f.max_store_bytes}}) {
    Key(w, name);
    w.Uint64(value);
  }
  Key(w, "log_state");
  String(w, f.log_state);
  for (const auto& [name, value] : std::initializer_list<std::pair<std::string_view, uint64_t>>{
           {"logged", f.logged},
           {"unlogged", f.unlogged},
           {"log_bytes", f.log_bytes},
           {"max_log_bytes", f.max_log_bytes}}) {
    Key(w, name);
    w.Uint64(value);
  }
  w.EndObject();
}

void WriteWindows(JsonWriter& w, const WindowsStatus& windows) {
  w.StartObject();
  Key(w, "enabled");
  w.Bool(windows.enabled);
  for (const auto& [name, value] : std::initializer_list<std::pair<std::string_view, uint64_t>>{
           {"sealed", windows.sealed},
           {"done", windows.done},
           {"dropped", windows.dropped},
           {"queued", windows.queued},
           {"running", windows.running},
           {"late_transactions", windows.late_transactions}}) {
    Key(w, name);
    w.Uint64(value);
  }
  Key(w, "checkers");
  w.StartArray();
  for (const CheckerStatus& c : windows.checkers) {
    w.StartObject();
    Key(w, "name");
    String(w, c.name);
    for (const auto& [name, value] : std::initializer_list<std::pair<std::string_view, uint64_t>>{
             {"checked", c.checked}, {"unknown", c.unknown}, {"violations", c.violations}}) {
      Key(w, name);
      w.Uint64(value);
    }
    Key(w, "seconds");
    Number(w, c.seconds);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

// The answer to a page of a listing: the items `items_of` gives of `page` under `name`, each
// written by `write_item`, and the page's next_page_token; or the source's error.
template <typename Page, typename ItemsOf, typename WriteItem>
HttpResponse PageResponse(const absl::StatusOr<Page>& page, std::string_view name, ItemsOf items_of,
                          WriteItem write_item) {
  if (!page.ok()) {
    const int status = HttpStatusOf(page.status());
    // The only parameter a source can reject is the page token; the others were checked before.
    return JsonError(status, common::StdView(page.status().message()),
                     status == 400 ? "page_token" : "");
  }
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  Key(w, name);
  w.StartArray();
  for (const auto& item : items_of(*page)) write_item(w, item);
  w.EndArray();
  Key(w, "next_page_token");
  String(w, page->next_page_token);
  w.EndObject();
  return HttpResponse::Json(200, ToString(buffer));
}

}  // namespace

HttpApi::HttpApi(DaemonMetrics* metrics, ViolationSource* violations, StatusSource* status,
                 ReadinessCheck readiness, Options options)
    : metrics_(metrics),
      violations_(violations),
      status_(status),
      readiness_(std::move(readiness)),
      options_(std::move(options)) {
  if (options_.max_limit == 0) options_.max_limit = 1;
  options_.default_limit = std::clamp<size_t>(options_.default_limit, 1, options_.max_limit);
}

absl::Status HttpApi::RegisterOn(HttpServer& server) {
  if ((options_.metrics_need_token || options_.health_need_token) && options_.token.empty()) {
    return absl::InvalidArgumentError("/metrics or the probes need a token, and there is none");
  }
  auto bind = [this](HttpResponse (HttpApi::*handler)(const HttpRequest&) const) {
    return [this, handler](const HttpRequest& request) { return (this->*handler)(request); };
  };
  server_ = &server;
  if (metrics_ != nullptr) {
    unauthorized_ =
        &metrics_->HttpRequestsRejected(HttpRejectionName(HttpRejection::kUnauthorized));
  }
  struct Endpoint {
    const char* path;
    HttpResponse (HttpApi::*handler)(const HttpRequest&) const;
    bool need_token;
  };
  const bool api_token = !options_.token.empty();
  const Endpoint endpoints[] = {
      {"/metrics", &HttpApi::ServeMetrics, options_.metrics_need_token},
      {"/healthz", &HttpApi::ServeHealth, options_.health_need_token},
      {"/livez", &HttpApi::ServeHealth, options_.health_need_token},
      {"/readyz", &HttpApi::ServeReady, options_.health_need_token},
      {"/api/v1/violations", &HttpApi::ServeViolations, api_token},
      {"/api/v1/summaries", &HttpApi::ServeSummaries, api_token},
      {"/api/v1/status", &HttpApi::ServeStatus, api_token},
  };
  for (const Endpoint& e : endpoints) {
    // The probes and /metrics are quick and never block: they run on the I/O thread, and answer
    // while the API's threads are all busy (docs/operations.md, "HTTP under load").
    const bool api = std::string_view(e.path).starts_with("/api/");
    const RouteKind kind = api ? RouteKind::kPooled : RouteKind::kInline;
    if (absl::Status s =
            server.Handle("GET", e.path, Guard(bind(e.handler), e.need_token, /*json=*/api), kind);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

HttpHandler HttpApi::Guard(HttpHandler handler, bool need_token, bool json) const {
  if (!need_token) return handler;
  return [this, handler = std::move(handler), json](const HttpRequest& request) {
    const std::optional<std::string_view> header = request.Header("authorization");
    const std::optional<std::string_view> token =
        header.has_value() ? BearerToken(*header) : std::nullopt;
    if (token.has_value() && TokensMatch(*token, options_.token)) return handler(request);
    if (unauthorized_ != nullptr) unauthorized_->Increment();
    const std::string_view message =
        token.has_value() ? "wrong bearer token" : "this endpoint needs a bearer token";
    HttpResponse response =
        json ? JsonError(401, message) : HttpResponse::Text(401, fmt::format("{}\n", message));
    response.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="isowatch")");
    return response;
  };
}

HttpResponse HttpApi::ServeMetrics(const HttpRequest& /*request*/) const {
  if (metrics_ == nullptr) return HttpResponse::Text(503, "metrics are not available\n");
  metrics_->ready().Set(!readiness_ || readiness_().ok() ? 1 : 0);
  if (server_ != nullptr) {
    metrics_->http_connections().Set(static_cast<double>(server_->open_connections()));
  }
  HttpResponse response = HttpResponse::Text(200, metrics_->Serialize());
  response.content_type = std::string(DaemonMetrics::kContentType);
  return response;
}

HttpResponse HttpApi::ServeHealth(const HttpRequest& /*request*/) const {
  return HttpResponse::Text(200, "ok\n");
}

HttpResponse HttpApi::ServeReady(const HttpRequest& /*request*/) const {
  if (!readiness_) return HttpResponse::Text(200, "ok\n");
  absl::Status ready = readiness_();
  if (ready.ok()) return HttpResponse::Text(200, "ok\n");
  std::string reason(common::StdView(ready.message()));
  if (reason.empty()) reason = absl::StatusCodeToString(ready.code());
  return HttpResponse::Text(503, fmt::format("not ready: {}\n", reason));
}

HttpResponse HttpApi::ServeViolations(const HttpRequest& request) const {
  std::variant<ViolationQuery, ParamError> parsed = ParseViolationQuery(request, options_);
  if (const auto* error = std::get_if<ParamError>(&parsed)) {
    return JsonError(400, error->message, error->parameter);
  }
  const ViolationQuery& query = std::get<ViolationQuery>(parsed);
  if (violations_ == nullptr) return JsonError(503, "violations are not available");
  return PageResponse(
      violations_->Query(query.filter, query.limit, query.page_token), "violations",
      [](const store::ViolationPage& page) -> const auto& { return page.violations; },
      WriteViolation);
}

HttpResponse HttpApi::ServeSummaries(const HttpRequest& request) const {
  std::variant<SummaryQuery, ParamError> parsed = ParseSummaryQuery(request, options_);
  if (const auto* error = std::get_if<ParamError>(&parsed)) {
    return JsonError(400, error->message, error->parameter);
  }
  const SummaryQuery& query = std::get<SummaryQuery>(parsed);
  if (violations_ == nullptr) return JsonError(503, "summaries are not available");
  return PageResponse(
      violations_->QuerySummaries(query.filter, query.limit, query.page_token), "summaries",
      [](const store::SummaryPage& page) -> const auto& { return page.summaries; }, WriteSummary);
}

HttpResponse HttpApi::ServeStatus(const HttpRequest& request) const {
  if (!request.query.empty()) {
    return JsonError(400, fmt::format("unknown parameter '{}'", request.query.front().first),
                     request.query.front().first);
  }
  if (status_ == nullptr) return JsonError(503, "status is not available");
  absl::StatusOr<DaemonStatus> status = status_->GetStatus();
  if (!status.ok()) {
    return JsonError(HttpStatusOf(status.status()), common::StdView(status.status().message()));
  }
  absl::Status ready = readiness_ ? readiness_() : absl::OkStatus();
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  Key(w, "version");
  String(w, status->version);
  Key(w, "start_time");
  String(w, FormatUnixMillis(status->start_unix_ms));
  Key(w, "uptime_seconds");
  Number(w, status->uptime_seconds);
  Key(w, "ready");
  w.Bool(ready.ok());
  if (!ready.ok()) {
    Key(w, "not_ready_reason");
    String(w, common::StdView(ready.message()));
  }
  Key(w, "streams");
  w.StartArray();
  for (const StreamStatus& stream : status->streams) WriteStream(w, stream);
  w.EndArray();
  Key(w, "counts");
  WriteCounts(w, status->counts);
  Key(w, "memory");
  WriteMemory(w, status->memory);
  Key(w, "windows");
  WriteWindows(w, status->windows);
  Key(w, "findings");
  WriteFindings(w, status->findings);
  w.EndObject();
  return HttpResponse::Json(200, ToString(buffer));
}

}  // namespace isowatch::server
