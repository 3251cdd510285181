// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

namespace isowatch::testing {

// The repository's root, for tests that read files of the source tree (golden histories,
// corpora, docs). Compiled into one object of its own so that the test sources themselves do not
// depend on where the tree is checked out, and a compiler cache shares them between checkouts.
const std::string& SourceDir();

}  // namespace isowatch::testing
