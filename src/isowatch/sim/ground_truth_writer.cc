// SPDX-License-Identifier: Apache-2.0
#include <ostream>
#include <string>

#include <rapidjson/ostreamwrapper.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "isowatch/sim/simulator.h"

namespace isowatch::sim {
namespace {

// One expected violation as a compact JSON object.
std::string EntryJson(const ExpectedViolation& e) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("anomaly");
  w.String(verdict::AnomalyName(e.anomaly));
  if (e.anomaly == verdict::Anomaly::kExt) {
    w.Key("ext_kind");
    w.String(verdict::ExtKindName(e.ext_kind));
  }
  w.Key("txns");
  w.StartArray();
  for (const std::string& id : e.txns) {
    w.String(id.data(), static_cast<rapidjson::SizeType>(id.size()));
  }
  w.EndArray();
  if (e.key) {
    w.Key("key");
    w.Int64(*e.key);
  }
  w.Key("cause");
  w.String(FaultName(e.cause));
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace

void WriteGroundTruth(const SimResult& result, verdict::IsolationLevel level, std::ostream& out) {
  rapidjson::OStreamWrapper stream(out);
  rapidjson::Writer<rapidjson::OStreamWrapper> w(stream);
  w.StartObject();
  w.Key("level");
  w.String(verdict::IsolationLevelName(level));
  w.Key("committed");
  w.Uint64(result.committed);
  w.Key("aborted");
  w.Uint64(result.aborted);
  w.Key("expected");
  w.StartArray();
  // One entry per line, so that the file reads (and diffs) line by line.
  for (const ExpectedViolation& e : result.expected) {
    std::string entry = "\n  " + EntryJson(e);
    w.RawValue(entry.data(), entry.size(), rapidjson::kObjectType);
  }
  w.EndArray();
  w.EndObject();
  out << '\n';
}

}  // namespace isowatch::sim
