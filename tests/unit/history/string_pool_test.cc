// SPDX-License-Identifier: Apache-2.0
// StringPool forgets what Retain does not keep: kept strings keep their indices and bytes,
// forgotten indices are handed out again, and Restore rebuilds a pool exactly, forgotten
// indices and the order they are handed out in included.
#include "isowatch/history/string_pool.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace isowatch::history {
namespace {

std::vector<uint64_t> Marks(std::initializer_list<uint32_t> indices) {
  std::vector<uint64_t> marks;
  for (uint32_t i : indices) {
    if (i / 64 >= marks.size()) marks.resize(i / 64 + 1, 0);
    marks[i / 64] |= uint64_t{1} << (i % 64);
  }
  return marks;
}

// Strings of every kind the pool treats apart: small decimals (a direct table), a decimal too
// large for it (hashed), a non-canonical decimal, text, the empty string and a long one.
std::vector<std::string> Samples() {
  return {"0", "7", "123456789012345", "007", "apple", "", std::string(3000, 'x'), "pear", "8"};
}

TEST(StringPool, RetainKeepsMarkedStringsAtTheirIndicesAndForgetsTheRest) {
  StringPool pool;
  const std::vector<std::string> s = Samples();
  for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(pool.Intern(s[i]).first, i);
  // Keep "7", "007", "" and "pear".
  EXPECT_EQ(pool.Retain(Marks({1, 3, 5, 7})), 5u);
  EXPECT_EQ(pool.size(), s.size());
  EXPECT_EQ(pool.live(), 4u);
  for (size_t i = 0; i < s.size(); ++i) {
    const bool kept = i == 1 || i == 3 || i == 5 || i == 7;
    EXPECT_EQ(pool.forgotten(static_cast<uint32_t>(i)), !kept) << i;
    EXPECT_EQ(pool.Find(s[i]), kept ? static_cast<int64_t>(i) : -1) << s[i];
    if (kept) {
      EXPECT_EQ(pool.Get(static_cast<uint32_t>(i)), s[i]);
    }
  }
  // A kept string is found again, not added.
  EXPECT_EQ(pool.Intern("pear"), std::make_pair(uint32_t{7}, false));
  EXPECT_EQ(pool.Intern("7"), std::make_pair(uint32_t{1}, false));
  // Forgotten indices are handed out again, the lowest first; new strings and forgotten ones
  // alike get them, and equal contents still get equal indices.
  EXPECT_EQ(pool.Intern("apple"), std::make_pair(uint32_t{0}, true));
  EXPECT_EQ(pool.Intern("0"), std::make_pair(uint32_t{2}, true));
  EXPECT_EQ(pool.Intern("fig"), std::make_pair(uint32_t{4}, true));
  EXPECT_EQ(pool.Intern("apple"), std::make_pair(uint32_t{0}, false));
  EXPECT_EQ(pool.Intern("0"), std::make_pair(uint32_t{2}, false));
  EXPECT_EQ(pool.Get(0), "apple");
  EXPECT_EQ(pool.Get(2), "0");
  EXPECT_EQ(pool.Get(4), "fig");
  EXPECT_EQ(pool.Intern("123456789012345"), std::make_pair(uint32_t{6}, true));
  EXPECT_EQ(pool.Intern(std::string(3000, 'x')), std::make_pair(uint32_t{8}, true));
  // Every forgotten index is in use again: the next string is appended.
  EXPECT_EQ(pool.Intern("plum"), std::make_pair(uint32_t{9}, true));
  EXPECT_EQ(pool.live(), pool.size());
}

TEST(StringPool, RetainingNothingForgetsEverythingAndAgainForgetsNothingMore) {
  StringPool pool;
  for (int i = 0; i < 100; ++i) pool.Intern(fmt::format("s{}", i));
  EXPECT_EQ(pool.Retain({}), 100u);
  EXPECT_EQ(pool.live(), 0u);
  EXPECT_EQ(pool.Retain({}), 0u);  // already forgotten: not counted twice
  EXPECT_EQ(pool.forgotten_indices().size(), 100u);
  EXPECT_EQ(pool.Intern("s99").first, 0u);
}

TEST(StringPool, RetainReclaimsTheBytesOfForgottenStrings) {
  StringPool pool;
  const std::string big(4096, 'b');
  for (int i = 0; i < 2000; ++i) pool.Intern(fmt::format("{}{}", big, i));
  const size_t before = pool.MemoryUsage();
  pool.Retain(Marks({0, 1999}));
  EXPECT_LT(pool.MemoryUsage(), before / 20) << before;
  EXPECT_EQ(pool.Get(1999), fmt::format("{}{}", big, 1999));
  EXPECT_EQ(pool.Get(0), big + "0");
}

TEST(StringPool, ManyRoundsOfRetainKeepTheMappingOneToOne) {
  StringPool pool;
  std::vector<std::string> held;  // by index; empty = forgotten
  uint32_t next = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 40; ++i) {
      // Decimals of a growing range (the direct table grows over hashed ones) and text.
      const std::string s = i % 2 == 0 ? fmt::format("{}", next++) : fmt::format("t{}", next++);
      const auto [index, added] = pool.Intern(s);
      ASSERT_TRUE(added) << s;
      if (index >= held.size()) held.resize(index + 1);
      ASSERT_TRUE(held[index].empty()) << "index " << index << " handed out while held";
      held[index] = s;
    }
    // Keep every third held string.
    std::vector<uint64_t> marks((held.size() + 63) / 64, 0);
    for (size_t i = 0; i < held.size(); ++i) {
      if (!held[i].empty() && (i + round) % 3 == 0) {
        marks[i / 64] |= uint64_t{1} << (i % 64);
      } else {
        held[i].clear();
      }
    }
    pool.Retain(marks);
    for (size_t i = 0; i < held.size(); ++i) {
      if (held[i].empty()) {
        ASSERT_TRUE(pool.forgotten(static_cast<uint32_t>(i))) << i;
      } else {
        ASSERT_EQ(pool.Get(static_cast<uint32_t>(i)), held[i]);
        ASSERT_EQ(pool.Find(held[i]), static_cast<int64_t>(i));
      }
    }
  }
}

