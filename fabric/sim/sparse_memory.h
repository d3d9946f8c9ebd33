// Node memory for the simulator: real bytes, allocated lazily in 64 KB pages,
// so a 224 GB memory node costs host memory only for the pages it touches.
// Untouched bytes read as zero.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fabric/node.h"
#include "fabric/range_alloc.h"
#include "fabric/sim/page_pool.h"

namespace dmb::sim {

class SparseMemory : public fabric::Memory {
 public:
  SparseMemory(std::string node_name, uint64_t size_bytes);

  uint64_t size_bytes() const override { return size_; }
  void Read(uint64_t addr, void* dst, uint64_t n) const override;
  void Write(uint64_t addr, const void* src, uint64_t n) override;
  void Fill(uint64_t addr, uint8_t byte, uint64_t n) override;
  uint64_t Alloc(uint64_t bytes, uint64_t align = 64) override;
  // Zeroes the range; pages it covers whole stop being resident.
  void Free(uint64_t addr, uint64_t bytes) override;
  uint64_t in_use_bytes() const override { return alloc_.in_use_bytes(); }
  // One past the highest address ever handed out and not given back.
  uint64_t top() const { return alloc_.top(); }
  uint64_t resident_bytes() const override { return resident_pages_ * kPageBytes; }
  // True when [addr, addr+n) lies inside the node's memory.
  bool Contains(uint64_t addr, uint64_t n) const { return addr <= size_ && n <= size_ - addr; }

  static constexpr int kPageShift = 16;
  static constexpr uint64_t kPageBytes = 1ull << kPageShift;

 private:
  static constexpr int kDirShift = 14;  // pages per directory: 16384 (1 GB)
  uint8_t* PageForWrite(uint64_t page);
  const uint8_t* PageForRead(uint64_t page) const;
  void CheckRange(uint64_t addr, uint64_t n, const char* what) const;
  void DropPage(uint64_t page);

  std::string node_name_;
  uint64_t size_;
  fabric::RangeAllocator alloc_;  // from 4096: address 0 stays unused, like a null page
  uint64_t resident_pages_ = 0;
  PagePool pool_{kPageBytes};
  std::vector<std::unique_ptr<uint8_t*[]>> dirs_;  // page pointers from pool_
  mutable uint64_t cached_page_ = ~0ull;           // one-entry cache of the last resident page
  mutable uint8_t* cached_ptr_ = nullptr;
};

}  // namespace dmb::sim
