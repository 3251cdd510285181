// SPDX-License-Identifier: Apache-2.0
#include "collectors/postgres/pgoutput_assembler.h"

#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/collectors/pgoutput_builder.h"

namespace isowatch::pg {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using namespace ::isowatch::pg::testing;  // NOLINT: the message builders

constexpr uint32_t kAcct = 16402;
using Values = std::vector<std::optional<std::string>>;

class PgoutputAssemblerTest : public ::testing::Test {
 protected:
  // Feeds messages that complete no transaction.
  void FeedAll(const std::vector<std::string>& messages) {
    for (const std::string& m : messages) {
      absl::StatusOr<std::optional<DecodedTxn>> r = assembler_.Feed(m);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_FALSE(r->has_value());
    }
  }
  DecodedTxn FeedCommit(Lsn commit_lsn, Lsn end_lsn) {
    absl::StatusOr<std::optional<DecodedTxn>> r = assembler_.Feed(Commit(commit_lsn, end_lsn));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || !r->has_value()) {
      ADD_FAILURE() << "the Commit completed no transaction";
      return {};
    }
    return **r;
  }
  std::string ErrorOf(const std::string& message) {
    absl::StatusOr<std::optional<DecodedTxn>> r = assembler_.Feed(message);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_FALSE(assembler_.in_transaction());
    return static_cast<std::string>(r.status().message());
  }
  std::string AcctRelation() {
    return Relation(kAcct, "public", "acct", {{"id", true}, {"bal", false}});
  }

  PgoutputAssembler assembler_;
};

TEST_F(PgoutputAssemblerTest, AssemblesATransaction) {
  FeedAll({Begin(0x1A2B3C40, 74211), AcctRelation(), Insert(kAcct, {Text("7"), Text("100")}),
           Update(kAcct, 'K', {Text("7"), Null()}, {Text("8"), Toast()}),
           Update(kAcct, 0, {}, {Text("8"), Text("90")}), Delete(kAcct, 'K', {Text("8"), Null()}),
           Message(true, 0x1A2B3C00, "isowatch", "x"), Message(false, 0x1A2B3C08, "other", "y"),
           Origin(5, "node"), Type(16500, "public", "mood")});
  EXPECT_TRUE(assembler_.in_transaction());
  const DecodedTxn txn = FeedCommit(0x1A2B3C40, 0x1A2B3C70);
  EXPECT_FALSE(assembler_.in_transaction());
  EXPECT_EQ(txn.xid, 74211u);
  EXPECT_EQ(txn.commit_lsn, 0x1A2B3C40u);
  EXPECT_EQ(txn.end_lsn, 0x1A2B3C70u);
  EXPECT_EQ(txn.commit_time_us, kUnixTime);
  ASSERT_EQ(txn.changes.size(), 4u);
  const DecodedChange& insert = txn.changes[0];
  EXPECT_EQ(insert.kind, DecodedChange::Kind::kInsert);
  EXPECT_EQ(insert.schema, "public");
  EXPECT_EQ(insert.table, "acct");
  EXPECT_THAT(insert.column_names, ElementsAre("id", "bal"));
  EXPECT_EQ(insert.values, (Values{"7", "100"}));
  EXPECT_EQ(txn.changes[1].kind, DecodedChange::Kind::kUpdate);
  EXPECT_EQ(txn.changes[1].values, (Values{"8", std::nullopt}));  // unchanged TOAST
  EXPECT_EQ(txn.changes[2].values, (Values{"8", "90"}));
  EXPECT_EQ(txn.changes[3].kind, DecodedChange::Kind::kDelete);
  EXPECT_EQ(txn.changes[3].values, (Values{"8", std::nullopt}));
  ASSERT_EQ(txn.messages.size(), 1u);  // the non-transactional one is dropped
  EXPECT_EQ(txn.messages[0].prefix, "isowatch");
  EXPECT_EQ(txn.messages[0].content, "x");
}

TEST_F(PgoutputAssemblerTest, RelationsOutliveTransactionsAndCanChange) {
  FeedAll({AcctRelation(), Begin(100, 1), Insert(kAcct, {Text("1"), Text("2")})});
  EXPECT_EQ(FeedCommit(100, 120).changes[0].column_names, (std::vector<std::string>{"id", "bal"}));
  // ALTER TABLE acct RENAME bal TO balance, ADD note: a new Relation message.
  FeedAll({Begin(200, 2),
           Relation(kAcct, "public", "acct", {{"id", true}, {"balance", false}, {"note", false}}),
           Insert(kAcct, {Text("1"), Text("2"), Null()})});
  const DecodedTxn txn = FeedCommit(200, 220);
  EXPECT_EQ(txn.changes[0].column_names, (std::vector<std::string>{"id", "balance", "note"}));
  ASSERT_NE(assembler_.relation(kAcct), nullptr);
  EXPECT_EQ(assembler_.relation(kAcct)->columns.size(), 3u);
  EXPECT_EQ(assembler_.relation(1), nullptr);
}