TEST(StringPool, RestoreRebuildsThePoolAndTheOrderOfItsForgottenIndices) {
  StringPool pool;
  const std::vector<std::string> s = Samples();
  for (const std::string& x : s) pool.Intern(x);
  pool.Retain(Marks({0, 4, 6}));
  pool.Intern("new");  // takes index 1; 2, 3, 5, 7 and 8 stay forgotten

  std::vector<std::string> saved;
  for (uint32_t i = 0; i < pool.size(); ++i) saved.emplace_back(pool.Get(i));
  const std::vector<uint32_t> forgotten(pool.forgotten_indices().begin(),
                                        pool.forgotten_indices().end());
  std::vector<std::string_view> views(saved.begin(), saved.end());
  StringPool restored;
  ASSERT_TRUE(restored.Restore(views, forgotten));
  EXPECT_EQ(restored.size(), pool.size());
  EXPECT_EQ(restored.live(), pool.live());
  for (uint32_t i = 0; i < pool.size(); ++i) {
    EXPECT_EQ(restored.forgotten(i), pool.forgotten(i)) << i;
    EXPECT_EQ(restored.Get(i), pool.Get(i)) << i;
    if (!pool.forgotten(i)) {
      EXPECT_EQ(restored.Find(pool.Get(i)), i);
    }
  }
  // What comes next gets the same indices in both.
  for (const char* x : {"a", "b", "0", "c", "d", "e", "f"}) {
    EXPECT_EQ(restored.Intern(x), pool.Intern(x)) << x;
  }
}

