// SPDX-License-Identifier: Apache-2.0
#include "isowatch/history/history_builder.h"

#include <gtest/gtest.h>

namespace isowatch::history {
namespace {

TEST(HistoryBuilderTest, BuildsSessionsInSequenceOrder) {
  HistoryBuilder b;
  KeyId x = b.IntKey(1);
  ASSERT_TRUE(b.BeginTxn({.id = "b", .session = "s", .seq = 2, .commit = Timestamp{5, 0}}).ok());
  b.Read(x, Value::Int(1));
  b.EndTxn();
  ASSERT_TRUE(b.BeginTxn({.id = "a", .session = "s", .seq = 1, .commit = Timestamp{3, 0}}).ok());
  b.Write(x, Value::Int(1));
  b.EndTxn();
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->size(), 2u);
  EXPECT_EQ(h->txn(TxnId(0)).seq, 1u);
  EXPECT_EQ(h->txn(TxnId(1)).seq, 0u);
  EXPECT_EQ(h->txn(TxnId(0)).session_prev, TxnId(1));
  EXPECT_FALSE(h->txn(TxnId(1)).session_prev.valid());
  EXPECT_EQ(h->FindTxn("a"), TxnId(1));
  EXPECT_EQ(h->data_model(), DataModel::kKeyValue);
}

TEST(HistoryBuilderTest, RejectsDuplicateIdsAndStartAfterCommit) {
  HistoryBuilder b;
  ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  b.EndTxn();
  EXPECT_FALSE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  EXPECT_FALSE(
      b.BeginTxn({.id = "2", .session = "s", .start = Timestamp{9, 0}, .commit = Timestamp{8, 5}})
          .ok());
  EXPECT_TRUE(
      b.BeginTxn({.id = "3", .session = "s", .start = Timestamp{8, 5}, .commit = Timestamp{8, 5}})
          .ok());
}

TEST(HistoryBuilderTest, AbsentReadOfListKeyBecomesEmptyList) {
  HistoryBuilder b;
  KeyId l = b.IntKey(7);
  ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  b.Read(l, Value::Absent());
  b.Append(l, Value::Int(3));
  b.EndTxn();
  auto h = std::move(b).Finish();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->data_model(), DataModel::kList);
  auto ops = h->ops(TxnId(0));
  EXPECT_EQ(ops[0].kind(), OpKind::kListRead);
  EXPECT_EQ(h->list_elements(ops[0]).size(), 0u);
}

TEST(HistoryBuilderTest, RejectsKeyUsedAsRegisterAndList) {
  HistoryBuilder b;
  KeyId k = b.IntKey(7);
  ASSERT_TRUE(b.BeginTxn({.id = "1", .session = "s"}).ok());
  b.Write(k, Value::Int(1));
  b.Append(k, Value::Int(3));
  b.EndTxn();
  EXPECT_FALSE(std::move(b).Finish().ok());
}

TEST(HistoryBuilderTest, BytesInterningIsExact) {
  HistoryBuilder b;
  Value v1 = b.BytesValue("abc");
  Value v2 = b.BytesValue(std::string("ab") + "c");
  Value v3 = b.BytesValue("abd");
  EXPECT_EQ(v1, v2);
  EXPECT_NE(v1, v3);
  EXPECT_EQ(b.BytesKey("k"), b.BytesKey("k"));
  EXPECT_NE(b.BytesKey("k"), b.IntKey(0));
}

}  // namespace
}  // namespace isowatch::history
