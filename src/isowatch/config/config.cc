// SPDX-License-Identifier: Apache-2.0
#include "isowatch/config/config.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cctype>
#include <charconv>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <netinet/in.h>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

#include "fmt/format.h"
#include "yaml-cpp/yaml.h"

#include "isowatch/checkers/registry.h"
#include "isowatch/common/status_macros.h"
#include "isowatch/config/internal/option_table.h"

namespace isowatch::config {

using internal::FindOption;
using internal::Option;
using internal::SplitList;
using internal::Table;

namespace {

bool IsSection(std::string_view name) {
  for (const Option& o : Table()) {
    if (o.key.size() > name.size() && o.key.compare(0, name.size(), name) == 0 &&
        o.key[name.size()] == '.') {
      return true;
    }
  }
  return false;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string UnknownOption(std::string_view key) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, key.size() / 4) + 1;
  for (const Option& o : Table()) {
    const size_t d = EditDistance(key, o.key);
    if (d < best_distance) {
      best_distance = d;
      best = o.key;
    }
  }
  if (!best.empty()) return fmt::format(R"(unknown option "{}" (did you mean "{}"?))", key, best);
  return fmt::format(R"(unknown option "{}" (the options are listed in config/isowatchd.yaml))",
                     key);
}

std::string NodeKind(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

// Builds messages of the form "SOURCE:LINE: text".
class FileErrors {
 public:
  explicit FileErrors(std::string_view source) : source_(source) {}
  absl::Status At(const YAML::Mark& mark, std::string_view text) const {
    if (mark.is_null()) return absl::InvalidArgumentError(fmt::format("{}: {}", source_, text));
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source_, mark.line + 1, text));
  }

 private:
  std::string_view source_;
};

absl::Status ApplyNode(DaemonConfig& config, const std::string& key, const YAML::Node& key_node,
                       const YAML::Node& value, const FileErrors& errors) {
  const Option* option = FindOption(key);
  if (option == nullptr) return errors.At(key_node.Mark(), UnknownOption(key));
  std::string text;
  if (value.IsNull()) {
    if (!option->nullable) {
      return errors.At(key_node.Mark(),
                       fmt::format("{}: expected {}, got nothing", key, option->expected));
    }
  } else if (option->list && value.IsSequence()) {
    for (const YAML::Node& item : value) {
      if (!item.IsScalar()) {
        return errors.At(item.Mark(), fmt::format("{}: expected {}, got {} in the list", key,
                                                  option->expected, NodeKind(item)));
      }
      text += (text.empty() ? "" : ",") + item.Scalar();
    }
  } else if (!value.IsScalar()) {
    return errors.At(key_node.Mark(), fmt::format("{}: expected {}, got {}", key, option->expected,
                                                  NodeKind(value)));
  } else {
    text = value.Scalar();
  }
  if (absl::Status s = option->set(config, text); !s.ok()) {
    return errors.At(
        key_node.Mark(),
        fmt::format("{}: {}", key, std::string_view(s.message().data(), s.message().size())));
  }
  return absl::OkStatus();
}