TEST_F(PgoutputAssemblerTest, MessageOnlyAndEmptyTransactions) {
  FeedAll({Begin(100, 1), Message(true, 90, "isowatch", "x")});
  const DecodedTxn txn = FeedCommit(100, 120);
  EXPECT_THAT(txn.changes, IsEmpty());
  ASSERT_EQ(txn.messages.size(), 1u);
  FeedAll({Begin(200, 2)});
  EXPECT_EQ(FeedCommit(200, 220).xid, 2u);
}

TEST_F(PgoutputAssemblerTest, TruncatesAreCountedAndDropped) {
  FeedAll({AcctRelation(), Begin(100, 1), Truncate({kAcct}), Insert(kAcct, {Text("1"), Null()})});
  EXPECT_EQ(FeedCommit(100, 120).changes.size(), 1u);
  EXPECT_EQ(assembler_.truncates_ignored(), 1u);
}

TEST_F(PgoutputAssemblerTest, RejectsMessagesOutsideATransaction) {
  FeedAll({AcctRelation(), Message(false, 1, "p", "outside")});
  EXPECT_THAT(ErrorOf(Insert(kAcct, {Text("1"), Null()})), HasSubstr("outside a transaction"));
  EXPECT_THAT(ErrorOf(Update(kAcct, 0, {}, {Text("1"), Null()})),
              HasSubstr("outside a transaction"));
  EXPECT_THAT(ErrorOf(Delete(kAcct, 'K', {Text("1"), Null()})), HasSubstr("outside a transaction"));
  EXPECT_THAT(ErrorOf(Message(true, 1, "p", "c")), HasSubstr("transactional Message outside"));
  EXPECT_THAT(ErrorOf(Commit(1, 2)), HasSubstr("Commit outside"));
}

TEST_F(PgoutputAssemblerTest, RejectsInconsistentTransactions) {
  FeedAll({Begin(100, 1)});
  EXPECT_THAT(ErrorOf(Begin(200, 2)), HasSubstr("Begin of xid 2 inside the transaction of xid 1"));

  FeedAll({Begin(100, 1)});
  EXPECT_THAT(ErrorOf(Commit(101, 120)), HasSubstr("is not the final LSN 0/64 of its Begin"));

  FeedAll({Begin(100, 1)});
  EXPECT_THAT(ErrorOf(Commit(100, 99)), HasSubstr("before it starts"));

  FeedAll({Begin(100, 1)});
  EXPECT_THAT(ErrorOf(Insert(kAcct, {Text("1"), Null()})),
              HasSubstr("relation 16402, which no Relation message described"));

  FeedAll({AcctRelation(), Begin(100, 1)});
  EXPECT_THAT(ErrorOf(Insert(kAcct, {Text("1")})),
              HasSubstr("public.acct with 1 columns; its Relation has 2"));

  FeedAll({Begin(100, 1)});
  EXPECT_THAT(ErrorOf(Insert(kAcct, {Text("1"), {PgColumnValue::Kind::kBinary, "\x01"}})),
              HasSubstr("binary value in column bal"));

  FeedAll({Begin(100, 1)});
  EXPECT_THAT(ErrorOf("Z"), HasSubstr("unknown message type"));
}

TEST_F(PgoutputAssemblerTest, RecoversAtTheNextBeginAfterAnError) {
  FeedAll({AcctRelation(), Begin(100, 1), Insert(kAcct, {Text("1"), Null()})});
  ErrorOf(Commit(999, 1000));
  FeedAll({Begin(200, 2), Insert(kAcct, {Text("2"), Null()})});
  const DecodedTxn txn = FeedCommit(200, 220);
  EXPECT_EQ(txn.xid, 2u);
  ASSERT_EQ(txn.changes.size(), 1u);  // nothing left over from xid 1
  EXPECT_EQ(txn.changes[0].values, (Values{"2", std::nullopt}));
}

TEST_F(PgoutputAssemblerTest, ApplyTakesDecodedMessages) {
  ASSERT_TRUE(assembler_.Apply(PgBegin{.final_lsn = 10, .commit_time_us = 5, .xid = 3}).ok());
  absl::StatusOr<std::optional<DecodedTxn>> r =
      assembler_.Apply(PgCommit{.commit_lsn = 10, .end_lsn = 20, .commit_time_us = 6});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->xid, 3u);
  EXPECT_EQ((*r)->commit_time_us, 6);
}

}  // namespace
}  // namespace isowatch::pg
