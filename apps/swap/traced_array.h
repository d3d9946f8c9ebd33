// TracedArray<T>: an application array whose accesses are recorded.
//
// The algorithm asks for the elements it is about to use, saying whether it
// reads or writes them; the page range they span is recorded on the calling
// thread. Construction maps the array (mmap, as glibc does for large
// allocations) and destruction unmaps it (free -> munmap).
//
// Contract: i + n <= size(); the recorder outlives the array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "apps/swap/trace.h"

namespace dmb::apps::swap {

template <typename T>
class TracedArray {
 public:
  TracedArray(TraceRecorder& rec, size_t n, T init = T{}, uint8_t thread = 0)
      : rec_(&rec), data_(n, init), addr_(rec.Map(n * sizeof(T), thread)) {}
  ~TracedArray() {
    if (rec_ != nullptr) rec_->Unmap(addr_, data_.size() * sizeof(T));
  }
  TracedArray(TracedArray&& o) noexcept
      : rec_(std::exchange(o.rec_, nullptr)), data_(std::move(o.data_)), addr_(o.addr_) {}
  TracedArray(const TracedArray&) = delete;
  TracedArray& operator=(const TracedArray&) = delete;
  TracedArray& operator=(TracedArray&&) = delete;

  const T* Read(size_t i, size_t n = 1, uint8_t thread = 0) {
    rec_->Touch(thread, addr_ + i * sizeof(T), n * sizeof(T), false);
    return data_.data() + i;
  }
  T* Write(size_t i, size_t n = 1, uint8_t thread = 0) {
    rec_->Touch(thread, addr_ + i * sizeof(T), n * sizeof(T), true);
    return data_.data() + i;
  }
  T Get(size_t i, uint8_t thread = 0) { return *Read(i, 1, thread); }
  void Set(size_t i, T v, uint8_t thread = 0) { *Write(i, 1, thread) = v; }

  size_t size() const { return data_.size(); }
  uint64_t addr() const { return addr_; }
  // Untraced view, for checking results after the run.
  const std::vector<T>& untraced() const { return data_; }

 private:
  TraceRecorder* rec_;
  std::vector<T> data_;
  uint64_t addr_;
};

}  // namespace dmb::apps::swap
