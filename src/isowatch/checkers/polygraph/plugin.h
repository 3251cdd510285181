// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "isowatch/checkers/plugin.h"

namespace isowatch::checkers {

// The polygraph plug-in (docs/checkers/plugins.md): polygraph::CheckPolygraph at ser and si,
// without timestamps, with option si_variant.
CheckerInfo PolygraphPlugin();

}  // namespace isowatch::checkers
