// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

#include "isowatch/engine/internal/order_key.h"

namespace isowatch::engine::internal {

// An ordered map from OrderKey to a small trivially copyable V, for the per-key chains of the
// engine (versions, pending reads): a B+-tree whose leaves are sorted arrays linked in order.
//
// Shaped for how the engine uses it: entries are mostly added near the end (arrival order is
// commit order up to the disorder) and removed only as a prefix (finality, collection).
//  - A single-leaf tree (most keys hold a handful of entries) grows its leaf by doubling, from 4
//    entries up to kLeafSlots, so a cold key costs little memory. Erasing every entry keeps the
//    last leaf, so a key whose entries come and go does not allocate each time.
//  - Adding after the last entry while the last leaf has room touches only that leaf; a full last
//    leaf splits off just the new entry, so a sequentially filled tree has full leaves.
//  - A leaf holds its entries in [begin, count) of its arrays: erasing a prefix within a leaf
//    only moves `begin`. A leaf full at the end with a quarter or more free at the front moves
//    its entries to the front (at most 3 moves per entry erased since, amortised); otherwise it
//    grows (a lone leaf) or splits, so a sliding window does not compact at every insertion.
//  - erase_prefix frees the leaves and subtrees left of the cut: cost O(height + nodes freed).
//    Nodes on the left edge may be left under-full (the tree does not rebalance); every other
//    node was at least half full when it was split off and only the left edge loses entries, so
//    the height stays O(log n) of the entries kept (plus the left edge), and the root collapses
//    while it has a single child.
// Every search is O(log n): a descent of the inner nodes then a binary search in one leaf; the
// memmove of an insertion is bounded by kLeafSlots entries (leaf) and kInnerSlots children
// (inner nodes).
//
// Keys are unique: insert() requires a key not present. Iterators are invalidated by insert and
// erase_prefix (except the one insert returns). Not copyable; movable. Thread-compatible.
template <typename V>
class ChainMap {
  static_assert(std::is_trivially_copyable_v<V>);

 public:
  static constexpr uint32_t kLeafSlots = 32;
  static constexpr uint32_t kInnerSlots = 32;  // children of an inner node

 private:
  // A leaf: header, then `capacity` keys, then `capacity` values, in one allocation. Entries
  // occupy [begin, count); only the first leaf has begin > 0.
  struct Leaf {
    uint32_t begin;
    uint32_t count;
    uint32_t capacity;
    Leaf* prev;
    Leaf* next;

    static constexpr size_t KeysOffset() { return (sizeof(Leaf) + 7) & ~size_t{7}; }
    static constexpr size_t ValuesOffset(uint32_t cap) {
      return (KeysOffset() + cap * sizeof(OrderKey) + alignof(V) - 1) & ~(alignof(V) - 1);
    }
    static constexpr size_t Bytes(uint32_t cap) { return ValuesOffset(cap) + cap * sizeof(V); }

    OrderKey* keys() {
      return reinterpret_cast<OrderKey*>(reinterpret_cast<char*>(this) + KeysOffset());
    }
    V* values() {
      return reinterpret_cast<V*>(reinterpret_cast<char*>(this) + ValuesOffset(capacity));
    }
  };

  // An inner node: children[0..count), keys[0..count-1); every key in children[j + 1] and after
  // is >= keys[j], every key in children[0..j] is < keys[j].
  struct Inner {
    uint32_t count;
    OrderKey keys[kInnerSlots - 1];
    void* children[kInnerSlots];
  };

  static constexpr int kMaxHeight = 16;
  static constexpr int kBackSteps = 4;
  static constexpr uint32_t kFirstLeafSlots = 4;

 public:
  class iterator {
   public:
    iterator() = default;
    const OrderKey& key() const { return leaf_->keys()[i_]; }
    V& value() const { return leaf_->values()[i_]; }
    iterator& operator++() {
      if (++i_ == leaf_->count && leaf_->next != nullptr) {
        leaf_ = leaf_->next;
        i_ = 0;
      }
      return *this;
    }
    iterator& operator--() {
      if (i_ == leaf_->begin) {
        leaf_ = leaf_->prev;
        i_ = leaf_->count;
      }
      --i_;
      return *this;
    }
    friend bool operator==(const iterator& a, const iterator& b) {
      return a.leaf_ == b.leaf_ && a.i_ == b.i_;
    }

