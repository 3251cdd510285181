// SPDX-License-Identifier: Apache-2.0
// The general parser of TimeKiller transactions and ops (TimeKillerParser::ParseTxn, ParseOps),
// on simdjson's On-Demand API: it accepts every transaction the format allows and says what is
// wrong with the others.
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include <fmt/format.h>
#include <simdjson.h>

#include "isowatch/formats/internal/timekiller_internal.h"
#include "isowatch/formats/internal/timekiller_parser.h"
#include "isowatch/formats/internal/timekiller_text.h"
#include "isowatch/formats/internal/timekiller_txn.h"
#include "isowatch/history/history.h"
#include "isowatch/history/timestamp.h"

namespace isowatch::formats::internal {

using history::Timestamp;

std::string_view TimeKillerParser::RawToken(od::value& v) {
  return TrimTrailingSpace(v.raw_json_token());
}

const char* TimeKillerParser::Where(od::value& v, const char* fallback) {
  std::string_view raw = v.raw_json_token();
  return raw.data() == nullptr ? fallback : raw.data();
}

bool TimeKillerParser::FailJson(const char* where, simdjson::error_code error,
                                std::string_view what) {
  switch (error) {
    case simdjson::INCORRECT_TYPE:
    case simdjson::NUMBER_ERROR:
    case simdjson::NUMBER_OUT_OF_RANGE:
      return Fail(where, fmt::format("expected {}", what));
    default:
      return Fail(where, fmt::format("invalid JSON while reading {}: {}", what,
                                     simdjson::error_message(error)));
  }
}

bool TimeKillerParser::FailIterate(simdjson::error_code error, const char* begin, const char* end) {
  const char* where = begin;
  if (error == simdjson::UTF8_ERROR) {
    if (const char* bad = FindInvalidUtf8(begin, end)) where = bad;
    return Fail(where, "invalid UTF-8");
  }
  if (error == simdjson::UNESCAPED_CHARS) {
    if (const char* bad = FindUnescapedControl(begin, end)) where = bad;
    return Fail(where, "unescaped control character in a string");
  }
  return Fail(where, fmt::format("invalid JSON: {}", simdjson::error_message(error)));
}

bool TimeKillerParser::ParseId(od::value& v, const char* where, std::string_view name,
                               std::string_view* text, bool* numeric) {
  od::json_type type;
  if (auto error = v.type().get(type)) {
    return FailJson(where, error, fmt::format("\"{}\" to be an integer or a string", name));
  }
  if (type == od::json_type::string) {
    if (auto error = StringText(v, text)) {
      return FailJson(where, error, fmt::format("\"{}\" to be a valid string", name));
    }
    *numeric = false;
    return true;
  }
  if (type == od::json_type::number) {
    std::string_view raw = RawToken(v);
    if (!IsJsonInteger(raw)) {
      return Fail(where, fmt::format("expected \"{}\" to be an integer or a string, found {}", name,
                                     Shown(raw)));
    }
    *text = raw;
    *numeric = true;
    return true;
  }
  return Fail(where, fmt::format("expected \"{}\" to be an integer or a string, found {}", name,
                                 Shown(RawToken(v))));
}

bool TimeKillerParser::ParseHlcPart(od::value& v, const char* where, std::string_view name,
                                    std::string_view part, int64_t* out) {
  od::json_type type;
  if (v.type().get(type) == simdjson::SUCCESS) {
    if (type == od::json_type::number) {
      if (v.get_int64().get(*out) == simdjson::SUCCESS) return true;
    } else if (type == od::json_type::string) {
      std::string_view s;
      if (StringText(v, &s) == simdjson::SUCCESS && ParseDecimal(s, out)) return true;
      return Fail(where, fmt::format("expected \"{}.{}\" to be a 64-bit integer or a decimal "
                                     "string, found \"{}\"",
                                     name, part, Shown(s)));
    }
  }
  return Fail(where,
              fmt::format("expected \"{}.{}\" to be a 64-bit integer or a decimal string, found {}",
                          name, part, Shown(RawToken(v))));
}

bool TimeKillerParser::ParseHlc(od::value& v, const char* where, std::string_view name,
                                Timestamp* ts) {
  od::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) {
    return Fail(where, fmt::format("expected \"{}\" to be an object {{\"p\", \"l\"}}, found {}",
                                   name, Shown(RawToken(v))));
  }
  bool has_p = false;
  bool has_l = false;
  ts->logical = 0;
  for (auto field_result : obj) {
    if (auto error = field_result.error()) {
      return FailJson(where, error, fmt::format("\"{}\" to be an object {{\"p\", \"l\"}}", name));
    }
    od::field& field = field_result.value_unsafe();
    const char* key_where = field.key().raw() - 1;
    std::string_view key;
    if (auto error = FieldName(field, &key)) {
      return FailJson(key_where, error, "a member name");
    }
    if (key == "p" || key == "l") {
      bool& seen = key == "p" ? has_p : has_l;
      if (seen) {
        return Fail(key_where, fmt::format("\"{}\" has two members \"{}\"", name, key));
      }
      seen = true;
      if (!ParseHlcPart(field.value(), key_where, name, key,
                        key == "p" ? &ts->physical : &ts->logical)) {
        return false;
      }
    }
  }
  if (!has_p) return Fail(where, fmt::format("\"{}\" has no \"p\"", name));
  return true;
}

