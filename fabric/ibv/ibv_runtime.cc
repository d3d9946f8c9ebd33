#include "fabric/ibv/ibv_runtime.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "fabric/root_task.h"

namespace dmb::fabric::ibv {

IbvRuntime::IbvRuntime() {
  if (const char* s = std::getenv("DMB_IBV_SPIN_TURNS"))
    spin_turns_ = std::strtoull(s, nullptr, 10);
}

IbvRuntime::~IbvRuntime() { Shutdown(); }

void IbvRuntime::Shutdown() {
  ready_.clear();
  while (!timers_.empty()) timers_.pop();
  while (!roots_.empty()) {
    std::coroutine_handle<>::from_address(*roots_.begin()).destroy();  // unregisters itself
  }
}

void IbvRuntime::Spawn(Task<void> task) {
  ready_.push_back(fabric::RunRoot(this, std::move(task)).handle);
}

void IbvRuntime::ResumeAt(std::coroutine_handle<> h, Ps t) {
  if (t <= now()) {
    ready_.push_back(h);
  } else {
    timers_.push(Timer{t, timer_seq_++, h});
  }
}

int IbvRuntime::RunReady() {
  int n = 0;
  // Only what is ready now: coroutines readied while running wait for the
  // next turn, so pollers still run between them.
  for (size_t k = ready_.size(); k > 0 && !exception_; --k) {
    auto h = ready_.front();
    ready_.pop_front();
    h.resume();
    ++n;
  }
  return n;
}

int IbvRuntime::FireTimers() {
  if (timers_.empty()) return 0;  // no clock read: it is a system call on some guests
  int n = 0;
  const Ps t = now();
  while (!timers_.empty() && timers_.top().t <= t) {
    ready_.push_back(timers_.top().h);
    timers_.pop();
    ++n;
  }
  return n;
}

void IbvRuntime::CheckStall(bool first, std::chrono::steady_clock::time_point* idle_since,
                            std::chrono::milliseconds stall_limit) const {
  const auto t = std::chrono::steady_clock::now();
  if (first) {
    *idle_since = t;
    return;
  }
  if (t - *idle_since > stall_limit) {
    throw StallError("ibv: no completion and no progress for " +
                     std::to_string(stall_limit.count()) + " ms (" + std::to_string(roots_.size()) +
                     " tasks suspended): a work request never completed or a peer is "
                     "gone; raise DMB_IBV_STALL_MS if the device is just slow");
  }
}

void IbvRuntime::Sleep() {
  constexpr Ps kMaxSleepPs = 50 * kPsPerMs;  // async events and stall checks
  Ps wait = kMaxSleepPs;
  if (!timers_.empty()) {
    const Ps t = now();
    if (timers_.top().t <= t) return;
    wait = std::min(wait, timers_.top().t - t);
  }
  idle_waiter_(wait);
}

void IbvRuntime::Run(Task<void> task, std::chrono::milliseconds stall_limit) {
  bool done = false;
  auto wrapper = [](Task<void> t, bool* flag) -> Task<void> {
    co_await t;
    *flag = true;
  };
  Spawn(wrapper(std::move(task), &done));
  // The clock is read only while idle, every 1024 turns or after a sleep: on
  // every busy turn it would be costly where clock_gettime is a system call
  // (a TCG guest's HPET clocksource). The stall window thus starts up to
  // 1024 idle turns late.
  std::chrono::steady_clock::time_point idle_since;
  uint64_t idle_turns = 0;   // turns in a row without progress
  uint64_t quiet_turns = 0;  // turns since the last completion or event
  bool window_open = false;
  while (!done && !exception_) {
    const int ran = RunReady();
    int polled = 0;
    for (auto& p : pollers_) polled += p();
    FireTimers();  // a timer's coroutine counts as progress when it runs next turn
    quiet_turns = polled > 0 ? 0 : quiet_turns + 1;
    if (ran + polled > 0) {
      idle_turns = 0;
      window_open = false;
      continue;
    }
    if (ready_.empty() && timers_.empty() && roots_.empty()) break;
    ++idle_turns;
    const bool sleep = idle_waiter_ && quiet_turns > spin_turns_;
    if (sleep) {
      Sleep();
    } else if (idle_turns > spin_turns_) {
      sched_yield();
    }
    if (sleep || idle_turns % 1024 == 0) {
      CheckStall(!window_open, &idle_since, stall_limit);
      window_open = true;
    }
  }
  if (exception_) {
    auto e = exception_;
    exception_ = nullptr;
    std::rethrow_exception(e);
  }
  if (!done) {
    throw std::runtime_error("ibv: the task is blocked forever (nothing left to run or poll)");
  }
}

}  // namespace dmb::fabric::ibv