absl::StatusOr<DaemonConfig> LoadYaml(std::string_view yaml, std::string_view source) {
  const FileErrors errors(source);
  DaemonConfig config;
  const YAML::Node root = YAML::Load(std::string(yaml));
  if (root.IsNull()) return config;  // an empty file: every default
  if (!root.IsMap()) {
    return errors.At(root.Mark(), "expected a mapping of options (option: value) at the top");
  }
  std::set<std::string> seen;
  auto check_once = [&](const std::string& key, const YAML::Node& key_node) -> absl::Status {
    if (seen.insert(key).second) return absl::OkStatus();
    return errors.At(key_node.Mark(), fmt::format(R"("{}" is given twice)", key));
  };
  // The options of section `prefix` ("" at the top), sections nested to any depth.
  std::function<absl::Status(const std::string&, const YAML::Node&)> apply_map =
      [&](const std::string& prefix, const YAML::Node& map) -> absl::Status {
    for (const auto& entry : map) {
      const YAML::Node& key_node = entry.first;
      const YAML::Node& value = entry.second;
      if (!key_node.IsScalar()) return errors.At(key_node.Mark(), "expected an option name");
      const std::string name =
          prefix.empty() ? key_node.Scalar() : fmt::format("{}.{}", prefix, key_node.Scalar());
      RETURN_IF_ERROR(check_once(name, key_node));
      if (key_node.Scalar().find('.') != std::string::npos && FindOption(name)) {
        const size_t dot = name.rfind('.');
        return errors.At(key_node.Mark(),
                         fmt::format(R"(unknown option "{}" (write it nested: "{}:" then "  {}:"))",
                                     key_node.Scalar(), name.substr(0, dot).substr(prefix.size()),
                                     name.substr(dot + 1)));
      }
      if (!IsSection(name)) {
        RETURN_IF_ERROR(ApplyNode(config, name, key_node, value, errors));
        continue;
      }
      if (value.IsNull()) continue;  // an empty section
      if (!value.IsMap()) {
        return errors.At(key_node.Mark(),
                         fmt::format("{}: expected a section of options, got {}", name,
                                     value.IsScalar() ? fmt::format("\"{}\"", value.Scalar())
                                                      : NodeKind(value)));
      }
      RETURN_IF_ERROR(apply_map(name, value));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(apply_map("", root));
  return config;
}

}  // namespace

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kCritical:
      return "critical";
    case LogLevel::kOff:
      return "off";
  }
  return "?";
}

const char* WindowCutName(WindowCut cut) {
  switch (cut) {
    case WindowCut::kTransactions:
      return "transactions";
    case WindowCut::kCommitTime:
      return "commit_time";
  }
  return "?";
}

const char* HttpAccessName(HttpAccess access) {
  switch (access) {
    case HttpAccess::kOpen:
      return "open";
    case HttpAccess::kToken:
      return "token";
  }
  return "?";
}

const char* LogFormatName(LogFormat format) {
  switch (format) {
    case LogFormat::kText:
      return "text";
    case LogFormat::kJson:
      return "json";
  }
  return "?";
}

uint64_t RememberedIds(const DaemonConfig& config) {
  if (config.ingest.remembered_ids) return *config.ingest.remembered_ids;
  return config.engine.memory_budget == 0 ? 0 : kDefaultRememberedIds;
}

const std::vector<OptionInfo>& Options() {
  static const std::vector<OptionInfo>* const kInfos = [] {
    auto* list = new std::vector<OptionInfo>();
    const DaemonConfig defaults;
    for (const Option& o : Table()) {
      list->push_back({o.key, o.type, o.get(defaults), o.help});
    }
    return list;
  }();
  return *kInfos;
}

absl::StatusOr<DaemonConfig> LoadConfigString(std::string_view yaml, std::string_view source) {
  // yaml-cpp reports syntax errors, and some misuse, by throwing; nothing else in isowatch does.
  try {
    return LoadYaml(yaml, source);
  } catch (const YAML::Exception& e) {
    return FileErrors(source).At(e.mark, e.msg);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", source, e.what()));
  }
}

absl::StatusOr<DaemonConfig> LoadConfigFile(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    return absl::NotFoundError(fmt::format("config file {}: no such file", path));
  }
  if (std::filesystem::is_directory(status)) {
    return absl::InvalidArgumentError(fmt::format("config file {}: is a directory", path));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || in.bad()) {
    return absl::PermissionDeniedError(fmt::format("config file {}: cannot be read", path));
  }
  return LoadConfigString(text.str(), path);
}

