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
//  - A thread's lists hold at most what it once had live, and are freed when
//    it exits.
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
  static constexpr bool kPooled = DMB_FRAME_POOL;

  static void* Allocate(std::size_t n) {
    if (!kPooled || n > kMaxPooledBytes) return ::operator new(n);
    void*& head = lists_.head[ClassOf(n)];
    if (void* p = head) {
      head = static_cast<Node*>(p)->next;
      return p;
    }
    return AllocateNew(n);
  }
  static void Free(void* p, std::size_t n) {
    if (!kPooled || n > kMaxPooledBytes) return ::operator delete(p);
    void*& head = lists_.head[ClassOf(n)];
    static_cast<Node*>(p)->next = head;
    head = p;
  }

 private:
  struct Node {
    void* next;
  };
  // Plain data, zero-initialised: reaching it needs no per-access guard.
  struct Lists {
    void* head[kClasses];
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