bool TimeKillerParser::ParseOpValue(od::value& v, const char* where, size_t index, PendingOp* op) {
  od::json_type type;
  if (auto error = v.type().get(type)) {
    return FailJson(where, error, "\"v\" to be an integer, null or an array of integers");
  }
  switch (type) {
    case od::json_type::null: {
      bool is_null = false;
      if (v.is_null().get(is_null) != simdjson::SUCCESS || !is_null) {
        return Fail(where, fmt::format("op #{}: expected \"v\" to be an integer, null or an array "
                                       "of integers, found {}",
                                       index, Shown(RawToken(v))));
      }
      op->form = ValueForm::kNull;
      return true;
    }
    case od::json_type::number:
      if (v.get_int64().get(op->value) != simdjson::SUCCESS) {
        return Fail(where, fmt::format("op #{}: expected \"v\" to be a 64-bit integer, found {}",
                                       index, Shown(RawToken(v))));
      }
      op->form = ValueForm::kInt;
      return true;
    case od::json_type::array: {
      od::array array;
      if (auto error = v.get_array().get(array)) {
        return FailJson(where, error, "\"v\" to be an array of integers");
      }
      op->form = ValueForm::kList;
      op->list_begin = static_cast<uint32_t>(txn_.elements.size());
      size_t element_index = 0;
      for (auto element_result : array) {
        if (auto error = element_result.error()) {
          return FailJson(where, error, fmt::format("op #{}: \"v\" to be an array", index));
        }
        od::value& element = element_result.value_unsafe();
        int64_t x = 0;
        if (element.get_int64().get(x) != simdjson::SUCCESS) {
          return Fail(Where(element, where),
                      fmt::format("op #{}: expected element {} of \"v\" to be a 64-bit integer, "
                                  "found {}",
                                  index, element_index, Shown(RawToken(element))));
        }
        txn_.elements.push_back(x);
        ++element_index;
      }
      op->list_size = static_cast<uint32_t>(txn_.elements.size() - op->list_begin);
      return true;
    }
    default:
      return Fail(where, fmt::format("op #{}: expected \"v\" to be an integer, null or an array of "
                                     "integers, found {}",
                                     index, Shown(RawToken(v))));
  }
}

