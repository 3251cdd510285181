// SPDX-License-Identifier: Apache-2.0
// A live history saved (HistoryBuilder::SaveLive) and restored into a fresh builder
// (HistoryBuilder::RestoreLive) is the same history through every accessor, and the two builders
// go on the same way: the same ids, pool indices, positions and refusals for what comes next.
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isowatch/history/history_builder.h"
#include "isowatch/v1/history_checkpoint.pb.h"

namespace isowatch::history {
namespace {

// Transaction i: one of three sessions ("a" implicit positions, "given" with sequence numbers,
// "42" numeric and implicit); an id "t<i>", or a number for every fourth; writes of integer and
// byte-string registers, reads (absent ones too), appends of integers and byte strings to lists
// 100..103 and "list-b", list reads (some empty), unknown reads of a register and of a list; an
// xid and a snapshot for some, an xid alone for others; aborted and unknown ones; an origin.
void AddTxn(HistoryBuilder& b, int i) {
  const uint64_t x = 1000 + static_cast<uint64_t>(i);
  const std::vector<uint64_t> xip = {x - 1, x - 2 - static_cast<uint64_t>(i % 2), x - 1};
  const bool numeric = i % 4 == 3;
  const std::string name = numeric ? fmt::format("{}", 5000 + i) : fmt::format("t{}", i);
  const char* sessions[] = {"a", "given", "42"};
  TxnHeader header{.id = name,
                   .id_numeric = numeric,
                   .session = sessions[i % 3],
                   .session_numeric = i % 3 == 2,
                   .status = i % 7 == 5    ? TxnStatus::kAborted
                             : i % 11 == 6 ? TxnStatus::kUnknown
                                           : TxnStatus::kCommitted,
                   .start = Timestamp{int64_t{10} * i, i % 2},
                   .commit = Timestamp{int64_t{10} * i + 5, 0},
                   .source_offset = 100 * static_cast<uint64_t>(i),
                   .xid = i % 4 == 1 || i % 5 == 0 ? x : 0};
  if (i % 3 == 1) header.seq = 1000 - i;
  if (i % 4 == 1) {
    header.start.reset();
    header.snapshot = SnapshotView{x - 3, x, xip};
  }
  ASSERT_TRUE(b.BeginTxn(header).ok());
  b.Write(b.IntKey(i % 5), Value::Int(i));
  b.Write(b.BytesKey(fmt::format("reg-{}", i % 3)), b.BytesValue(fmt::format("val-{}", i)));
  b.Read(b.IntKey(9), i % 2 == 0 ? Value::Absent() : Value::Int(i - 1));
  const KeyId list = b.IntKey(100 + i % 4);
  b.Append(list, i % 2 == 0 ? Value::Int(i) : b.BytesValue(fmt::format("el-{}", i % 6)));
  if (i % 3 == 0) {
    b.ListRead(list, {});
  } else {
    const std::vector<Value> elements = {Value::Int(i - 1), b.BytesValue("el-1")};
    b.ListRead(list, elements);
  }
  const KeyId list_b = b.BytesKey("list-b");
  if (i % 6 == 0) b.Append(list_b, Value::Int(i));
  b.Read(list_b, Value::Absent());  // a list read, once list-b is appended to
  if (i % 5 == 2) b.UnknownRead(b.IntKey(i % 5));
  if (i % 5 == 3) b.UnknownRead(list);
  auto id = b.EndLiveTxn();
  ASSERT_TRUE(id.ok()) << id.status();
  b.SetOrigin(*id, static_cast<uint16_t>(i % 3));
}

std::string RawValue(Value v) {
  return fmt::format("{}:{}", static_cast<int>(v.kind()), v.payload());
}

// Every accessor of `h`, line by line.
std::vector<std::string> Dump(const History& h) {
  std::vector<std::string> out;
  out.push_back(
      fmt::format("size {} first {} ops {} keys {} sessions {} retired {} model {} "
                  "source {} snapshots {}",
                  h.size(), h.first_txn(), h.op_count(), h.key_count(), h.session_count(),
                  h.retired_count(), DataModelName(h.data_model()), h.source(), h.has_snapshots()));
  for (uint32_t i = 0; i < h.size() + 2; ++i) {
    const TxnId id(i);
    const Transaction& t = h.txn(id);
    std::string line = fmt::format(
        "txn {} held {} label {} name {} find {} | ext {} numeric {} session {} seq {} prev {} "
        "status {} start {}/{} commit {}/{} origin {} ops {}+{} xid_slot {} offset {} xid {}",
        i, h.has_txn(id), h.TxnLabel(id), h.txn_name(id),
        h.txn_name(id).empty() ? -2 : static_cast<int64_t>(h.FindTxn(h.txn_name(id)).value()),
        t.ext_id, t.ext_id_numeric, t.session.value(), t.seq, t.session_prev.value(),
        TxnStatusName(t.status), t.has_start, t.start.ToString(), t.has_commit, t.commit.ToString(),
        t.origin, t.ops_begin, t.ops_count, t.xid_slot, t.source_offset, h.xid(t));
    if (h.has_snapshot(t)) line += fmt::format(" snapshot {}", FormatSnapshot(h.snapshot(t)));
    for (const Op& op : h.ops(id)) {
      line += fmt::format(" | {} {} {}{}", static_cast<int>(op.kind()), op.key().value(),
                          h.KeyToString(op.key()), op.unknown() ? " unknown" : "");
      if (op.kind() == OpKind::kListRead) {
        line += fmt::format(" @{}+{} {}", op.list_offset(), op.list_size(),
                            h.ListToString(h.list_elements(op)));
        for (const Value v : h.list_elements(op)) line += " " + RawValue(v);
      } else {
        line += fmt::format(" {} {}", RawValue(op.value()), h.ValueToString(op.value()));
      }
    }
    out.push_back(line);
  }
  for (uint32_t i = 0; i < h.size(); ++i) {
    std::string line = fmt::format("visible to {}:", i);
    for (uint64_t w = h.first_txn(); w < h.size(); ++w) {
      line += fmt::format(" {}", static_cast<int>(h.Visible(TxnId(w), TxnId(i))));
    }
    out.push_back(line);
  }
  for (uint32_t k = 0; k < h.key_count(); ++k) {
    const KeyId key(k);
    const KeyInfo& info = h.key(key);
    if (info.forgotten) {
      out.push_back(fmt::format("key {} forgotten", k));
      continue;
    }
    const KeyId found = info.is_int ? h.FindIntKey(info.payload)
                                    : h.FindBytesKey(h.bytes(static_cast<uint32_t>(info.payload)));
    out.push_back(
        fmt::format("key {} int {} list {} payload {} {} found {} initial {} {} "
                    "absent-reads-initial {} list {}",
                    k, info.is_int, info.is_list, info.payload, h.KeyToString(key), found.value(),
                    RawValue(h.InitialValue(key)), h.ValueToString(h.InitialValue(key)),
                    h.AbsentReadsInitial(key), h.ListToString(h.InitialList(key))));
  }
  out.push_back(fmt::format("missing keys {} {}", h.FindIntKey(-12345).valid(),
                            h.FindBytesKey("no such key").valid()));
  for (uint32_t s = 0; s < h.session_count(); ++s) {
    out.push_back(fmt::format("session {} {} {}", s, h.session_name(SessionId(s)),
                              h.session_numeric(SessionId(s))));
  }
  const InitialState& initial = h.initial();
  std::vector<std::string> sets;
  for (const auto& [key, v] : initial.registers) {
    sets.push_back(fmt::format("register {} {}", key.value(), RawValue(v)));
  }
  for (const auto& [key, range] : initial.lists) {
    sets.push_back(fmt::format("list {} @{}+{}", key.value(), range.offset, range.size));
  }
  for (const KeyId key : initial.versions) sets.push_back(fmt::format("version {}", key.value()));
  std::sort(sets.begin(), sets.end());
  out.push_back(fmt::format("initial default {}: {}", RawValue(initial.default_value),
                            fmt::join(sets, ", ")));
  return out;
}

void ExpectSameHistory(const History& a, const History& b) {
  const std::vector<std::string> da = Dump(a);
  const std::vector<std::string> db = Dump(b);
  ASSERT_EQ(da.size(), db.size()) << da[0] << "\n" << db[0];
  for (size_t i = 0; i < da.size(); ++i) EXPECT_EQ(da[i], db[i]);
}

// What a builder answers to further work: ids, pool indices and refusals, in order, in `log`.
void Continue(HistoryBuilder& b, int from, std::vector<std::string>& log) {
  auto end = [&]() {
    const absl::StatusOr<TxnId> id = b.EndLiveTxn();
    log.push_back(id.ok() ? fmt::format("id {}", id->value()) : id.status().ToString());
  };
  auto begin = [&](const std::string& name, const char* session, std::optional<int64_t> seq) {
    const absl::Status s = b.BeginTxn({.id = name, .session = session, .seq = seq});
    log.push_back(s.ToString());
    return s.ok();
  };
  const auto name = [&](std::string_view prefix) { return fmt::format("{}-{}", prefix, from); };
  log.push_back(fmt::format("keys {} {} {} {}", b.IntKey(3).value(), b.IntKey(7777).value(),
                            b.BytesKey("reg-1").value(), b.BytesKey("fresh-key").value()));
  log.push_back(fmt::format("values {} {} {}", RawValue(b.BytesValue("val-3")),
                            RawValue(b.BytesValue("fresh-value")), RawValue(b.BytesValue("el-1"))));
  // Register keys appended to, a list key written: refused.
  ASSERT_TRUE(begin(name("conflict-1"), "a", std::nullopt));
  b.Append(b.IntKey(1), Value::Int(1));
  end();
  ASSERT_TRUE(begin(name("conflict-3"), "42", std::nullopt));
  b.Append(b.IntKey(3), Value::Int(1));  // written before, not in the initial state
  end();
  ASSERT_TRUE(begin(name("conflict-2"), "new-session", std::nullopt));
  b.Write(b.BytesKey("list-b"), Value::Int(1));
  end();
  for (int i = from; i < from + 6; ++i) {
    AddTxn(b, i);
    log.push_back(fmt::format("added {}", b.txn_count()));
  }
  // A session with sequence numbers given a transaction without one, and the reverse: refused.
  ASSERT_TRUE(begin(name("no-seq"), "given", std::nullopt));
  end();
  ASSERT_TRUE(begin(name("seq"), "a", 3));
  end();
  // Ids refused since the last release are taken, as are those held; a forgotten one (t2 at
  // first) may come back.
  for (const std::string& taken : {std::string("refused"), fmt::format("t{}", from)}) {
    if (begin(taken, "a", std::nullopt)) b.AbandonTxn();
  }
  ASSERT_TRUE(begin(fmt::format("t{}", from - 47), "new-session", 5));
  b.Write(b.BytesKey("fresh-key"), b.BytesValue("another"));
  b.Read(b.IntKey(7777), Value::Absent());
  end();
  ASSERT_TRUE(begin(name("n1"), "new-session", 9));
  b.Append(b.IntKey(7777), Value::Int(1));
  end();
  ASSERT_TRUE(begin(name("n2"), "a", std::nullopt));
  b.Read(b.IntKey(7777), Value::Absent());
  end();
  log.push_back(fmt::format("sessions {} txns {} keys {}", b.live_history().session_count(),
                            b.txn_count(), b.live_history().key_count()));
}

// A live history with initial state, refused transactions, and transactions released, retired
// and held.
void Build(HistoryBuilder& b) {
  b.StartLive(DataModel::kMixed);
  b.set_source("live stream");
  b.SetDefaultInitialValue(Value::Int(-1));
  b.SetInitialRegister(b.IntKey(1), Value::Int(10));
  b.SetInitialRegister(b.BytesKey("reg-0"), b.BytesValue("initial"));
  b.SetInitialVersion(b.IntKey(2), Value::Int(20));
  b.SetInitialVersion(b.IntKey(4), Value::Absent());
  const std::vector<Value> initial_list = {Value::Int(-7), b.BytesValue("el-0")};
  b.SetInitialList(b.IntKey(100), initial_list);
  b.SetInitialList(b.IntKey(102), {});
  for (int i = 0; i < 24; ++i) AddTxn(b, i);
  ASSERT_TRUE(b.BeginTxn({.id = "refused", .session = "a"}).ok());
  b.Write(b.IntKey(101), Value::Int(1));
  ASSERT_FALSE(b.EndLiveTxn().ok());
  for (int i = 24; i < 40; ++i) AddTxn(b, i);
  b.ReleaseLive(TxnId(30), [](TxnId id) { return id.value() % 6 == 0 || id.value() == 17; });
  for (int i = 40; i < 48; ++i) AddTxn(b, i);
  b.ReleaseLive(TxnId(36), [](TxnId id) { return id.value() % 12 == 0 || id.value() == 31; });
  ASSERT_TRUE(b.BeginTxn({.id = "refused", .session = "a"}).ok());
  b.Append(b.IntKey(1), Value::Int(1));
  ASSERT_FALSE(b.EndLiveTxn().ok());
  AddTxn(b, 48);
}

absl::StatusOr<HistoryBuilder> RoundTrip(const HistoryBuilder& original) {
  v1::HistoryCheckpoint saved;
  original.SaveLive(&saved);
  v1::HistoryCheckpoint parsed;
  if (!parsed.ParseFromString(saved.SerializeAsString())) {
    return absl::InternalError("the checkpoint does not parse");
  }
  HistoryBuilder restored;
  absl::Status s = restored.RestoreLive(parsed);
  if (!s.ok()) return s;
  return restored;
}

// `original` and `restored` answer the same to the same work (Continue from transaction `from`),
// hold the same history after it, and save the same checkpoint.
void ExpectSameFromHere(HistoryBuilder& original, HistoryBuilder& restored, int from) {
  std::vector<std::string> log;
  std::vector<std::string> restored_log;
  ASSERT_NO_FATAL_FAILURE(Continue(original, from, log));
  ASSERT_NO_FATAL_FAILURE(Continue(restored, from, restored_log));
  EXPECT_EQ(restored_log, log);
  ASSERT_NO_FATAL_FAILURE(ExpectSameHistory(original.live_history(), restored.live_history()));
  v1::HistoryCheckpoint a;
  v1::HistoryCheckpoint b;
  original.SaveLive(&a);
  restored.SaveLive(&b);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
}

TEST(HistoryCheckpointTest, RestoresExactlyAndGoesOnTheSameWay) {
  HistoryBuilder original;
  ASSERT_NO_FATAL_FAILURE(Build(original));
  const History& h = original.live_history();
  ASSERT_EQ(h.size(), 49u);
  ASSERT_EQ(h.first_txn(), 36u);
  ASSERT_EQ(h.retired_count(), 4u);  // 0, 12, 24, 31
  ASSERT_TRUE(h.has_snapshots());

  absl::StatusOr<HistoryBuilder> restored = RoundTrip(original);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(restored->live());
  ASSERT_NO_FATAL_FAILURE(ExpectSameHistory(h, restored->live_history()));
  EXPECT_EQ(restored->live_history().bytes(original.BytesValue("val-3").bytes_index()), "val-3");

  // The same work gives the same answers, and the same histories.
  std::vector<std::string> log;
  std::vector<std::string> restored_log;
  ASSERT_NO_FATAL_FAILURE(Continue(original, 49, log));
  ASSERT_NO_FATAL_FAILURE(Continue(*restored, 49, restored_log));
  EXPECT_EQ(restored_log, log);
  EXPECT_NE(std::find(log.begin(), log.end(), "id 55"), log.end());
  ASSERT_NO_FATAL_FAILURE(ExpectSameHistory(h, restored->live_history()));

  // And the same releases.
  std::vector<uint32_t> asked_original;
  std::vector<uint32_t> asked_restored;
  original.ReleaseLive(TxnId(50), [&](TxnId id) {
    asked_original.push_back(id.value());
    return id.value() % 5 == 0;
  });
  restored->ReleaseLive(TxnId(50), [&](TxnId id) {
    asked_restored.push_back(id.value());
    return id.value() % 5 == 0;
  });
  std::sort(asked_original.begin(), asked_original.end());
  std::sort(asked_restored.begin(), asked_restored.end());
  EXPECT_EQ(asked_original, asked_restored);
  ASSERT_NO_FATAL_FAILURE(ExpectSameHistory(h, restored->live_history()));
  ASSERT_NO_FATAL_FAILURE(ExpectSameFromHere(original, *restored, 70));
}

// A live history forgets the byte strings neither it nor the caller holds (CollectBytes): all it
// holds reads the same, the forgotten indices are handed out again, and a checkpoint restores
// the pool, forgotten indices included, so that the two builders go on the same way.
TEST(HistoryCheckpointTest, ForgetsByteStringsNothingHoldsAndRestoresThePool) {
  HistoryBuilder original;
  ASSERT_NO_FATAL_FAILURE(Build(original));
  const History& h = original.live_history();
  const std::vector<std::string> before = Dump(h);
  // Written by transactions 2 and 5, both released and not retired: only the caller holds the
  // first (as the engine would a version's value), nothing the second.
  const size_t held = h.byte_strings_held();
  const uint32_t val2 = original.BytesValue("val-2").bytes_index();
  const uint32_t val5 = original.BytesValue("val-5").bytes_index();
  const uint32_t val40 = original.BytesValue("val-40").bytes_index();  // transaction 40 is held
  const uint32_t initial = original.BytesValue("initial").bytes_index();
  ASSERT_EQ(h.byte_strings_held(), held);  // all were there already
  std::vector<uint64_t> marks;
  MarkBytes(Value::BytesRef(val2), marks);
  const size_t forgotten = original.CollectBytes(marks);
  EXPECT_GT(forgotten, 10u);
  EXPECT_EQ(h.byte_strings_held(), held - forgotten);
  EXPECT_EQ(h.byte_count(), held);
  const std::vector<std::string> after = Dump(h);
  EXPECT_EQ(after, before);
  EXPECT_EQ(h.bytes(val2), "val-2");
  EXPECT_EQ(h.bytes(val5), "");
  EXPECT_EQ(h.bytes(val40), "val-40");
  EXPECT_EQ(h.bytes(initial), "initial");
  EXPECT_TRUE(h.FindBytesKey("reg-2").valid());
  // Nothing more to forget.
  std::vector<uint64_t> again = marks;
  EXPECT_EQ(original.CollectBytes(again), 0u);

  absl::StatusOr<HistoryBuilder> restored = RoundTrip(original);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_NO_FATAL_FAILURE(ExpectSameHistory(h, restored->live_history()));
  EXPECT_EQ(restored->live_history().byte_strings_held(), h.byte_strings_held());
  EXPECT_EQ(restored->live_history().bytes(static_cast<uint32_t>(val2)), "val-2");
  // "val-3" and "val-5" come back at forgotten indices, the same in both.
  v1::HistoryCheckpoint saved;
  original.SaveLive(&saved);
  EXPECT_GT(saved.forgotten_byte_strings_size(), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectSameFromHere(original, *restored, 49));
  EXPECT_EQ(original.BytesValue("val-5"), restored->BytesValue("val-5"));
  EXPECT_LT(original.BytesValue("val-5").bytes_index(), held);
}

// A live history forgets the register keys neither it nor the caller holds (CollectKeys): what
// it holds reads the same, the forgotten ids are handed out again, the bytes of forgotten bytes
// keys go at the next CollectBytes, and a checkpoint restores the free ids so that the two
// builders go on the same way. A malformed list of forgotten keys is refused.
TEST(HistoryCheckpointTest, ForgetsKeysNothingHoldsAndHandsTheirIdsOutAgain) {
  HistoryBuilder b;
  b.StartLive(DataModel::kMixed);
  b.SetInitialRegister(b.IntKey(1), Value::Int(10));
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(b.BeginTxn({.id = fmt::format("t{}", i),
                            .session = "s",
                            .start = Timestamp{10 * i, 0},
                            .commit = Timestamp{10 * i + 5, 0}})
                    .ok());
    b.Write(b.IntKey(100 + i), Value::Int(i));
    b.Write(b.BytesKey(fmt::format("k-{}", i)), b.BytesValue(fmt::format("v-{}", i)));
    b.Read(b.IntKey(1), Value::Int(10));
    if (i == 0) b.Append(b.IntKey(200), Value::Int(1));  // a list: never forgotten
    ASSERT_TRUE(b.EndLiveTxn().ok());
  }
  b.ReleaseLive(TxnId(15), [](TxnId id) { return id.value() == 3; });
  std::vector<uint64_t> byte_marks;
  b.CollectBytes(byte_marks);  // the values of the released transactions
  const History& h = b.live_history();
  const size_t keys = h.key_count();
  ASSERT_EQ(keys, 42u);
  const std::vector<std::string> before = Dump(h);
  std::vector<uint64_t> marks;
  const KeyId held_by_caller = h.FindIntKey(110);
  marks.assign((keys + 63) / 64, 0);
  marks[held_by_caller.value() / 64] |= uint64_t{1} << (held_by_caller.value() % 64);
  const std::vector<KeyId> forgotten = b.CollectKeys(marks);
  // Those of transactions 0 to 14 but 3 (retired) and key 110 (the caller's).
  ASSERT_EQ(forgotten.size(), 27u);
  EXPECT_TRUE(std::is_sorted(forgotten.begin(), forgotten.end()));
  EXPECT_EQ(h.key_count(), keys);
  EXPECT_EQ(h.keys_held(), keys - 27);
  for (const int i : {0, 14}) {
    EXPECT_FALSE(h.FindIntKey(100 + i).valid()) << i;
    EXPECT_FALSE(h.FindBytesKey(fmt::format("k-{}", i)).valid()) << i;
  }
  for (const int i : {3, 10, 15, 19}) EXPECT_TRUE(h.FindIntKey(100 + i).valid()) << i;
  EXPECT_TRUE(h.FindBytesKey("k-3").valid());
  EXPECT_TRUE(h.FindIntKey(1).valid());    // initial state and held reads
  EXPECT_TRUE(h.FindIntKey(200).valid());  // a list
  // The transactions held read the same; the keys forgotten are no longer listed.
  const std::vector<std::string> after = Dump(h);
  for (size_t i = 0; i < h.size() + 3; ++i) EXPECT_EQ(after[i], before[i]) << i;
  EXPECT_NE(std::find(after.begin(), after.end(),
                      fmt::format("key {} forgotten", forgotten.front().value())),
            after.end());
  // Nothing more to forget; the bytes of the forgotten bytes keys go next.
  EXPECT_TRUE(b.CollectKeys(marks).empty());
  byte_marks.clear();
  EXPECT_EQ(b.CollectBytes(byte_marks), 14u);  // "k-0" to "k-14" but "k-3"

