// SPDX-License-Identifier: Apache-2.0
#include "isowatch/report/check_report.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <rapidjson/ostreamwrapper.h>
#include <rapidjson/writer.h>

namespace isowatch::report {
namespace {

using history::History;
using history::Op;
using history::OpKind;
using history::Transaction;
using verdict::Anomaly;
using verdict::ExtKind;
using verdict::IsolationLevel;
using verdict::ReadFault;
using verdict::Violation;

// "r(0)=1 w(0)=2" for the operations of `t` on `key` (all operations if `key` is invalid),
// at most `limit` of them.
std::string DescribeOps(const History& h, TxnId id, KeyId key, size_t limit = 8) {
  std::string out;
  size_t shown = 0;
  size_t skipped = 0;
  for (const Op& op : h.ops(id)) {
    if (key.valid() && op.key() != key) continue;
    if (shown == limit) {
      ++skipped;
      continue;
    }
    if (!out.empty()) out += ' ';
    std::string k = h.KeyToString(op.key());
    std::string v;
    if (op.unknown()) {
      v = "?";
    } else if (op.kind() == OpKind::kListRead) {
      v = h.ListToString(h.list_elements(op));
    } else {
      v = h.ValueToString(op.value());
    }
    switch (op.kind()) {
      case OpKind::kRead:
      case OpKind::kListRead:
        out += fmt::format("r({})={}", k, v);
        break;
      case OpKind::kWrite:
        out += fmt::format("w({})={}", k, v);
        break;
      case OpKind::kAppend:
        out += fmt::format("append({},{})", k, v);
        break;
    }
    ++shown;
  }
  if (skipped > 0) out += fmt::format(" … (+{} more)", skipped);
  if (out.empty()) out = "(no operations on the key)";
  return out;
}

std::string TxnLine(const History& h, TxnId id) {
  if (!h.has_txn(id)) return fmt::format("{} (no longer held in memory)", h.TxnLabel(id));
  const Transaction& t = h.txn(id);
  std::string out = fmt::format("{} (session {}", h.txn_name(id), h.session_name(t.session));
  out += t.has_start ? fmt::format(", start {}", t.start.ToString()) : ", no start";
  out += t.has_commit ? fmt::format(", commit {}", t.commit.ToString()) : ", no commit";
  if (!t.committed()) out += fmt::format(", {}", history::TxnStatusName(t.status));
  out += ")";
  return out;
}

// The role of the i-th transaction of a violation, for the text report.
const char* Role(const Violation& v, size_t i) {
  switch (v.anomaly) {
    case Anomaly::kSession:
      return i == 0 ? "txn" : "session predecessor";
    case Anomaly::kInt:
      return "txn";
    case Anomaly::kExt:
      return i == 0 ? "reader" : "wrote it";
    case Anomaly::kNoConflict:
      return i == 0 ? "first committer" : "concurrent writer";
    case Anomaly::kG1a:
    case Anomaly::kG1b:
      return i == 0 ? "reader" : "wrote it";
    case Anomaly::kIncompatibleOrder:
      return i == 0 ? "reader" : "read the other list";
    case Anomaly::kThinAir:
    case Anomaly::kDuplicateElements:
      return "reader";
    case Anomaly::kTapA:
    case Anomaly::kTapC:
    case Anomaly::kTapE:
      return "txn";
    case Anomaly::kTapB:
    case Anomaly::kTapD:
    case Anomaly::kTapF:
      return i == 0 ? "reader" : "wrote it";
    case Anomaly::kTapJ:
      return i == 0 ? "reader" : "wrote one value";
    case Anomaly::kTapH:
    case Anomaly::kTapI:
    case Anomaly::kTapK:
    case Anomaly::kTapL:
    case Anomaly::kTapM:
    case Anomaly::kTapN:
      return i == 0 ? "reader" : (i == 1 ? "wrote the value read" : "wrote the missed value");
    case Anomaly::kTapG:
      return "in the cycle";
    case Anomaly::kGSIa:
      return i == 0 ? "depended on" : "dependent";
    case Anomaly::kG0:
    case Anomaly::kG1c:
    case Anomaly::kGSingle:
    case Anomaly::kG2Item:
    case Anomaly::kGSIb:
      return "in the cycle";
  }
  return "txn";
}

std::string LevelNames(const std::vector<IsolationLevel>& levels) {
  std::vector<std::string_view> names;
  names.reserve(levels.size());
  for (IsolationLevel level : levels) names.emplace_back(IsolationLevelName(level));
  return fmt::format("{}", fmt::join(names, ", "));
}

// "  chronos (si, ser): INVALID, 3 violations, 0.012 s; external_reads 40, ..."
void WriteCheckerLine(const CheckerOutcome& c, std::ostream& out) {
  out << fmt::format("  {} ({}): ", c.name, LevelNames(c.levels));
  if (c.violations > 0) {
    out << fmt::format("INVALID, {} violation{}", c.violations, c.violations == 1 ? "" : "s");
  } else {
    out << (c.complete ? "VALID" : "UNKNOWN");
  }
  if (!c.skipped.empty()) {
    out << fmt::format(" (skipped: {})\n", c.skipped);
    return;
  }
  if (!c.undecided.empty()) {
    out << fmt::format(" (undecided: {})", c.undecided);
  } else if (!c.complete) {
    out << (c.windows > 1
                ? fmt::format(" (out of time in {} of {} windows)", c.incomplete_windows, c.windows)
                : std::string(" (out of time)"));
  }
  out << fmt::format(", {} transactions, {:.3f} s", c.transactions_checked, c.seconds);
  if (c.windows > 1) out << fmt::format(", {} windows", c.windows);
  if (c.findings_out_of_scope > 0) {
    out << fmt::format(", {} findings out of window scope", c.findings_out_of_scope);
  }
  std::vector<std::string> stats;
  for (const auto& [name, value] : c.stats) stats.push_back(fmt::format("{} {}", name, value));
  if (!stats.empty()) out << fmt::format("; {}", fmt::join(stats, ", "));
  out << "\n";
}

std::string Title(const Violation& v) {
  std::string out = AnomalyName(v.anomaly);
  if (v.ext_kind != ExtKind::kNone) out += fmt::format(" ({})", ExtKindName(v.ext_kind));
  if (v.read_fault != ReadFault::kNone) out += fmt::format(" [{}]", ReadFaultName(v.read_fault));
  if (v.cycle_kind != verdict::CycleKind::kNone) {
    out += fmt::format(" <{}>", verdict::CycleKindName(v.cycle_kind));
  }
  return out;
}

}  // namespace

void WriteTextReport(const History& h, const CheckReport& report, std::ostream& out,
                     size_t max_detailed) {
  size_t n = report.violations.size();
  size_t shown = max_detailed == 0 ? n : std::min(n, max_detailed);
  for (size_t i = 0; i < shown; ++i) {
    const Violation& v = report.violations[i];
    out << fmt::format("[{}] {}", i + 1, Title(v));
    if (v.key.valid()) out << fmt::format(" on key {}", h.KeyToString(v.key));
    if (!report.checkers.empty()) {
      out << fmt::format(
          " ({} at {})", v.checker,
          LevelNames(v.levels.empty() ? std::vector<IsolationLevel>{v.level} : v.levels));
    }
    out << "\n";
    for (size_t j = 0; j < v.txns.size(); ++j) {
      out << fmt::format("    {:<19} {}\n", Role(v, j), TxnLine(h, v.txns[j]));
      out << fmt::format("    {:<19} {}\n", "", DescribeOps(h, v.txns[j], v.key));
    }
    if (!v.expected.empty() || !v.observed.empty()) {
      out << fmt::format("    {:<19} {}\n    {:<19} {}\n", "expected", v.expected, "observed",
                         v.observed);
    }
    out << fmt::format("    {}\n\n", v.explanation);
  }
  if (shown < n)
    out << fmt::format("... and {} more violations (use --json for all)\n\n", n - shown);

  std::map<std::string, size_t> counts;
  for (const Violation& v : report.violations) ++counts[Title(v)];
  out << fmt::format("{}: {} transactions checked", report.source, report.transactions_checked);
  if (report.level) out << fmt::format(" at {}", IsolationLevelName(*report.level));
  out << fmt::format(" by {}", report.checker);
  if (report.transactions_skipped > 0) {
    out << fmt::format(" ({} skipped: not committed, or without what the checker needs)",
                       report.transactions_skipped);
  }
  out << "\n";
  if (!report.format.empty()) {
    out << fmt::format("format: {}", report.format);
    if (!h.info().dialect.empty()) out << fmt::format(" ({})", h.info().dialect);
    out << "\n";
  }
  for (const history::SourceNote& note : h.info().notes) {
    out << fmt::format("note: {} {}, e.g. {}\n", note.count, note.kind, note.example);
  }
  if (report.window_transactions > 0) {
    out << fmt::format("windows: {} transactions each, {} of overlap\n", report.window_transactions,
                       report.window_overlap);
  }
  for (const CheckerOutcome& c : report.checkers) WriteCheckerLine(c, out);
  std::vector<std::string_view> unknown;
  bool out_of_time = false;
  for (const CheckerOutcome& c : report.checkers) {
    if (c.complete) continue;
    unknown.emplace_back(c.name);
    out_of_time = out_of_time || (c.undecided.empty() && c.skipped.empty());
  }
  const std::string why = out_of_time ? "did not finish in time" : "could not decide everything";
  if (!report.picked.empty()) out << fmt::format("picked: {}\n", report.picked);
  if (report.valid()) {
    out << "result: VALID, no violations\n";
  } else if (n == 0) {
    out << fmt::format("result: UNKNOWN, no violations found, but {} {}\n",
                       fmt::join(unknown, ", "), why);
  } else {
    out << fmt::format("result: INVALID, {} violation{}:", n, n == 1 ? "" : "s");
    for (const auto& [name, count] : counts) out << fmt::format(" {} {};", name, count);
    if (!unknown.empty()) out << fmt::format(" {} {} (UNKNOWN)", fmt::join(unknown, ", "), why);
    out << "\n";
  }
  if (report.online) {
    const OnlineCounts& o = *report.online;
    out << fmt::format(
        "online: {} batches of {} (delay N({}, {}) ms at {} tps, {}), {} flip-flops, {} late "
        "arrivals, {} duplicates, {} horizon misses, max {} provisional reads, {} retained "
        "versions, {} retained txns\n",
        o.batches, o.batch, o.mean_ms, o.sigma_ms, o.rate_tps,
        o.watermarks ? "watermarks" : fmt::format("timeout {} ms", o.timeout_ms), o.flip_flops,
        o.late_arrivals, o.duplicates, o.horizon_misses, o.max_provisional_reads,
        o.max_retained_versions, o.max_retained_txns);
    if (o.repeated_reports > 0) {
      out << fmt::format("warning: {} violations were reported more than once\n",
                         o.repeated_reports);
    }
  }
  out << fmt::format("time: read {:.3f} s, check {:.3f} s\n", report.read_seconds,
                     report.check_seconds);
}

namespace {

void WriteTxnId(const History& h, const Violation& v, TxnId id,
                rapidjson::Writer<rapidjson::OStreamWrapper>& w) {
  if (!h.has_txn(id)) {
    const std::string label = TxnLabel(h, v, id);
    w.String(label.data(), static_cast<rapidjson::SizeType>(label.size()));
    return;
  }
  std::string_view name = h.txn_name(id);
  if (h.txn(id).ext_id_numeric) {
    // Numeric ids are written back as numbers, as in the input.
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), value);
    if (ec == std::errc() && ptr == name.data() + name.size()) {
      w.Int64(value);
      return;
    }
  }
  w.String(name.data(), static_cast<rapidjson::SizeType>(name.size()));
}