   private:
    friend class ChainMap;
    iterator(Leaf* leaf, uint32_t i) : leaf_(leaf), i_(i) {}
    Leaf* leaf_ = nullptr;
    uint32_t i_ = 0;
  };

  ChainMap() = default;
  ChainMap(const ChainMap&) = delete;
  ChainMap& operator=(const ChainMap&) = delete;
  ChainMap(ChainMap&& o) noexcept { Steal(o); }
  ChainMap& operator=(ChainMap&& o) noexcept {
    if (this != &o) {
      Release();
      Steal(o);
    }
    return *this;
  }
  ~ChainMap() { Release(); }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  iterator begin() const { return iterator(first_, first_->begin); }
  iterator end() const { return iterator(last_, last_->count); }

  // Asks for the first lines of the last and first leaves (a hint; no effect on the contents).
  [[gnu::always_inline]] void PrefetchEnds() const {
    __builtin_prefetch(last_);
    __builtin_prefetch(reinterpret_cast<const char*>(last_) + 64);
    if (first_ != last_) __builtin_prefetch(first_);
  }

  // REQUIRES: !empty().
  const OrderKey& front_key() const { return first_->keys()[first_->begin]; }
  const OrderKey& back_key() const { return last_->keys()[last_->count - 1]; }
  iterator last() const { return iterator(last_, last_->count - 1); }

  // The first entry with key >= k / > k.
  // Searches near the end (the engine's usual case) stay in the last leaf: no descent, and a few
  // steps back from the end before a binary search of the rest of the leaf.
  iterator lower_bound(const OrderKey& k) const {
    if (InLastLeaf(k)) {
      Leaf* leaf = last_;
      const OrderKey* keys = leaf->keys();
      uint32_t i = leaf->count;
      for (int step = 0; step < kBackSteps; ++step) {
        if (i == leaf->begin || keys[i - 1] < k) return iterator(leaf, i);
        --i;
      }
      return iterator(leaf, LowerBoundIn(keys, leaf->begin, i, k));
    }
    Leaf* leaf = Descend(k);
    return Normalize(leaf, LowerBoundIn(leaf->keys(), leaf->begin, leaf->count, k));
  }
  iterator upper_bound(const OrderKey& k) const {
    if (InLastLeaf(k)) return iterator(last_, LastLeafUpperBound(k));
    Leaf* leaf = Descend(k);
    return Normalize(leaf, UpperBoundIn(leaf->keys(), leaf->begin, leaf->count, k));
  }

  // Adds (k, v). REQUIRES: no entry has key k.
  iterator insert(const OrderKey& k, const V& v) {
    Leaf* leaf = last_;
    if (leaf->count < leaf->capacity) {
      // After the last entry, with room at the end of the last leaf: no descent.
      if (size_ == 0 || back_key() < k) {
        const uint32_t i = leaf->count++;
        leaf->keys()[i] = k;
        leaf->values()[i] = v;
        ++size_;
        return iterator(leaf, i);
      }
      // Near the end: still in the last leaf.
      if (InLastLeaf(k)) {
        const uint32_t i = LastLeafUpperBound(k);
        ShiftUp(leaf, i, leaf->count);
        ++leaf->count;
        leaf->keys()[i] = k;
        leaf->values()[i] = v;
        ++size_;
        return iterator(leaf, i);
      }
    }
    return InsertSlow(k, v);
  }

  // Removes every entry before `it`; returns how many. Erasing everything keeps the last leaf
  // (empty), ready for the next entries.
  size_t erase_prefix(iterator it) {
    if (it.leaf_ == first_) {
      // Within the first leaf: the common case.
      const size_t erased = it.i_ - first_->begin;
      if (erased == 0) return 0;
      first_->begin = it.i_;
      size_ -= erased;
      if (size_ == 0) first_->begin = first_->count = 0;
      return erased;
    }
    return ErasePrefixSlow(it);
  }

  void clear() {
    if (root_ == &empty_leaf_) return;
    Release();
    root_ = first_ = last_ = &empty_leaf_;
  }

 private:
  static Leaf* NewLeaf(uint32_t capacity) {
    void* raw = ::operator new(Leaf::Bytes(capacity));
    return new (raw) Leaf{0, 0, capacity, nullptr, nullptr};
  }
  static void DeleteLeaf(Leaf* leaf) { ::operator delete(leaf); }

