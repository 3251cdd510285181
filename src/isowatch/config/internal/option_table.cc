// SPDX-License-Identifier: Apache-2.0
// The option table of isowatchd.yaml: each option's key, type, help, and how it is read and
// rendered.
#include "isowatch/config/internal/option_table.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <optional>
#include <system_error>
#include <utility>

#include "fmt/format.h"

#include "isowatch/checkers/registry.h"
#include "isowatch/common/status_macros.h"

namespace isowatch::config::internal {

namespace {

absl::Status Expected(std::string_view what, std::string_view got) {
  return absl::InvalidArgumentError(fmt::format(R"(expected {}, got "{}")", what, got));
}

template <typename T>
std::optional<T> ParseInteger(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// `access` is a generic lambda returning a reference to the option's field, for a const or a
// mutable DaemonConfig alike.

template <typename Access>
Option StringOption(const std::string& key, const std::string& expected, const std::string& help,
                    bool may_be_empty, Access access) {
  return {
      .key = key,
      .type = "string",
      .expected = expected,
      .help = help,
      .nullable = may_be_empty,
      .quoted = true,
      .set = [access, may_be_empty, expected](DaemonConfig& c, std::string_view v) -> absl::Status {
        if (!may_be_empty && v.empty()) return Expected(expected, v);
        access(c) = std::string(v);
        return absl::OkStatus();
      },
      .get = [access](const DaemonConfig& c) { return std::string(access(c)); }};
}

template <typename Access>
Option PortOption(const std::string& key, const std::string& help, Access access) {
  return {.key = key,
          .type = "port",
          .expected = "a port number from 0 to 65535",
          .help = help,
          .set = [access](DaemonConfig& c, std::string_view v) -> absl::Status {
            const std::optional<int> port = ParseInteger<int>(v);
            if (!port || *port < 0 || *port > 65535) {
              return Expected("a port number from 0 to 65535", v);
            }
            access(c) = *port;
            return absl::OkStatus();
          },
          .get = [access](const DaemonConfig& c) { return std::to_string(access(c)); }};
}

template <typename Access>
Option CountOption(const std::string& key, const std::string& help, Access access) {
  return {.key = key,
          .type = "integer >= 1",
          .expected = "a positive integer",
          .help = help,
          .set = [access](DaemonConfig& c, std::string_view v) -> absl::Status {
            const std::optional<uint64_t> n = ParseInteger<uint64_t>(v);
            if (!n || *n == 0) return Expected("a positive integer", v);
            access(c) = *n;
            return absl::OkStatus();
          },
          .get = [access](const DaemonConfig& c) { return std::to_string(access(c)); }};
}

// A size in bytes; 0 only if `zero_means` says what it means (e.g. "none").
template <typename Access>
Option SizeOption(const std::string& key, const std::string& help, Access access,
                  const char* zero_means = nullptr) {
  return {.key = key,
          .type = zero_means == nullptr ? "size" : fmt::format("size, or 0 for {}", zero_means),
          .expected = R"(a size such as "16MiB" or "65536")",
          .help = help,
          .set = [access, zero_means](DaemonConfig& c, std::string_view v) -> absl::Status {
            ASSIGN_OR_RETURN(const uint64_t bytes, ParseByteSize(v));
            if (bytes == 0 && zero_means == nullptr) {
              return Expected("a size of at least 1 byte", v);
            }
            access(c) = bytes;
            return absl::OkStatus();
          },
          .get = [access](const DaemonConfig& c) { return FormatByteSize(access(c)); }};
}

// `zero`: whether 0 is allowed (it then means "never").
template <typename Access>
Option DurationOption(const std::string& key, const std::string& help, Access access,
                      bool zero = false) {
  return {.key = key,
          .type = "duration",
          .expected = R"(a duration such as "5s" or "250ms")",
          .help = help,
          .set = [access, zero](DaemonConfig& c, std::string_view v) -> absl::Status {
            ASSIGN_OR_RETURN(const std::chrono::nanoseconds d, ParseDuration(v));
            if (d.count() == 0 && !zero) {
              return Expected(R"(a positive duration such as "5s")", v);
            }
            if (d % std::chrono::milliseconds(1) != std::chrono::nanoseconds(0)) {
              return Expected("a whole number of milliseconds", v);
            }
            access(c) = std::chrono::duration_cast<std::chrono::milliseconds>(d);
            return absl::OkStatus();
          },
          .get = [access](const DaemonConfig& c) { return FormatDuration(access(c)); }};
}

template <typename Access>
Option NonNegativeOption(const std::string& key, const std::string& help, Access access) {
  return {.key = key,
          .type = "integer >= 0",
          .expected = "a non-negative integer",
          .help = help,
          .set = [access](DaemonConfig& c, std::string_view v) -> absl::Status {
            const std::optional<int64_t> n = ParseInteger<int64_t>(v);
            if (!n || *n < 0) {
              return Expected(
                  "a non-negative integer (in the physical unit of the streams' timestamps)", v);
            }
            access(c) = *n;
            return absl::OkStatus();
          },
          .get = [access](const DaemonConfig& c) { return std::to_string(access(c)); }};
}

// "auto" (unset) or an integer >= 0.
template <typename Access>
Option AutoCountOption(const std::string& key, const std::string& zero_means,
                       const std::string& help, Access access) {
  return {.key = key,
          .type = fmt::format("auto, or integer >= 0 (0: {})", zero_means),
          .expected = R"("auto" or a non-negative integer)",
          .help = help,
          .set = [access](DaemonConfig& c, std::string_view v) -> absl::Status {
            if (v == "auto") {
              access(c).reset();
              return absl::OkStatus();
            }
            const std::optional<uint64_t> n = ParseInteger<uint64_t>(v);
            if (!n) return Expected(R"("auto" or a non-negative integer)", v);
            access(c) = *n;
            return absl::OkStatus();
          },
          .get = [access](const DaemonConfig& c) -> std::string {
            return access(c) ? std::to_string(*access(c)) : "auto";
          }};
}

template <typename Access>
Option BoolOption(const std::string& key, const std::string& help, Access access) {
  return {.key = key,
          .type = "bool",
          .expected = "true or false",
          .help = help,
          .set = [access](DaemonConfig& c, std::string_view v) -> absl::Status {
            if (EqualsIgnoringCase(v, "true")) {
              access(c) = true;
            } else if (EqualsIgnoringCase(v, "false")) {
              access(c) = false;
            } else {
              return Expected("true or false", v);
            }
            return absl::OkStatus();
          },
          .get = [access](const DaemonConfig& c) -> std::string {
            return access(c) ? "true" : "false";
          }};
}

// An option whose values are the names of an enumeration's values.
template <typename E, typename Access>
Option EnumOption(const std::string& key, const std::string& help, std::vector<E> values,
                  const char* (*name)(E), Access access) {
  std::string type;
  std::string expected;
  for (size_t i = 0; i < values.size(); ++i) {
    type += fmt::format("{}{}", i == 0 ? "" : " | ", name(values[i]));
    expected += fmt::format("{}\"{}\"", i == 0 ? "" : (i + 1 == values.size() ? " or " : ", "),
                            name(values[i]));
  }
  return {
      .key = key,
      .type = type,
      .expected = expected,
      .help = help,
      .set = [access, values, name, expected](DaemonConfig& c, std::string_view v) -> absl::Status {
        for (E value : values) {
          if (v == name(value)) {
            access(c) = value;
            return absl::OkStatus();
          }
        }
        return Expected(expected, v);
      },
      .get = [access, name](const DaemonConfig& c) { return std::string(name(access(c))); }};
}

// A non-negative count; `zero_means` says what 0 means, if anything.
template <typename Access>
Option UnsignedOption(const std::string& key, const std::string& zero_means,
                      const std::string& help, Access access) {
  return {.key = key,
          .type = fmt::format("integer >= 0 (0: {})", zero_means),
          .expected = "a non-negative integer",
          .help = help,
          .set = [access](DaemonConfig& c, std::string_view v) -> absl::Status {
            const std::optional<uint64_t> n = ParseInteger<uint64_t>(v);
            if (!n) return Expected("a non-negative integer", v);
            access(c) = *n;
            return absl::OkStatus();
          },
          .get = [access](const DaemonConfig& c) { return std::to_string(access(c)); }};
}

// The items of a list written "a, b" or "[a, b]".

}  // namespace

std::vector<std::string> SplitList(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(begin, end - begin);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) items.emplace_back(item);
    begin = end + 1;
  }
  return items;
}

