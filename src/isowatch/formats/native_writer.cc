// SPDX-License-Identifier: Apache-2.0
//
// Writer of the native history format (docs/history-format.md): a Header record, then one record
// per transaction, each written as soon as it is built.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/strings/escaping.h"
#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <simdjson.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/native.h"
#include "isowatch/v1/history.pb.h"

namespace isowatch::formats {
namespace {

namespace pb = ::isowatch::v1;
using history::History;
using history::KeyInfo;
using history::KeyValue;
using history::Op;
using history::OpKind;
using history::Transaction;
using history::TxnStatus;
using history::Value;
using ::isowatch::KeyId;
using ::isowatch::TxnId;

// True if `s` is an int64 written the way fmt writes one (so that it reads back the same).
bool ParseCanonicalInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  return fmt::format("{}", *out) == s;
}

class RecordWriter {
 public:
  RecordWriter(NativeEncoding encoding, std::ostream& out) : encoding_(encoding), out_(out) {
    json_options_.preserve_proto_field_names = true;
  }

  absl::Status Write(const pb::HistoryRecord& record, std::string_view what) {
    buffer_.clear();
    if (encoding_ == NativeEncoding::kBinary) {
      size_t size = record.ByteSizeLong();
      if (size > kNativeMaxRecordSize) return TooLarge(what, size);
      google::protobuf::io::StringOutputStream stream(&buffer_);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      coded.WriteVarint32(static_cast<uint32_t>(size));
      record.SerializeWithCachedSizes(&coded);
      coded.Trim();
    } else {
      google::protobuf::util::Status status =
          google::protobuf::util::MessageToJsonString(record, &buffer_, json_options_);
      if (!status.ok()) {
        return absl::InvalidArgumentError(
            fmt::format("{}: cannot be written as JSON: {}", what,
                        std::string_view(status.message().data(), status.message().size())));
      }
      if (buffer_.size() > kNativeMaxRecordSize) return TooLarge(what, buffer_.size());
      buffer_.push_back('\n');
    }
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    if (!out_) return absl::UnavailableError(fmt::format("{}: the output stream failed", what));
    return absl::OkStatus();
  }

 private:
  static absl::Status TooLarge(std::string_view what, size_t size) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: the record takes {} bytes, over the limit of {}", what, size, kNativeMaxRecordSize));
  }

  NativeEncoding encoding_;
  std::ostream& out_;
  google::protobuf::util::JsonPrintOptions json_options_;
  std::string buffer_;
};

class Encoder {
 public:
  explicit Encoder(const History& h) : h_(h) {}

  void Key(KeyId key, pb::Datum* d) const {
    const KeyInfo& info = h_.key(key);
    if (info.is_int) {
      d->set_int_(info.payload);
    } else {
      std::string_view b = h_.bytes(static_cast<uint32_t>(info.payload));
      d->set_bytes(b.data(), b.size());
    }
  }

  // Leaves `d` unset for an absent value.
  void MaybeValue(Value v, pb::Datum* d) const {
    if (v.is_int()) {
      d->set_int_(v.as_int());
    } else if (v.is_bytes()) {
      std::string_view b = h_.bytes(v.bytes_index());
      d->set_bytes(b.data(), b.size());
    }
  }

  static absl::Status AbsentError(std::string_view what) {
    return absl::InvalidArgumentError(
        fmt::format("{} is absent; the native format holds no absent value there", what));
  }

  absl::Status RequiredValue(Value v, pb::Datum* d, std::string_view what) const {
    if (v.absent()) return AbsentError(what);
    MaybeValue(v, d);
    return absl::OkStatus();
  }

  absl::Status Elements(std::span<const Value> elements,
                        google::protobuf::RepeatedPtrField<pb::Datum>* out,
                        std::string_view what) const {
    for (size_t i = 0; i < elements.size(); ++i) {
      RETURN_IF_ERROR(
          RequiredValue(elements[i], out->Add(), fmt::format("{}, element {}", what, i)));
    }
    return absl::OkStatus();
  }

  // Orders keys by kind (integers first) and then by value, so that the output does not depend
  // on the order in which keys were interned.
  bool KeyLess(KeyId a, KeyId b) const {
    const KeyInfo& x = h_.key(a);
    const KeyInfo& y = h_.key(b);
    if (x.is_int != y.is_int) return x.is_int;
    if (x.is_int) return x.payload < y.payload;
    return h_.bytes(static_cast<uint32_t>(x.payload)) < h_.bytes(static_cast<uint32_t>(y.payload));
  }

