// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace isowatch::server::internal {

// What the registry needs of a connection: a way to close it from any thread.
class Connection {
 public:
  virtual ~Connection() = default;
  // Closes the connection soon, on its own thread; returns at once.
  virtual void CloseAsync() = 0;
};

// The open connections of an HttpServer, and the order in which the idle ones became idle, so
// that a connection over the limit makes room by closing the connection idle the longest rather
// than being refused: a flood of connections that hold their place without asking anything
// cannot lock out a probe or a scrape, which asks at once.
//
// A connection is idle while no handler runs for it and no response is being written: waiting for
// a request, or reading one (a client that sends its header one byte at a time is idle too).
//
// Invariants:
//   1. After Register returns kAdmitted or kEvicted, at most `max_connections` are registered.
//      An evicted connection leaves the registry at once, although its socket closes a moment
//      later, on its own thread.
//   2. A connection is in `idle_` exactly when it is registered and idle; its entry holds the
//      key it has there (0 when busy). Keys only grow: the smallest is the one idle the longest.
//
// Thread-safe. Holds connections weakly: it owns none of them.
class ConnectionRegistry {
 public:
  enum class Admission : uint8_t {
    kAdmitted,  // registered, nothing closed
    kEvicted,   // registered after closing the connection idle the longest
    kFull,      // not registered: the limit is reached and every connection is busy
    kStopping,  // not registered: Stop() was called
  };

  // REQUIRES: max_connections >= 1.
  explicit ConnectionRegistry(size_t max_connections) : max_connections_(max_connections) {}

  ConnectionRegistry(const ConnectionRegistry&) = delete;
  ConnectionRegistry& operator=(const ConnectionRegistry&) = delete;

  // Registers a new connection, idle (it has asked nothing yet), as the newest idle one.
  // REQUIRES: `connection` is not null and not registered.
  Admission Register(const std::shared_ptr<Connection>& connection);
  // Forgets a connection; nothing happens if it is not registered (evicted, or never admitted).
  void Unregister(const Connection* connection);
  // Marks a registered connection idle (the newest idle one) or busy; nothing happens if it is
  // not registered.
  void SetIdle(const Connection* connection, bool idle);
  // Refuses every later registration and returns the connections registered, to be closed.
  std::vector<std::shared_ptr<Connection>> Stop();

  size_t size() const;
  size_t idle() const;

 private:
  struct Entry {
    std::weak_ptr<Connection> connection;
    uint64_t idle_key = 0;  // its key in idle_; 0: busy
  };

  const size_t max_connections_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_idle_key_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<const Connection*, Entry> connections_ ABSL_GUARDED_BY(mu_);
  absl::btree_map<uint64_t, const Connection*> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace isowatch::server::internal