absl::Status ApplyOverride(DaemonConfig* config, std::string_view dotted_key,
                           std::string_view value) {
  const Option* option = FindOption(dotted_key);
  if (option == nullptr) return absl::InvalidArgumentError(UnknownOption(dotted_key));
  if (absl::Status s = option->set(*config, value); !s.ok()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: {}", dotted_key, std::string_view(s.message().data(), s.message().size())));
  }
  return absl::OkStatus();
}

absl::Status ApplyAssignment(DaemonConfig* config, std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        fmt::format(R"(expected KEY=VALUE such as "engine.level=ser", got "{}")", assignment));
  }
  return ApplyOverride(config, assignment.substr(0, eq), assignment.substr(eq + 1));
}

absl::Status Validate(const DaemonConfig& config) {
  std::vector<std::string> problems;
  auto check = [&](bool ok, std::string problem) {
    if (!ok) problems.push_back(std::move(problem));
  };
  check(!config.data_dir.empty(), "data_dir: must name the store's directory");
  for (const auto& [name, endpoint] :
       {std::pair<std::string_view, const Endpoint&>{"grpc", config.grpc},
        std::pair<std::string_view, const Endpoint&>{"http", config.http}}) {
    check(!endpoint.listen.empty(), fmt::format("{}.listen: must not be empty", name));
    check(endpoint.port >= 0 && endpoint.port <= 65535,
          fmt::format("{}.port: expected a port number from 0 to 65535, got {}", name,
                      endpoint.port));
    const TlsFiles& tls = endpoint.tls;
    check(tls.cert_file.empty() == tls.key_file.empty(),
          fmt::format("{0}.tls: cert_file and key_file go together ({0}.tls.{1} is not set)", name,
                      tls.cert_file.empty() ? "cert_file" : "key_file"));
    check(tls.client_ca_file.empty() || !tls.cert_file.empty(),
          fmt::format("{0}.tls.client_ca_file: client certificates need TLS: set "
                      "{0}.tls.cert_file and {0}.tls.key_file too",
                      name));
  }
  // gRPC sends call credentials only over TLS, and a token in clear could be read and replayed.
  check(config.grpc.token_file.empty() || !config.grpc.tls.cert_file.empty(),
        "grpc.auth.token_file: a bearer token needs TLS: set grpc.tls.cert_file and "
        "grpc.tls.key_file too");
  for (const auto& [name, access] : {std::pair{"http.auth.metrics", config.http_auth.metrics},
                                     std::pair{"http.auth.health", config.http_auth.health}}) {
    check(access == HttpAccess::kOpen || !config.http.token_file.empty(),
          fmt::format("{}: \"token\" needs http.auth.token_file", name));
  }
  check(config.grpc.port == 0 || config.grpc.port != config.http.port,
        fmt::format("http.port: {} is grpc.port too; the two servers need different ports",
                    config.http.port));
  check(config.engine.finality_timeout.count() > 0,
        fmt::format("engine.finality_timeout: must be positive, got {}",
                    FormatDuration(config.engine.finality_timeout)));
  for (const auto& [name, timeout] :
       {std::pair{"http.idle_timeout", config.http_limits.idle_timeout},
        std::pair{"http.header_timeout", config.http_limits.header_timeout},
        std::pair{"http.body_timeout", config.http_limits.body_timeout},
        std::pair{"http.write_timeout", config.http_limits.write_timeout}}) {
    check(timeout.count() > 0,
          fmt::format("{}: must be positive, got {}", name, FormatDuration(timeout)));
  }
  // The server's threads are ints; far more than any machine needs is a typo.
  check(config.http_limits.api_threads <= 1024,
        fmt::format("http.api_threads: at most 1024, got {}", config.http_limits.api_threads));
  check(config.engine.retention >= 0,
        fmt::format("engine.retention: must not be negative, got {}", config.engine.retention));
  check(config.engine.spill_retention >= 0,
        fmt::format("engine.spill_retention: must not be negative, got {}",
                    config.engine.spill_retention));
  const std::pair<std::string_view, uint64_t> counts[] = {
      {"ingest.max_batch_transactions", config.ingest.max_batch_transactions},
      {"ingest.max_ops_per_transaction", config.ingest.max_ops_per_transaction},
      {"ingest.queue_batches", config.ingest.queue_batches},
      {"ingest.max_streams", config.ingest.max_streams},
      {"ingest.max_batch_bytes", config.ingest.max_batch_bytes},
      {"http.max_connections", config.http_limits.max_connections},
      {"http.api_threads", config.http_limits.api_threads}};
  for (const auto& [name, value] : counts) {
    check(value >= 1, fmt::format("{}: must be at least 1", name));
  }
  // gRPC takes its message size limit as an int.
  check(config.ingest.max_batch_bytes <= static_cast<uint64_t>(std::numeric_limits<int>::max()),
        fmt::format("ingest.max_batch_bytes: at most 2GiB - 1 (gRPC's largest message), got {}",
                    FormatByteSize(config.ingest.max_batch_bytes)));
  check(config.windows.overlap < config.windows.size,
        fmt::format("windows.overlap: must be less than windows.size ({}), got {}",
                    config.windows.size, config.windows.overlap));
  if (problems.empty()) return absl::OkStatus();
  std::string message = problems.front();
  for (size_t i = 1; i < problems.size(); ++i) message += "; " + problems[i];
  return absl::InvalidArgumentError(message);
}

