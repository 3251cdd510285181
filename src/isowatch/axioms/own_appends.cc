// SPDX-License-Identifier: Apache-2.0
#include "isowatch/axioms/own_appends.h"

#include <algorithm>
#include <span>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace isowatch::axioms {

using history::Op;
using history::OpKind;
using history::Value;
using verdict::ReadFault;

std::optional<IntRead> JudgeOwnAppends(const history::History& h, TxnId txn, uint32_t read) {
  const std::span<const Op> ops = h.ops(txn);
  const Op& op = ops[read];
  const std::span<const Value> list = h.list_elements(op);
  auto holds = [&](Value v) { return std::find(list.begin(), list.end(), v) != list.end(); };
  // The transaction's appends to the key before the read; one after it that the list holds is a
  // future read. A transaction appends to a key a few times, so plain scans do.
  absl::InlinedVector<uint32_t, 8> before;
  for (uint32_t j = 0; j < ops.size(); ++j) {
    if (ops[j].kind() != OpKind::kAppend || ops[j].key() != op.key()) continue;
    if (j < read) {
      before.push_back(j);
    } else if (holds(ops[j].value())) {
      return IntRead{.read_op = read, .fault = ReadFault::kFuture, .own_op = j};
    }
  }
  if (before.empty()) return std::nullopt;
  const size_t tail = list.size() - std::min(list.size(), before.size());
  bool ends_with_own = list.size() >= before.size();
  for (size_t a = 0; ends_with_own && a < before.size(); ++a) {
    ends_with_own = list[tail + a] == ops[before[a]].value();
  }
  if (ends_with_own) return std::nullopt;
  const bool ends_with_an_own =
      !list.empty() && std::any_of(before.begin(), before.end(),
                                   [&](uint32_t j) { return ops[j].value() == list.back(); });
  if (ends_with_an_own) {
    return IntRead{.read_op = read, .fault = ReadFault::kNotLastWrite, .own_op = before.back()};
  }
  for (uint32_t j : before) {
    if (!holds(ops[j].value())) {
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

std::optional<IntRead> JudgeOwnWrite(uint32_t read, std::optional<uint32_t> source,
                                     std::optional<uint32_t> last_own) {
  if (source.has_value() && *source >= read) {
    return IntRead{.read_op = read, .fault = ReadFault::kFuture, .own_op = *source};
  }
  if (!last_own.has_value() || source == last_own) return std::nullopt;
  return IntRead{.read_op = read,
                 .fault = source.has_value() ? ReadFault::kNotLastWrite : ReadFault::kNotOwnWrite,
                 .own_op = *last_own};
}

}  // namespace isowatch::axioms
