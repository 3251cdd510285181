// SPDX-License-Identifier: Apache-2.0
#include "tests/testing/source_dir.h"

namespace isowatch::testing {

const std::string& SourceDir() {
  static const std::string dir = ISOWATCH_SOURCE_DIR;
  return dir;
}

}  // namespace isowatch::testing