  absl::StatusOr<HistoryBuilder> restored = RoundTrip(b);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_NO_FATAL_FAILURE(ExpectSameHistory(h, restored->live_history()));
  // Keys interned from here get the forgotten ids, the same in both, and a forgotten key that
  // comes back is a new key (a register again, whatever it was).
  std::vector<uint32_t> ids;
  std::vector<uint32_t> restored_ids;
  for (HistoryBuilder* x : {&b, &*restored}) {
    std::vector<uint32_t>& out = x == &b ? ids : restored_ids;
    out.push_back(x->IntKey(100).value());
    out.push_back(x->BytesKey("k-0").value());
    out.push_back(x->IntKey(5000).value());
    out.push_back(x->IntKey(110).value());  // held all along: its id
  }
  EXPECT_EQ(restored_ids, ids);
  EXPECT_EQ(ids[0], forgotten[0].value());
  EXPECT_EQ(ids[1], forgotten[1].value());
  EXPECT_EQ(ids[3], held_by_caller.value());
  EXPECT_EQ(h.key_count(), keys);
  EXPECT_EQ(h.keys_held(), keys - 24);
  ASSERT_NO_FATAL_FAILURE(ExpectSameHistory(h, restored->live_history()));
  v1::HistoryCheckpoint saved;
  b.SaveLive(&saved);
  v1::HistoryCheckpoint saved_restored;
  restored->SaveLive(&saved_restored);
  EXPECT_EQ(saved.SerializeAsString(), saved_restored.SerializeAsString());
  ASSERT_EQ(saved.forgotten_keys_size(), 24);