  // The child of `inner` whose range holds k: the number of separators <= k.
  static uint32_t ChildIndex(const Inner* inner, const OrderKey& k) {
    uint32_t lo = 0;
    uint32_t n = inner->count - 1;
    while (n > 0) {
      const uint32_t half = n / 2;
      if (!(k < inner->keys[lo + half])) {
        lo += half + 1;
        n -= half + 1;
      } else {
        n = half;
      }
    }
    return lo;
  }

  // Whether the first entry >= k (and the first > k) is in the last leaf or the end: the tree is
  // one leaf, or k is at least the last leaf's first key. REQUIRES: !empty() unless one leaf.
  bool InLastLeaf(const OrderKey& k) const {
    return last_ == first_ || !(k < last_->keys()[last_->begin]);
  }

  // Upper bound within the last leaf, a few steps back from its end first.
  uint32_t LastLeafUpperBound(const OrderKey& k) const {
    const Leaf* leaf = last_;
    const OrderKey* keys = const_cast<Leaf*>(leaf)->keys();
    uint32_t i = leaf->count;
    for (int step = 0; step < kBackSteps; ++step) {
      if (i == leaf->begin || !(k < keys[i - 1])) return i;
      --i;
    }
    return UpperBoundIn(keys, leaf->begin, i, k);
  }

  // The first index in [lo, hi) whose key is >= k (LowerBoundIn) or > k (UpperBoundIn), or hi.
  static uint32_t LowerBoundIn(const OrderKey* keys, uint32_t lo, uint32_t hi, const OrderKey& k) {
    uint32_t n = hi - lo;
    while (n > 0) {
      const uint32_t half = n / 2;
      if (keys[lo + half] < k) {
        lo += half + 1;
        n -= half + 1;
      } else {
        n = half;
      }
    }
    return lo;
  }
  static uint32_t UpperBoundIn(const OrderKey* keys, uint32_t lo, uint32_t hi, const OrderKey& k) {
    uint32_t n = hi - lo;
    while (n > 0) {
      const uint32_t half = n / 2;
      if (!(k < keys[lo + half])) {
        lo += half + 1;
        n -= half + 1;
      } else {
        n = half;
      }
    }
    return lo;
  }

  Leaf* Descend(const OrderKey& k) const {
    void* node = root_;
    for (int level = height_; level > 0; --level) {
      Inner* inner = static_cast<Inner*>(node);
      node = inner->children[ChildIndex(inner, k)];
    }
    return static_cast<Leaf*>(node);
  }

  // Position i of `leaf` as an iterator: past its last entry means the next leaf's first.
  static iterator Normalize(Leaf* leaf, uint32_t i) {
    if (i == leaf->count && leaf->next != nullptr) return iterator(leaf->next, 0);
    return iterator(leaf, i);
  }

  // Moves entries [from, to) of `leaf` one place up.
  static void ShiftUp(Leaf* leaf, uint32_t from, uint32_t to) {
    if (from == to) return;
    OrderKey* keys = leaf->keys();
    V* values = leaf->values();
    std::memmove(keys + from + 1, keys + from, (to - from) * sizeof(OrderKey));
    std::memmove(values + from + 1, values + from, (to - from) * sizeof(V));
  }

  // Inserts at position pos of a leaf with room at the end; returns pos.
  static uint32_t InsertInLeaf(Leaf* leaf, uint32_t pos, const OrderKey& k, const V& v) {
    ShiftUp(leaf, pos, leaf->count);
    ++leaf->count;
    leaf->keys()[pos] = k;
    leaf->values()[pos] = v;
    return pos;
  }

  // Moves the entries of `leaf` to the front of its arrays (begin = 0).
  static void Compact(Leaf* leaf) {
    const uint32_t live = leaf->count - leaf->begin;
    std::memmove(leaf->keys(), leaf->keys() + leaf->begin, live * sizeof(OrderKey));
    std::memmove(leaf->values(), leaf->values() + leaf->begin, live * sizeof(V));
    leaf->begin = 0;
    leaf->count = live;
  }

