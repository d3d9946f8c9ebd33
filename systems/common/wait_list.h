// WaitList: coroutines parked until something changes (e.g. a revocation
// finished and a chunk became free). Single-threaded per node, as everything
// a backend schedules.
#pragma once

#include <coroutine>
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
  void NotifyAll() {
    std::vector<std::coroutine_handle<>> w;
    w.swap(waiters_);
    for (auto h : w) h.resume();
  }

 private:
  std::vector<std::coroutine_handle<>> waiters_;
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