void Str(rapidjson::Writer<rapidjson::OStreamWrapper>& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// `name`: an object of counts by name.
void WriteCounts(rapidjson::Writer<rapidjson::OStreamWrapper>& w, const char* name,
                 const std::map<std::string, size_t>& counts) {
  w.Key(name);
  w.StartObject();
  for (const auto& [key, count] : counts) {
    Str(w, key);
    w.Uint64(count);
  }
  w.EndObject();
}

// "checkers": one object per plug-in, and "window" when the history was cut into windows.
void WriteCheckersJson(const CheckReport& report, rapidjson::Writer<rapidjson::OStreamWrapper>& w) {
  w.Key("checkers");
  w.StartArray();
  for (const CheckerOutcome& c : report.checkers) {
    w.StartObject();
    w.Key("name");
    Str(w, c.name);
    w.Key("levels");
    w.StartArray();
    for (IsolationLevel level : c.levels) w.String(IsolationLevelName(level));
    w.EndArray();
    w.Key("result");
    w.String(c.violations > 0 ? "invalid" : (c.complete ? "valid" : "unknown"));
    w.Key("complete");
    w.Bool(c.complete);
    if (!c.undecided.empty()) {
      w.Key("undecided");
      Str(w, c.undecided);
    }
    if (!c.skipped.empty()) {
      w.Key("skipped");
      Str(w, c.skipped);
    }
    w.Key("seconds");
    w.Double(c.seconds);
    const std::pair<const char*, uint64_t> counts[] = {
        {"violations", c.violations},
        {"transactions", c.transactions_checked},
        {"transactions_skipped", c.transactions_skipped},
        {"findings_out_of_scope", c.findings_out_of_scope},
        {"windows", c.windows},
        {"incomplete_windows", c.incomplete_windows}};
    for (const auto& [name, value] : counts) {
      w.Key(name);
      w.Uint64(value);
    }
    w.Key("stats");
    w.StartObject();
    for (const auto& [name, value] : c.stats) {
      Str(w, name);
      w.Uint64(value);
    }
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  if (report.window_transactions > 0) {
    w.Key("window");
    w.StartObject();
    w.Key("transactions");
    w.Uint64(report.window_transactions);
    w.Key("overlap");
    w.Uint64(report.window_overlap);
    w.EndObject();
  }
}

}  // namespace

std::string ViolationToJson(const History& h, const Violation& v, bool with_checker) {
  std::ostringstream out;
  rapidjson::OStreamWrapper os(out);
  rapidjson::Writer<rapidjson::OStreamWrapper> w(os);
  w.StartObject();
  if (with_checker) {
    w.Key("checker");
    Str(w, v.checker);
  }
  w.Key("anomaly");
  w.String(AnomalyName(v.anomaly));
  if (v.ext_kind != ExtKind::kNone) {
    w.Key("ext_kind");
    w.String(ExtKindName(v.ext_kind));
  }
  if (v.read_fault != ReadFault::kNone) {
    w.Key("read_fault");
    w.String(ReadFaultName(v.read_fault));
  }
  if (v.cycle_kind != verdict::CycleKind::kNone) {
    w.Key("cycle_kind");
    w.String(verdict::CycleKindName(v.cycle_kind));
  }
  w.Key("txns");
  w.StartArray();
  for (TxnId id : v.txns) WriteTxnId(h, v, id, w);
  w.EndArray();
  w.Key("key");
  if (!v.key.valid()) {
    w.Null();
  } else if (h.key(v.key).is_int) {
    w.Int64(h.key(v.key).payload);
  } else {
    Str(w, h.bytes(static_cast<uint32_t>(h.key(v.key).payload)));
  }
  w.Key("expected");
  Str(w, v.expected);
  w.Key("observed");
  Str(w, v.observed);
  w.Key("explanation");
  Str(w, v.explanation);
  if (!v.levels.empty()) {
    // A checker that judges several levels at once (adya) names every level the finding breaks.
    w.Key("levels");
    w.StartArray();
    for (IsolationLevel level : v.levels) w.String(IsolationLevelName(level));
    w.EndArray();
  }
  w.EndObject();
  os.Flush();
  return out.str();
}

void WriteJsonReport(const History& h, const CheckReport& report, std::ostream& out) {
  rapidjson::OStreamWrapper os(out);
  rapidjson::Writer<rapidjson::OStreamWrapper> w(os);
  w.StartObject();
  w.Key("valid");
  w.Bool(report.valid());
  w.Key("result");
  w.String(report.valid() ? "valid" : (report.violations.empty() ? "unknown" : "invalid"));
  w.Key("level");
  if (report.level) {
    w.String(IsolationLevelName(*report.level));
  } else {
    w.Null();
  }
  w.Key("checker");
  Str(w, report.checker);
  if (!report.picked.empty()) {
    w.Key("picked");
    Str(w, report.picked);
  }
  w.Key("source");
  Str(w, report.source);
  w.Key("format");
  Str(w, report.format);
  if (!h.info().dialect.empty()) {
    w.Key("dialect");
    Str(w, h.info().dialect);
  }
  w.Key("source_notes");
  w.StartArray();
  for (const history::SourceNote& note : h.info().notes) {
    w.StartObject();
    w.Key("kind");
    Str(w, note.kind);
    w.Key("count");
    w.Uint64(note.count);
    w.Key("example");
    Str(w, note.example);
    w.EndObject();
  }
  w.EndArray();
  w.Key("transactions");
  w.Uint64(report.transactions_checked);
  w.Key("transactions_skipped");
  w.Uint64(report.transactions_skipped);
  std::map<std::string, size_t> counts;
  std::map<std::string, size_t> ext_kinds;
  std::map<std::string, size_t> read_faults;
  for (const Violation& v : report.violations) {
    ++counts[AnomalyName(v.anomaly)];
    if (v.ext_kind != ExtKind::kNone) ++ext_kinds[ExtKindName(v.ext_kind)];
    if (v.read_fault != ReadFault::kNone) ++read_faults[ReadFaultName(v.read_fault)];
  }
  WriteCounts(w, "counts", counts);
  WriteCounts(w, "ext_kinds", ext_kinds);
  WriteCounts(w, "read_faults", read_faults);
  w.Key("violations");
  w.StartArray();
  for (const Violation& v : report.violations) {
    std::string json = ViolationToJson(h, v, /*with_checker=*/!report.checkers.empty());
    w.RawValue(json.data(), json.size(), rapidjson::kObjectType);
  }
  w.EndArray();
  if (!report.checkers.empty()) WriteCheckersJson(report, w);
  if (report.online) {
    const OnlineCounts& o = *report.online;
    w.Key("flip_flops");
    w.Uint64(o.flip_flops);
    w.Key("late_arrivals");
    w.Uint64(o.late_arrivals);
    w.Key("online");
    w.StartObject();
    w.Key("mean_ms");
    w.Double(o.mean_ms);
    w.Key("sigma_ms");
    w.Double(o.sigma_ms);
    w.Key("batch");
    w.Uint64(o.batch);
    w.Key("seed");
    w.Uint64(o.seed);
    w.Key("rate_tps");
    w.Double(o.rate_tps);
    w.Key("watermarks");
    w.Bool(o.watermarks);
    w.Key("timeout_ms");
    w.Int64(o.timeout_ms);
    w.Key("retention");
    w.Int64(o.retention);
    w.Key("batches");
    w.Uint64(o.batches);
    w.Key("max_disorder_ms");
    w.Double(o.max_disorder_ms);
    w.Key("flip_flops");
    w.Uint64(o.flip_flops);
    w.Key("late_arrivals");
    w.Uint64(o.late_arrivals);
    w.Key("duplicates");
    w.Uint64(o.duplicates);
    w.Key("horizon_misses");
    w.Uint64(o.horizon_misses);
    w.Key("repeated_reports");
    w.Uint64(o.repeated_reports);
    w.Key("max_provisional_reads");
    w.Uint64(o.max_provisional_reads);
    w.Key("max_retained_versions");
    w.Uint64(o.max_retained_versions);
    w.Key("max_retained_txns");
    w.Uint64(o.max_retained_txns);
    w.EndObject();
  }
  w.Key("timing");
  w.StartObject();
  w.Key("read_seconds");
  w.Double(report.read_seconds);
  w.Key("check_seconds");
  w.Double(report.check_seconds);
  w.EndObject();
  w.EndObject();
  out << "\n";
}

}  // namespace isowatch::report