  // Malformed: a forgotten key not listed, one listed twice, a listed key not forgotten, an
  // operation on a forgotten key.
  auto refused = [](const v1::HistoryCheckpoint& c) {
    HistoryBuilder x;
    const absl::Status s = x.RestoreLive(c);
    return s.code() == absl::StatusCode::kDataLoss;
  };
  v1::HistoryCheckpoint bad = saved;
  bad.mutable_forgotten_keys()->RemoveLast();
  EXPECT_TRUE(refused(bad));
  bad = saved;
  bad.set_forgotten_keys(0, saved.forgotten_keys(1));
  EXPECT_TRUE(refused(bad));
  bad = saved;
  bad.set_forgotten_keys(0, held_by_caller.value());
  EXPECT_TRUE(refused(bad));
  bad = saved;
  const uint32_t held_key = h.FindIntKey(1).value();
  (*bad.mutable_key_flags())[held_key] = 0x04;
  bad.set_key_payloads(static_cast<int>(held_key), 0);
  bad.add_forgotten_keys(held_key);
  EXPECT_TRUE(refused(bad));
}

TEST(HistoryCheckpointTest, EmptyAndKeyValueHistories) {
  HistoryBuilder empty;
  empty.StartLive(DataModel::kKeyValue);
  absl::StatusOr<HistoryBuilder> restored = RoundTrip(empty);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_NO_FATAL_FAILURE(ExpectSameHistory(empty.live_history(), restored->live_history()));
  // Under kKeyValue an append is refused, in both.
  for (HistoryBuilder* b : {&empty, &*restored}) {
    ASSERT_TRUE(b->BeginTxn({.id = "1", .session = "s"}).ok());
    b->Append(b->IntKey(1), Value::Int(1));
    EXPECT_FALSE(b->EndLiveTxn().ok());
  }
  ASSERT_NO_FATAL_FAILURE(ExpectSameHistory(empty.live_history(), restored->live_history()));
}

TEST(HistoryCheckpointTest, RestoresOnlyIntoAFreshBuilder) {
  HistoryBuilder original;
  ASSERT_NO_FATAL_FAILURE(Build(original));
  v1::HistoryCheckpoint saved;
  original.SaveLive(&saved);
  HistoryBuilder used;
  used.StartLive(DataModel::kMixed);
  used.IntKey(1);
  EXPECT_EQ(used.RestoreLive(saved).code(), absl::StatusCode::kFailedPrecondition);
  saved.set_version(3);
  HistoryBuilder fresh;
  EXPECT_EQ(fresh.RestoreLive(saved).code(), absl::StatusCode::kFailedPrecondition);
}

// One corruption of a valid checkpoint, and the error it must give.
struct Corruption {
  const char* name;
  void (*apply)(v1::HistoryCheckpoint&);
};

TEST(HistoryCheckpointTest, MalformedCheckpointsAreDataLoss) {
  HistoryBuilder original;
  ASSERT_NO_FATAL_FAILURE(Build(original));
  v1::HistoryCheckpoint saved;
  original.SaveLive(&saved);
  const Corruption corruptions[] = {
      {"op key beyond the keys",
       [](v1::HistoryCheckpoint& c) {
         c.mutable_held()->mutable_ops()->set_keys(0, static_cast<uint32_t>(c.key_payloads_size()));
       }},
      {"byte value beyond the pool",
       [](v1::HistoryCheckpoint& c) {
         auto& ops = *c.mutable_held()->mutable_ops();
         ops.mutable_flags()->at(1) = static_cast<char>(1 | 2 << 2);  // a write of bytes
         ops.set_payloads(1, c.byte_strings_size());
       }},
      {"list read beyond its elements",
       [](v1::HistoryCheckpoint& c) {
         auto& ops = *c.mutable_held()->mutable_ops();
         for (int i = 0; i < ops.list_sizes_size(); ++i) {
           if (ops.list_sizes(i) > 0) ops.set_list_sizes(i, ops.list_sizes(i) + 1000);
         }
       }},
      {"operations beyond the pool",
       [](v1::HistoryCheckpoint& c) {
         auto& txns = *c.mutable_held()->mutable_txns();
         txns.set_ops_count(txns.ops_count_size() - 1, 1000);
       }},
      {"retired operations beyond their pool",
       [](v1::HistoryCheckpoint& c) {
         c.mutable_retired()->mutable_ops()->mutable_flags()->pop_back();
       }},
      {"arrays of different lengths",
       [](v1::HistoryCheckpoint& c) {
         c.mutable_held()->mutable_txns()->mutable_seqs()->RemoveLast();
       }},
      {"a session beyond the sessions",
       [](v1::HistoryCheckpoint& c) { c.mutable_held()->mutable_txns()->set_sessions(0, 99); }},
      {"an xid slot beyond the table",
       [](v1::HistoryCheckpoint& c) { c.mutable_held()->clear_xids(); }},
      {"in-progress xids beyond their pool",
       [](v1::HistoryCheckpoint& c) { c.mutable_held()->mutable_xip()->RemoveLast(); }},
      {"a retired id not below first_txn",
       [](v1::HistoryCheckpoint& c) { c.set_first_txn(c.retired_ids(c.retired_ids_size() - 1)); }},
      {"transaction ids overflowing",
       [](v1::HistoryCheckpoint& c) { c.set_first_txn(kTxnIdLimit - 3); }},
      {"held transactions out of source-id order",
       [](v1::HistoryCheckpoint& c) { c.mutable_held()->mutable_txns()->set_ext_ids(1, 0); }},
      {"a repeated key",
       [](v1::HistoryCheckpoint& c) {
         int first = -1;  // the first integer key, given the payload of the next
         for (int i = 0; i < c.key_payloads_size(); ++i) {
           if ((c.key_flags()[i] & 1) == 0) continue;
           if (first >= 0) {
             c.set_key_payloads(i, c.key_payloads(first));
             break;
           }
           first = i;
         }
       }},
      {"a repeated byte string",
       [](v1::HistoryCheckpoint& c) { *c.mutable_byte_strings(1) = c.byte_strings(0); }},
      {"a bytes key beyond the pool",
       [](v1::HistoryCheckpoint& c) {
         for (int i = 0; i < c.key_payloads_size(); ++i) {
           if ((c.key_flags()[i] & 1) == 0) c.set_key_payloads(i, 1 << 20);
         }
       }},
      {"an initial list beyond its elements",
       [](v1::HistoryCheckpoint& c) { c.set_initial_list_offsets(0, 1000); }},
      {"initial registers out of order",
       [](v1::HistoryCheckpoint& c) { c.mutable_initial_register_keys()->SwapElements(0, 1); }},
      {"no initial default value", [](v1::HistoryCheckpoint& c) { c.clear_initial_default(); }},
      {"live marks for more keys than there are",
       [](v1::HistoryCheckpoint& c) { c.mutable_live_register()->append(1000, '\0'); }},
      {"a live session mode of 3",
       [](v1::HistoryCheckpoint& c) { c.mutable_live_session_mode()->at(0) = 3; }},
      {"a data model of 3", [](v1::HistoryCheckpoint& c) { c.set_data_model(3); }},
  };
  for (const Corruption& corruption : corruptions) {
    v1::HistoryCheckpoint c = saved;
    corruption.apply(c);
    HistoryBuilder b;
    const absl::Status s = b.RestoreLive(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << corruption.name << ": " << s;
    // Refused, the builder is still fresh.
    const absl::Status again = b.RestoreLive(saved);
    EXPECT_TRUE(again.ok()) << corruption.name << ": " << again;
  }
}

// Whatever bytes a checkpoint holds, a restore either refuses them or gives a history every
// accessor can read.
TEST(HistoryCheckpointTest, DamagedBytesNeverCrash) {
  HistoryBuilder original;
  ASSERT_NO_FATAL_FAILURE(Build(original));
  v1::HistoryCheckpoint saved;
  original.SaveLive(&saved);
  const std::string bytes = saved.SerializeAsString();
  size_t parsed = 0;
  size_t restored = 0;
  // A sample (each restore costs three pool blocks): every third byte flipped, one bit of it, and
  // every sixteenth length cut.
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (const bool cut : {false, true}) {
      if (i % (cut ? 16 : 3) != 0) continue;
      std::string damaged = bytes;
      if (cut) {
        damaged.resize(i);
      } else {
        damaged[i] = static_cast<char>(damaged[i] ^ (1 << (i / 3 % 8)));
      }
      v1::HistoryCheckpoint c;
      if (!c.ParseFromString(damaged)) continue;
      ++parsed;
      HistoryBuilder b;
      const absl::Status s = b.RestoreLive(c);
      if (!s.ok()) {
        EXPECT_TRUE(s.code() == absl::StatusCode::kDataLoss ||
                    s.code() == absl::StatusCode::kFailedPrecondition)
            << s;
        continue;
      }
      ++restored;
      Dump(b.live_history());
    }
  }
  EXPECT_GT(parsed, bytes.size() / 4);
  EXPECT_LT(restored, parsed);
}

}  // namespace
}  // namespace isowatch::history
