// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "isowatch/checkers/plugin.h"

namespace isowatch::checkers {

// The chronos plug-in (docs/checkers/plugins.md): RunChronos at si and ser, one replay per
// configured level, with the window trust rule of start snapshots.
CheckerInfo ChronosPlugin();

}  // namespace isowatch::checkers