  [[gnu::noinline]] iterator InsertSlow(const OrderKey& k, const V& v) {
    if (root_ == &empty_leaf_) {
      Leaf* leaf = NewLeaf(kFirstLeafSlots);
      leaf->keys()[0] = k;
      leaf->values()[0] = v;
      leaf->count = 1;
      root_ = first_ = last_ = leaf;
      size_ = 1;
      return iterator(leaf, 0);
    }
    Inner* path[kMaxHeight];
    uint32_t slot[kMaxHeight];
    void* node = root_;
    for (int level = height_; level > 0; --level) {
      Inner* inner = static_cast<Inner*>(node);
      const uint32_t c = ChildIndex(inner, k);
      path[level - 1] = inner;
      slot[level - 1] = c;
      node = inner->children[c];
    }
    Leaf* leaf = static_cast<Leaf*>(node);
    uint32_t pos = UpperBoundIn(leaf->keys(), leaf->begin, leaf->count, k);
    ++size_;
    if (leaf->count < leaf->capacity) return iterator(leaf, InsertInLeaf(leaf, pos, k, v));
    // Full at the end. With a quarter or more free at the front, the entries move to the front:
    // at most 3 moves per entry erased since, amortised. Otherwise the leaf grows or splits.
    const uint32_t begin = leaf->begin;
    if (begin > 0) {
      pos -= begin;
      Compact(leaf);
      if (begin * 4 >= leaf->capacity) return iterator(leaf, InsertInLeaf(leaf, pos, k, v));
    }
    if (height_ == 0 && leaf->capacity < kLeafSlots) {
      leaf = GrowRoot(leaf);
      return iterator(leaf, InsertInLeaf(leaf, pos, k, v));
    }
    // Split the full leaf (begin == 0); a new last entry goes alone into the new leaf.
    Leaf* right = NewLeaf(kLeafSlots);
    iterator result;
    if (pos == leaf->count && leaf == last_) {
      right->keys()[0] = k;
      right->values()[0] = v;
      right->count = 1;
      result = iterator(right, 0);
    } else {
      const uint32_t mid = leaf->count / 2;
      const uint32_t moved = leaf->count - mid;
      std::memcpy(right->keys(), leaf->keys() + mid, moved * sizeof(OrderKey));
      std::memcpy(right->values(), leaf->values() + mid, moved * sizeof(V));
      right->count = moved;
      leaf->count = mid;
      if (pos <= mid) {
        result = iterator(leaf, InsertInLeaf(leaf, pos, k, v));
      } else {
        result = iterator(right, InsertInLeaf(right, pos - mid, k, v));
      }
    }
    right->prev = leaf;
    right->next = leaf->next;
    if (leaf->next != nullptr) leaf->next->prev = right;
    leaf->next = right;
    if (last_ == leaf) last_ = right;
    InsertChild(path, slot, 0, right->keys()[0], right);
    return result;
  }

  // The root leaf is full below kLeafSlots: doubles its capacity.
  Leaf* GrowRoot(Leaf* leaf) {
    const uint32_t capacity = leaf->capacity * 2 < kLeafSlots ? leaf->capacity * 2 : kLeafSlots;
    Leaf* grown = NewLeaf(capacity);
    const uint32_t n = leaf->count - leaf->begin;
    std::memcpy(grown->keys(), leaf->keys() + leaf->begin, n * sizeof(OrderKey));
    std::memcpy(grown->values(), leaf->values() + leaf->begin, n * sizeof(V));
    grown->count = n;
    DeleteLeaf(leaf);
    root_ = first_ = last_ = grown;
    return grown;
  }

  // Inserts separator `sep` and child `right` just after path[level]'s child slot[level] (the
  // node that split), splitting inner nodes upward as needed.
  void InsertChild(Inner** path, const uint32_t* slot, int level, OrderKey sep, void* right) {
    while (true) {
      if (level == height_) {
        // The root split: a new root above it.
        Inner* root = new Inner;
        root->count = 2;
        root->keys[0] = sep;
        root->children[0] = root_;
        root->children[1] = right;
        root_ = root;
        ++height_;
        return;
      }
      Inner* inner = path[level];
      const uint32_t pos = slot[level] + 1;  // index of the new child
      if (inner->count < kInnerSlots) {
        InsertInInner(inner, pos, sep, right);
        return;
      }
      // Split: the new right node takes the upper children; the separator between the two
      // halves moves up. A new last child of the right edge goes alone into the new node.
      Inner* upper = new Inner;
      OrderKey up;
      if (pos == inner->count && IsRightEdge(path, slot, level)) {
        upper->count = 1;
        upper->children[0] = right;
        up = sep;
      } else {
        const uint32_t mid = inner->count / 2;  // children [0, mid) stay
        const uint32_t moved = inner->count - mid;
        std::memcpy(upper->children, inner->children + mid, moved * sizeof(void*));
        std::memcpy(upper->keys, inner->keys + mid, (moved - 1) * sizeof(OrderKey));
        up = inner->keys[mid - 1];
        upper->count = moved;
        inner->count = mid;
        if (pos <= mid) {
          InsertInInner(inner, pos, sep, right);
        } else {
          InsertInInner(upper, pos - mid, sep, right);
        }
      }
      sep = up;
      right = upper;
      ++level;
    }
  }

