// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"

#include "isowatch/store/violation_record.h"

namespace isowatch::server {

// Where the HTTP API reads final violations from; the daemon implements it over its violation
// store.
//
// Thread-safety: implementations must be thread-safe; the HTTP server may call Query() from
// several threads at once.
class ViolationSource {
 public:
  virtual ~ViolationSource() = default;

  // Returns at most `limit` violations matching `filter`, in the order they became final,
  // starting where `page_token` (empty: the first page) left off, and the token of the next page
  // (empty when there is none). Walking the tokens from the first page visits every matching
  // violation exactly once. REQUIRES: limit >= 1.
  // Errors: InvalidArgument for a page token this source did not issue (or issued for another
  // filter); Unavailable when the store cannot be read right now.
  virtual absl::StatusOr<store::ViolationPage> Query(const store::ViolationFilter& filter,
                                                     size_t limit, std::string_view page_token) = 0;

  // The summaries of the violations not stored in full (docs/operations.md, "Bounded
  // findings") matching `filter`, paged as Query pages. REQUIRES: limit >= 1. Errors: as Query;
  // Unimplemented where a source keeps no summaries (the default).
  virtual absl::StatusOr<store::SummaryPage> QuerySummaries(const store::SummaryFilter& /*filter*/,
                                                            size_t /*limit*/,
                                                            std::string_view /*page_token*/) {
    return absl::UnimplementedError("this source keeps no summaries");
  }
};

}  // namespace isowatch::server
