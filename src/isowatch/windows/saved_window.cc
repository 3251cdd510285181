// SPDX-License-Identifier: Apache-2.0
#include "isowatch/windows/saved_window.h"

#include <limits>
#include <sstream>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "isowatch/formats/native.h"

namespace isowatch::windows {
namespace {

void SaveTimestamp(history::Timestamp t, v1::Timestamp* out) {
  out->set_physical(t.physical);
  out->set_logical(t.logical);
}

history::Timestamp LoadTimestamp(const v1::Timestamp& t) {
  return history::Timestamp{t.physical(), t.logical()};
}

}  // namespace

absl::Status SaveWindow(const Window& w, v1::SavedWindow* out) {
  out->Clear();
  std::ostringstream native;
  if (absl::Status s = formats::WriteNative(w.history, formats::NativeEncoding::kBinary, native);
      !s.ok()) {
    return absl::Status(s.code(),
                        fmt::format("window {}: {}", w.scope.index, std::string(s.message())));
  }
  out->set_index(w.scope.index);
  out->set_history(std::move(native).str());
  out->set_first_proper(w.scope.first_proper);
  SaveTimestamp(w.scope.base, out->mutable_base());
  out->set_base_xid_end(w.scope.base_xid_end);
  out->set_base_without_xid(w.scope.base_without_xid);
  out->mutable_origins()->Add(w.origins.begin(), w.origins.end());
  SaveTimestamp(w.first_commit, out->mutable_first_commit());
  SaveTimestamp(w.last_commit, out->mutable_last_commit());
  out->set_own(w.own);
  out->set_lead_in(w.lead_in);
  out->set_own_beyond_base(w.own_beyond_base);
  out->set_defect(w.defect);
  return absl::OkStatus();
}

absl::StatusOr<Window> LoadWindow(const v1::SavedWindow& in) {
  const std::string source = fmt::format("window {}", in.index());
  absl::StatusOr<history::History> h = formats::ReadNativeString(in.history(), {}, source);
  if (!h.ok()) {
    return absl::DataLossError(
        fmt::format("saved {}: {}", source, std::string(h.status().message())));
  }
  Window w;
  w.history = *std::move(h);
  w.scope.index = in.index();
  w.scope.first_proper = in.first_proper();
  w.scope.base = LoadTimestamp(in.base());
  w.scope.base_xid_end = in.base_xid_end();
  w.scope.base_without_xid = in.base_without_xid();
  w.first_commit = LoadTimestamp(in.first_commit());
  w.last_commit = LoadTimestamp(in.last_commit());
  w.own = in.own();
  w.lead_in = in.lead_in();
  w.own_beyond_base = in.own_beyond_base();
  w.defect = in.defect();
  for (const uint32_t origin : in.origins()) {
    if (origin > std::numeric_limits<uint16_t>::max()) {
      return absl::DataLossError(fmt::format("saved {}: origin {}", source, origin));
    }
    w.origins.push_back(static_cast<uint16_t>(origin));
  }
  const size_t n = w.history.size();
  // A window the cutter could not build is never checked (Window::defect): only its fields are
  // reported.
  const bool consistent =
      !w.defect.empty() || (w.origins.size() == n && w.scope.first_proper == w.lead_in &&
                            w.lead_in + w.own == n && w.own_beyond_base <= w.own);
  if (!consistent) {
    return absl::DataLossError(
        fmt::format("saved {}: {} transactions, {} origins, {} lead-in and {} own, first proper {}",
                    source, n, w.origins.size(), w.lead_in, w.own, w.scope.first_proper));
  }
  return w;
}

}  // namespace isowatch::windows