bool TimeKillerParser::ParseOp(od::value& v, size_t index) {
  const char* op_where = Where(v, nullptr);
  od::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) {
    return Fail(op_where,
                fmt::format("op #{}: expected an object {{\"t\", \"k\", \"v\"}}, found {}", index,
                            Shown(RawToken(v))));
  }
  PendingOp op;
  op.where = op_where;
  std::string_view type_text;
  const char* type_where = nullptr;
  const char* key_member_where = nullptr;
  const char* value_where = nullptr;
  for (auto field_result : obj) {
    if (auto error = field_result.error()) {
      return FailJson(op_where, error, fmt::format("op #{} to be an object", index));
    }
    od::field& field = field_result.value_unsafe();
    const char* member_where = field.key().raw() - 1;
    std::string_view key;
    if (auto error = FieldName(field, &key)) {
      return FailJson(member_where, error, "a member name");
    }
    if (key.size() != 1) continue;
    const char** seen = nullptr;
    switch (key[0]) {
      case 't':
        seen = &type_where;
        break;
      case 'k':
        seen = &key_member_where;
        break;
      case 'v':
        seen = &value_where;
        break;
      default:
        continue;
    }
    if (*seen != nullptr) {
      return Fail(member_where, fmt::format("op #{}: two members \"{}\"", index, key));
    }
    *seen = member_where;
    od::value& value = field.value();
    switch (key[0]) {
      case 't':
        if (StringText(value, &type_text) != simdjson::SUCCESS) {
          return Fail(member_where, fmt::format("op #{}: expected \"t\" to be a string, found {}",
                                                index, Shown(RawToken(value))));
        }
        break;
      case 'k':
        if (value.get_int64().get(op.key) != simdjson::SUCCESS) {
          return Fail(member_where,
                      fmt::format("op #{}: expected \"k\" to be a 64-bit integer, found {}", index,
                                  Shown(RawToken(value))));
        }
        break;
      default:
        if (!ParseOpValue(value, member_where, index, &op)) return false;
        break;
    }
  }
  if (type_where == nullptr) return Fail(op_where, fmt::format("op #{}: missing \"t\"", index));
  if (key_member_where == nullptr) {
    return Fail(op_where, fmt::format("op #{}: missing \"k\"", index));
  }
  if (EqualsLower(type_text, "w") || EqualsLower(type_text, "write")) {
    op.type = OpType::kWrite;
  } else if (EqualsLower(type_text, "r") || EqualsLower(type_text, "read")) {
    op.type = OpType::kRead;
  } else if (EqualsLower(type_text, "a") || EqualsLower(type_text, "append")) {
    op.type = OpType::kAppend;
  } else {
    return Fail(type_where, fmt::format("op #{}: unknown op type \"{}\" (expected w, write, r, "
                                        "read, a or append)",
                                        index, Shown(type_text)));
  }
  if (op.type != OpType::kRead) {
    const char* what = op.type == OpType::kWrite ? "a write" : "an append";
    if (op.form == ValueForm::kMissing) {
      return Fail(op_where, fmt::format("op #{}: {} needs \"v\"", index, what));
    }
    if (op.form == ValueForm::kList) {
      return Fail(
          value_where,
          fmt::format("op #{}: the \"v\" of {} must be one integer, not an array", index, what));
    }
    if (op.type == OpType::kAppend && op.form == ValueForm::kNull) {
      return Fail(
          value_where,
          fmt::format("op #{}: the \"v\" of an append must be an integer, not null", index));
    }
  }
  txn_.ops.push_back(op);
  return true;
}

bool TimeKillerParser::ParseOps(od::value& v, const char* where) {
  od::array array;
  if (v.get_array().get(array) != simdjson::SUCCESS) {
    return Fail(where,
                fmt::format("expected \"ops\" to be an array, found {}", Shown(RawToken(v))));
  }
  size_t index = 0;
  for (auto op_result : array) {
    if (auto error = op_result.error()) {
      return FailJson(where, error, "\"ops\" to be an array of objects");
    }
    od::value& op_value = op_result.value_unsafe();
    if (!ParseOp(op_value, index)) return false;
    ++index;
  }
  return true;
}

bool TimeKillerParser::ParseXid(od::value& v, const char* where) {
  std::string_view raw = RawToken(v);
  if (v.get_uint64().get(txn_.xid) != simdjson::SUCCESS || txn_.xid == 0) {
    return Fail(where, fmt::format("expected \"xid\" to be a positive 64-bit integer, found {}",
                                   Shown(raw)));
  }
  return true;
}

