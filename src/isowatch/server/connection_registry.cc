// SPDX-License-Identifier: Apache-2.0
#include "isowatch/server/internal/connection_registry.h"

#include <utility>

namespace isowatch::server::internal {

ConnectionRegistry::Admission ConnectionRegistry::Register(
    const std::shared_ptr<Connection>& connection) {
  std::shared_ptr<Connection> evicted;
  Admission admission = Admission::kAdmitted;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return Admission::kStopping;
    if (connections_.size() >= max_connections_) {
      if (idle_.empty()) return Admission::kFull;
      auto oldest = idle_.begin();
      auto it = connections_.find(oldest->second);
      // An expired connection is being destroyed: its place is free already.
      evicted = it->second.connection.lock();
      connections_.erase(it);
      idle_.erase(oldest);
      if (evicted != nullptr) admission = Admission::kEvicted;
    }
    const uint64_t key = next_idle_key_++;
    connections_.emplace(connection.get(), Entry{.connection = connection, .idle_key = key});
    idle_.emplace(key, connection.get());
  }
  // Outside the lock: closing posts to the connection's thread, and dropping the last reference
  // here would run its destructor, which unregisters.
  if (evicted != nullptr) evicted->CloseAsync();
  return admission;
}

void ConnectionRegistry::Unregister(const Connection* connection) {
  absl::MutexLock lock(&mu_);
  auto it = connections_.find(connection);
  if (it == connections_.end()) return;
  if (it->second.idle_key != 0) idle_.erase(it->second.idle_key);
  connections_.erase(it);
}

void ConnectionRegistry::SetIdle(const Connection* connection, bool idle) {
  absl::MutexLock lock(&mu_);
  auto it = connections_.find(connection);
  if (it == connections_.end()) return;
  Entry& entry = it->second;
  if (entry.idle_key != 0) {
    if (idle) return;  // idle already: it keeps its place in the order
    idle_.erase(entry.idle_key);
    entry.idle_key = 0;
    return;
  }
  if (!idle) return;
  entry.idle_key = next_idle_key_++;
  idle_.emplace(entry.idle_key, connection);
}

std::vector<std::shared_ptr<Connection>> ConnectionRegistry::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  std::vector<std::shared_ptr<Connection>> open;
  open.reserve(connections_.size());
  for (auto& [ptr, entry] : connections_) {
    if (std::shared_ptr<Connection> c = entry.connection.lock()) open.push_back(std::move(c));
  }
  return open;
}

size_t ConnectionRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return connections_.size();
}

size_t ConnectionRegistry::idle() const {
  absl::MutexLock lock(&mu_);
  return idle_.size();
}

}  // namespace isowatch::server::internal
