// SPDX-License-Identifier: Apache-2.0
#include "tests/unit/checkers/plume/plume_testing.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "isowatch/history/history_builder.h"

namespace isowatch::checkers::plume::testing {
namespace {

using history::HistoryBuilder;
using history::TxnStatus;
using history::Value;
using verdict::IsolationLevel;

// A transaction of the text: its id, session and operations in order.
struct TextTxn {
  int64_t id = 0;
  int64_t session = 0;
  std::vector<TextOp> ops;
};

// Committed transactions in order of first appearance.
std::vector<TextTxn> Committed(const std::vector<TextOp>& ops) {
  std::vector<TextTxn> txns;
  std::map<int64_t, size_t> index;
  for (const TextOp& op : ops) {
    if (op.txn < 0) continue;
    auto [it, fresh] = index.try_emplace(op.txn, txns.size());
    if (fresh) txns.push_back({op.txn, op.session, {}});
    txns[it->second].ops.push_back(op);
  }
  return txns;
}

// The list a read of `value` from `key` returns in the list form (BuildList).
std::vector<int64_t> ListOf(const std::vector<TextOp>& ops, int64_t key, int64_t value) {
  std::vector<int64_t> list;
  if (value == 0) return list;
  for (const TextOp& op : ops) {
    if (!op.write || op.key != key) continue;
    if (op.value == value) {
      list.push_back(value);
      return list;
    }
    if (op.txn >= 0) list.push_back(op.value);
  }
  return {value};
}

// Emits the transactions of `ops` into `b`: the aborted writes of each session as one aborted
// transaction, then the committed transactions.
void Emit(HistoryBuilder& b, const std::vector<TextOp>& ops, bool lists, int64_t* clock) {
  auto emit = [&](const std::string& id, const std::string& session, TxnStatus status,
                  const std::vector<TextOp>& txn_ops) {
    history::TxnHeader header{.id = id, .session = session, .status = status};
    if (clock != nullptr) {
      ++*clock;
      header.start = history::Timestamp{*clock, 0};
      if (status == TxnStatus::kCommitted) header.commit = history::Timestamp{*clock, 0};
    }
    if (!b.BeginTxn(header).ok()) std::abort();
    for (const TextOp& op : txn_ops) {
      const KeyId k = b.IntKey(op.key);
      if (op.write && lists) {
        b.Append(k, Value::Int(op.value));
      } else if (op.write) {
        b.Write(k, Value::Int(op.value));
      } else if (lists) {
        std::vector<Value> elements;
        for (int64_t e : ListOf(ops, op.key, op.value)) elements.push_back(Value::Int(e));
        b.ListRead(k, elements);
      } else {
        b.Read(k, Value::Int(op.value));
      }
    }
    b.EndTxn();
  };
  std::map<int64_t, std::vector<TextOp>> aborted;
  for (const TextOp& op : ops) {
    if (op.txn < 0 && op.write) aborted[op.session].push_back(op);
  }
  for (const auto& [session, writes] : aborted) {
    emit(fmt::format("abort{}", session), fmt::format("abort{}", session), TxnStatus::kAborted,
         writes);
  }
  for (const TextTxn& t : Committed(ops)) {
    emit(std::to_string(t.id), std::to_string(t.session), TxnStatus::kCommitted, t.ops);
  }
}

history::History Build(const std::vector<std::vector<TextOp>>& parts, bool lists,
                       bool timestamps = false) {
  HistoryBuilder b;
  b.SetDefaultInitialValue(Value::Int(0));
  int64_t clock = 0;
  for (const std::vector<TextOp>& ops : parts) Emit(b, ops, lists, timestamps ? &clock : nullptr);
  auto h = std::move(b).Finish();
  if (!h.ok()) std::abort();
  return *std::move(h);
}

constexpr int kInitTxn = -1;

}  // namespace

std::vector<TextOp> ParseOps(std::string_view text) {
  std::vector<TextOp> ops;
  std::string s(text);
  const char* p = s.c_str();
  while (*p != '\0') {
    while (*p == ' ' || *p == '\n' || *p == '\t') ++p;
    if (*p == '\0') break;
    char kind = 0;
    long long k = 0;
    long long v = 0;
    long long sess = 0;
    long long t = 0;
    int used = 0;
    // NOLINTNEXTLINE(cert-err34-c): test input, checked by the count
    if (std::sscanf(p, "%c(%lld,%lld,%lld,%lld)%n", &kind, &k, &v, &sess, &t, &used) != 5) {
      std::fprintf(stderr, "bad op at: %s\n", p);
      std::abort();
    }
    ops.push_back({.write = kind == 'w', .key = k, .value = v, .session = sess, .txn = t});
    p += used;
  }
  return ops;
}

std::string FormatOps(const std::vector<TextOp>& ops) {
  std::string out;
  for (const TextOp& op : ops) {
    out += fmt::format("{}{}({},{},{},{})", out.empty() ? "" : " ", op.write ? 'w' : 'r', op.key,
                       op.value, op.session, op.txn);
  }
  return out;
}

history::History BuildKv(const std::vector<TextOp>& ops) { return Build({ops}, false); }
history::History BuildList(const std::vector<TextOp>& ops) { return Build({ops}, true); }
history::History BuildKvParts(const std::vector<std::vector<TextOp>>& parts) {
  return Build(parts, false, true);
}

std::string Labels(const PlumeResult& r, IsolationLevel level) {
  std::set<char> letters;
  for (const verdict::Violation& v : r.violations) {
    if (std::find(v.levels.begin(), v.levels.end(), level) == v.levels.end()) continue;
    const std::string name = verdict::AnomalyName(v.anomaly);
    letters.insert(name.rfind("TAP-", 0) == 0 ? name[4] : '*');
  }
  return std::string(letters.begin(), letters.end());
}

bool Violates(const PlumeResult& r, IsolationLevel level) { return !Labels(r, level).empty(); }

OracleVerdict Oracle(const std::vector<TextOp>& ops, bool lists) {
  const std::vector<TextTxn> txns = Committed(ops);
  const int n = static_cast<int>(txns.size());
  if (n > 7) std::abort();
  // Committed writes: (key, value) -> (txn, op index).
  std::map<std::pair<int64_t, int64_t>, std::pair<int, int>> writer;
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < static_cast<int>(txns[t].ops.size()); ++i) {
      const TextOp& op = txns[t].ops[i];
      if (op.write) writer[{op.key, op.value}] = {t, i};
    }
  }
  auto writes = [&](int t, int64_t key, int from, int to) {  // writes key in ops [from, to)
    for (int i = std::max(from, 0); i < to && i < static_cast<int>(txns[t].ops.size()); ++i) {
      if (txns[t].ops[i].write && txns[t].ops[i].key == key) return true;
    }
    return false;
  };
  auto writes_key = [&](int t, int64_t key) {
    return t == kInitTxn || writes(t, key, 0, static_cast<int>(txns[t].ops.size()));
  };
  struct Wr {
    int t1;  // writer, or kInitTxn
    int t3;
    int64_t key;
    int pos;
  };
  std::vector<Wr> wr;
  std::vector<std::pair<int, int>> ww;  // lists: append order
  const OracleVerdict invalid;
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < static_cast<int>(txns[t].ops.size()); ++i) {
      const TextOp& op = txns[t].ops[i];
      if (op.write) continue;
      int64_t value = op.value;
      if (lists) {
        const std::vector<int64_t> list = ListOf(ops, op.key, op.value);
        int prev = kInitTxn;
        for (int64_t e : list) {
          auto it = writer.find({op.key, e});
          if (it == writer.end()) return invalid;  // an element nobody committed
          if (prev != kInitTxn && prev != it->second.first) ww.emplace_back(prev, it->second.first);
          prev = it->second.first;
        }
        value = list.empty() ? 0 : list.back();
        // A read returns the whole list: every committed append it lacks comes after its last.
        for (const auto& [kv, w] : writer) {
          if (kv.first != op.key || prev == kInitTxn || w.first == prev) continue;
          if (std::find(list.begin(), list.end(), kv.second) == list.end()) {
            ww.emplace_back(prev, w.first);
          }
        }
      }
      int wt = kInitTxn;
      int wi = 0;
      if (value != 0) {
        auto it = writer.find({op.key, value});
        if (it == writer.end()) return invalid;  // no committed write: thin air or aborted
        wt = it->second.first;
        wi = it->second.second;
      }
      if (wt == t) {
        if (wi > i) return invalid;                        // RC-(1)
        if (writes(t, op.key, wi + 1, i)) return invalid;  // RC-(2)
        continue;
      }
      if (writes(t, op.key, 0, i)) return invalid;  // RC-(2)
      if (wt != kInitTxn && writes(wt, op.key, wi + 1, static_cast<int>(txns[wt].ops.size()))) {
        return invalid;  // RC-(3)
      }
      wr.push_back({wt, t, op.key, i});
    }
  }
  // Session order (transitive) and the causal order.
  std::vector<std::vector<bool>> so(n, std::vector<bool>(n, false));
  std::vector<std::vector<bool>> wr_any(n, std::vector<bool>(n, false));
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) so[a][b] = txns[a].session == txns[b].session;
  }
  for (const Wr& r : wr) {
    if (r.t1 != kInitTxn) wr_any[r.t1][r.t3] = true;
  }
  std::vector<std::vector<bool>> co(n, std::vector<bool>(n, false));
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) co[a][b] = so[a][b] || wr_any[a][b];
  }
  for (int k = 0; k < n; ++k) {
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) co[a][b] = co[a][b] || (co[a][k] && co[k][b]);
    }
  }
  for (int a = 0; a < n; ++a) {
    if (co[a][a]) return invalid;
  }
  // Commit-order constraints each level's axiom sets: (before, after); kInitTxn comes first.
  auto constraints = [&](IsolationLevel level) {
    std::vector<std::pair<int, int>> out;
    for (const Wr& rx : wr) {
      const int t3 = rx.t3;
      for (int t2 = 0; t2 < n; ++t2) {
        if (t2 == rx.t1 || t2 == t3 || !writes_key(t2, rx.key)) continue;
        bool premise = false;
        if (level == IsolationLevel::kCausal) premise = co[t2][t3];
        if (level == IsolationLevel::kReadAtomic) premise = so[t2][t3] || wr_any[t2][t3];
        if (level == IsolationLevel::kReadCommitted) {
          for (const Wr& ry : wr) {
            premise =
                premise || (ry.t3 == t3 && ry.t1 == t2 && ry.key != rx.key && ry.pos < rx.pos);
          }
        }
        if (premise) out.emplace_back(t2, rx.t1);
      }
    }
    return out;
  };
  auto satisfiable = [&](IsolationLevel level) {
    const std::vector<std::pair<int, int>> forced = constraints(level);
    for (const auto& [before, after] : forced) {
      if (after == kInitTxn) return false;  // nothing commits before the initial state
    }
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::vector<int> at(n);
    do {
      for (int i = 0; i < n; ++i) at[order[i]] = i;
      bool ok = true;
      for (int a = 0; a < n && ok; ++a) {
        for (int b = 0; b < n && ok; ++b) ok = !co[a][b] || at[a] < at[b];
      }
      for (const auto& [a, b] : ww) ok = ok && at[a] < at[b];
      for (const auto& [a, b] : forced) ok = ok && (a == kInitTxn || at[a] < at[b]);
      if (ok) return true;
    } while (std::next_permutation(order.begin(), order.end()));
    return false;
  };
  return {.rc = satisfiable(IsolationLevel::kReadCommitted),
          .ra = satisfiable(IsolationLevel::kReadAtomic),
          .tcc = satisfiable(IsolationLevel::kCausal)};
}

}  // namespace isowatch::checkers::plume::testing