bool TimeKillerParser::ParseSnapshotText(od::value& v, const char* where) {
  std::string_view text;
  if (StringText(v, &text) != simdjson::SUCCESS) {
    return Fail(where, fmt::format("expected \"snapshot\" to be a string \"xmin:xmax:xip,...\", "
                                   "found {}",
                                   Shown(RawToken(v))));
  }
  if (absl::Status s = history::ParseSnapshot(text, &txn_.xmin, &txn_.xmax, &txn_.xip); !s.ok()) {
    return Fail(where, std::string(s.message()));
  }
  txn_.has_snapshot = true;
  return true;
}

bool TimeKillerParser::ParseTxn(od::object& obj, const char* start) {
  txn_.ops.clear();
  txn_.elements.clear();
  txn_.xid = 0;
  txn_.has_snapshot = false;
  const char* tid_where = nullptr;
  const char* sid_where = nullptr;
  const char* sts_where = nullptr;
  const char* cts_where = nullptr;
  const char* ops_where = nullptr;
  const char* xid_where = nullptr;
  const char* snapshot_where = nullptr;
  for (auto field_result : obj) {
    if (auto error = field_result.error()) {
      return FailJson(start, error, "a transaction object");
    }
    od::field& field = field_result.value_unsafe();
    const char* member_where = field.key().raw() - 1;
    std::string_view key;
    if (auto error = FieldName(field, &key)) {
      return FailJson(member_where, error, "a member name");
    }
    if (key.size() != 3 && key != "snapshot") continue;
    const char** seen = nullptr;
    if (key == "snapshot") {
      seen = &snapshot_where;
    } else if (key == "xid") {
      seen = &xid_where;
    } else if (key == "tid") {
      seen = &tid_where;
    } else if (key == "sid") {
      seen = &sid_where;
    } else if (key == "sts") {
      seen = &sts_where;
    } else if (key == "cts") {
      seen = &cts_where;
    } else if (key == "ops") {
      seen = &ops_where;
    } else {
      continue;
    }
    if (*seen != nullptr) return Fail(member_where, fmt::format("two members \"{}\"", key));
    *seen = member_where;
    od::value& value = field.value();
    bool ok = true;
    if (seen == &tid_where) {
      ok = ParseId(value, member_where, "tid", &txn_.tid, &txn_.tid_numeric);
    } else if (seen == &sid_where) {
      ok = ParseId(value, member_where, "sid", &txn_.sid, &txn_.sid_numeric);
    } else if (seen == &sts_where) {
      ok = ParseHlc(value, member_where, "sts", &txn_.sts);
    } else if (seen == &cts_where) {
      ok = ParseHlc(value, member_where, "cts", &txn_.cts);
    } else if (seen == &xid_where) {
      ok = ParseXid(value, member_where);
    } else if (seen == &snapshot_where) {
      ok = ParseSnapshotText(value, member_where);
    } else {
      ok = ParseOps(value, member_where);
    }
    if (!ok) return false;
  }
  if (tid_where == nullptr) return Fail(start, "missing \"tid\"");
  if (sid_where == nullptr) return Fail(start, "missing \"sid\"");
  if (sts_where != nullptr && snapshot_where != nullptr) {
    return Fail(snapshot_where,
                "a transaction with both \"sts\" and \"snapshot\" (a snapshot replaces the start)");
  }
  if (sts_where == nullptr && snapshot_where == nullptr) {
    return Fail(start, "missing \"sts\" (or an isowatch \"snapshot\")");
  }
  if (cts_where == nullptr) return Fail(start, "missing \"cts\"");
  if (ops_where == nullptr) return Fail(start, "missing \"ops\"");
  txn_.has_sts = sts_where != nullptr;
  if (txn_.has_sts && txn_.sts > txn_.cts) {
    return Fail(sts_where, fmt::format("\"sts\" {} is after \"cts\" {}", txn_.sts.ToString(),
                                       txn_.cts.ToString()));
  }
  return true;
}

}  // namespace isowatch::formats::internal
