#include "fabric/sim/simulator.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "fabric/root_task.h"

namespace dmb::sim {
namespace {

void ResumeEvent(void* ctx, uint64_t) { std::coroutine_handle<>::from_address(ctx).resume(); }

constexpr uint32_t kResumeKind = 1;

}  // namespace

Simulator::Simulator(uint64_t seed) : seed_(seed) {}

Simulator::~Simulator() { Shutdown(); }

void Simulator::Shutdown() {
  events_.Clear();
  while (!roots_.empty()) {
    void* frame = *roots_.begin();
    std::coroutine_handle<>::from_address(frame).destroy();  // unregisters itself
  }
}

void Simulator::Spawn(Task<void> task) {
  auto r = fabric::RunRoot(this, std::move(task));
  Schedule(now_, kResumeKind, ResumeEvent, r.handle.address(), 0);
}

void Simulator::Schedule(Ps t, uint32_t kind, EventFn fn, void* ctx, uint64_t arg) {
  if (t < now_) {
    throw std::logic_error("event scheduled in the past: t=" + std::to_string(t) +
                           " ps < now=" + std::to_string(now_) + " ps");
  }
  events_.Push({t, fn, ctx, arg, kind});
}

void Simulator::ResumeAt(std::coroutine_handle<> h, Ps t) {
  Schedule(std::max(t, now_), kResumeKind, ResumeEvent, h.address(), 0);
}

void Simulator::Drain(Ps limit) {
  stop_ = false;
  while (!events_.empty() && events_.min_time() <= limit && !exception_ && !stop_) {
    const EventQueue::Event e = events_.Pop();
    now_ = e.t;
    ++events_executed_;
    TraceMix(static_cast<uint64_t>(e.t) * 31 + e.kind);  // args may be pointers: not hashed
    e.fn(e.ctx, e.arg);
  }
  if (exception_) std::rethrow_exception(std::exchange(exception_, nullptr));
}

void Simulator::Run() { Drain(std::numeric_limits<Ps>::max()); }

void Simulator::RunUntil(Ps t) {
  Drain(t);
  now_ = std::max(now_, t);
}

}  // namespace dmb::sim
