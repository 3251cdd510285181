// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "isowatch/history/history_builder.h"
#include "isowatch/verdict/violation.h"

namespace isowatch::testing {

// A compact way to write small histories in tests:
//   TestHistory t;
//   t.Txn("1", "s", 1, 2).W(0, 1);
//   t.Txn("2", "s", 3, 4).R(0, 1);
//   history::History h = t.Build();
// Keys and values are integers; R(k, std::nullopt) reads an absent value.
class TestHistory {
 public:
  TestHistory& Txn(std::string id, std::string session, int64_t start, int64_t commit,
                   history::TxnStatus status = history::TxnStatus::kCommitted) {
    return TxnHlc(std::move(id), std::move(session), {start, 0}, {commit, 0}, status);
  }
  TestHistory& TxnHlc(std::string id, std::string session, history::Timestamp start,
                      history::Timestamp commit,
                      history::TxnStatus status = history::TxnStatus::kCommitted) {
    txns_.push_back({std::move(id), std::move(session), start, commit, status, {}});
    return *this;
  }
  // A transaction without timestamps, as black-box histories hold them.
  TestHistory& Untimed(std::string id, std::string session,
                       history::TxnStatus status = history::TxnStatus::kCommitted) {
    txns_.push_back({std::move(id), std::move(session), std::nullopt, std::nullopt, status, {}});
    return *this;
  }
  // A transaction as PostgreSQL records it: its xid (0 = none), its snapshot `xmin:xmax:xip`
  // (empty = none) instead of a start, and its commit LSN as the commit timestamp.
  TestHistory& Pg(std::string id, std::string session, uint64_t xid, std::string snapshot,
                  int64_t commit_lsn, history::TxnStatus status = history::TxnStatus::kCommitted) {
    txns_.push_back({std::move(id),
                     std::move(session),
                     std::nullopt,
                     history::Timestamp{commit_lsn, 0},
                     status,
                     {},
                     xid,
                     std::move(snapshot)});
    return *this;
  }
  // The client's real-time interval of the last transaction added.
  TestHistory& RealTime(int64_t invoke, int64_t complete) {
    txns_.back().real_time = history::TxnHeader::RealTime{invoke, complete};
    return *this;
  }
  // A transaction with a start timestamp and an xid.
  TestHistory& Xid(uint64_t xid) {
    txns_.back().xid = xid;
    return *this;
  }
  TestHistory& R(int64_t key, std::optional<int64_t> v) { return Add({OpKind::kRead, key, v, {}}); }
  TestHistory& W(int64_t key, int64_t v) { return Add({OpKind::kWrite, key, v, {}}); }
  TestHistory& A(int64_t key, int64_t v) { return Add({OpKind::kAppend, key, v, {}}); }
  TestHistory& L(int64_t key, std::vector<int64_t> list) {
    return Add({OpKind::kListRead, key, std::nullopt, std::move(list)});
  }
  TestHistory& DefaultInitial(int64_t v) {
    default_initial_ = v;
    return *this;
  }
  // The unit of the real-time intervals (HistoryInfo::time_unit), e.g. "ms".
  TestHistory& TimeUnit(std::string unit) {
    time_unit_ = std::move(unit);
    return *this;
  }

  history::History Build() const {
    history::HistoryBuilder b;
    if (default_initial_) b.SetDefaultInitialValue(history::Value::Int(*default_initial_));
    b.set_time_unit(time_unit_);
    for (const auto& t : txns_) {
      history::TxnHeader header{.id = t.id,
                                .session = t.session,
                                .status = t.status,
                                .start = t.start,
                                .commit = t.commit,
                                .real_time = t.real_time,
                                .xid = t.xid};
      uint64_t xmin = 0;
      uint64_t xmax = 0;
      std::vector<uint64_t> xip;
      if (!t.snapshot.empty()) {
        if (!history::ParseSnapshot(t.snapshot, &xmin, &xmax, &xip).ok()) std::abort();
        header.snapshot = history::SnapshotView{xmin, xmax, xip};
      }
      auto st = b.BeginTxn(header);
      if (!st.ok()) std::abort();
      for (const auto& op : t.ops) {
        KeyId k = b.IntKey(op.key);
        history::Value v = op.value ? history::Value::Int(*op.value) : history::Value::Absent();
        switch (op.kind) {
          case OpKind::kRead:
            b.Read(k, v);
            break;
          case OpKind::kWrite:
            b.Write(k, v);
            break;
          case OpKind::kAppend:
            b.Append(k, v);
            break;
          case OpKind::kListRead: {
            std::vector<history::Value> elements;
            for (int64_t e : op.list) elements.push_back(history::Value::Int(e));
            b.ListRead(k, elements);
            break;
          }
        }
      }
      b.EndTxn();
    }
    auto h = std::move(b).Finish();
    if (!h.ok()) std::abort();
    return *std::move(h);
  }

 private:
  using OpKind = history::OpKind;
  struct TestOp {
    OpKind kind;
    int64_t key;
    std::optional<int64_t> value;
    std::vector<int64_t> list;
  };
  struct TestTxn {
    std::string id;
    std::string session;
    std::optional<history::Timestamp> start;
    std::optional<history::Timestamp> commit;
    history::TxnStatus status;
    std::vector<TestOp> ops;
    uint64_t xid = 0;
    std::string snapshot;  // "xmin:xmax:xip,..." or empty
    std::optional<history::TxnHeader::RealTime> real_time;
  };
  TestHistory& Add(TestOp op) {
    txns_.back().ops.push_back(std::move(op));
    return *this;
  }

  std::vector<TestTxn> txns_;
  std::optional<int64_t> default_initial_;
  std::string time_unit_;
};

// "EXT/before T3,T1 k=0" — a violation in one line, for compact assertions.
inline std::string Summarize(const history::History& h, const verdict::Violation& v) {
  std::string out = verdict::AnomalyName(v.anomaly);
  if (v.ext_kind != verdict::ExtKind::kNone)
    out += fmt::format("/{}", verdict::ExtKindName(v.ext_kind));
  for (size_t i = 0; i < v.txns.size(); ++i) {
    out += fmt::format("{}{}", i == 0 ? " " : ",", h.txn_name(v.txns[i]));
  }
  if (v.key.valid()) out += fmt::format(" k={}", h.KeyToString(v.key));
  return out;
}

inline std::vector<std::string> SummarizeAll(const history::History& h,
                                             const std::vector<verdict::Violation>& vs) {
  std::vector<std::string> out;
  for (const auto& v : vs) out.push_back(Summarize(h, v));
  return out;
}

}  // namespace isowatch::testing
