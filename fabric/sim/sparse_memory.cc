#include "fabric/sim/sparse_memory.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dmb::sim {

SparseMemory::SparseMemory(std::string node_name, uint64_t size_bytes)
    : node_name_(std::move(node_name)), size_(size_bytes), alloc_(node_name_, 4096, size_bytes) {
  const uint64_t pages = (size_ + kPageBytes - 1) >> kPageShift;
  dirs_.resize((pages + (1ull << kDirShift) - 1) >> kDirShift);
}

void SparseMemory::CheckRange(uint64_t addr, uint64_t n, const char* what) const {
  if (!Contains(addr, n)) {
    throw std::out_of_range(std::string(what) + " of " + std::to_string(n) + " bytes at 0x" +
                            std::to_string(addr) + " is outside node '" + node_name_ +
                            "' memory of " + std::to_string(size_) + " bytes");
  }
}

uint8_t* SparseMemory::PageForWrite(uint64_t page) {
  if (page == cached_page_) return cached_ptr_;
  auto& dir = dirs_[page >> kDirShift];
  if (!dir) dir = std::make_unique<uint8_t*[]>(1ull << kDirShift);  // all null
  uint8_t*& p = dir[page & ((1ull << kDirShift) - 1)];
  if (!p) {
    p = pool_.Take();  // zeros
    ++resident_pages_;
  }
  cached_page_ = page;
  cached_ptr_ = p;
  return p;
}

const uint8_t* SparseMemory::PageForRead(uint64_t page) const {
  if (page == cached_page_) return cached_ptr_;
  const auto& dir = dirs_[page >> kDirShift];
  if (!dir) return nullptr;
  uint8_t* p = dir[page & ((1ull << kDirShift) - 1)];
  if (p) {
    cached_page_ = page;
    cached_ptr_ = p;
  }
  return p;
}

void SparseMemory::Read(uint64_t addr, void* dst, uint64_t n) const {
  CheckRange(addr, n, "read");
  auto* out = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const uint64_t off = addr & (kPageBytes - 1);
    const uint64_t len = std::min(n, kPageBytes - off);
    const uint8_t* page = PageForRead(addr >> kPageShift);
    if (page) {
      std::memcpy(out, page + off, len);
    } else {
      std::memset(out, 0, len);
    }
    out += len;
    addr += len;
    n -= len;
  }
}

void SparseMemory::Write(uint64_t addr, const void* src, uint64_t n) {
  CheckRange(addr, n, "write");
  const auto* in = static_cast<const uint8_t*>(src);
  while (n > 0) {
    const uint64_t off = addr & (kPageBytes - 1);
    const uint64_t len = std::min(n, kPageBytes - off);
    std::memcpy(PageForWrite(addr >> kPageShift) + off, in, len);
    in += len;
    addr += len;
    n -= len;
  }
}

void SparseMemory::Fill(uint64_t addr, uint8_t byte, uint64_t n) {
  CheckRange(addr, n, "fill");
  while (n > 0) {
    const uint64_t off = addr & (kPageBytes - 1);
    const uint64_t len = std::min(n, kPageBytes - off);
    if (byte != 0 || PageForRead(addr >> kPageShift) != nullptr) {
      std::memset(PageForWrite(addr >> kPageShift) + off, byte, len);
    }
    addr += len;
    n -= len;
  }
}

uint64_t SparseMemory::Alloc(uint64_t bytes, uint64_t align) { return alloc_.Alloc(bytes, align); }

void SparseMemory::DropPage(uint64_t page) {
  auto& dir = dirs_[page >> kDirShift];
  if (!dir) return;
  uint8_t*& p = dir[page & ((1ull << kDirShift) - 1)];
  if (!p) return;
  pool_.Give(p);
  p = nullptr;
  --resident_pages_;
  if (cached_page_ == page) {
    cached_page_ = ~0ull;
    cached_ptr_ = nullptr;
  }
}

void SparseMemory::Free(uint64_t addr, uint64_t bytes) {
  alloc_.Free(addr, bytes);  // throws before anything changes
  const uint64_t end = addr + bytes;
  const uint64_t first_whole = (addr + kPageBytes - 1) >> kPageShift;
  const uint64_t end_whole = end >> kPageShift;
  if (first_whole >= end_whole) {
    Fill(addr, 0, bytes);
    return;
  }
  Fill(addr, 0, (first_whole << kPageShift) - addr);
  for (uint64_t p = first_whole; p < end_whole; ++p) DropPage(p);
  Fill(end_whole << kPageShift, 0, end - (end_whole << kPageShift));
}

}  // namespace dmb::sim
