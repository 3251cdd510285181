// SPDX-License-Identifier: Apache-2.0
#include "isowatch/sim/mv_store.h"

#include <algorithm>

namespace isowatch::sim {

using history::Value;

MvStore::MvStore(uint64_t keys, bool lists) : lists_(lists) {
  if (keys > 0) EnsureKey(keys - 1);
}

void MvStore::EnsureKey(uint64_t key) {
  if (key < chains_.size()) return;
  const size_t n = static_cast<size_t>(key) + 1;
  heads_.resize(n);
  chains_.resize(n);
  aborted_.resize(n);
  has_aborted_.resize(n, 0);
  if (lists_) {
    elements_.resize(n);
  } else {
    with_intermediate_.resize(n);
  }
}

const MvStore::Version* MvStore::Visible(uint64_t key, int64_t ts) const {
  const std::vector<Version>& chain = chains_[key];
  // Snapshots are nearly always recent: gallop back from the newest version to bracket the
  // answer, then binary-search the bracket. O(log d) for the d versions newer than ts.
  size_t hi = chain.size();  // chain[hi..] are all newer than ts
  size_t step = 1;
  while (hi > 0 && chain[hi - 1].cts > ts) {
    const size_t lo = hi > step ? hi - step : 0;
    if (chain[lo].cts > ts) {
      hi = lo;
      step *= 2;
      continue;
    }
    // chain[lo] is visible, chain[hi - 1] is not.
    auto it = std::upper_bound(chain.begin() + static_cast<ptrdiff_t>(lo),
                               chain.begin() + static_cast<ptrdiff_t>(hi), ts,
                               [](int64_t t, const Version& v) { return t < v.cts; });
    hi = static_cast<size_t>(it - chain.begin());
    break;
  }
  return hi == 0 ? nullptr : &chain[hi - 1];
}

const MvStore::Version* MvStore::Previous(uint64_t key, const Version* v) const {
  if (v == nullptr || v == chains_[key].data()) return nullptr;
  return v - 1;
}

const MvStore::Version* MvStore::Newest(uint64_t key) const {
  const std::vector<Version>& chain = chains_[key];
  return chain.empty() ? nullptr : &chain.back();
}

Value MvStore::ReadRegister(uint64_t key, int64_t ts) const {
  const Head& head = heads_[key];
  if (head.cts <= ts) return head.cts == Head().cts ? Value::Absent() : Value::Int(head.data);
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
  heads_[key] = Head{.cts = cts, .data = final_value};
}

void MvStore::InstallList(uint64_t key, int64_t cts, uint32_t writer,
                          std::span<const Value> elements) {
  std::vector<Value>& all = elements_[key];
  all.insert(all.end(), elements.begin(), elements.end());
  chains_[key].push_back(
      Version{.cts = cts, .data = static_cast<int64_t>(all.size()), .writer = writer});
  heads_[key] = Head{.cts = cts, .data = static_cast<int64_t>(all.size())};
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
