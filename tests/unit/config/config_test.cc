// SPDX-License-Identifier: Apache-2.0
#include "isowatch/config/config.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "isowatch/config/units.h"
#include "isowatch/verdict/violation.h"

#include "tests/testing/source_dir.h"

namespace isowatch::config {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string ShippedFile() { return isowatch::testing::SourceDir() + "/config/isowatchd.yaml"; }
std::string DocsFile() { return isowatch::testing::SourceDir() + "/docs/configuration.md"; }

std::string Message(const absl::Status& s) { return {s.message().data(), s.message().size()}; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Keys() {
  std::vector<std::string> keys;
  for (const OptionInfo& o : Options()) keys.push_back(o.key);
  return keys;
}

// The error of loading `yaml`, which must fail.
std::string LoadError(std::string_view yaml) {
  auto config = LoadConfigString(yaml, "test.yaml");
  EXPECT_FALSE(config.ok()) << "accepted:\n" << yaml;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return Message(config.status());
}

std::string OverrideError(std::string_view key, std::string_view value) {
  DaemonConfig config;
  const absl::Status s = ApplyOverride(&config, key, value);
  EXPECT_FALSE(s.ok()) << key << "=" << value;
  EXPECT_EQ(config, DaemonConfig()) << "a refused value changed the configuration";
  return Message(s);
}

// ---- The shipped file ----

TEST(ConfigTest, TheShippedFileLoadsAndHoldsTheDefaults) {
  auto config = LoadConfigFile(ShippedFile());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config, DaemonConfig());
  EXPECT_TRUE(Validate(*config).ok()) << Validate(*config);
}

// The shipped file names every option explicitly, with the default value, and nothing else.
bool Has(const std::map<std::string, std::string>& options, const std::string& key,
         const std::string& value) {
  auto it = options.find(key);
  return it != options.end() && it->second == value;
}

// The value of a node as the option table renders it: a scalar, or a list as "[a, b]".
std::string Rendered(const YAML::Node& node) {
  if (!node.IsSequence()) return node.Scalar();
  std::string out = "[";
  for (size_t i = 0; i < node.size(); ++i) out += (i == 0 ? "" : ", ") + node[i].Scalar();
  return out + "]";
}

// The options of a YAML mapping, sections nested to any depth, by dotted key.
void Flatten(const YAML::Node& map, const std::string& prefix,
             std::map<std::string, YAML::Node>* out) {
  for (const auto& entry : map) {
    const std::string name =
        prefix.empty() ? entry.first.Scalar() : fmt::format("{}.{}", prefix, entry.first.Scalar());
    if (entry.second.IsMap()) {
      Flatten(entry.second, name, out);
    } else {
      out->emplace(name, entry.second);
    }
  }
}

TEST(ConfigTest, TheShippedFileListsEveryOption) {
  const YAML::Node root = YAML::LoadFile(ShippedFile());
  std::map<std::string, YAML::Node> in_file;
  Flatten(root, "", &in_file);
  std::set<std::string> keys_in_file;
  for (const auto& [key, node] : in_file) keys_in_file.insert(key);
  const std::vector<std::string> keys = Keys();
  EXPECT_EQ(keys_in_file, std::set<std::string>(keys.begin(), keys.end()));
  // Each value written there is the default, in the canonical spelling.
  for (const OptionInfo& o : Options()) {
    auto it = in_file.find(o.key);
    ASSERT_NE(it, in_file.end()) << o.key;
    EXPECT_EQ(Rendered(it->second), o.default_value) << o.key;
  }
}

// Every field of DaemonConfig is an option. The structured bindings stop compiling when a field
// is added: add it to the option table in config.cc, to config/isowatchd.yaml,
// docs/configuration.md and here.
TEST(ConfigTest, EveryFieldOfDaemonConfigIsAnOption) {
  DaemonConfig c;
  auto& [data_dir, grpc, http, http_auth, http_limits, ports_file, log, engine, ingest, store,
         findings, windows, checker_options] = c;
  auto& [grpc_listen, grpc_port, grpc_tls, grpc_token_file] = grpc;
  auto& [grpc_cert, grpc_key, grpc_client_ca] = grpc_tls;
  auto& [http_listen, http_port, http_tls, http_token_file] = http;
  auto& [http_cert, http_key, http_client_ca] = http_tls;
  auto& [http_metrics_access, http_health_access] = http_auth;
  auto& [http_max_connections, http_idle_timeout, http_header_timeout, http_body_timeout,
         http_write_timeout, http_api_threads, http_api_queue] = http_limits;
  auto& [log_level, log_format, log_file] = log;
  auto& [engine_level, finality_timeout, retention, memory_budget, spill_collected,
         spill_retention] = engine;
  auto& [max_batch_transactions, max_batch_bytes, max_ops, queue_batches, max_streams,
         remembered_ids] = ingest;
  auto& [sync_writes, checkpoint_interval] = store;
  auto& [max_per_key, max_per_txn, max_store_bytes, log_per_minute, max_log_bytes,
         summary_interval] = findings;
  auto& [window_checkers, window_by, window_size, window_overlap, window_threads, window_queued,
         window_time_limit] = windows;

  // For each field: its key and a change of it made through the option. (The lambdas capture
  // pointers: C++20 lets lambdas capture structured bindings, clang 14 does not yet.)
  struct Field {
    std::string key;
    std::string value;
    std::function<bool()> changed;
  };
  const DaemonConfig d;
  const std::vector<Field> fields = {
      {"data_dir", "/elsewhere", [p = &data_dir] { return *p == "/elsewhere"; }},
      {"grpc.listen", "::", [p = &grpc_listen] { return *p == "::"; }},
      {"grpc.port", "9000", [p = &grpc_port] { return *p == 9000; }},
      {"grpc.tls.cert_file", "/c.pem", [p = &grpc_cert] { return *p == "/c.pem"; }},
      {"grpc.tls.key_file", "/k.pem", [p = &grpc_key] { return *p == "/k.pem"; }},
      {"grpc.tls.client_ca_file", "/ca.pem", [p = &grpc_client_ca] { return *p == "/ca.pem"; }},
      {"grpc.auth.token_file", "/t", [p = &grpc_token_file] { return *p == "/t"; }},
      {"http.listen", "0.0.0.0", [p = &http_listen] { return *p == "0.0.0.0"; }},
      {"http.port", "9001", [p = &http_port] { return *p == 9001; }},
      {"http.tls.cert_file", "/hc.pem", [p = &http_cert] { return *p == "/hc.pem"; }},
      {"http.tls.key_file", "/hk.pem", [p = &http_key] { return *p == "/hk.pem"; }},
      {"http.tls.client_ca_file", "/hca.pem", [p = &http_client_ca] { return *p == "/hca.pem"; }},
      {"http.auth.token_file", "/ht", [p = &http_token_file] { return *p == "/ht"; }},
      {"http.auth.metrics", "token",
       [p = &http_metrics_access] { return *p == HttpAccess::kToken; }},
      {"http.auth.health", "token", [p = &http_health_access] { return *p == HttpAccess::kToken; }},
      {"http.max_connections", "12", [p = &http_max_connections] { return *p == 12u; }},
      {"http.idle_timeout", "3s", [p = &http_idle_timeout] { return *p == 3s; }},
      {"http.header_timeout", "2s", [p = &http_header_timeout] { return *p == 2s; }},
      {"http.body_timeout", "4s", [p = &http_body_timeout] { return *p == 4s; }},
      {"http.write_timeout", "5s", [p = &http_write_timeout] { return *p == 5s; }},
      {"http.api_threads", "3", [p = &http_api_threads] { return *p == 3u; }},
      {"http.api_queue", "0", [p = &http_api_queue] { return *p == 0u; }},
      {"ports_file", "/tmp/p.json", [p = &ports_file] { return *p == "/tmp/p.json"; }},
      {"log.level", "debug", [p = &log_level] { return *p == LogLevel::kDebug; }},
      {"log.format", "json", [p = &log_format] { return *p == LogFormat::kJson; }},
      {"log.file", "/tmp/log", [p = &log_file] { return *p == "/tmp/log"; }},
      {"engine.level", "ser",
       [p = &engine_level] { return *p == verdict::IsolationLevel::kSerializable; }},
      {"engine.finality_timeout", "250ms", [p = &finality_timeout] { return *p == 250ms; }},
      {"engine.retention", "1000", [p = &retention] { return *p == 1000; }},
      {"engine.memory_budget", "256MiB", [p = &memory_budget] { return *p == (256u << 20); }},
      {"engine.spill_collected", "true", [p = &spill_collected] { return *p; }},
      {"engine.spill_retention", "5000", [p = &spill_retention] { return *p == 5000; }},
      {"ingest.max_batch_transactions", "7", [p = &max_batch_transactions] { return *p == 7u; }},
      {"ingest.max_batch_bytes", "1KiB", [p = &max_batch_bytes] { return *p == 1024u; }},
      {"ingest.max_ops_per_transaction", "8", [p = &max_ops] { return *p == 8u; }},
      {"ingest.queue_batches", "9", [p = &queue_batches] { return *p == 9u; }},
      {"ingest.max_streams", "10", [p = &max_streams] { return *p == 10u; }},
      {"ingest.remembered_ids", "0", [p = &remembered_ids] { return *p == uint64_t{0}; }},
      {"store.sync_writes", "false", [p = &sync_writes] { return !*p; }},
      {"store.checkpoint_interval", "0s", [p = &checkpoint_interval] { return p->count() == 0; }},
      {"findings.max_per_key", "0", [p = &max_per_key] { return *p == 0u; }},
      {"findings.max_per_txn", "3", [p = &max_per_txn] { return *p == 3u; }},
      {"findings.max_store_bytes", "0", [p = &max_store_bytes] { return *p == 0u; }},
      {"findings.log_per_minute", "0", [p = &log_per_minute] { return *p == 0u; }},
      {"findings.max_log_bytes", "1MiB", [p = &max_log_bytes] { return *p == (1u << 20); }},
      {"findings.summary_interval", "10s", [p = &summary_interval] { return *p == 10s; }},
      {"windows.checkers", "adya, chronos",
       [p = &window_checkers] {
         return *p == std::vector<std::string>{"adya", "chronos"};
       }},
      {"windows.by", "commit_time", [p = &window_by] { return *p == WindowCut::kCommitTime; }},
      {"windows.size", "500", [p = &window_size] { return *p == 500u; }},
      {"windows.overlap", "50", [p = &window_overlap] { return *p == 50u; }},
      {"windows.threads", "3", [p = &window_threads] { return *p == 3u; }},
      {"windows.max_queued", "4", [p = &window_queued] { return *p == 4u; }},
      {"windows.time_limit", "2s", [p = &window_time_limit] { return *p == 2s; }},
      {"checkers.chronos.levels", "si",
       [p = &checker_options] { return Has(*p, "chronos.levels", "si"); }},
      {"checkers.chronos.threads", "2",
       [p = &checker_options] { return Has(*p, "chronos.threads", "2"); }},
      {"checkers.adya.levels", "[ser, si]",
       [p = &checker_options] { return Has(*p, "adya.levels", "ser,si"); }},
      {"checkers.adya.max_search_steps", "1000",
       [p = &checker_options] { return Has(*p, "adya.max_search_steps", "1000"); }},
      {"checkers.plume.levels", "[tcc, rc]",
       [p = &checker_options] { return Has(*p, "plume.levels", "tcc,rc"); }},
      {"checkers.plume.max_explained_cycles", "10",
       [p = &checker_options] { return Has(*p, "plume.max_explained_cycles", "10"); }},
      {"checkers.polygraph.levels", "[ser]",
       [p = &checker_options] { return Has(*p, "polygraph.levels", "ser"); }},
      {"checkers.polygraph.si_variant", "strong",
       [p = &checker_options] { return Has(*p, "polygraph.si_variant", "strong"); }},
      {"checkers.polygraph.solver", "cryptominisat",
       [p = &checker_options] { return Has(*p, "polygraph.solver", "cryptominisat"); }},
      {"checkers.polygraph.clock_drift", "5ms",
       [p = &checker_options] { return Has(*p, "polygraph.clock_drift", "5ms"); }},
  };
  std::vector<std::string> field_keys;
  for (const Field& f : fields) {
    SCOPED_TRACE(f.key);
    field_keys.push_back(f.key);
    EXPECT_FALSE(f.changed()) << "the test value is the default";
    ASSERT_TRUE(ApplyOverride(&c, f.key, f.value).ok());
    EXPECT_TRUE(f.changed());
  }
  EXPECT_EQ(field_keys, Keys());
  EXPECT_NE(c, d);
}

TEST(ConfigTest, TheDocsDescribeEveryOption) {
  const std::string docs = ReadFile(DocsFile());
  ASSERT_FALSE(docs.empty()) << DocsFile();
  for (const OptionInfo& o : Options()) {
    EXPECT_THAT(docs, HasSubstr(fmt::format("`{}`", o.key)));
    EXPECT_THAT(docs,
                HasSubstr(fmt::format("`{}`", o.default_value.empty() ? "\"\"" : o.default_value)))
        << o.key;
  }
}

// ---- Defaults and loading ----

TEST(ConfigTest, Defaults) {
  const DaemonConfig c;
  EXPECT_EQ(c.data_dir, "/var/lib/isowatch");
  EXPECT_EQ(c.grpc.listen, "127.0.0.1");
  EXPECT_EQ(c.grpc.port, 7470);
  EXPECT_EQ(c.http.port, 7471);
  EXPECT_EQ(c.ports_file, "");
  EXPECT_EQ(c.log.level, LogLevel::kInfo);
  EXPECT_EQ(c.log.format, LogFormat::kText);
  EXPECT_EQ(c.engine.level, verdict::IsolationLevel::kSnapshotIsolation);
  EXPECT_EQ(c.engine.finality_timeout, 5s);
  EXPECT_EQ(c.engine.retention, 0);
  EXPECT_EQ(c.ingest.max_batch_bytes, 16u << 20);
  EXPECT_TRUE(c.store.sync_writes);
  EXPECT_EQ(c.store.checkpoint_interval, 5min);
  EXPECT_EQ(c.findings.max_per_key, 100u);
  EXPECT_EQ(c.findings.max_per_txn, 20u);
  EXPECT_EQ(c.findings.max_store_bytes, 256u << 20);
  EXPECT_EQ(c.findings.log_per_minute, 600u);
  EXPECT_EQ(c.findings.max_log_bytes, 64u << 20);
  EXPECT_EQ(c.findings.summary_interval, 1min);
  EXPECT_TRUE(Validate(c).ok());
}

TEST(ConfigTest, AnEmptyFileOrSectionMeansDefaults) {
  for (std::string_view yaml : {"", "# nothing\n", "grpc:\n", "log: {}\nengine:\n"}) {
    auto c = LoadConfigString(yaml);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(*c, DaemonConfig());
  }
}

TEST(ConfigTest, LoadsEveryKindOfValue) {
  auto c = LoadConfigString(R"(
data_dir: /data/isowatch
grpc: {listen: "0.0.0.0", port: 0}
http:
  port: 0
ports_file: /run/isowatch/ports.json
log:
  level: warn
  format: json
  file: ~
engine:
  level: ser
  finality_timeout: 1m30s
  retention: 262144
ingest:
  max_batch_bytes: 4 MB
  queue_batches: 8
store:
  sync_writes: False
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->data_dir, "/data/isowatch");
  EXPECT_EQ(c->grpc.listen, "0.0.0.0");
  EXPECT_EQ(c->grpc.port, 0);
  EXPECT_EQ(c->http.port, 0);
  EXPECT_EQ(c->http.listen, "127.0.0.1");
  EXPECT_EQ(c->ports_file, "/run/isowatch/ports.json");
  EXPECT_EQ(c->log.level, LogLevel::kWarn);
  EXPECT_EQ(c->log.format, LogFormat::kJson);
  EXPECT_EQ(c->log.file, "");
  EXPECT_EQ(c->engine.level, verdict::IsolationLevel::kSerializable);
  EXPECT_EQ(c->engine.finality_timeout, 90s);
  EXPECT_EQ(c->engine.retention, 262144);
  EXPECT_EQ(c->ingest.max_batch_bytes, 4'000'000u);
  EXPECT_EQ(c->ingest.queue_batches, 8u);
  EXPECT_EQ(c->ingest.max_streams, 1024u);
  EXPECT_FALSE(c->store.sync_writes);
  EXPECT_TRUE(Validate(*c).ok()) << Validate(*c);
}

TEST(ConfigTest, EachBadValueNamesItsOptionAndLine) {
  struct Case {
    std::string yaml;
    std::string expected;  // part of the message
  };
  const std::vector<Case> cases = {
      {"engine:\n  finality_timeout: soon\n",
       R"(test.yaml:2: engine.finality_timeout: expected a duration such as "5s" or "250ms", got "soon")"},
      {"engine:\n  finality_timeout: 5\n", "engine.finality_timeout: expected a duration"},
      {"engine:\n  finality_timeout: 0s\n",
       "engine.finality_timeout: expected a positive duration"},
      {"engine:\n  finality_timeout: -5s\n", "engine.finality_timeout: expected a duration"},
      {"engine:\n  finality_timeout: 1500us\n",
       "engine.finality_timeout: expected a whole number of milliseconds"},
      {"engine:\n  level: rc\n", R"(engine.level: expected "si" or "ser", got "rc")"},
      {"engine:\n  retention: -1\n", "engine.retention: expected a non-negative integer"},
      {"engine:\n  retention: 1h\n", "engine.retention: expected a non-negative integer"},
      {"grpc:\n  port: 70000\n",
       R"(grpc.port: expected a port number from 0 to 65535, got "70000")"},
      {"http:\n  port: http\n", "http.port: expected a port number"},
      {"grpc:\n  listen: \"\"\n", "grpc.listen: expected an address or host name"},
      {"\n\nlog:\n  level: loud\n",
       R"(test.yaml:4: log.level: expected "trace", "debug", "info", "warn", "error", "critical" or "off", got "loud")"},
      {"log:\n  format: xml\n", R"(log.format: expected "text" or "json", got "xml")"},
      {"ingest:\n  max_batch_bytes: lots\n",
       R"(ingest.max_batch_bytes: expected a size such as "16MiB" or "65536", got "lots")"},
      {"ingest:\n  max_batch_bytes: 0\n", "ingest.max_batch_bytes: expected a size of at least 1"},
      {"ingest:\n  queue_batches: 0\n",
       R"(ingest.queue_batches: expected a positive integer, got "0")"},
      {"ingest:\n  max_streams: 1.5\n", "ingest.max_streams: expected a positive integer"},
      {"ingest:\n  max_batch_transactions: -3\n", "ingest.max_batch_transactions: expected"},
      {"ingest:\n  max_ops_per_transaction: many\n", "ingest.max_ops_per_transaction: expected"},
      {"ingest:\n  remembered_ids: -1\n",
       R"(test.yaml:2: ingest.remembered_ids: expected "auto" or a non-negative integer, got "-1")"},
      {"ingest:\n  remembered_ids: some\n", "ingest.remembered_ids: expected \"auto\" or"},
      {"ingest:\n  remembered_ids: 1e6\n", "ingest.remembered_ids: expected \"auto\" or"},
      {"store:\n  sync_writes: maybe\n",
       R"(store.sync_writes: expected true or false, got "maybe")"},
      {"data_dir:\n", "data_dir: expected a directory path, got nothing"},
      {"data_dir: [a, b]\n", "data_dir: expected a directory path, got a list"},
      {"grpc:\n  port: {a: 1}\n",
       "grpc.port: expected a port number from 0 to 65535, got a mapping"},
      {"grpc: 7470\n", R"(grpc: expected a section of options, got "7470")"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    EXPECT_THAT(LoadError(c.yaml), HasSubstr(c.expected));
  }
}

TEST(ConfigTest, UnknownOptionsAreRefused) {
  EXPECT_THAT(LoadError("engine:\n  finalty_timeout: 5s\n"),
              HasSubstr(R"(test.yaml:2: unknown option "engine.finalty_timeout" (did you mean )"
                        R"("engine.finality_timeout"?))"));
  EXPECT_THAT(LoadError("datadir: /x\n"),
              HasSubstr(R"(unknown option "datadir" (did you mean "data_dir"?))"));
  EXPECT_THAT(LoadError("collectors:\n  span: 10s\n"), HasSubstr(R"(unknown option "collectors")"));
  // Plug-ins and their options are known by the registry.
  EXPECT_THAT(LoadError("checkers:\n  adya:\n    max_steps: 10\n"),
              HasSubstr(R"(test.yaml:3: unknown option "checkers.adya.max_steps")"));
  EXPECT_THAT(LoadError("checkers:\n  elle:\n    levels: [rc]\n"),
              HasSubstr(R"(unknown option "checkers.elle")"));
  EXPECT_THAT(LoadError("checkers:\n  chronos:\n    levels: [rc]\n"),
              HasSubstr("checkers.chronos.levels"));
  EXPECT_THAT(LoadError("windows:\n  checkers: [adya, nope]\n"), HasSubstr("nope"));
  EXPECT_THAT(LoadError("grpc:\n  port: 1\n  colour: blue\n"),
              HasSubstr(R"(test.yaml:3: unknown option "grpc.colour")"));
  // A dotted key at the top level is not the nested form.
  EXPECT_THAT(LoadError("grpc.port: 1\n"), HasSubstr(R"(unknown option "grpc.port")"));
}

TEST(ConfigTest, RefusesMalformedYamlAndRepeatedOptions) {
  EXPECT_THAT(LoadError("grpc:\n  port: [1\n"), StartsWith("test.yaml:"));
  EXPECT_THAT(LoadError("- a\n- b\n"), HasSubstr("expected a mapping of options"));
  EXPECT_THAT(LoadError("just text\n"), HasSubstr("expected a mapping of options"));
  EXPECT_THAT(LoadError("grpc:\n  port: 1\ngrpc:\n  listen: x\n"), HasSubstr("given twice"));
  EXPECT_THAT(LoadError("log:\n  level: info\n  level: debug\n"),
              HasSubstr(R"("log.level" is given twice)"));
}

TEST(ConfigTest, MissingFile) {
  auto c = LoadConfigFile("/nonexistent/isowatchd.yaml");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/isowatchd.yaml"));
  EXPECT_EQ(LoadConfigFile(isowatch::testing::SourceDir()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- Overrides ----

TEST(ConfigTest, OverridesApplyOverTheFile) {
  auto c = LoadConfigString("grpc:\n  port: 9000\nengine:\n  level: si\n");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(ApplyOverride(&*c, "grpc.port", "0").ok());
  ASSERT_TRUE(ApplyAssignment(&*c, "engine.level=ser").ok());
  ASSERT_TRUE(ApplyAssignment(&*c, "ports_file=").ok());
  ASSERT_TRUE(ApplyAssignment(&*c, "log.file=/var/log/a=b.log").ok());  // the first = splits
  EXPECT_EQ(c->grpc.port, 0);
  EXPECT_EQ(c->engine.level, verdict::IsolationLevel::kSerializable);
  EXPECT_EQ(c->ports_file, "");
  EXPECT_EQ(c->log.file, "/var/log/a=b.log");
}

TEST(ConfigTest, OverridesAreCheckedLikeTheFile) {
  EXPECT_EQ(OverrideError("engine.finality_timeout", "soon"),
            R"(engine.finality_timeout: expected a duration such as "5s" or "250ms", got "soon")");
  EXPECT_THAT(OverrideError("grpc.port", "-1"), StartsWith("grpc.port: expected a port number"));
  EXPECT_THAT(OverrideError("store.sync_writes", "1"), StartsWith("store.sync_writes:"));
  EXPECT_THAT(OverrideError("engine.levle", "ser"),
              HasSubstr(R"(unknown option "engine.levle" (did you mean "engine.level"?))"));
  EXPECT_THAT(OverrideError("grpc", "1"), HasSubstr(R"(unknown option "grpc")"));
  EXPECT_THAT(OverrideError("data_dir", ""), StartsWith("data_dir: expected a directory path"));
  DaemonConfig c;
  EXPECT_THAT(Message(ApplyAssignment(&c, "engine.level")), HasSubstr("expected KEY=VALUE"));
  EXPECT_THAT(Message(ApplyAssignment(&c, "=ser")), HasSubstr("expected KEY=VALUE"));
  EXPECT_EQ(c, DaemonConfig());
}

// "auto" follows the memory budget; a value given, 0 included, is taken as it is.
TEST(ConfigTest, RememberedIdsFollowTheMemoryBudgetUnlessSet) {
  DaemonConfig c;
  EXPECT_FALSE(c.ingest.remembered_ids.has_value());
  EXPECT_EQ(RememberedIds(c), 0u);
  ASSERT_TRUE(ApplyOverride(&c, "engine.memory_budget", "256MiB").ok());
  EXPECT_EQ(RememberedIds(c), kDefaultRememberedIds);
  EXPECT_EQ(kDefaultRememberedIds, 262144u);
  ASSERT_TRUE(ApplyOverride(&c, "ingest.remembered_ids", "0").ok());
  EXPECT_EQ(RememberedIds(c), 0u);
  ASSERT_TRUE(ApplyAssignment(&c, "ingest.remembered_ids=1000").ok());
  EXPECT_EQ(RememberedIds(c), 1000u);
  ASSERT_TRUE(ApplyOverride(&c, "engine.memory_budget", "0").ok());
  EXPECT_EQ(RememberedIds(c), 1000u);
  ASSERT_TRUE(ApplyOverride(&c, "ingest.remembered_ids", "auto").ok());
  EXPECT_EQ(RememberedIds(c), 0u);
  EXPECT_EQ(c, DaemonConfig());
  EXPECT_THAT(OverrideError("ingest.remembered_ids", "all"),
              StartsWith(R"(ingest.remembered_ids: expected "auto" or a non-negative integer)"));
}

// ---- Validation ----

TEST(ConfigTest, ValidateChecksAcrossFields) {
  DaemonConfig c;
  c.http.port = c.grpc.port;
  absl::Status s = Validate(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("http.port: 7470 is grpc.port too"));
  c.grpc.port = c.http.port = 0;  // two free ports
  EXPECT_TRUE(Validate(c).ok());

  DaemonConfig bad;
  bad.data_dir = "";
  bad.grpc.port = 70000;
  bad.http.listen = "";
  bad.engine.finality_timeout = 0ms;
  bad.engine.retention = -1;
  bad.ingest.queue_batches = 0;
  bad.ingest.max_batch_bytes = 4ull << 30;
  bad.http_limits.max_connections = 0;
  bad.http_limits.header_timeout = 0ms;
  bad.http_limits.api_threads = 5000;
  bad.grpc.tls.cert_file = "/c.pem";           // without a key
  bad.grpc.token_file = "/t";                  // fine: grpc has TLS (if incomplete)
  bad.http.tls.client_ca_file = "/ca.pem";     // without TLS
  bad.http_auth.metrics = HttpAccess::kToken;  // without a token
  s = Validate(bad);
  ASSERT_FALSE(s.ok());
  for (std::string_view key :
       {"data_dir:", "grpc.port:", "http.listen:", "engine.finality_timeout:", "engine.retention:",
        "ingest.queue_batches:", "ingest.max_batch_bytes: at most 2GiB - 1",
        "http.max_connections: must be at least 1", "http.header_timeout: must be positive",
        "http.api_threads: at most 1024", "grpc.tls: cert_file and key_file go together",
        "http.tls.client_ca_file: client certificates need TLS",
        "http.auth.metrics: \"token\" needs http.auth.token_file"}) {
    EXPECT_THAT(s.message(), HasSubstr(std::string(key)));
  }
  EXPECT_THAT(s.message(), Not(HasSubstr("grpc.auth.token_file")));
  EXPECT_THAT(s.message(), Not(HasSubstr("http.auth.health")));

  DaemonConfig token_without_tls;
  token_without_tls.grpc.token_file = "/t";
  s = Validate(token_without_tls);
  EXPECT_THAT(s.message(), HasSubstr("grpc.auth.token_file: a bearer token needs TLS"));
  for (std::string_view key : {"grpc.auth.token_file"}) {
    EXPECT_THAT(s.message(), HasSubstr(std::string(key)));
  }
}

TEST(ConfigTest, IsLoopbackKnowsTheLoopbackAddresses) {
  for (const char* host :
       {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1", "localhost"}) {
    EXPECT_TRUE(IsLoopback(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "::", "10.0.0.1", "192.0.2.1", "128.0.0.1", "::ffff:10.0.0.1",
                           "db.example", ""}) {
    EXPECT_FALSE(IsLoopback(host)) << host;
  }
}

TEST(ConfigTest, AccessWarningsNameWhatIsOpenOffLoopback) {
  DaemonConfig c;
  EXPECT_TRUE(AccessWarnings(c).empty());  // loopback
  c.grpc.listen = "0.0.0.0";
  c.http.listen = "::";
  std::vector<std::string> w = AccessWarnings(c);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_THAT(w[0], HasSubstr("gRPC listens on 0.0.0.0 without authentication"));
  EXPECT_THAT(w[1], HasSubstr("HTTP listens on :: without authentication"));
  // TLS alone authenticates nobody; client certificates or a token do.
  c.grpc.tls = {.cert_file = "/c", .key_file = "/k"};
  EXPECT_EQ(AccessWarnings(c).size(), 2u);
  c.grpc.tls.client_ca_file = "/ca";
  c.http.token_file = "/t";
  w = AccessWarnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr("the token travels in clear"));
  c.http.tls = {.cert_file = "/c", .key_file = "/k"};
  EXPECT_TRUE(AccessWarnings(c).empty());
  c.grpc.tls.client_ca_file = "";
  c.grpc.token_file = "/t";
  EXPECT_TRUE(AccessWarnings(c).empty());
}

// ---- Rendering ----

TEST(ConfigTest, DescribeConfigLoadsBackTheSame) {
  const std::string described_default = DescribeConfig(DaemonConfig());
  auto back = LoadConfigString(described_default);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << described_default;
  EXPECT_EQ(*back, DaemonConfig());

  DaemonConfig c;
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"data_dir", "/data dir/with: colon # and hash"},
           {"grpc.listen", "::"},
           {"http.port", "0"},
           {"ports_file", "~"},
           {"log.level", "off"},
           {"log.file", "\"quoted\"\n"},
           {"engine.level", "ser"},
           {"engine.finality_timeout", "1500ms"},
           {"ingest.max_batch_bytes", "1000"},
           {"ingest.remembered_ids", "4096"},
           {"store.sync_writes", "false"}}) {
    ASSERT_TRUE(ApplyOverride(&c, key, value).ok()) << key;
  }
  const std::string described = DescribeConfig(c);
  back = LoadConfigString(described);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << described;
  EXPECT_EQ(*back, c) << described;
  EXPECT_THAT(described, HasSubstr("finality_timeout: 1.5s"));
  EXPECT_THAT(described, HasSubstr("max_batch_bytes: 1000"));
  EXPECT_THAT(described, HasSubstr("remembered_ids: 4096"));
  EXPECT_THAT(described_default, HasSubstr("remembered_ids: auto"));
}

// ---- Units ----

TEST(UnitsTest, Durations) {
  EXPECT_EQ(*ParseDuration("5s"), 5s);
  EXPECT_EQ(*ParseDuration("250ms"), 250ms);
  EXPECT_EQ(*ParseDuration("1.5h"), 90min);
  EXPECT_EQ(*ParseDuration("1m30s"), 90s);
  EXPECT_EQ(*ParseDuration("10us"), 10us);
  EXPECT_EQ(*ParseDuration("0"), 0ns);
  for (std::string_view bad : {"", "soon", "5", "-1s", "inf", "5 s", "s", "1y", "1000000h"}) {
    SCOPED_TRACE(bad);
    auto d = ParseDuration(bad);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(d.status().message(), HasSubstr(fmt::format("\"{}\"", bad)));
  }
  EXPECT_THAT(ParseDuration("5").status().message(), HasSubstr("a unit is needed"));
  EXPECT_EQ(FormatDuration(5s), "5s");
  EXPECT_EQ(FormatDuration(250ms), "250ms");
  EXPECT_EQ(FormatDuration(90s), "1m30s");
  for (auto ms : {1ms, 999ms, 1001ms, 3600000ms, 86400001ms}) {
    EXPECT_EQ(*ParseDuration(FormatDuration(ms)), ms);
  }
}

TEST(UnitsTest, ByteSizes) {
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("65536"), 65536u);
  EXPECT_EQ(*ParseByteSize("16MiB"), 16u << 20);
  EXPECT_EQ(*ParseByteSize("16 MiB"), 16u << 20);
  EXPECT_EQ(*ParseByteSize("16mib"), 16u << 20);
  EXPECT_EQ(*ParseByteSize("512KiB"), 512u << 10);
  EXPECT_EQ(*ParseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize("1TiB"), 1ull << 40);
  EXPECT_EQ(*ParseByteSize("3kB"), 3000u);
  EXPECT_EQ(*ParseByteSize("3KB"), 3000u);
  EXPECT_EQ(*ParseByteSize("4MB"), 4'000'000u);
  EXPECT_EQ(*ParseByteSize("1GB"), 1'000'000'000u);
  EXPECT_EQ(*ParseByteSize("7B"), 7u);
  for (std::string_view bad :
       {"", "lots", "MiB", "16XB", "-1", "1.5MiB", "16  MiB", "16 ", " 16", "16MiBs"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(ParseByteSize(bad).status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(ParseByteSize("99999999999999999999").status().message(), HasSubstr("64 bits"));
  EXPECT_THAT(ParseByteSize("17179869184GiB").status().message(), HasSubstr("64 bits"));
  EXPECT_EQ(*ParseByteSize("16383TiB"), 16383ull << 40);
  EXPECT_EQ(FormatByteSize(16u << 20), "16MiB");
  EXPECT_EQ(FormatByteSize(1000), "1000");
  EXPECT_EQ(FormatByteSize(1536), "1536");
  EXPECT_EQ(FormatByteSize(0), "0");
  for (uint64_t n : std::vector<uint64_t>{1, 1024, 1536, 3ull << 30, 5ull << 40, UINT64_MAX}) {
    EXPECT_EQ(*ParseByteSize(FormatByteSize(n)), n);
  }
}

}  // namespace
}  // namespace isowatch::config
