// U64Map: a map from 64-bit keys to pointers, in one flat array.
//
// Why (issue 18): SlabAllocator looks up a slab by its chunk's address /
// granularity on every Find, Free and chunk returned: a million chunks at the
// paper's scale. std::unordered_map's node per entry cost a heap allocation
// and a cache miss per lookup; here an entry is 16 bytes in one array.
//
// Contract:
//  - Find(k) returns the value stored for k, or nullptr; Put(k, v) stores v
//    (v != nullptr) for k, replacing any; Erase(k) removes k (no-op if absent).
//  - Any key but kNoKey (2^64 - 1) may be stored.
//  - Iteration order (ForEach) is unspecified: callers that need an order sort.
//  - Open addressing with linear probing, at most half full (it doubles), and
//    deletion by shifting back the entries after the erased one, so there are
//    no tombstones and a lookup stops at the first empty entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace dmb::apps::kv {

template <typename T>
class U64Map {
 public:
  static constexpr uint64_t kNoKey = ~0ull;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  T* Find(uint64_t k) const {
    if (size_ == 0) return nullptr;
    for (size_t i = Home(k);; i = (i + 1) & mask_) {
      if (slots_[i].key == k) return slots_[i].value;
      if (slots_[i].key == kNoKey) return nullptr;
    }
  }

  void Put(uint64_t k, T* v) {
    if (k == kNoKey) throw std::invalid_argument("U64Map: the key 2^64-1 is reserved");
    if (2 * (size_ + 1) > slots_.size()) Grow();
    size_t i = Home(k);
    while (slots_[i].key != kNoKey && slots_[i].key != k) i = (i + 1) & mask_;
    if (slots_[i].key == kNoKey) ++size_;
    slots_[i] = Slot{k, v};
  }

  void Erase(uint64_t k) {
    if (size_ == 0) return;
    size_t i = Home(k);
    while (slots_[i].key != k) {
      if (slots_[i].key == kNoKey) return;
      i = (i + 1) & mask_;
    }
    // Shift back every later entry of the run that may move into the hole:
    // one whose home is not cyclically in (hole, j].
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; slots_[j].key != kNoKey; j = (j + 1) & mask_) {
      const size_t home = Home(slots_[j].key);
      const bool stays = hole < j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = Slot{};
    --size_;
  }

  void Clear() {
    slots_.clear();
    mask_ = 0;
    size_ = 0;
  }

  template <typename F>
  void ForEach(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.key != kNoKey) f(s.key, s.value);
    }
  }

 private:
  struct Slot {
    uint64_t key = kNoKey;
    T* value = nullptr;
  };

  // Fibonacci hashing: consecutive keys (chunks side by side) spread out.
  size_t Home(uint64_t k) const { return (k * 0x9e3779b97f4a7c15ull) >> shift_ & mask_; }

  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    const size_t n = old.empty() ? 16 : 2 * old.size();
    slots_.assign(n, Slot{});
    mask_ = n - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(n));
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != kNoKey) Put(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace dmb::apps::kv
