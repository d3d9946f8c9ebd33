#include "fabric/frame_pool.h"

namespace dmb {

// Frees the calling thread's lists when the thread exits.
struct FramePoolReaper {
  ~FramePoolReaper() { FramePool::FreeThreadLists(); }
};

void* FramePool::AllocateNew(std::size_t n) {
  static thread_local FramePoolReaper reaper;
  (void)&reaper;  // constructed on a thread's first fresh frame
  return ::operator new((ClassOf(n) + 1) * kClassBytes);
}

void FramePool::FreeThreadLists() {
  for (std::size_t c = 0; c < kClasses; ++c) {
    while (void* p = lists_.head[c]) {
      lists_.head[c] = static_cast<Node*>(p)->next;
      ::operator delete(p);
    }
    lists_.kept[c] = 0;
  }
}

}  // namespace dmb
