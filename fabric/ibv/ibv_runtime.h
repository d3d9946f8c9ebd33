// IbvRuntime: the coroutine scheduler of the ibv backend. One OS thread (the
// one calling Run) polls every CQ of the process and resumes the coroutines
// waiting on them, fires timers and runs spawned tasks: the same coroutines
// the simulator drives, driven by real completions and the wall clock.
//
// Contract:
//  - now() is wall-clock time since the runtime was created (WallClock:
//    steady_clock, or the TSC where a steady_clock read is a system call).
//  - Run(task) returns when `task` finishes (background services may still
//    be suspended) and rethrows the first exception of any spawned task.
//  - Idle: after spin_turns loop turns without a completion (DMB_IBV_SPIN_TURNS,
//    4096) the loop stops spinning. Each turn that then has nothing to run
//    sleeps in the idle waiter (IbvCluster: the nodes' completion channels,
//    armed first) until a completion or an asynchronous event arrives, the
//    next timer is due, or 50 ms pass. Timers alone do not keep the loop
//    spinning: a daemon that looks at its sockets every few ms sleeps between
//    looks. Without a waiter it yields the CPU each turn instead.
//  - A run that makes no progress (no completion, no coroutine resumed) for
//    `stall_limit` while the task is unfinished throws a StallError naming
//    what is still pending: a lost completion never hangs a test. (A periodic
//    service's timer keeps a run alive; the callers' own time limits remain.)
#pragma once

#include <chrono>
#include <coroutine>
#include <deque>
#include <exception>
#include <functional>
#include <queue>
#include <stdexcept>
#include <unordered_set>
#include <vector>

#include "fabric/ibv/wall_clock.h"
#include "fabric/node.h"

namespace dmb::fabric::ibv {

class StallError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class IbvRuntime final : public Runtime {
 public:
  IbvRuntime();
  ~IbvRuntime() override;

  Ps now() const override { return clock_.now(); }
  void Spawn(Task<void> task) override;
  void Ready(std::coroutine_handle<> h) { ready_.push_back(h); }

  // Something to poll on every loop turn (CQs, async events); returns the
  // number of events it handled (0 = idle).
  using Poller = std::function<int()>;
  void AddPoller(Poller p) { pollers_.push_back(std::move(p)); }
  // Blocks until an event may have arrived or `max_wait_ps` passed; returns
  // at once if what it looked at first found work.
  using IdleWaiter = std::function<void(Ps max_wait_ps)>;
  void SetIdleWaiter(IdleWaiter w) { idle_waiter_ = std::move(w); }

  void Run(Task<void> task, std::chrono::milliseconds stall_limit);
  // Destroys every unfinished spawned task (like the simulator's Shutdown).
  void Shutdown();

  void AddRoot(void* frame) { roots_.insert(frame); }
  void RemoveRoot(void* frame) { roots_.erase(frame); }
  void RecordException(std::exception_ptr e) {
    if (!exception_) exception_ = e;
  }

 protected:
  void ResumeAt(std::coroutine_handle<> h, Ps t) override;

 private:
  struct Timer {
    Ps t;
    uint64_t seq;
    std::coroutine_handle<> h;
    bool operator>(const Timer& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  int RunReady();
  // Readies the coroutines whose time has come; reads the clock only when a
  // timer is pending.
  int FireTimers();
  // Sleeps in the idle waiter until the next timer is due (at most 50 ms).
  void Sleep();
  // Every 1024 idle turns and after each sleep: `first` of an idle stretch
  // starts its window in *idle_since; later ones throw StallError once the
  // window exceeds the limit.
  void CheckStall(bool first, std::chrono::steady_clock::time_point* idle_since,
                  std::chrono::milliseconds stall_limit) const;

  WallClock clock_;
  std::deque<std::coroutine_handle<>> ready_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  uint64_t timer_seq_ = 0;
  // Loop turns without a completion spent spinning before the loop sleeps
  // (or yields) when idle (DMB_IBV_SPIN_TURNS): Soft-RoCE needs the CPU for
  // the kernel's NIC work, and a quiet MN should not burn a core.
  uint64_t spin_turns_ = 4096;
  std::vector<Poller> pollers_;
  IdleWaiter idle_waiter_;
  std::unordered_set<void*> roots_;
  std::exception_ptr exception_;
};

}  // namespace dmb::fabric::ibv
