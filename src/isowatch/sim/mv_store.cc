// SPDX-License-Identifier: Apache-2.0
#include "isowatch/sim/mv_store.h"

#include <algorithm>
#include <limits>

namespace isowatch::sim {

using history::Value;

MvStore::MvStore(uint64_t keys, bool lists) : chains_(keys), aborted_(keys), has_aborted_(keys, 0) {
  if (lists) {
    elements_.resize(keys);
  } else {
    with_intermediate_.resize(keys);
  }
}

const MvStore::Version* MvStore::Visible(uint64_t key, int64_t ts) const {
  const std::vector<Version>& chain = chains_[key];
  auto it = std::upper_bound(chain.begin(), chain.end(), ts,
                             [](int64_t t, const Version& v) { return t < v.cts; });
  if (it == chain.begin()) return nullptr;
  return &*(it - 1);
}

const MvStore::Version* MvStore::Previous(uint64_t key, const Version* v) const {
  if (v == nullptr || v == chains_[key].data()) return nullptr;
  return v - 1;
}

const MvStore::Version* MvStore::Newest(uint64_t key) const {
  const std::vector<Version>& chain = chains_[key];
  return chain.empty() ? nullptr : &chain.back();
}

int64_t MvStore::LastCommit(uint64_t key) const {
  const Version* v = Newest(key);
  return v == nullptr ? std::numeric_limits<int64_t>::min() : v->cts;
}

Value MvStore::ReadRegister(uint64_t key, int64_t ts) const {
  const Version* v = Visible(key, ts);
  return v == nullptr ? Value::Absent() : v->value();
}

std::span<const Value> MvStore::ListThrough(uint64_t key, const Version* v) const {
  if (v == nullptr) return {};
  return std::span<const Value>(elements_[key]).first(static_cast<size_t>(v->data));
}

const MvStore::Version* MvStore::VisibleWithIntermediate(uint64_t key, int64_t ts) const {
  const std::vector<Version>& chain = chains_[key];
  const std::vector<uint32_t>& idx = with_intermediate_[key];
  auto it = std::upper_bound(idx.begin(), idx.end(), ts,
                             [&](int64_t t, uint32_t i) { return t < chain[i].cts; });
  if (it == idx.begin()) return nullptr;
  return &chain[*(it - 1)];
}

void MvStore::InstallRegister(uint64_t key, int64_t cts, uint32_t writer, int64_t final_value,
                              int64_t intermediate) {
  std::vector<Version>& chain = chains_[key];
  if (intermediate != 0) with_intermediate_[key].push_back(static_cast<uint32_t>(chain.size()));
  chain.push_back(
      Version{.cts = cts, .data = final_value, .intermediate = intermediate, .writer = writer});
}

void MvStore::InstallList(uint64_t key, int64_t cts, uint32_t writer,
                          std::span<const Value> elements) {
  std::vector<Value>& all = elements_[key];
  all.insert(all.end(), elements.begin(), elements.end());
  chains_[key].push_back(
      Version{.cts = cts, .data = static_cast<int64_t>(all.size()), .writer = writer});
}

void MvStore::RecordAbortedWrite(uint64_t key, Value value, uint32_t writer) {
  aborted_[key] = AbortedWrite{.value = value, .writer = writer};
  has_aborted_[key] = 1;
}

std::optional<MvStore::AbortedWrite> MvStore::LastAbortedWrite(uint64_t key) const {
  if (!has_aborted_[key]) return std::nullopt;
  return aborted_[key];
}

}  // namespace isowatch::sim
