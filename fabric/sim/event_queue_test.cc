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

// The simulator peeks (min_time) before it pops, and a FIFO event of the
// current instant may then schedule one between now and the heap's minimum;
// with 30,000 events pending over times far apart, the order is still the
// reference's. A monotone queue (a radix heap) must get this right: its
// floor is the last key popped, not the minimum it was asked for.
TEST(EventQueue, APushBelowAPeekedMinimumAndWideTimesKeepTheOrder) {
  std::mt19937_64 rng(11);
  EventQueue q;
  std::vector<Ref> ref;
  uint64_t pushed = 0;
  Ps now = 0;
  auto push = [&](Ps t) {
    q.Push({t, nullptr, nullptr, pushed, 0});
    ref.push_back({t, pushed++});
    std::push_heap(ref.begin(), ref.end(), std::greater<>{});
  };
  for (int i = 0; i < 30000; ++i) push(1 + static_cast<Ps>(rng() % (1ull << 40)));
  for (int step = 0; step < 400000 && !ref.empty(); ++step) {
    ASSERT_EQ(q.min_time(), ref.front().t);
    if (rng() % 3 == 0) {  // at now, just after now, or anywhere up to far beyond the minimum
      const Ps span = std::max<Ps>(1, ref.front().t - now);
      const uint64_t r = rng() % 4;
      push(r == 0 ? now : now + 1 + static_cast<Ps>(rng() % (r == 1 ? span : 4 * span)));
      continue;
    }
    std::pop_heap(ref.begin(), ref.end(), std::greater<>{});
    const Ref want = ref.back();
    ref.pop_back();
    const EventQueue::Event got = q.Pop();
    ASSERT_EQ(got.t, want.t) << "step " << step;
    ASSERT_EQ(got.arg, want.seq) << "step " << step;
    now = got.t;
  }
  EXPECT_EQ(q.size(), ref.size());
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
