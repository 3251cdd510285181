// SPDX-License-Identifier: Apache-2.0
// The window cutter's checkpoints: a cutter saved and restored along a stream cuts the same
// windows, a saved window loads as it was, and malformed ones of either are refused.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "isowatch/formats/native.h"
#include "isowatch/history/history.h"
#include "isowatch/sim/simulator.h"
#include "isowatch/v1/checkpoint.pb.h"
#include "isowatch/windows/saved_window.h"
#include "isowatch/windows/window_cutter.h"

#include "tests/unit/windows/simulated_arrivals.h"

namespace isowatch::windows {
namespace {

using history::History;
using history::Timestamp;

// Everything a window says, as text: its history in the native format and its other fields.
std::string Render(const Window& w) {
  std::ostringstream native;
  EXPECT_TRUE(formats::WriteNative(w.history, formats::NativeEncoding::kJsonLines, native).ok());
  return fmt::format(
      "index {} first_proper {} base {} base_xid_end {} without_xid {} first {} last {} own {} "
      "lead_in {} beyond {} defect '{}' origins {}\n{}",
      w.scope.index, w.scope.first_proper, w.scope.base.ToString(), w.scope.base_xid_end,
      w.scope.base_without_xid, w.first_commit.ToString(), w.last_commit.ToString(), w.own,
      w.lead_in, w.own_beyond_base, w.defect, fmt::join(w.origins, ","), native.str());
}

// `w` saved as a checkpoint keeps it, serialized, parsed and loaded.
Window SavedAndLoaded(const Window& w) {
  v1::SavedWindow saved;
  const absl::Status s = SaveWindow(w, &saved);
  EXPECT_TRUE(s.ok()) << s;
  v1::SavedWindow parsed;
  EXPECT_TRUE(parsed.ParseFromString(saved.SerializeAsString()));
  absl::StatusOr<Window> loaded = LoadWindow(parsed);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? *std::move(loaded) : Window{};
}

// A cutter saved, serialized, parsed and restored into a fresh one, at random points of a
// simulated stream, cuts the windows an uninterrupted cutter cuts, with the same counts; and
// each of its windows, saved and loaded again, is the same window.
void CheckRestoredStream(history::DataModel data, WindowOptions options, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Arrivals a = SimulatedArrivals(data, seed, rng);
  const History& src = a.sim.history;
  auto& arrivals = a.order;
  ASSERT_GT(src.size(), 0u);
  // A few transactions arrive far too late, after their window was sealed.
  for (size_t i = 0; i < 4; ++i) {
    auto late = arrivals.begin() + static_cast<ptrdiff_t>(10 + 50 * i);
    std::rotate(late, late + 1, arrivals.end());
  }

  WindowCutter whole(options);
  auto restarted = std::make_unique<WindowCutter>(options);
  std::vector<std::string> expected;
  std::vector<std::string> got;
  int restores = 0;
  for (const auto& [at, id] : arrivals) {
    whole.Add(src, id);
    restarted->Add(src, id);
    if (rng() % 8 == 0) {
      for (const Window& w : whole.Seal(src, Ts(at - kJitter - 1))) expected.push_back(Render(w));
      for (const Window& w : restarted->Seal(src, Ts(at - kJitter - 1))) {
        got.push_back(Render(SavedAndLoaded(w)));
      }
    }
    if (rng() % 16 == 0) {
      v1::CutterCheckpoint saved;
      restarted->Save(&saved);
      v1::CutterCheckpoint parsed;
      ASSERT_TRUE(parsed.ParseFromString(saved.SerializeAsString()));
      restarted = std::make_unique<WindowCutter>(options);
      ASSERT_TRUE(restarted->Restore(src, parsed).ok());
      ++restores;
      EXPECT_EQ(restarted->stats().added, whole.stats().added);
      EXPECT_EQ(restarted->stats().staged, whole.stats().staged);
      EXPECT_EQ(restarted->stats().sealed, whole.stats().sealed);
      EXPECT_EQ(restarted->stats().late, whole.stats().late);
    }
  }
  for (const Window& w : whole.Flush(src)) expected.push_back(Render(w));
  for (const Window& w : restarted->Flush(src)) got.push_back(Render(SavedAndLoaded(w)));
  EXPECT_GT(restores, 10);
  EXPECT_GT(whole.stats().late, 0u);
  ASSERT_GT(expected.size(), 3u);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "window " << i;
  EXPECT_EQ(restarted->stats().late, whole.stats().late);
  EXPECT_EQ(restarted->stats().renamed, whole.stats().renamed);
}

TEST(WindowCutterTest, RestoredCutterCutsTheSameKeyValueWindowsBySpan) {
  CheckRestoredStream(history::DataModel::kKeyValue, WindowOptions{.span = 40, .overlap = 10}, 11);
}

TEST(WindowCutterTest, RestoredCutterCutsTheSameListWindowsBySpan) {
  CheckRestoredStream(history::DataModel::kList, WindowOptions{.span = 25}, 12);
}

TEST(WindowCutterTest, RestoredCutterCutsTheSameKeyValueWindowsByCount) {
  CheckRestoredStream(history::DataModel::kKeyValue,
                      WindowOptions{.transactions = 50, .overlap = 8}, 13);
}

TEST(WindowCutterTest, RestoredCutterCutsTheSameListWindowsByCount) {
  CheckRestoredStream(history::DataModel::kList, WindowOptions{.transactions = 37, .overlap = 5},
                      14);
}

TEST(WindowCutterTest, RestoreRefusesOtherOptionsAndMalformedCheckpoints) {
  sim::WorkloadOptions o;
  o.txns = 60;
  o.count_committed = true;
  o.sessions = 4;
  o.keys = 10;
  absl::StatusOr<sim::SimResult> r = sim::Simulate(o);
  ASSERT_TRUE(r.ok()) << r.status();
  const History& src = r->history;
  WindowCutter cutter(WindowOptions{.transactions = 20, .overlap = 5});
  for (uint32_t i = 0; i < src.size(); ++i) cutter.Add(src, TxnId(i));
  std::vector<Timestamp> commits;
  for (uint32_t i = 0; i < src.size(); ++i) {
    if (src.txn(TxnId(i)).has_commit) commits.push_back(src.txn(TxnId(i)).commit);
  }
  std::sort(commits.begin(), commits.end());
  ASSERT_GT(commits.size(), 45u);
  ASSERT_FALSE(cutter.Seal(src, commits[45]).empty());
  v1::CutterCheckpoint saved;
  cutter.Save(&saved);
  ASSERT_GT(saved.staged().names_size(), 0);
  ASSERT_GT(saved.register_keys_size(), 0);

  WindowCutter other(WindowOptions{.span = 100});
  const absl::Status options = other.Restore(src, saved);
  EXPECT_EQ(options.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(options.message()),
              ::testing::HasSubstr("cut by transactions, 20 per window with overlap 5"));
  EXPECT_THAT(std::string(options.message()),
              ::testing::HasSubstr("cut by commit time, 100 per window with overlap 0"));

  auto expect_malformed = [&](const v1::CutterCheckpoint& bad, std::string_view what) {
    WindowCutter fresh(WindowOptions{.transactions = 20, .overlap = 5});
    const absl::Status s = fresh.Restore(src, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << what << ": " << s;
    EXPECT_EQ(fresh.stats().added, 0u) << what;
  };
  v1::CutterCheckpoint bad = saved;
  bad.mutable_staged()->mutable_ops()->set_keys(0, static_cast<uint32_t>(src.key_count()));
  expect_malformed(bad, "a key past the history's");
  bad = saved;
  bad.mutable_staged()->add_names("extra");
  expect_malformed(bad, "arrays of different lengths");
  bad = saved;
  bad.mutable_staged()->set_ops_counts(0, bad.staged().ops_counts(0) + 1);
  expect_malformed(bad, "operations past the pool");
  bad = saved;
  bad.set_register_keys(0, static_cast<uint32_t>(src.key_count()) + 7);
  expect_malformed(bad, "a register key past the history's");
  bad = saved;
  bad.mutable_retained()->set_sessions(0, 1u << 20);
  expect_malformed(bad, "a session past the history's");
  bad = saved;
  bad.set_arrival(0);
  expect_malformed(bad, "arrivals past the count");

  // Restored, it goes on as the original does.
  WindowCutter restored(WindowOptions{.transactions = 20, .overlap = 5});
  ASSERT_TRUE(restored.Restore(src, saved).ok());
  EXPECT_EQ(restored.Restore(src, saved).code(), absl::StatusCode::kFailedPrecondition);
  std::vector<std::string> a;
  std::vector<std::string> b;
  for (const Window& w : cutter.Flush(src)) a.push_back(Render(w));
  for (const Window& w : restored.Flush(src)) b.push_back(Render(w));
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a.empty());
}

TEST(WindowCutterTest, LoadingASavedWindowRefusesMalformedOnes) {
  std::mt19937_64 rng(5);
  const Arrivals a = SimulatedArrivals(history::DataModel::kKeyValue, 5, rng);
  WindowCutter cutter(WindowOptions{.transactions = 50, .overlap = 8});
  for (const auto& [at, id] : a.order) cutter.Add(a.sim.history, id);
  std::vector<Window> sealed = cutter.Flush(a.sim.history);
  ASSERT_GT(sealed.size(), 2u);
  const Window& w = sealed[1];
  ASSERT_GT(w.lead_in, 0u);
  v1::SavedWindow saved;
  ASSERT_TRUE(SaveWindow(w, &saved).ok());
  EXPECT_EQ(Render(SavedAndLoaded(w)), Render(w));

  v1::SavedWindow bad = saved;
  bad.set_history(saved.history().substr(0, saved.history().size() / 2));
  EXPECT_EQ(LoadWindow(bad).status().code(), absl::StatusCode::kDataLoss);
  bad = saved;
  bad.add_origins(0);
  EXPECT_EQ(LoadWindow(bad).status().code(), absl::StatusCode::kDataLoss);
  bad = saved;
  bad.set_first_proper(saved.first_proper() + 1);
  EXPECT_EQ(LoadWindow(bad).status().code(), absl::StatusCode::kDataLoss);
  bad = saved;
  bad.set_own(saved.own() + 1);
  EXPECT_EQ(LoadWindow(bad).status().code(), absl::StatusCode::kDataLoss);
  bad = saved;
  bad.set_origins(0, 1u << 20);
  EXPECT_EQ(LoadWindow(bad).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace isowatch::windows
