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
  for (void*& head : lists_.head) {
    while (void* p = head) {
      head = static_cast<Node*>(p)->next;
      ::operator delete(p);
    }
  }
}

}  // namespace dmb
