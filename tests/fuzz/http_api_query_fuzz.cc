// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes as an HTTP request target to the target parser and, when it parses, to
// the /api/v1/violations and /api/v1/status handlers. Every answer must be 200 or 400 with a JSON
// object body (a 400 naming the parameter it rejects), and a filter that reaches the source must
// hold a limit within bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "isowatch/server/http_api.h"
#include "isowatch/server/internal/request_target.h"

namespace {

using isowatch::server::HttpApi;
using isowatch::server::HttpRequest;
using isowatch::server::HttpResponse;

// Answers every query with one record that echoes the filter's strings back into the JSON, and a
// page token, so that the writer sees arbitrary bytes.
class EchoSource : public isowatch::server::ViolationSource {
 public:
  absl::StatusOr<isowatch::store::ViolationPage> Query(
      const isowatch::store::ViolationFilter& filter, size_t limit,
      std::string_view page_token) override {
    if (limit < 1 || limit > 1000) std::abort();
    if (page_token == "bad") return absl::InvalidArgumentError("unknown page token");
    isowatch::store::ViolationPage page;
    isowatch::store::ViolationRecord record;
    record.id = std::string(page_token);
    record.level = filter.level.value_or("");
    record.anomaly = filter.anomaly.value_or("");
    if (filter.stream) record.streams.push_back(*filter.stream);
    record.finalised_unix_ms = filter.since_unix_ms.value_or(0);
    record.json = filter.stream.value_or("{}");
    page.violations.push_back(record);
    page.next_page_token = record.anomaly;
    return page;
  }
};

class FixedStatus : public isowatch::server::StatusSource {
 public:
  absl::StatusOr<isowatch::server::DaemonStatus> GetStatus() override {
    return isowatch::server::DaemonStatus{};
  }
};

void CheckJson(const HttpResponse& response) {
  if (response.status != 200 && response.status != 400) std::abort();
  if (response.content_type != "application/json") std::abort();
  rapidjson::Document d;
  d.Parse(response.body.data(), response.body.size());
  if (d.HasParseError() || !d.IsObject()) std::abort();
  if (response.status == 400 && !d.HasMember("error")) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto target = isowatch::server::internal::ParseRequestTarget(input);
  if (!target.ok()) return 0;
  if (target->path.empty() || target->path.front() != '/') std::abort();
  static EchoSource source;
  static FixedStatus status;
  static HttpApi api(nullptr, &source, &status, nullptr);
  HttpRequest request;
  request.method = "GET";
  request.path = target->path;
  request.query = target->query;
  CheckJson(api.ServeViolations(request));
  CheckJson(api.ServeStatus(request));
  return 0;
}
