// SPDX-License-Identifier: Apache-2.0
#include "isowatch/axioms/ext_rules.h"

#include <algorithm>
#include <vector>

#include "isowatch/axioms/explain.h"

namespace isowatch::axioms {

using history::Value;
using verdict::ExtKind;

bool ListReadMatches(std::span<const Value> committed, std::span<const Value> own,
                     std::span<const Value> observed) {
  if (observed.size() != committed.size() + own.size()) return false;
  return std::equal(committed.begin(), committed.end(), observed.begin()) &&
         std::equal(own.begin(), own.end(), observed.begin() + committed.size());
}

verdict::Violation RegisterViolation(const history::History& h, WriteIndex& writes,
                                     verdict::IsolationLevel level, TxnId reader, KeyId key,
                                     Value expected, TxnId expected_writer, Value observed) {
  ExtFinding f = writes.Classify(reader, key, observed, level);
  return ExplainExtRegister(h, level, reader, key, expected, expected_writer, observed, f);
}

verdict::Violation ListViolation(const history::History& h, WriteIndex& writes,
                                 verdict::IsolationLevel level, TxnId reader, KeyId key,
                                 std::span<const Value> committed, std::span<const Value> own,
                                 std::span<const Value> observed) {
  std::vector<Value> expected(committed.begin(), committed.end());
  expected.insert(expected.end(), own.begin(), own.end());
  // Judge what the read says of the committed list: when it ends with the transaction's own
  // appends, as it should, only the part before them.
  std::span<const Value> judged = observed;
  if (!own.empty() && observed.size() >= own.size() &&
      std::equal(own.begin(), own.end(), observed.end() - static_cast<ptrdiff_t>(own.size()))) {
    judged = observed.first(observed.size() - own.size());
  }
  size_t j = 0;
  while (j < committed.size() && j < judged.size() && committed[j] == judged[j]) ++j;
  ExtFinding f;
  if (j == judged.size()) {
    f.kind = ExtKind::kBefore;  // a proper prefix of the snapshot: a stale version
    if (j > 0 && j < committed.size()) {
      // Unless it ends between two appends of one transaction: an intermediate read.
      const ExtFinding last = writes.Classify(reader, key, judged[j - 1], level);
      if (last.writer.valid() &&
          writes.Classify(reader, key, committed[j], level).writer == last.writer) {
        f = {ExtKind::kIntermediate, last.writer};
      }
    }
  } else {
    f = writes.Classify(reader, key, judged[j], level);
  }
  return ExplainExtList(h, level, reader, key, expected, observed,
                        j == judged.size() ? observed.size() : j, f);
}

}  // namespace isowatch::axioms
