// The deterministic discrete-event scheduler behind the sim backend.
//
// Contract:
//  - Events run in (time, sequence) order; the sequence number is the order of
//    scheduling, so a run is a pure function of the root seed and the inputs.
//  - trace_hash() folds every executed event's (time, kind) into one 64-bit
//    value (arguments may be pointers: not hashed), and what components add
//    with TraceMix: the same seed gives the same hash; print it to compare runs.
//  - Spawned tasks that throw stop Run(), which rethrows the first exception.
//  - Coroutines still suspended when the Simulator is destroyed are destroyed
//    (with every Task they were awaiting) without being resumed.
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "fabric/node.h"
#include "fabric/rng.h"
#include "fabric/sim/event_queue.h"

namespace dmb::sim {

class Simulator : public fabric::Runtime {
 public:
  using EventFn = EventQueue::EventFn;

  explicit Simulator(uint64_t seed);
  ~Simulator() override;
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  Ps now() const override { return now_; }
  uint64_t seed() const { return seed_; }
  void Spawn(Task<void> task) override;

  // Schedules fn(ctx, arg) at time t >= now(). `kind` identifies the event type
  // in the trace hash (pointers are not hashed: they vary between runs).
  void Schedule(Ps t, uint32_t kind, EventFn fn, void* ctx, uint64_t arg);
  void ResumeAt(std::coroutine_handle<> h, Ps t) override;

  // Runs until no event is left. Rethrows a spawned task's exception.
  void Run();
  // Runs events with time <= t, then sets now() = max(now(), t).
  void RunUntil(Ps t);
  // Makes the current Run/RunUntil return after the event being executed
  // (background services such as periodic scanners never run out of events).
  void RequestStop() { stop_ = true; }
  // Destroys pending events and every unfinished spawned task.
  void Shutdown();

  uint64_t events_executed() const { return events_executed_; }
  uint64_t trace_hash() const { return trace_hash_; }
  // Folds component state into the trace hash (e.g. bytes a WR moved).
  void TraceMix(uint64_t v) { trace_hash_ = (trace_hash_ ^ v) * 0x100000001b3ull + 0x9e37ull; }
  size_t live_tasks() const { return roots_.size(); }
  Rng MakeRng(std::string_view stream) const { return Rng(seed_, stream); }

  // Internal: root task bookkeeping.
  void AddRoot(void* frame) { roots_.insert(frame); }
  void RemoveRoot(void* frame) { roots_.erase(frame); }
  void RecordException(std::exception_ptr e) {
    if (!exception_) exception_ = e;
  }

 private:
  bool stop_ = false;
  void Drain(Ps limit);

  uint64_t seed_;
  Ps now_ = 0;
  uint64_t events_executed_ = 0;
  uint64_t trace_hash_ = 0xcbf29ce484222325ull;
  EventQueue events_;
  std::unordered_set<void*> roots_;
  std::exception_ptr exception_;
};

}  // namespace dmb::sim
