// WaitList::NotifyUntilOneParks hands a freed slot to the same waiters, in
// the same order, as NotifyAll, and leaves the rest parked in the same order,
// without resuming each of them to fail.
#include "systems/common/wait_list.h"

#include <gtest/gtest.h>

#include <vector>

#include "fabric/sim/simulator.h"

namespace dmb::systems {
namespace {

struct Ring {
  WaitList room;
  int used = 0;
  int capacity = 0;
  int resumes = 0;        // wake-ups that found the ring full
  std::vector<int> took;  // who got a slot, in order
};

Task<void> Taker(Ring* r, int id) {
  while (r->used == r->capacity) {
    co_await r->room.Wait();
    if (r->used == r->capacity) ++r->resumes;
  }
  ++r->used;
  r->took.push_back(id);
}

// 40 takers on a 3-slot ring; slots free one or two at a time, and a new
// taker arrives now and then; returns the order the slots went in.
Ring Drive(bool until_one_parks) {
  sim::Simulator s(1);
  Ring r;
  r.capacity = 3;
  for (int i = 0; i < 40; ++i) s.Spawn(Taker(&r, i));
  s.Run();
  int next_id = 100;
  for (int round = 0; round < 30; ++round) {
    const int freed = 1 + round % 2;
    r.used -= freed;
    if (round % 5 == 0) s.Spawn(Taker(&r, next_id++));  // parks behind the others
    s.Run();
    for (int k = 0; k < freed; ++k) {
      if (until_one_parks) {
        r.room.NotifyUntilOneParks();
      } else {
        r.room.NotifyAll();
      }
    }
  }
  return r;
}

TEST(WaitList, NotifyUntilOneParksHandsSlotsOutAsNotifyAllDoes) {
  const Ring all = Drive(false);
  const Ring one = Drive(true);
  EXPECT_EQ(one.took, all.took);
  EXPECT_GT(all.took.size(), 40u) << "slots were handed out after the first three";
  EXPECT_EQ(one.room.size(), all.room.size());
  EXPECT_LT(one.resumes * 10, all.resumes) << "NotifyAll resumes every waiter to fail";
}

}  // namespace
}  // namespace dmb::systems