  // Absent first, then integers, then bytes; by value within a kind.
  bool ValueLess(Value a, Value b) const {
    if (a.kind() != b.kind()) return a.kind() < b.kind();
    if (a.is_int()) return a.as_int() < b.as_int();
    if (a.is_bytes()) return h_.bytes(a.bytes_index()) < h_.bytes(b.bytes_index());
    return false;
  }

  void Pair(const KeyValue& kv, pb::KeyValue* out) const {
    Key(kv.key, out->mutable_key());
    if (!kv.value.absent()) MaybeValue(kv.value, out->mutable_value());
  }

  absl::Status Header(pb::Header* header) const {
    header->set_version(kNativeFormatVersion);
    (*header->mutable_metadata())["producer"] = "isowatch";
    header->set_time_unit(h_.info().time_unit);
    const history::InitialState& initial = h_.initial();
    pb::InitialState* out = header->mutable_initial();
    if (!initial.default_value.absent()) {
      MaybeValue(initial.default_value, out->mutable_default_value());
    }

    std::vector<KeyId> keys;
    for (const auto& [key, value] : initial.registers) keys.push_back(key);
    std::sort(keys.begin(), keys.end(), [this](KeyId a, KeyId b) { return KeyLess(a, b); });
    for (KeyId key : keys) {
      pb::InitialState::Register* r = out->add_registers();
      Key(key, r->mutable_key());
      Value v = initial.registers.at(key);
      if (!v.absent()) MaybeValue(v, r->mutable_value());
      if (initial.versions.contains(key)) r->set_installed(true);
    }
    keys.clear();
    for (const auto& [key, range] : initial.lists) keys.push_back(key);
    std::sort(keys.begin(), keys.end(), [this](KeyId a, KeyId b) { return KeyLess(a, b); });
    for (KeyId key : keys) {
      pb::InitialState::List* l = out->add_lists();
      Key(key, l->mutable_key());
      RETURN_IF_ERROR(Elements(h_.InitialList(key), l->mutable_elements(),
                               fmt::format("the initial list {}", h_.KeyToString(key))));
    }
    std::vector<KeyValue> tombstones(h_.tombstones().begin(), h_.tombstones().end());
    std::sort(tombstones.begin(), tombstones.end(), [this](const KeyValue& a, const KeyValue& b) {
      if (a.key != b.key) return KeyLess(a.key, b.key);
      return ValueLess(a.value, b.value);
    });
    for (const KeyValue& kv : tombstones) Pair(kv, out->add_tombstones());
    return absl::OkStatus();
  }

