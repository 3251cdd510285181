// SPDX-License-Identifier: Apache-2.0
#include "isowatch/checkers/plume/internal/explain.h"

#include <span>
#include <vector>

#include <fmt/format.h>

namespace isowatch::checkers::plume {
namespace {

using history::Op;
using history::OpKind;
using verdict::Anomaly;

constexpr size_t kListTail = 5;  // list reads longer than this show their last elements only

}  // namespace

std::string Name(const history::History& h, TxnId id) {
  std::string name = h.TxnLabel(id);
  const bool number = !name.empty() && name[0] >= '0' && name[0] <= '9';
  return number ? fmt::format("T{}", name) : name;
}

std::string Name(const history::History& h, const Model& m, uint32_t node) {
  return node == kInit ? std::string("the initial state") : Name(h, m.txn[node]);
}

std::string Title(Anomaly tap) {
  const char* what = "";
  switch (tap) {
    case Anomaly::kTapA:
      what = "thin-air read";
      break;
    case Anomaly::kTapB:
      what = "aborted read";
      break;
    case Anomaly::kTapC:
      what = "future read";
      break;
    case Anomaly::kTapD:
      what = "not my own write";
      break;
    case Anomaly::kTapE:
      what = "not my last write";
      break;
    case Anomaly::kTapF:
      what = "intermediate read";
      break;
    case Anomaly::kTapG:
      what = "cyclic causal order";
      break;
    case Anomaly::kTapH:
    case Anomaly::kTapI:
      what = "non-monotonic read";
      break;
    case Anomaly::kTapJ:
      what = "non-repeatable read";
      break;
    case Anomaly::kTapK:
    case Anomaly::kTapL:
      what = "fractured read";
      break;
    case Anomaly::kTapM:
      what = "causality conflict";
      break;
    case Anomaly::kTapN:
      what = "commit-order conflict";
      break;
    default:
      return verdict::AnomalyName(tap);
  }
  return fmt::format("{} ({})", verdict::AnomalyName(tap), what);
}

std::string ReadText(const history::History& h, const Op& read) {
  const std::string key = h.KeyToString(read.key());
  if (read.kind() != OpKind::kListRead) {
    return fmt::format("key {} = {}", key, h.ValueToString(read.value()));
  }
  std::span<const history::Value> list = h.list_elements(read);
  if (list.size() <= kListTail) return fmt::format("key {} = {}", key, h.ListToString(list));
  const std::string tail = h.ListToString(list.last(kListTail));
  return fmt::format("key {} = [..., {} ({} elements)", key, tail.substr(1), list.size());
}

std::string LastWrite(const history::History& h, const Model& m, uint32_t u, KeyId key) {
  if (u == kInit) return h.ValueToString(h.InitialValue(key));
  std::span<const Op> ops = h.ops(m.txn[u]);
  for (size_t i = ops.size(); i-- > 0;) {
    if (ops[i].is_write() && ops[i].key() == key) return h.ValueToString(ops[i].value());
  }
  return "?";
}

std::string LevelClause(uint8_t bits) {
  std::vector<std::string_view> names;
  if ((bits & kRc) != 0) names.emplace_back("read committed");
  if ((bits & kRa) != 0) names.emplace_back("read atomic");
  if ((bits & kTcc) != 0) names.emplace_back("causal consistency");
  if (names.empty()) return "";
  if (names.size() == 1) return fmt::format("; {} forbids it", names[0]);
  if (names.size() == 2) return fmt::format("; {} and {} forbid it", names[0], names[1]);
  return fmt::format("; {}, {} and {} forbid it", names[0], names[1], names[2]);
}

}  // namespace isowatch::checkers::plume
