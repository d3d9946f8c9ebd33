// FramePool: where Task coroutine frames come from. A data-path operation
// makes and frees a frame or more per work request (a READ: the approach's
// OneSided frame; a key-value GET: several), so a frame's allocation is on
// every path the simulator and the ibv runtime time. Each thread keeps a
// free list per 64-byte size class: allocating is a pointer pop, freeing a
// push, instead of a trip through malloc.
//
// Contract:
//  - Allocate(n) returns n bytes aligned as operator new's; Free(p, n) takes
//    back what Allocate(n) returned, on any thread.
//  - Frames over kMaxPooledBytes go straight to operator new / delete.
//  - A list keeps at most kMaxKeptPerClass blocks (further frees go to
//    operator delete): the frames an operation makes and frees are reused
//    hot, while a large population of long-lived frames (27,648 coroutines
//    in sim_speed_bench's bare loop) goes back to the allocator, which lays
//    the next population out in address order again. A thread's lists are
//    freed when it exits.
//  - Under AddressSanitizer the pool is off (every frame from operator new),
//    so a use of a freed frame is still reported.
#pragma once

#include <cstddef>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define DMB_FRAME_POOL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DMB_FRAME_POOL 0
#endif
#endif
#ifndef DMB_FRAME_POOL
#define DMB_FRAME_POOL 1
#endif

namespace dmb {

class FramePool {
 public:
  static constexpr std::size_t kClassBytes = 64;
  static constexpr std::size_t kMaxPooledBytes = 4096;
  static constexpr std::size_t kClasses = kMaxPooledBytes / kClassBytes;
  static constexpr std::size_t kMaxKeptPerClass = 512;
  static constexpr bool kPooled = DMB_FRAME_POOL;

  static void* Allocate(std::size_t n) {
    if (!kPooled || n > kMaxPooledBytes) return ::operator new(n);
    const std::size_t c = ClassOf(n);
    if (void* p = lists_.head[c]) {
      lists_.head[c] = static_cast<Node*>(p)->next;
      --lists_.kept[c];
      return p;
    }
    return AllocateNew(n);
  }
  static void Free(void* p, std::size_t n) {
    if (!kPooled || n > kMaxPooledBytes) return ::operator delete(p);
    const std::size_t c = ClassOf(n);
    if (lists_.kept[c] == kMaxKeptPerClass) return ::operator delete(p);
    static_cast<Node*>(p)->next = lists_.head[c];
    lists_.head[c] = p;
    ++lists_.kept[c];
  }

 private:
  struct Node {
    void* next;
  };
  // Plain data, zero-initialised: reaching it needs no per-access guard.
  struct Lists {
    void* head[kClasses];
    std::size_t kept[kClasses];
  };
  // n >= 1 (a frame holds at least its promise): 1..64 -> 0, 65..128 -> 1, ...
  static std::size_t ClassOf(std::size_t n) { return (n - 1) / kClassBytes; }
  // The slow path: a fresh block of the class's full size, and the thread's
  // lists registered to be freed at its exit.
  static void* AllocateNew(std::size_t n);
  static void FreeThreadLists();
  friend struct FramePoolReaper;

  static inline thread_local Lists lists_{};
};

}  // namespace dmb
