// SPDX-License-Identifier: Apache-2.0
#include "isowatch/server/internal/connection_registry.h"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

namespace isowatch::server::internal {
namespace {

using Admission = ConnectionRegistry::Admission;

// Counts the calls to CloseAsync.
class FakeConnection : public Connection {
 public:
  void CloseAsync() override { ++closes; }
  int closes = 0;
};

std::vector<std::shared_ptr<FakeConnection>> Make(int n) {
  std::vector<std::shared_ptr<FakeConnection>> out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_shared<FakeConnection>());
  return out;
}

TEST(ConnectionRegistryTest, AdmitsUpToTheLimitThenRefusesWhenAllAreBusy) {
  ConnectionRegistry registry(2);
  auto c = Make(3);
  EXPECT_EQ(registry.Register(c[0]), Admission::kAdmitted);
  EXPECT_EQ(registry.Register(c[1]), Admission::kAdmitted);
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_EQ(registry.idle(), 2u);  // a new connection has asked nothing yet
  registry.SetIdle(c[0].get(), false);
  registry.SetIdle(c[1].get(), false);
  // Both are busy: nothing can be evicted.
  EXPECT_EQ(registry.Register(c[2]), Admission::kFull);
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_EQ(c[0]->closes + c[1]->closes + c[2]->closes, 0);
}

TEST(ConnectionRegistryTest, EvictsTheConnectionIdleTheLongest) {
  ConnectionRegistry registry(3);
  auto c = Make(5);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(registry.Register(c[i]), Admission::kAdmitted);
    registry.SetIdle(c[i].get(), false);
  }
  // Idle in the order 1, 0, 2.
  registry.SetIdle(c[1].get(), true);
  registry.SetIdle(c[0].get(), true);
  registry.SetIdle(c[2].get(), true);
  registry.SetIdle(c[1].get(), true);  // idle already: keeps its place
  EXPECT_EQ(registry.idle(), 3u);
  EXPECT_EQ(registry.Register(c[3]), Admission::kEvicted);
  EXPECT_EQ(c[1]->closes, 1);
  EXPECT_EQ(registry.Register(c[4]), Admission::kEvicted);
  EXPECT_EQ(c[0]->closes, 1);
  EXPECT_EQ(c[2]->closes, 0);
  EXPECT_EQ(registry.size(), 3u);
  EXPECT_EQ(registry.idle(), 3u);  // c[2], then the new c[3] and c[4]
  // An evicted connection is gone: marking or unregistering it changes nothing.
  registry.SetIdle(c[1].get(), true);
  registry.Unregister(c[0].get());
  EXPECT_EQ(registry.size(), 3u);
  EXPECT_EQ(registry.idle(), 3u);
  // The new connections are newer than c[2].
  auto d = std::make_shared<FakeConnection>();
  EXPECT_EQ(registry.Register(d), Admission::kEvicted);
  EXPECT_EQ(c[2]->closes, 1);
  EXPECT_EQ(c[3]->closes + c[4]->closes, 0);
}

TEST(ConnectionRegistryTest, ABusyConnectionIsNotEvictedAndGoesToTheBackWhenIdleAgain) {
  ConnectionRegistry registry(2);
  auto c = Make(4);
  ASSERT_EQ(registry.Register(c[0]), Admission::kAdmitted);
  ASSERT_EQ(registry.Register(c[1]), Admission::kAdmitted);
  // c[0] answers a request, then waits for the next one: now c[1] is idle the longest.
  registry.SetIdle(c[0].get(), false);
  registry.SetIdle(c[0].get(), true);
  EXPECT_EQ(registry.Register(c[2]), Admission::kEvicted);
  EXPECT_EQ(c[1]->closes, 1);
  EXPECT_EQ(c[0]->closes, 0);
  // c[0] and c[2] busy: no room.
  registry.SetIdle(c[0].get(), false);
  registry.SetIdle(c[2].get(), false);
  EXPECT_EQ(registry.Register(c[3]), Admission::kFull);
  EXPECT_EQ(c[0]->closes + c[2]->closes, 0);
}

TEST(ConnectionRegistryTest, AnExpiredConnectionFreesItsPlaceWithoutAClose) {
  ConnectionRegistry registry(1);
  auto first = std::make_shared<FakeConnection>();
  ASSERT_EQ(registry.Register(first), Admission::kAdmitted);
  first.reset();  // its destructor has not unregistered it yet (a connection unregisters itself)
  auto second = std::make_shared<FakeConnection>();
  EXPECT_EQ(registry.Register(second), Admission::kAdmitted);
  EXPECT_EQ(registry.size(), 1u);
}

TEST(ConnectionRegistryTest, UnregisterFreesAPlace) {
  ConnectionRegistry registry(1);
  auto c = Make(2);
  ASSERT_EQ(registry.Register(c[0]), Admission::kAdmitted);
  registry.Unregister(c[0].get());
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_EQ(registry.idle(), 0u);
  EXPECT_EQ(registry.Register(c[1]), Admission::kAdmitted);
  EXPECT_EQ(c[0]->closes, 0);
}

TEST(ConnectionRegistryTest, StopReturnsTheOpenConnectionsAndRefusesNewOnes) {
  ConnectionRegistry registry(4);
  auto c = Make(3);
  ASSERT_EQ(registry.Register(c[0]), Admission::kAdmitted);
  ASSERT_EQ(registry.Register(c[1]), Admission::kAdmitted);
  std::vector<std::shared_ptr<Connection>> open = registry.Stop();
  EXPECT_EQ(open.size(), 2u);
  EXPECT_EQ(registry.Register(c[2]), Admission::kStopping);
}

}  // namespace
}  // namespace isowatch::server::internal
