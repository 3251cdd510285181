// SPDX-License-Identifier: Apache-2.0
#include "collectors/postgres/pgoutput.h"

#include <cstdint>
#include <limits>
#include <string>
#include <variant>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/collectors/pgoutput_builder.h"

namespace isowatch::pg {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace ::isowatch::pg::testing;  // NOLINT: the message builders

template <typename T>
T ParseAs(const std::string& bytes) {
  absl::StatusOr<PgoutputMessage> m = ParsePgoutputMessage(bytes);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok() || !std::holds_alternative<T>(*m)) {
    ADD_FAILURE() << "decoded to another message kind";
    return T{};
  }
  return std::get<T>(*m);
}

std::string ErrorOf(const std::string& bytes) {
  absl::StatusOr<PgoutputMessage> m = ParsePgoutputMessage(bytes);
  EXPECT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << m.status();
  return static_cast<std::string>(m.status().message());
}

TEST(LsnTest, FormatsAndParses) {
  EXPECT_EQ(LsnToString(0), "0/0");
  EXPECT_EQ(LsnToString((Lsn{0x16} << 32) | 0xB374D848), "16/B374D848");
  EXPECT_EQ(*ParseLsn("16/B374D848"), (Lsn{0x16} << 32) | 0xB374D848);
  EXPECT_EQ(*ParseLsn("16/b374d848"), (Lsn{0x16} << 32) | 0xB374D848);
  EXPECT_EQ(*ParseLsn("FFFFFFFF/FFFFFFFF"), std::numeric_limits<Lsn>::max());
  for (Lsn lsn : {Lsn{0}, Lsn{1}, Lsn{0x1A2B3C40}, std::numeric_limits<Lsn>::max()}) {
    EXPECT_EQ(*ParseLsn(LsnToString(lsn)), lsn);
  }
}

TEST(LsnTest, RejectsWhatIsNotAnLsn) {
  for (const char* bad : {"", "16", "/1", "1/", "1/2/3", "G/0", "0/-1", "100000000/0",
                          "0/100000000", " 1/2", "1/2 ", "0x1/2"}) {
    absl::StatusOr<Lsn> lsn = ParseLsn(bad);
    EXPECT_EQ(lsn.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
}

TEST(PgoutputTest, Begin) {
  const PgBegin m = ParseAs<PgBegin>(Begin(0x1A2B3C40, 74211));
  EXPECT_EQ(m.final_lsn, 0x1A2B3C40u);
  EXPECT_EQ(m.commit_time_us, kUnixTime);
  EXPECT_EQ(m.xid, 74211u);
}

TEST(PgoutputTest, Commit) {
  const PgCommit m = ParseAs<PgCommit>(Commit(0x1A2B3C40, 0x1A2B3C70));
  EXPECT_EQ(m.flags, 0);
  EXPECT_EQ(m.commit_lsn, 0x1A2B3C40u);
  EXPECT_EQ(m.end_lsn, 0x1A2B3C70u);
  EXPECT_EQ(m.commit_time_us, kUnixTime);
}

TEST(PgoutputTest, Relation) {
  const PgRelation m =
      ParseAs<PgRelation>(Relation(16402, "public", "acct", {{"id", true}, {"bal", false}}));
  EXPECT_EQ(m.oid, 16402u);
  EXPECT_EQ(m.schema, "public");
  EXPECT_EQ(m.name, "acct");
  EXPECT_EQ(m.replica_identity, 'd');
  ASSERT_EQ(m.columns.size(), 2u);
  EXPECT_TRUE(m.columns[0].part_of_key);
  EXPECT_EQ(m.columns[0].name, "id");
  EXPECT_EQ(m.columns[0].type_oid, 23u);
  EXPECT_EQ(m.columns[0].type_modifier, -1);
  EXPECT_FALSE(m.columns[1].part_of_key);
  EXPECT_EQ(m.columns[1].name, "bal");
}

TEST(PgoutputTest, InsertWithEveryColumnKind) {
  const PgInsert m = ParseAs<PgInsert>(
      Insert(16402, {Text("7"),
                     Null(),
                     Toast(),
                     Text(""),
                     {PgColumnValue::Kind::kBinary, std::string("\x01\x00", 2)}}));
  EXPECT_EQ(m.relation_oid, 16402u);
  EXPECT_THAT(m.new_tuple,
              ElementsAre(Text("7"), Null(), Toast(), Text(""),
                          PgColumnValue{PgColumnValue::Kind::kBinary, std::string("\x01\x00", 2)}));
}

TEST(PgoutputTest, UpdateWithoutOldTuple) {
  const PgUpdate m = ParseAs<PgUpdate>(Update(16402, 0, {}, {Text("7"), Text("90")}));
  EXPECT_EQ(m.old_kind, 0);
  EXPECT_TRUE(m.old_tuple.empty());
  EXPECT_THAT(m.new_tuple, ElementsAre(Text("7"), Text("90")));
}

TEST(PgoutputTest, UpdateWithOldKeyOrRow) {
  for (char kind : {'K', 'O'}) {
    const PgUpdate m =
        ParseAs<PgUpdate>(Update(16402, kind, {Text("7"), Null()}, {Text("8"), Text("90")}));
    EXPECT_EQ(m.old_kind, kind);
    EXPECT_THAT(m.old_tuple, ElementsAre(Text("7"), Null()));
    EXPECT_THAT(m.new_tuple, ElementsAre(Text("8"), Text("90")));
  }
}

TEST(PgoutputTest, Delete) {
  const PgDelete m = ParseAs<PgDelete>(Delete(16402, 'K', {Text("7"), Null()}));
  EXPECT_EQ(m.relation_oid, 16402u);
  EXPECT_EQ(m.old_kind, 'K');
  EXPECT_THAT(m.old_tuple, ElementsAre(Text("7"), Null()));
}

TEST(PgoutputTest, Truncate) {
  const PgTruncate m = ParseAs<PgTruncate>(Truncate({16402, 16410}));
  EXPECT_THAT(m.relation_oids, ElementsAre(16402u, 16410u));
}

TEST(PgoutputTest, LogicalMessage) {
  const PgLogicalMessage m =
      ParseAs<PgLogicalMessage>(Message(true, 0x1A2B3C00, "isowatch", std::string("x\0y", 3)));
  EXPECT_TRUE(m.transactional);
  EXPECT_EQ(m.lsn, 0x1A2B3C00u);
  EXPECT_EQ(m.prefix, "isowatch");
  EXPECT_EQ(m.content, std::string("x\0y", 3));
  EXPECT_FALSE(ParseAs<PgLogicalMessage>(Message(false, 1, "p", "")).transactional);
}

TEST(PgoutputTest, OriginAndType) {
  const PgOrigin origin = ParseAs<PgOrigin>(Origin(0x10, "node_a"));
  EXPECT_EQ(origin.commit_lsn, 0x10u);
  EXPECT_EQ(origin.name, "node_a");
  const PgType type = ParseAs<PgType>(Type(16500, "public", "mood"));
  EXPECT_EQ(type.oid, 16500u);
  EXPECT_EQ(type.schema, "public");
  EXPECT_EQ(type.name, "mood");
}

TEST(PgoutputTest, EveryTruncationOfEveryMessageIsAnError) {
  const std::string messages[] = {
      Begin(1, 2),
      Commit(1, 2),
      Relation(1, "public", "t", {{"id", true}, {"v", false}}),
      Insert(1, {Text("1"), Null()}),
      Update(1, 'O', {Text("1"), Toast()}, {Text("1"), Text("2")}),
      Delete(1, 'K', {Text("1"), Null()}),
      Truncate({1, 2}),
      Message(true, 1, "p", "content"),
      Origin(1, "o"),
      Type(1, "s", "t"),
  };
  for (const std::string& message : messages) {
    ASSERT_TRUE(ParsePgoutputMessage(message).ok()) << message[0];
    for (size_t size = 0; size < message.size(); ++size) {
      absl::StatusOr<PgoutputMessage> m = ParsePgoutputMessage(message.substr(0, size));
      EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument)
          << message[0] << " cut to " << size << " bytes";
    }
    EXPECT_THAT(ErrorOf(message + "!"), HasSubstr("1 trailing bytes"));
  }
}

TEST(PgoutputTest, RejectsUnknownAndUnsupportedMessages) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("empty"));
  EXPECT_THAT(ErrorOf("Z"), HasSubstr("unknown message type 90"));
  EXPECT_THAT(ErrorOf(std::string(1, '\0')), HasSubstr("unknown message type 0"));
  EXPECT_THAT(ErrorOf(MessageBytes('S').U32(7).U8(1)), HasSubstr("streaming or two-phase"));
  EXPECT_THAT(ErrorOf(MessageBytes('c').U32(7)), HasSubstr("streaming or two-phase"));
}

