// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <csignal>
#include <pthread.h>
#include <thread>

namespace isowatch {

// SIGTERM and SIGINT, the signals that ask a long-running isowatch process to stop, are taken by
// sigwait rather than by a handler. BlockStopSignals blocks them in the calling thread, which
// every thread it starts afterwards inherits, so call it first thing in main(); it also ignores
// SIGPIPE (a peer that went away is an error return, not a death). Returns the set to wait on.
inline sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return signals;
}

// Waits for one of `signals` (from BlockStopSignals) and returns it.
inline int WaitForStopSignal(const sigset_t& signals) {
  int sig = 0;
  sigwait(&signals, &sig);
  return sig;
}

// BlockStopSignals, and a detached thread that sets `*stop` when SIGTERM or SIGINT comes: for a
// program whose loops poll a flag to end cleanly. Call it first thing in main(); `stop` must
// live as long as the process (a global).
inline void SetOnStopSignal(std::atomic<bool>* stop) {
  const sigset_t signals = BlockStopSignals();
  std::thread([signals, stop] {
    WaitForStopSignal(signals);
    stop->store(true);
  }).detach();
}

}  // namespace isowatch