  absl::Status Txn(TxnId id, pb::Transaction* out) const {
    const Transaction& t = h_.txn(id);
    std::string_view name = h_.txn_name(id);
    int64_t number = 0;
    if (t.ext_id_numeric && ParseCanonicalInt(name, &number)) {
      out->set_id_int(number);
    } else if (simdjson::validate_utf8(name.data(), name.size())) {
      out->set_id_str(name.data(), name.size());
    } else {
      return absl::InvalidArgumentError(fmt::format(
          "transaction \"{}\": the id is not UTF-8, which a string id must be", Escape(name)));
    }
    // Error messages only: built when one is needed, never on the way of a valid transaction.
    auto what = [name] { return fmt::format("transaction {}", name); };
    std::string_view session = h_.session_name(t.session);
    if (h_.session_numeric(t.session) && ParseCanonicalInt(session, &number)) {
      out->set_session_int(number);
    } else if (!simdjson::validate_utf8(session.data(), session.size())) {
      return absl::InvalidArgumentError(
          fmt::format("{}: the session \"{}\" is not UTF-8, which a string session must be", what(),
                      Escape(session)));
    } else if (!session.empty() || h_.session_numeric(t.session)) {
      out->set_session_str(session.data(), session.size());
    }
    out->set_seq(t.seq);
    switch (t.status) {
      case TxnStatus::kCommitted:
        out->set_status(pb::Transaction::COMMITTED);
        break;
      case TxnStatus::kAborted:
        out->set_status(pb::Transaction::ABORTED);
        break;
      case TxnStatus::kUnknown:
        out->set_status(pb::Transaction::UNKNOWN);
        break;
    }
    if (t.has_start) {
      out->mutable_start()->set_physical(t.start.physical);
      out->mutable_start()->set_logical(t.start.logical);
    }
    if (t.has_commit) {
      out->mutable_commit()->set_physical(t.commit.physical);
      out->mutable_commit()->set_logical(t.commit.logical);
    }
    if (t.has_real_time) {
      out->mutable_real_time()->set_invoke(t.invoke_time);
      if (t.complete_time != history::Transaction::kNeverCompleted) {
        out->mutable_real_time()->set_complete(t.complete_time);
      }
    }
    if (const uint64_t xid = h_.xid(t); xid != 0) out->set_xid(xid);
    if (h_.has_snapshot(t)) {
      const history::SnapshotView s = h_.snapshot(t);
      pb::Snapshot* snap = out->mutable_snapshot();
      snap->set_xmin(s.xmin);
      snap->set_xmax(s.xmax);
      snap->mutable_xip()->Add(s.xip.begin(), s.xip.end());
    }
    std::span<const Op> ops = h_.ops(t);
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      pb::Operation* o = out->add_ops();
      Key(op.key(), o->mutable_key());
      auto op_what = [&what, i](std::string_view part) {
        return fmt::format("{}, ops[{}]: {}", what(), i, part);
      };
      switch (op.kind()) {
        case OpKind::kRead:
          o->set_kind(pb::Operation::READ);
          if (op.unknown()) {
            o->set_unknown(true);
          } else if (!op.value().absent()) {
            MaybeValue(op.value(), o->mutable_value());
          }
          break;
        case OpKind::kWrite:
          o->set_kind(pb::Operation::WRITE);
          if (op.value().absent()) return AbsentError(op_what("the written value"));
          MaybeValue(op.value(), o->mutable_value());
          break;
        case OpKind::kAppend:
          o->set_kind(pb::Operation::APPEND);
          if (op.value().absent()) return AbsentError(op_what("the appended value"));
          MaybeValue(op.value(), o->mutable_value());
          break;
        case OpKind::kListRead:
          o->set_kind(pb::Operation::LIST_READ);
          if (op.unknown()) {
            o->set_unknown(true);
          } else if (op.list_size() > 0) {
            std::span<const Value> elements = h_.list_elements(op);
            for (size_t e = 0; e < elements.size(); ++e) {
              if (elements[e].absent()) {
                return AbsentError(op_what(fmt::format("the list read, element {}", e)));
              }
              MaybeValue(elements[e], o->mutable_list()->add_elements());
            }
          }
          break;
      }
    }
    for (const history::RangeRead& r : h_.range_reads(id)) {
      pb::RangeRead* o = out->add_range_reads();
      o->set_position(r.position);
      if (!r.low.unbounded) Key(r.low.key, o->mutable_low());
      if (!r.high.unbounded) Key(r.high.key, o->mutable_high());
      for (const KeyValue& kv : h_.range_live(r)) Pair(kv, o->add_live());
      for (const KeyValue& kv : h_.range_dead(r)) Pair(kv, o->add_dead());
    }
    return absl::OkStatus();
  }

 private:
  static std::string Escape(std::string_view s) {
    return absl::CHexEscape(absl::string_view(s.data(), s.size()));
  }

  const History& h_;
};

}  // namespace

absl::Status EncodeHeader(const History& h, pb::Header* header) {
  return Encoder(h).Header(header);
}

absl::Status EncodeTxn(const History& h, TxnId id, pb::Transaction* out) {
  return Encoder(h).Txn(id, out);
}

absl::Status WriteNative(const History& h, NativeEncoding encoding, std::ostream& out) {
  RecordWriter writer(encoding, out);
  Encoder encoder(h);
  pb::HistoryRecord record;
  RETURN_IF_ERROR(encoder.Header(record.mutable_header()));
  RETURN_IF_ERROR(writer.Write(record, "the header"));
  for (uint32_t i = 0; i < h.size(); ++i) {
    record.Clear();
    TxnId id(i);
    RETURN_IF_ERROR(encoder.Txn(id, record.mutable_txn()));
    RETURN_IF_ERROR(writer.Write(record, fmt::format("transaction {}", h.txn_name(id))));
  }
  out.flush();
  if (!out) return absl::UnavailableError("the output stream failed");
  return absl::OkStatus();
}

}  // namespace isowatch::formats
