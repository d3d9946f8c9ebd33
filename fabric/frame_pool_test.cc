#include "fabric/frame_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "fabric/task.h"

namespace dmb {
namespace {

TEST(FramePool, ReusesAFreedBlockOfTheSameClassOnlyWhenPooled) {
  void* p = FramePool::Allocate(100);
  std::memset(p, 0xab, 128);  // the whole class (65..128 B) is usable
  FramePool::Free(p, 100);
  void* q = FramePool::Allocate(120);  // same class
  if (FramePool::kPooled) {
    EXPECT_EQ(p, q);
  } else {
    EXPECT_NE(p, q);  // AddressSanitizer quarantines freed memory: the pool is really off
  }
  FramePool::Free(q, 120);
}

TEST(FramePool, ClassesDoNotMix) {
  void* small = FramePool::Allocate(64);
  FramePool::Free(small, 64);
  void* big = FramePool::Allocate(65);  // the next class: never the 64-byte block
  EXPECT_NE(small, big);
  std::memset(big, 0, 65);
  void* again = FramePool::Allocate(1);
  if (FramePool::kPooled) {
    EXPECT_EQ(again, small);
  }
  FramePool::Free(big, 65);
  FramePool::Free(again, 1);
}

TEST(FramePool, LargeFramesAndAlignment) {
  for (std::size_t n : {1ul, 63ul, 64ul, 4095ul, 4096ul, 4097ul, 100000ul}) {
    void* p = FramePool::Allocate(n);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % __STDCPP_DEFAULT_NEW_ALIGNMENT__, 0u) << n;
    std::memset(p, 0x5a, n);
    FramePool::Free(p, n);
  }
}

TEST(FramePool, ABlockFreedOnAnotherThreadIsThatThreadsToReuse) {
  void* p = FramePool::Allocate(200);
  void* reused = nullptr;
  std::thread t([&] {
    FramePool::Free(p, 200);
    reused = FramePool::Allocate(200);
    FramePool::Free(reused, 200);
  });  // the thread's lists are freed at its exit (a leak would show under ASan's leak check)
  t.join();
  if (FramePool::kPooled) {
    EXPECT_EQ(reused, p);
  }
}

TEST(FramePool, KeepsAtMostItsCapPerClass) {
  constexpr std::size_t kN = FramePool::kMaxKeptPerClass + 8;
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < kN; ++i) blocks.push_back(FramePool::Allocate(3000));
  for (void* p : blocks) FramePool::Free(p, 3000);
  // Only the first kMaxKeptPerClass frees were kept: allocating them back
  // returns them, newest first; the ones after the cap went to operator
  // delete (ASan would report a double use if they had also been kept).
  std::set<void*> kept(blocks.begin(), blocks.begin() + FramePool::kMaxKeptPerClass);
  std::vector<void*> again;
  for (std::size_t i = 0; i < FramePool::kMaxKeptPerClass; ++i) {
    again.push_back(FramePool::Allocate(3000));
    if (FramePool::kPooled) {
      EXPECT_TRUE(kept.count(again.back())) << i;
    }
  }
  if (FramePool::kPooled) {
    EXPECT_EQ(again.front(), blocks[FramePool::kMaxKeptPerClass - 1]);
  }
  for (void* p : again) FramePool::Free(p, 3000);
}

Task<int> Answer(int x) { co_return x + 1; }
Task<int> Twice() {
  const int a = co_await Answer(1);
  const int b = co_await Answer(a);
  co_return b;
}

TEST(FramePool, TaskFramesComeFromThePool) {
  void* first = nullptr;
  {
    Task<int> t = Answer(1);
    first = t.handle().address();
  }  // destroyed unstarted: the frame goes back
  Task<int> t2 = Answer(2);
  if (FramePool::kPooled) {
    EXPECT_EQ(t2.handle().address(), first);
  }
  // Frames still work as frames: a chain of awaits gives the right value.
  Task<int> t3 = Twice();
  auto h = t3.handle();
  h.resume();
  ASSERT_TRUE(h.done());
  EXPECT_EQ(*h.promise().value, 3);
}

}  // namespace
}  // namespace dmb
