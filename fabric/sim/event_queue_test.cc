#include "fabric/sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace dmb::sim {
namespace {

// The reference: a binary heap on (t, push order), as the simulator had
// before the queue (std::push_heap / std::pop_heap).
struct Ref {
  Ps t;
  uint64_t seq;
  bool operator>(const Ref& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// Interleaved pushes and pops with many equal times (the sim schedules
// bursts at one instant) give the reference's order exactly, payloads and
// all, including after slots were reused.
TEST(EventQueue, PopsInTimeThenPushOrderLikeTheBinaryHeap) {
  std::mt19937_64 rng(7);
  EventQueue q;
  std::vector<Ref> ref;
  uint64_t pushed = 0, popped = 0;
  Ps now = 0;
  for (int step = 0; step < 200000; ++step) {
    const bool push = ref.empty() || rng() % 100 < (step < 100000 ? 55 : 45);
    if (push) {
      const Ps t = now + static_cast<Ps>(rng() % 8) * 1000;  // few distinct times
      q.Push({t, nullptr, nullptr, pushed, static_cast<uint32_t>(pushed % 5)});
      ref.push_back({t, pushed++});
      std::push_heap(ref.begin(), ref.end(), std::greater<>{});
      continue;
    }
    std::pop_heap(ref.begin(), ref.end(), std::greater<>{});
    const Ref want = ref.back();
    ref.pop_back();
    ASSERT_EQ(q.min_time(), want.t);
    const EventQueue::Event got = q.Pop();
    ASSERT_EQ(got.t, want.t) << "pop " << popped;
    ASSERT_EQ(got.arg, want.seq) << "pop " << popped;  // the push order among equal times
    ASSERT_EQ(got.kind, want.seq % 5);
    now = got.t;
    ++popped;
  }
  EXPECT_EQ(q.size(), ref.size());
  EXPECT_GT(popped, 50000u);
}

TEST(EventQueue, ClearDropsEverythingAndTheQueueStaysUsable) {
  EventQueue q;
  for (int i = 0; i < 10; ++i) q.Push({Ps{10 - i}, nullptr, nullptr, static_cast<uint64_t>(i), 0});
  q.Clear();
  EXPECT_TRUE(q.empty());
  q.Push({5, nullptr, nullptr, 1, 0});
  q.Push({5, nullptr, nullptr, 2, 0});
  EXPECT_EQ(q.Pop().arg, 1u);
  EXPECT_EQ(q.Pop().arg, 2u);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace dmb::sim
