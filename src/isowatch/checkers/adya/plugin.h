// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "isowatch/checkers/plugin.h"

namespace isowatch::checkers {

// The adya plug-in (docs/checkers/plugins.md): adya::CheckAdya at rc, rr, si and ser, with
// option max_search_steps.
CheckerInfo AdyaPlugin();

}  // namespace isowatch::checkers