TEST(StringPool, RestoreRefusesRepeatsAndBadForgottenIndices) {
  const std::vector<std::string_view> strings = {"a", "b", "a"};
  StringPool repeated;
  EXPECT_FALSE(repeated.Restore(strings, {}));
  EXPECT_EQ(repeated.size(), 0u);
  // The repeat at a forgotten index is no string.
  StringPool holed;
  const std::vector<uint32_t> third = {2};
  EXPECT_TRUE(holed.Restore(strings, third));
  EXPECT_EQ(holed.live(), 2u);
  StringPool out_of_range;
  const std::vector<uint32_t> bad = {3};
  EXPECT_FALSE(out_of_range.Restore(strings, bad));
  StringPool twice;
  const std::vector<uint32_t> again = {2, 2};
  EXPECT_FALSE(twice.Restore(strings, again));
}

// A reserved pool meets decimals out of order (a session's transactions at a time), mixed
// with other strings and with decimals past what the reservation covers: each keeps one index.
TEST(StringPool, ReservedPoolInternsOutOfOrderDecimalsOnce) {
  StringPool pool;
  pool.Reserve(2000);
  std::vector<std::string> strings;
  for (int session = 0; session < 4; ++session) {
    for (int i = session; i < 2000; i += 4) strings.push_back(std::to_string(i));
    strings.push_back("s" + std::to_string(session));
    strings.push_back(std::to_string(100000 + session));
  }
  for (size_t i = 0; i < strings.size(); ++i) {
    EXPECT_EQ(pool.Intern(strings[i]), std::make_pair(static_cast<uint32_t>(i), true));
  }
  for (size_t i = 0; i < strings.size(); ++i) {
    EXPECT_EQ(pool.Intern(strings[i]), std::make_pair(static_cast<uint32_t>(i), false));
    EXPECT_EQ(pool.Find(strings[i]), static_cast<int64_t>(i));
    EXPECT_EQ(pool.Get(static_cast<uint32_t>(i)), strings[i]);
  }
  EXPECT_EQ(pool.Find("2000"), -1);
}

// Strings held by Add, unlooked-up, are found as if interned, one by one until the next Intern
// indexes them; an Intern of one of them finds it, and the pool after Retain is the same.
TEST(StringPool, AddedStringsAreFoundAndInternedAsIfInterned) {
  StringPool pool;
  const std::vector<std::string> s = Samples();
  std::vector<std::string> strings;
  for (size_t i = 0; i < s.size(); ++i) {
    strings.push_back(s[i]);
    strings.push_back(fmt::format("{}:{}", i % 3, i));
  }
  for (size_t i = 0; i < strings.size(); ++i) {
    // Every third string interned, the others added: both kinds stay unique.
    const std::pair<uint32_t, bool> got =
        i % 3 == 0 ? pool.Intern(strings[i]) : std::pair(pool.Add(strings[i]), true);
    EXPECT_EQ(got, std::make_pair(static_cast<uint32_t>(i), true)) << strings[i];
    for (size_t j = 0; j <= i; ++j) {
      EXPECT_EQ(pool.Find(strings[j]), static_cast<int64_t>(j)) << strings[j];
    }
    EXPECT_EQ(pool.Find("absent"), -1);
  }
  for (size_t i = 0; i < strings.size(); ++i) {
    EXPECT_EQ(pool.Intern(strings[i]), std::make_pair(static_cast<uint32_t>(i), false));
    EXPECT_EQ(pool.Get(static_cast<uint32_t>(i)), strings[i]);
  }
  EXPECT_EQ(pool.Add("later"), strings.size());
  std::vector<uint64_t> all((strings.size() + 64) / 64, ~uint64_t{0});
  EXPECT_EQ(pool.Retain(all), 0u);
  EXPECT_EQ(pool.Find("later"), static_cast<int64_t>(strings.size()));
  EXPECT_EQ(pool.Intern("later"), std::make_pair(static_cast<uint32_t>(strings.size()), false));
}

}  // namespace
}  // namespace isowatch::history
