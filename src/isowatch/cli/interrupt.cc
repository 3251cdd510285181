// SPDX-License-Identifier: Apache-2.0
#include "isowatch/cli/interrupt.h"

#include <csignal>

namespace isowatch::cli {
namespace {

// Lock-free, so that the handler may set it.
std::atomic<bool> interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void OnInterrupt(int /*signal*/) { interrupted.store(true); }

}  // namespace

const std::atomic<bool>& CatchInterrupts() {
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  return interrupted;
}

}  // namespace isowatch::cli