  // Whether path[level] is the rightmost node of its level.
  bool IsRightEdge(Inner** path, const uint32_t* slot, int level) const {
    for (int l = level + 1; l < height_; ++l) {
      if (slot[l] + 1 != path[l]->count) return false;
    }
    return true;
  }

  static void InsertInInner(Inner* inner, uint32_t pos, const OrderKey& sep, void* child) {
    // Child pos, separator pos - 1.
    std::memmove(inner->children + pos + 1, inner->children + pos,
                 (inner->count - pos) * sizeof(void*));
    std::memmove(inner->keys + pos, inner->keys + pos - 1, (inner->count - pos) * sizeof(OrderKey));
    inner->children[pos] = child;
    inner->keys[pos - 1] = sep;
    ++inner->count;
  }

  // erase_prefix when the cut lies beyond the first leaf.
  [[gnu::noinline]] size_t ErasePrefixSlow(iterator it) {
    const bool all = it == end();
    size_t erased = 0;
    // Free everything left of the path to it's leaf, level by level.
    const OrderKey k = all ? OrderKey() : it.key();
    Inner* inner = static_cast<Inner*>(root_);
    for (int level = height_; level > 0; --level) {
      const uint32_t c = all ? inner->count - 1 : ChildIndex(inner, k);
      for (uint32_t j = 0; j < c; ++j) erased += Free(inner->children[j], level - 1);
      if (c > 0) {
        std::memmove(inner->children, inner->children + c, (inner->count - c) * sizeof(void*));
        std::memmove(inner->keys, inner->keys + c, (inner->count - c - 1) * sizeof(OrderKey));
        inner->count -= c;
      }
      if (level > 1) inner = static_cast<Inner*>(inner->children[0]);
    }
    while (height_ > 0 && static_cast<Inner*>(root_)->count == 1) {
      Inner* old = static_cast<Inner*>(root_);
      root_ = old->children[0];
      delete old;
      --height_;
    }
    Leaf* leaf = it.leaf_;
    first_ = leaf;
    leaf->prev = nullptr;
    erased += it.i_;  // leaves after the first have begin == 0
    leaf->begin = it.i_;
    size_ -= erased;
    if (size_ == 0) leaf->begin = leaf->count = 0;
    return erased;
  }

  // Frees the subtree at `node` (`level` 0 = a leaf); returns the entries it held.
  static size_t Free(void* node, int level) {
    if (level == 0) {
      Leaf* leaf = static_cast<Leaf*>(node);
      const size_t n = leaf->count - leaf->begin;
      DeleteLeaf(leaf);
      return n;
    }
    Inner* inner = static_cast<Inner*>(node);
    size_t n = 0;
    for (uint32_t j = 0; j < inner->count; ++j) n += Free(inner->children[j], level - 1);
    delete inner;
    return n;
  }

  // Frees every node; leaves the members dangling.
  void Release() {
    if (root_ != &empty_leaf_) Free(root_, height_);
    height_ = 0;
    size_ = 0;
  }

  void Steal(ChainMap& o) {
    root_ = o.root_;
    first_ = o.first_;
    last_ = o.last_;
    size_ = o.size_;
    height_ = o.height_;
    o.root_ = o.first_ = o.last_ = &empty_leaf_;
    o.size_ = 0;
    o.height_ = 0;
  }

  // The leaf of every map that never held an entry: no capacity, never written.
  static inline Leaf empty_leaf_{0, 0, 0, nullptr, nullptr};

  void* root_ = &empty_leaf_;
  Leaf* first_ = &empty_leaf_;
  Leaf* last_ = &empty_leaf_;
  uint32_t size_ = 0;
  int height_ = 0;  // inner levels above the leaves
};

}  // namespace isowatch::engine::internal
