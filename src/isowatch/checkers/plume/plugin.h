// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "isowatch/checkers/plugin.h"

namespace isowatch::checkers {

// The plume plug-in (docs/checkers/plugins.md): plume::CheckPlume at rc, ra and tcc, from the
// reads alone (no timestamps), with option max_explained_cycles.
CheckerInfo PlumePlugin();

}  // namespace isowatch::checkers
