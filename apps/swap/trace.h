// Page-range access traces of an application run, and their recorder.
//
// A trace is the sequence of page-range touches (read or write) the
// application's threads make, plus the mmap/munmap of its arrays and the
// barriers of its parallel phases. The paging model replays it.
//
// Recording is epoch-based, standing in for what the kernel sees (accessed
// bits and faults, not single loads): each thread collects the distinct
// pages it touches until an explicit Flush(), a Barrier(), a Map/Unmap, or
// `epoch_pages` distinct pages; the epoch is then emitted as page-sorted,
// coalesced ranges (a page both read and written counts as written). A
// range of at least `epoch_pages` pages is emitted as it comes, after
// flushing the epoch. Within an epoch the touch order is lost, so an epoch
// must be far smaller than the local memory the model manages: the
// workloads record with ScaledEpochPages() of their working set.
//
// Address space: Map() hands out fresh page-aligned regions and never
// reuses them, so a page id names one allocation's page.
//
// Contract: thread < RecorderOptions::threads (at most 32); Touch only
// inside mapped regions (not checked).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace dmb::apps::swap {

inline constexpr uint64_t kPageBytes = 4096;

enum class TraceOp : uint8_t { kRead, kWrite, kMap, kUnmap, kBarrier };

struct TraceEvent {
  TraceOp op = TraceOp::kRead;
  uint8_t thread = 0;
  uint32_t pages = 0;
  uint64_t first_page = 0;
  bool operator==(const TraceEvent&) const = default;
};

struct Trace {
  uint32_t threads = 1;
  uint64_t address_pages = 0;  // pages ever mapped: page ids are below this
  std::vector<TraceEvent> events;
  bool operator==(const Trace&) const = default;

  uint64_t TouchedPages() const;  // sum of read/write event sizes
  // Compact binary form (varint, ranges as deltas); Parse returns false on a
  // malformed buffer.
  std::string Serialize() const;
  static bool Parse(const std::string& bytes, Trace* out);
};

// The epoch a workload records with: 1/kEpochWorkingSetDivisor of its
// working set, so the recorded structure (the epochs a pass over the data
// spans, an epoch against the local memory) is the same at every scale, and
// at least kMinEpochPages. A fixed epoch is not: 512 pages covered a Kmeans
// task's whole working set (258 pages) at scale 1/2048 (a pass over the
// data became one touch per page) and its local memory at 1/512, and the
// major faults per working-set page only settle once the epoch is at most
// about a quarter of the local memory (1/16 of the working set at 25%
// local). The floor keeps coalescing: a loop streams several arrays at once
// (Kmeans: X, its bounds, labels, norms), and an epoch of a few pages closes
// on every element, multiplying the pages touched (Kmeans 1/2048: 33x at 4
// pages against 16), hence the trace and the application CPU per page
// touched.
// Below 1,024 working-set pages (4 MB) the floor wins and the epoch is a
// larger fraction (Kmeans at 1/2048: 16 pages, 1/16 of its 258).
inline constexpr uint64_t kEpochWorkingSetDivisor = 64;
inline constexpr uint32_t kMinEpochPages = 16;
uint32_t ScaledEpochPages(uint64_t working_set_pages);

struct RecorderOptions {
  uint32_t threads = 1;
  uint32_t epoch_pages = 512;  // the workloads pass ScaledEpochPages()
  // false: Touch records nothing (the algorithm runs at its own speed; used
  // to measure the applications' CPU per page, app_cost.h).
  bool record = true;
};

class TraceRecorder {
 public:
  explicit TraceRecorder(const RecorderOptions& o = {});

  // mmap of `bytes` (rounded up to pages): the region's first byte address.
  uint64_t Map(uint64_t bytes, uint8_t thread = 0);
  // munmap of the region Map returned for `addr`, `bytes` long.
  void Unmap(uint64_t addr, uint64_t bytes, uint8_t thread = 0);
  // `thread` reads or writes bytes [addr, addr + bytes).
  void Touch(uint8_t thread, uint64_t addr, uint64_t bytes, bool write);
  void Flush(uint8_t thread);
  // Flushes every thread and records a barrier.
  void Barrier();
  // Flushes everything and hands the trace over.
  Trace Finish();

 private:
  struct Epoch {
    std::unordered_map<uint64_t, bool> pages;  // page -> written
    uint64_t last_page = ~uint64_t{0};
    bool last_write = false;
  };
  void FlushAll();
  void Emit(TraceOp op, uint8_t thread, uint64_t first, uint64_t n);

  RecorderOptions opt_;
  Trace trace_;
  std::vector<Epoch> epochs_;
};

}  // namespace dmb::apps::swap
