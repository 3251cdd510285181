// SPDX-License-Identifier: Apache-2.0
#include "isowatch/axioms/own_appends.h"

#include <algorithm>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace isowatch::axioms {

using history::Op;
using history::OpKind;
using history::Value;
using verdict::ReadFault;

std::optional<IntRead> JudgeOwnAppends(const history::History& h, TxnId txn, uint32_t read) {
  const std::span<const Op> ops = h.ops(txn);
  const Op& op = ops[read];
  const std::span<const Value> list = h.list_elements(op);
  // The transaction's appends to the key: value -> operation index.
  absl::flat_hash_map<Value, uint32_t> own;
  std::vector<uint32_t> before;
  for (uint32_t j = 0; j < ops.size(); ++j) {
    if (ops[j].kind() != OpKind::kAppend || ops[j].key() != op.key()) continue;
    own.try_emplace(ops[j].value(), j);
    if (j < read) before.push_back(j);
  }
  if (own.empty()) return std::nullopt;
  for (const Value& e : list) {
    auto it = own.find(e);
    if (it != own.end() && it->second > read) {
      return IntRead{.read_op = read, .fault = ReadFault::kFuture, .own_op = it->second};
    }
  }
  const size_t tail = list.size() - std::min(list.size(), before.size());
  bool ends_with_own = list.size() >= before.size();
  for (size_t a = 0; ends_with_own && a < before.size(); ++a) {
    ends_with_own = list[tail + a] == ops[before[a]].value();
  }
  if (ends_with_own) return std::nullopt;
  if (!list.empty() && own.contains(list.back())) {
    return IntRead{.read_op = read, .fault = ReadFault::kNotLastWrite, .own_op = before.back()};
  }
  for (uint32_t j : before) {
    if (std::find(list.begin(), list.end(), ops[j].value()) == list.end()) {
      return IntRead{.read_op = read, .fault = ReadFault::kNotOwnWrite, .own_op = j};
    }
  }
  for (size_t a = 0; a < before.size(); ++a) {
    if (tail + a >= list.size() || list[tail + a] != ops[before[a]].value()) {
      return IntRead{.read_op = read, .fault = ReadFault::kNotOwnWrite, .own_op = before[a]};
    }
  }
  return IntRead{.read_op = read, .fault = ReadFault::kNotOwnWrite, .own_op = before.front()};
}

}  // namespace isowatch::axioms
