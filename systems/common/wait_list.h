// WaitList: coroutines parked until something changes (e.g. a revocation
// finished and a chunk became free). Single-threaded per node, as everything
// a backend schedules.
#pragma once

#include <coroutine>
#include <cstddef>
#include <deque>
#include <vector>

#include "fabric/task.h"

namespace dmb::systems {

class WaitList {
 public:
  struct Awaiter {
    WaitList* list;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) { list->waiters_.push_back(h); }
    void await_resume() const noexcept {}
  };
  Awaiter Wait() { return Awaiter{this}; }
  // Resumes every waiter, oldest first; those that wait again (and any that
  // start waiting meanwhile) park anew, in the order they do.
  void NotifyAll() {
    std::deque<std::coroutine_handle<>> w;
    w.swap(waiters_);
    for (auto h : w) h.resume();
  }
  // NotifyAll for waiters that all retry the same thing (a free ring slot):
  // oldest first, until a resumed one parks again, which says the thing is
  // taken; the rest would find the same and park again in order, so they
  // are left parked behind it, as NotifyAll leaves them, without each being
  // resumed to fail (with many waiters that was quadratic work).
  void NotifyUntilOneParks() {
    while (!waiters_.empty()) {
      const std::coroutine_handle<> h = waiters_.front();
      waiters_.pop_front();
      const size_t before = waiters_.size();
      h.resume();
      if (waiters_.size() == before) continue;
      // Who parked meanwhile goes first, in order, as under NotifyAll.
      std::vector<std::coroutine_handle<>> parked(waiters_.begin() + before, waiters_.end());
      waiters_.resize(before);
      waiters_.insert(waiters_.begin(), parked.begin(), parked.end());
      return;
    }
  }
  size_t size() const { return waiters_.size(); }

 private:
  std::deque<std::coroutine_handle<>> waiters_;
};

// A coroutine mutex (one node, cooperative scheduling): e.g. an MN CPU control
// path that serves one repair at a time.
class CoMutex {
 public:
  Task<void> Lock() {
    while (locked_) co_await waiters_.Wait();
    locked_ = true;
  }
  void Unlock() {
    locked_ = false;
    waiters_.NotifyAll();
  }

 private:
  bool locked_ = false;
  WaitList waiters_;
};

}  // namespace dmb::systems
