// SPDX-License-Identifier: Apache-2.0
#include "collectors/common/state_file.h"

#include <algorithm>
#include <fstream>
#include <string_view>
#include <utility>

#include "absl/strings/numbers.h"
#include <fmt/format.h>

#include "isowatch/common/atomic_file.h"

namespace isowatch::collectors {

size_t CollectorState::ConfirmUpTo(uint64_t durable_seq) {
  size_t done = 0;
  while (done < in_flight.size() && in_flight[done].seq <= durable_seq) {
    const std::vector<uint64_t>& position = in_flight[done].position;
    if (durable.size() < position.size()) durable.resize(position.size(), 0);
    for (size_t i = 0; i < position.size(); ++i) durable[i] = std::max(durable[i], position[i]);
    ++done;
  }
  in_flight.erase(in_flight.begin(), in_flight.begin() + static_cast<std::ptrdiff_t>(done));
  return done;
}

StateFile::StateFile(std::string dir, std::vector<std::string> position_fields)
    : path_(std::move(dir) + "/state"), fields_(std::move(position_fields)) {}

absl::StatusOr<std::optional<CollectorState>> StateFile::Load() const {
  std::ifstream in(path_);
  if (!in) return std::optional<CollectorState>();
  CollectorState s;
  s.durable.assign(fields_.size(), 0);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string name = line.substr(0, space);
    const std::string value = line.substr(space + 1);
    bool ok = true;
    if (name == "stream") {
      s.stream = value;
    } else if (name == "run") {
      ok = absl::SimpleAtoi(value, &s.run);
    } else if (name == "input") {
      s.input = value;
    } else if (name == "sent") {
      // SEQ:N:N..., a number per position field.
      CollectorState::InFlight f;
      std::vector<uint64_t> numbers;
      size_t begin = 0;
      while (ok) {
        const size_t colon = value.find(':', begin);
        uint64_t n = 0;
        ok = absl::SimpleAtoi(value.substr(begin, colon - begin), &n);
        numbers.push_back(n);
        if (colon == std::string::npos) break;
        begin = colon + 1;
      }
      ok = ok && numbers.size() == fields_.size() + 1;
      if (ok) {
        f.seq = numbers[0];
        f.position.assign(numbers.begin() + 1, numbers.end());
        s.in_flight.push_back(std::move(f));
      }
    } else {
      const auto field = std::find(fields_.begin(), fields_.end(), name);
      if (field != fields_.end()) ok = absl::SimpleAtoi(value, &s.durable[field - fields_.begin()]);
    }
    if (!ok) {
      return absl::DataLossError(
          fmt::format("{}:{}: bad value \"{}\" for {}", path_, number, value, name));
    }
  }
  if (s.stream.empty()) return absl::DataLossError(fmt::format("{}: no stream", path_));
  return std::optional<CollectorState>(std::move(s));
}

absl::Status StateFile::Save(const CollectorState& state) const {
  std::string text = fmt::format("stream {}\nrun {}\n", state.stream, state.run);
  for (size_t i = 0; i < fields_.size(); ++i) {
    text += fmt::format("{} {}\n", fields_[i], i < state.durable.size() ? state.durable[i] : 0);
  }
  if (!state.input.empty()) text += fmt::format("input {}\n", state.input);
  for (const CollectorState::InFlight& f : state.in_flight) {
    text += fmt::format("sent {}", f.seq);
    for (uint64_t n : f.position) text += fmt::format(":{}", n);
    text += "\n";
  }
  return WriteFileAtomically(path_, text, /*sync=*/true);
}

}  // namespace isowatch::collectors