namespace {

std::string JoinList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : ", ") + items[i];
  return out + "]";
}

// The list of plug-ins run on windows.
Option CheckerListOption() {
  return {.key = "windows.checkers",
          .type = "list of plug-in names",
          .expected = "a list of plug-in checkers such as [adya, chronos]",
          .help = "Plug-in checkers run on every sealed window; empty: no windows are cut.",
          .nullable = true,
          .list = true,
          .set = [](DaemonConfig& c, std::string_view v) -> absl::Status {
            std::string joined;
            for (const std::string& item : SplitList(v))
              joined += (joined.empty() ? "" : ",") + item;
            std::vector<std::string> names;
            if (!joined.empty()) {
              ASSIGN_OR_RETURN(names, checkers::ParseCheckerList(joined));
            }
            c.windows.checkers = std::move(names);
            return absl::OkStatus();
          },
          .get = [](const DaemonConfig& c) { return JoinList(c.windows.checkers); }};
}

// `checkers.NAME.OPTION` for each option of each registered plug-in ("levels" first). The value
// is checked by building the plug-in with it.
std::vector<Option> CheckerOptions() {
  std::vector<Option> out;
  for (const checkers::CheckerInfo& info : checkers::RegisteredCheckers()) {
    std::vector<std::string> level_names;
    for (verdict::IsolationLevel l : info.levels) {
      level_names.emplace_back(verdict::IsolationLevelName(l));
    }
    std::vector<checkers::OptionSpec> specs;
    specs.push_back(
        {.name = "levels",
         .type = fmt::format("auto, or a list of levels from [{}]", fmt::join(level_names, ", ")),
         .default_value = "auto",
         .help = fmt::format("Levels the {} plug-in judges on windows; auto: engine.level if it "
                             "judges it, else all it judges.",
                             info.name)});
    specs.insert(specs.end(), info.options.begin(), info.options.end());
    for (const checkers::OptionSpec& spec : specs) {
      const std::string name = info.name;
      const std::string field = fmt::format("{}.{}", info.name, spec.name);
      const std::string default_value = spec.default_value;
      const bool is_levels = spec.name == "levels";
      out.push_back(
          {.key = fmt::format("checkers.{}", field),
           .type = spec.type,
           .expected = spec.type,
           .help = spec.help,
           .list = is_levels,
           .set = [name, field, default_value, is_levels, option = spec.name](
                      DaemonConfig& c, std::string_view v) -> absl::Status {
             std::string text(v);
             if (is_levels && text == "auto") {
               c.checker_options.erase(field);
               return absl::OkStatus();
             }
             if (option == "levels") {
               std::string joined;
               for (const std::string& item : SplitList(v)) {
                 joined += (joined.empty() ? "" : ",") + item;
               }
               text = joined;
             }
             const checkers::CheckerOptions one = {{option, text}};
             if (auto built = checkers::CreateChecker(name, one); !built.ok()) {
               return absl::InvalidArgumentError(
                   std::string(built.status().message().data(), built.status().message().size()));
             }
             // The default, however written, is no setting: the file that spells out every
             // default loads as the default configuration.
             if (is_levels ? SplitList(text) == SplitList(default_value) : text == default_value) {
               c.checker_options.erase(field);
             } else {
               c.checker_options[field] = text;
             }
             return absl::OkStatus();
           },
           .get = [field, default_value, is_levels](const DaemonConfig& c) -> std::string {
             auto it = c.checker_options.find(field);
             if (it == c.checker_options.end()) return std::string(default_value);
             return is_levels ? JoinList(SplitList(it->second)) : it->second;
           }});
    }
  }
  return out;
}

}  // namespace