bool IsLoopback(std::string_view host) {
  if (host == "localhost") return true;
  std::string text(host);
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;  // a host name: it may well resolve to a public address
}

std::vector<std::string> AccessWarnings(const DaemonConfig& config) {
  std::vector<std::string> out;
  if (!IsLoopback(config.grpc.listen) && config.grpc.tls.client_ca_file.empty() &&
      config.grpc.token_file.empty()) {
    out.push_back(fmt::format(
        "gRPC listens on {} without authentication: anyone who can connect can send batches; set "
        "grpc.tls.client_ca_file (client certificates) or grpc.auth.token_file "
        "(docs/security.md)",
        config.grpc.listen));
  }
  if (!IsLoopback(config.http.listen)) {
    if (config.http.token_file.empty()) {
      out.push_back(
          fmt::format("HTTP listens on {} without authentication: anyone who can connect can read "
                      "/api/v1/* (the violations and the data they name); set http.auth.token_file "
                      "(docs/security.md)",
                      config.http.listen));
    } else if (!config.http.tls.enabled()) {
      out.push_back(fmt::format(
          "HTTP listens on {} with a token but without TLS: the token travels in clear; set "
          "http.tls.cert_file and http.tls.key_file (docs/security.md)",
          config.http.listen));
    }
  }
  return out;
}

std::string DescribeConfig(const DaemonConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::vector<std::string> open;  // the sections open, outermost first
  for (const Option& o : Table()) {
    std::vector<std::string> path;
    for (size_t begin = 0;;) {
      const size_t dot = o.key.find('.', begin);
      path.push_back(o.key.substr(begin, dot - begin));
      if (dot == std::string::npos) break;
      begin = dot + 1;
    }
    const std::string leaf = path.back();
    path.pop_back();
    size_t common = 0;
    while (common < open.size() && common < path.size() && open[common] == path[common]) {
      ++common;
    }
    for (; open.size() > common; open.pop_back()) out << YAML::EndMap;
    for (; open.size() < path.size(); open.push_back(path[open.size()])) {
      out << YAML::Key << path[open.size()] << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << leaf << YAML::Value;
    if (o.list && o.get(config).starts_with('[')) {
      std::string text = o.get(config);
      out << YAML::Flow << YAML::BeginSeq;
      for (const std::string& item : SplitList(text)) out << item;
      out << YAML::EndSeq;
      continue;
    }
    if (o.quoted) out << YAML::DoubleQuoted;
    out << o.get(config);
  }
  for (; !open.empty(); open.pop_back()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace isowatch::config