TEST(PgoutputTest, RejectsMalformedFields) {
  EXPECT_THAT(ErrorOf(MessageBytes('I').U32(1).U8('X').Tuple({})), HasSubstr("tuple tag 88"));
  EXPECT_THAT(ErrorOf(MessageBytes('D').U32(1).U8('N').Tuple({})), HasSubstr("tuple tag 78"));
  EXPECT_THAT(ErrorOf(MessageBytes('U').U32(1).U8('K').Tuple({}).U8('K').Tuple({})),
              HasSubstr("tuple tag 75"));
  EXPECT_THAT(ErrorOf(MessageBytes('I').U32(1).U8('N').U16(1).U8('x')),
              HasSubstr("unknown kind 120"));
  EXPECT_THAT(ErrorOf(MessageBytes('I').U32(1).U8('N').U16(1).U8('t').U32(0xffffffff)),
              HasSubstr("negative length"));
  EXPECT_THAT(ErrorOf(MessageBytes('I').U32(1).U8('N').U16(1).U8('t').U32(100).Str("short")),
              HasSubstr("truncated"));
  EXPECT_THAT(ErrorOf(MessageBytes('I').U32(1).U8('N').U16(60000).U8('n')),
              HasSubstr("claims 60000 columns"));
  EXPECT_THAT(ErrorOf(MessageBytes('O').U64(1).U8('o')), HasSubstr("not NUL-terminated"));
  EXPECT_THAT(ErrorOf(MessageBytes('B').U64(1).U64(std::numeric_limits<int64_t>::max()).U32(2)),
              HasSubstr("out of range"));
}

TEST(PgoutputTest, TimestampConversion) {
  EXPECT_EQ(*PgTimestampToUnixMicros(0), int64_t{946'684'800} * 1'000'000);
  EXPECT_EQ(*PgTimestampToUnixMicros(kPgTime), kUnixTime);
  EXPECT_FALSE(PgTimestampToUnixMicros(std::numeric_limits<int64_t>::max()).ok());
  EXPECT_TRUE(PgTimestampToUnixMicros(std::numeric_limits<int64_t>::min()).ok());
}

}  // namespace
}  // namespace isowatch::pg