// The option table: the one list of options, in the order of config/isowatchd.yaml.
const std::vector<Option>& Table() {
  using verdict::IsolationLevel;
  static const std::vector<Option>* const kTable = [] {
    auto* t = new std::vector<Option>{
        StringOption(
            "data_dir", "a directory path",
            "Directory of the store (ingest log, streams, violations).", false,
            [](auto& c) -> auto& { return c.data_dir; }),
        StringOption(
            "grpc.listen", "an address or host name", "Address the gRPC ingest service listens on.",
            false, [](auto& c) -> auto& { return c.grpc.listen; }),
        PortOption(
            "grpc.port", "Port of the gRPC ingest service; 0 picks a free port.",
            [](auto& c) -> auto& { return c.grpc.port; }),
        StringOption(
            "grpc.tls.cert_file", "a file path",
            "The gRPC server's certificate chain (PEM); set: collectors connect with TLS.", true,
            [](auto& c) -> auto& { return c.grpc.tls.cert_file; }),
        StringOption(
            "grpc.tls.key_file", "a file path", "The private key of grpc.tls.cert_file (PEM).",
            true, [](auto& c) -> auto& { return c.grpc.tls.key_file; }),
        StringOption(
            "grpc.tls.client_ca_file", "a file path",
            "CA bundle (PEM); set: collectors must present a certificate it signed (mutual TLS).",
            true, [](auto& c) -> auto& { return c.grpc.tls.client_ca_file; }),
        StringOption(
            "grpc.auth.token_file", "a file path",
            "File holding the bearer token collectors must send; needs grpc.tls. Empty: none.",
            true, [](auto& c) -> auto& { return c.grpc.token_file; }),
        StringOption(
            "http.listen", "an address or host name",
            "Address the HTTP server (/metrics, /healthz, /readyz, /api/v1) listens on.", false,
            [](auto& c) -> auto& { return c.http.listen; }),
        PortOption(
            "http.port", "Port of the HTTP server; 0 picks a free port.",
            [](auto& c) -> auto& { return c.http.port; }),
        StringOption(
            "http.tls.cert_file", "a file path",
            "The HTTP server's certificate chain (PEM); set: HTTPS only.", true,
            [](auto& c) -> auto& { return c.http.tls.cert_file; }),
        StringOption(
            "http.tls.key_file", "a file path", "The private key of http.tls.cert_file (PEM).",
            true, [](auto& c) -> auto& { return c.http.tls.key_file; }),
        StringOption(
            "http.tls.client_ca_file", "a file path",
            "CA bundle (PEM); set: HTTP clients must present a certificate it signed.", true,
            [](auto& c) -> auto& { return c.http.tls.client_ca_file; }),
        StringOption(
            "http.auth.token_file", "a file path",
            "File holding the bearer token /api/v1/* requires; empty: the API is open.", true,
            [](auto& c) -> auto& { return c.http.token_file; }),
        EnumOption<HttpAccess>(
            "http.auth.metrics", "Whether /metrics is open or needs the token.",
            {HttpAccess::kOpen, HttpAccess::kToken}, &HttpAccessName,
            [](auto& c) -> auto& { return c.http_auth.metrics; }),
        EnumOption<HttpAccess>(
            "http.auth.health", "Whether /healthz, /livez and /readyz are open or need the token.",
            {HttpAccess::kOpen, HttpAccess::kToken}, &HttpAccessName,
            [](auto& c) -> auto& { return c.http_auth.health; }),
        CountOption(
            "http.max_connections",
            "Connections the HTTP server keeps open at once; one more closes the connection idle "
            "the longest.",
            [](auto& c) -> auto& { return c.http_limits.max_connections; }),
        DurationOption(
            "http.idle_timeout",
            "A kept-alive HTTP connection is closed when its next request does not start within "
            "this.",
            [](auto& c) -> auto& { return c.http_limits.idle_timeout; }),
        DurationOption(
            "http.header_timeout",
            "A request header must be complete this long after the connection was accepted (or, "
            "on a kept-alive connection, after its first byte); else the connection is closed.",
            [](auto& c) -> auto& { return c.http_limits.header_timeout; }),
        DurationOption(
            "http.body_timeout",
            "A request body must be complete this long after its header; else the connection is "
            "closed.",
            [](auto& c) -> auto& { return c.http_limits.body_timeout; }),
        DurationOption(
            "http.write_timeout",
            "A client must take a response within this; else the connection is closed.",
            [](auto& c) -> auto& { return c.http_limits.write_timeout; }),
        CountOption(
            "http.api_threads",
            "Threads answering /api/v1/*; the probes and /metrics are answered apart from them.",
            [](auto& c) -> auto& { return c.http_limits.api_threads; }),
        UnsignedOption(
            "http.api_queue", "none wait",
            "API requests waiting for one of http.api_threads; one more is answered 503.",
            [](auto& c) -> auto& { return c.http_limits.api_queue; }),
        StringOption(
            "ports_file", "a file path",
            R"(Once ready, the daemon writes {"grpc": PORT, "http": PORT} here; empty: no file.)",
            true, [](auto& c) -> auto& { return c.ports_file; }),
        EnumOption<LogLevel>(
            "log.level", "Least severe log messages written.",
            {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError,
             LogLevel::kCritical, LogLevel::kOff},
            &LogLevelName, [](auto& c) -> auto& { return c.log.level; }),
        EnumOption<LogFormat>(
            "log.format", "Log lines as text, or one JSON object per line.",
            {LogFormat::kText, LogFormat::kJson}, &LogFormatName,
            [](auto& c) -> auto& { return c.log.format; }),
        StringOption(
            "log.file", "a file path", "File the log is appended to; empty: standard error.", true,
            [](auto& c) -> auto& { return c.log.file; }),
        EnumOption<IsolationLevel>(
            "engine.level", "Isolation level the online engine checks.",
            {IsolationLevel::kSnapshotIsolation, IsolationLevel::kSerializable},
            &verdict::IsolationLevelName, [](auto& c) -> auto& { return c.engine.level; }),
        DurationOption(
            "engine.finality_timeout",
            "For streams without watermarks, a verdict becomes final this long after its "
            "transaction arrived.",
            [](auto& c) -> auto& { return c.engine.finality_timeout; }),
        NonNegativeOption(
            "engine.retention",
            "Versions kept below the final point, in the physical unit of the "
            "timestamps, for transactions that start that far back.",
            [](auto& c) -> auto& { return c.engine.retention; }),
        SizeOption(
            "engine.memory_budget",
            "Engine state above which collected versions move to the spill on disk "
            "(<data_dir>/spill) and are reloaded when needed.",
            [](auto& c) -> auto& { return c.engine.memory_budget; }, "no budget"),
        BoolOption(
            "engine.spill_collected",
            "Also spill the versions the normal collection drops, so that a transaction of any "
            "length is checked exactly (every version is written to disk once).",
            [](auto& c) -> auto& { return c.engine.spill_collected; }),
        NonNegativeOption(
            "engine.spill_retention",
            "How far below the final point, in the physical unit of the timestamps, the spill "
            "keeps versions for late and long transactions; below that it drops them. 0: kept "
            "while the daemon runs.",
            [](auto& c) -> auto& { return c.engine.spill_retention; }),
        CountOption(
            "ingest.max_batch_transactions",
            "Most transactions in one batch; a larger batch is refused.",
            [](auto& c) -> auto& { return c.ingest.max_batch_transactions; }),
        SizeOption(
            "ingest.max_batch_bytes", "Largest encoded batch (also the gRPC message size limit).",
            [](auto& c) -> auto& { return c.ingest.max_batch_bytes; }),
        CountOption(
            "ingest.max_ops_per_transaction",
            "Most operations in one transaction; a larger one is refused.",
            [](auto& c) -> auto& { return c.ingest.max_ops_per_transaction; }),
        CountOption(
            "ingest.queue_batches",
            "Batches queued between ingest and the engine; when full, ingest pushes back.",
            [](auto& c) -> auto& { return c.ingest.queue_batches; }),
        CountOption(
            "ingest.max_streams", "Most streams the daemon accepts.",
            [](auto& c) -> auto& { return c.ingest.max_streams; }),
        AutoCountOption(
            "ingest.remembered_ids", "all",
            "Transaction ids remembered per stream to recognise a transaction sent again: at least "
            "the newest this many, at most twice as many; auto: all without a memory budget, "
            "262144 with one.",
            [](auto& c) -> auto& { return c.ingest.remembered_ids; }),
        BoolOption(
            "store.sync_writes",
            "Sync every write to disk before acknowledging it (survives power loss); false "
            "survives only a crash of the process.",
            [](auto& c) -> auto& { return c.store.sync_writes; }),
        DurationOption(
            "store.checkpoint_interval",
            "How often the daemon saves a checkpoint of its checking state and drops the log "
            "before it, so that the log and the time a restart takes stay bounded; 0s: never "
            "(the log keeps every batch).",
            [](auto& c) -> auto& { return c.store.checkpoint_interval; }, /*zero=*/true),
        UnsignedOption(
            "findings.max_per_key", "no bound",
            "Violations of one kind on one key stored in full; the others are counted in the "
            "key's summary.",
            [](auto& c) -> auto& { return c.findings.max_per_key; }),
        UnsignedOption(
            "findings.max_per_txn", "no bound",
            "Violations of one kind with one transaction at fault stored in full; the others are "
            "counted in the transaction's summary.",
            [](auto& c) -> auto& { return c.findings.max_per_txn; }),
        SizeOption(
            "findings.max_store_bytes",
            "Bytes of violations and summaries in the store past which violations are no longer "
            "stored in full, only counted by kind; the checks go on.",
            [](auto& c) -> auto& { return c.findings.max_store_bytes; }, "no limit"),
        UnsignedOption(
            "findings.log_per_minute", "none",
            "Violations logged in full per minute; the others are counted in the summary lines.",
            [](auto& c) -> auto& { return c.findings.log_per_minute; }),
        SizeOption(
            "findings.max_log_bytes",
            "Bytes of violations logged in full while the daemon runs; past it only the summary "
            "lines are logged.",
            [](auto& c) -> auto& { return c.findings.max_log_bytes; }, "no limit"),
        DurationOption(
            "findings.summary_interval",
            "How often the summaries that grew, and the violations not logged, are logged.",
            [](auto& c) -> auto& { return c.findings.summary_interval; }),
        CheckerListOption(),
        EnumOption<WindowCut>(
            "windows.by", "Cut windows by number of transactions or by span of commit time.",
            {WindowCut::kTransactions, WindowCut::kCommitTime}, &WindowCutName,
            [](auto& c) -> auto& { return c.windows.by; }),
        CountOption(
            "windows.size",
            "Transactions per window, or its span of commit time in the physical unit of the "
            "timestamps.",
            [](auto& c) -> auto& { return c.windows.size; }),
        UnsignedOption(
            "windows.overlap", "no lead-in",
            "Lead-in each window takes from the previous one, in the unit of windows.size; less "
            "than windows.size.",
            [](auto& c) -> auto& { return c.windows.overlap; }),
        UnsignedOption(
            "windows.threads", "one fewer than the cores, at least one",
            "Worker threads running the plug-in checkers.",
            [](auto& c) -> auto& { return c.windows.threads; }),
        CountOption(
            "windows.max_queued",
            "Sealed windows waiting for a worker; one more drops the oldest, counted and logged.",
            [](auto& c) -> auto& { return c.windows.max_queued; }),
        DurationOption(
            "windows.time_limit",
            "Time one plug-in checker may spend on one window; past it the window is UNKNOWN "
            "for that checker.",
            [](auto& c) -> auto& { return c.windows.time_limit; }),
    };
    for (Option& o : CheckerOptions()) t->push_back(std::move(o));
    return t;
  }();
  return *kTable;
}

const Option* FindOption(std::string_view key) {
  for (const Option& o : Table()) {
    if (o.key == key) return &o;
  }
  return nullptr;
}

}  // namespace isowatch::config::internal
