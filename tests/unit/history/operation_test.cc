// SPDX-License-Identifier: Apache-2.0
// An Op packs its fields into 16 bytes (operation.h): every field must come back exactly as it
// went in, for every kind, at the edges of each field's range.
#include "isowatch/history/operation.h"

#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace isowatch::history {
namespace {

constexpr uint64_t kKeyListMark = uint64_t{1} << 60;  // History's marks (history.h)
constexpr uint64_t kRetiredMark = uint64_t{1} << 61;
constexpr uint64_t kMaxPosition = (uint64_t{1} << 56) - 1;

TEST(OpTest, ValuesComeBackForEveryKindAndValueKind) {
  const std::vector<Value> values = {
      Value::Absent(),
      Value::Int(0),
      Value::Int(-1),
      Value::Int(std::numeric_limits<int64_t>::min()),
      Value::Int(std::numeric_limits<int64_t>::max()),
      Value::BytesRef(0),
      Value::BytesRef(std::numeric_limits<uint32_t>::max()),
  };
  const std::vector<KeyId> keys = {KeyId(0), KeyId(7), KeyId(KeyId::kInvalidValue - 1)};
  for (const KeyId key : keys) {
    for (const Value v : values) {
      const Op r = Op::Read(key, v);
      const Op w = Op::Write(key, v);
      const Op a = Op::Append(key, v);
      EXPECT_EQ(r.kind(), OpKind::kRead);
      EXPECT_EQ(w.kind(), OpKind::kWrite);
      EXPECT_EQ(a.kind(), OpKind::kAppend);
      for (const Op& op : {r, w, a}) {
        EXPECT_EQ(op.key(), key);
        EXPECT_EQ(op.value(), v);
        EXPECT_FALSE(op.unknown());
        // A value's payload may fill every bit; it is never taken for a list size.
        EXPECT_EQ(op.list_size(), 0u);
      }
      EXPECT_TRUE(r.is_read());
      EXPECT_FALSE(r.is_write());
      EXPECT_TRUE(w.is_write());
      EXPECT_TRUE(a.is_write());
    }
  }
}

TEST(OpTest, ListReadOffsetsAndSizesComeBackAtTheEdges) {
  const std::vector<uint64_t> positions = {0, 1, 12345, uint64_t{1} << 40, kMaxPosition};
  const std::vector<uint64_t> offsets_marks = {0, kKeyListMark, kRetiredMark};
  const std::vector<uint32_t> sizes = {0,
                                       1,
                                       (uint32_t{1} << 27) - 1,
                                       uint32_t{1} << 27,
                                       (uint32_t{1} << 27) + 5,
                                       0xdeadbeef,
                                       std::numeric_limits<uint32_t>::max()};
  for (const uint64_t mark : offsets_marks) {
    for (const uint64_t position : positions) {
      const uint64_t offset = mark == kKeyListMark ? mark : mark + position;
      for (const uint32_t size : sizes) {
        const Op op = Op::ListRead(KeyId(3), offset, size);
        EXPECT_EQ(op.kind(), OpKind::kListRead);
        EXPECT_EQ(op.key(), KeyId(3));
        EXPECT_FALSE(op.unknown());
        EXPECT_TRUE(op.is_read());
        EXPECT_EQ(op.list_offset(), offset) << offset << " " << size;
        EXPECT_EQ(op.list_size(), size) << offset << " " << size;
        // Moving the elements keeps the size and everything else.
        const Op moved = op.WithListOffset(kRetiredMark + position / 2);
        EXPECT_EQ(moved.list_offset(), kRetiredMark + position / 2);
        EXPECT_EQ(moved.list_size(), size);
        EXPECT_EQ(moved.key(), KeyId(3));
        EXPECT_EQ(moved.kind(), OpKind::kListRead);
      }
    }
  }
}

TEST(OpTest, UnknownReadsKeepTheirKindThroughConversion) {
  const Op unknown_read = Op::UnknownRead(KeyId(9), OpKind::kRead);
  EXPECT_TRUE(unknown_read.unknown());
  EXPECT_EQ(unknown_read.kind(), OpKind::kRead);
  EXPECT_EQ(unknown_read.value(), Value::Absent());

  const Op unknown_list = Op::UnknownRead(KeyId(9), OpKind::kListRead);
  EXPECT_TRUE(unknown_list.unknown());
  EXPECT_EQ(unknown_list.kind(), OpKind::kListRead);
  EXPECT_EQ(unknown_list.list_size(), 0u);
  EXPECT_EQ(unknown_list.WithListOffset(42).list_offset(), 42u);
  EXPECT_TRUE(unknown_list.WithListOffset(42).unknown());

  Op converted = unknown_read;
  converted.ConvertAbsentReadToEmptyListRead();
  EXPECT_EQ(converted.kind(), OpKind::kListRead);
  EXPECT_TRUE(converted.unknown());
  EXPECT_EQ(converted.list_size(), 0u);
  EXPECT_EQ(converted.list_offset(), 0u);

  Op absent = Op::Read(KeyId(9), Value::Absent());
  absent.ConvertAbsentReadToEmptyListRead();
  EXPECT_EQ(absent.kind(), OpKind::kListRead);
  EXPECT_FALSE(absent.unknown());
  EXPECT_EQ(absent.key(), KeyId(9));
  EXPECT_EQ(absent.list_size(), 0u);
}

}  // namespace
}  // namespace isowatch::history
