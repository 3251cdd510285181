// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>

namespace isowatch::cli {

// Catches SIGINT and SIGTERM for a command that stops cleanly when asked (demo, replay): from the
// call on, either signal sets the flag returned, and the command notices it and winds down. The
// flag is the process's one; calling again only installs the handlers again.
const std::atomic<bool>& CatchInterrupts();

}  // namespace isowatch::cli
