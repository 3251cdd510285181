// SPDX-License-Identifier: Apache-2.0
// The register rule the adya, plume and polygraph checkers share for a read against the
// transaction's own writes (docs/checkers/read-faults.md).
#include "isowatch/axioms/own_appends.h"

#include <cstdint>
#include <optional>
#include <utility>

#include <gtest/gtest.h>

namespace isowatch::axioms {
namespace {

using verdict::ReadFault;

// The fault the rule names, and the own write it names (kNone and 0 when it finds nothing).
std::pair<ReadFault, uint32_t> Judge(uint32_t read, std::optional<uint32_t> source,
                                     std::optional<uint32_t> last_own) {
  const std::optional<IntRead> r = JudgeOwnWrite(read, source, last_own);
  if (!r.has_value()) return {ReadFault::kNone, 0};
  EXPECT_EQ(r->read_op, read);
  return {r->fault, r->own_op};
}

TEST(JudgeOwnWriteTest, ReadOfTheLastOwnWriteIsFine) {
  EXPECT_EQ(Judge(2, 1, 1), std::make_pair(ReadFault::kNone, 0u));
}

TEST(JudgeOwnWriteTest, OthersValueWithoutOwnWriteIsNotItsBusiness) {
  EXPECT_EQ(Judge(0, std::nullopt, std::nullopt), std::make_pair(ReadFault::kNone, 0u));
}

TEST(JudgeOwnWriteTest, OwnWriteAfterTheReadIsAFutureRead) {
  // R reads x = 7 (operation 0), then writes x = 7 (operation 1).
  EXPECT_EQ(Judge(0, 1, std::nullopt), std::make_pair(ReadFault::kFuture, 1u));
  // Even after an earlier own write: the value read is the later one.
  EXPECT_EQ(Judge(1, 2, 0), std::make_pair(ReadFault::kFuture, 2u));
  // A range read before operation 1 does not see the write at operation 1.
  EXPECT_EQ(Judge(1, 1, 0), std::make_pair(ReadFault::kFuture, 1u));
}

TEST(JudgeOwnWriteTest, OverwrittenOwnWriteIsNotTheLast) {
  // R writes x = 1, then x = 2, then reads 1.
  EXPECT_EQ(Judge(2, 0, 1), std::make_pair(ReadFault::kNotLastWrite, 1u));
}

TEST(JudgeOwnWriteTest, AnothersValueAfterAnOwnWriteIsNotOwn) {
  // R writes x = 2 at 0 and x = 3 at 2, then reads another's (or the initial) value at 4.
  EXPECT_EQ(Judge(4, std::nullopt, 2), std::make_pair(ReadFault::kNotOwnWrite, 2u));
}

}  // namespace
}  // namespace isowatch::axioms
