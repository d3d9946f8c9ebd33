// WaitList: coroutines parked until something changes (e.g. a revocation
// finished and a chunk became free). Single-threaded per node, as everything
// a backend schedules.
#pragma once

#include <coroutine>
#include <vector>

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

}  // namespace dmb::systems
