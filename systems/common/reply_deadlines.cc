#include "systems/common/reply_deadlines.h"

#include <utility>

namespace dmb::systems::chain {

ReplyDeadlines::ReplyDeadlines(fabric::Runtime* rt) : s_(std::make_shared<State>()) { s_->rt = rt; }

void ReplyDeadlines::set_liveness(LivenessCheck alive) { s_->alive = std::move(alive); }

size_t ReplyDeadlines::pending() const {
  size_t n = 0;
  for (const Entry& e : s_->q) n += e.done ? 0 : 1;
  return n;
}

ReplyDeadlines::Ticket ReplyDeadlines::Arm(fabric::Qp* qp, Ps timeout) {
  State& s = *s_;
  const Ps deadline = s.rt->now() + timeout;
  s.q.push_back(Entry{deadline, timeout, qp});
  if (deadline > s.last_deadline) s.last_deadline = deadline;
  // A timer sleeping past this deadline (a shorter timeout than before) is
  // replaced: the newer generation runs, the older one ends when it wakes.
  if (!s.timer_running || deadline < s.wake_at) {
    s.timer_running = true;
    s.wake_at = deadline;
    s.rt->Spawn(Timer(s_, ++s.timer_gen));
  }
  return s.head + s.q.size() - 1;
}

bool ReplyDeadlines::Settle(Ticket t) {
  State& s = *s_;
  Entry& e = s.q[t - s.head];
  e.done = true;
  const bool timed_out = e.timed_out;
  s.PopAnswered();
  return timed_out;
}

void ReplyDeadlines::State::PopAnswered() {
  while (!q.empty() && q.front().done) {
    q.pop_front();
    ++head;
  }
}

Ps ReplyDeadlines::State::ExpireDue(const std::shared_ptr<State>& self, Ps now) {
  Ps next = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    Entry& e = q[i];
    if (e.done || e.expired) continue;
    if (e.deadline <= now) {
      e.expired = true;
      rt->Spawn(Expire(self, head + i));
    } else if (next == 0 || e.deadline < next) {
      next = e.deadline;
    }
  }
  return next;
}

// Wakes at the earliest unanswered deadline; with none left, once more at
// the latest deadline armed (where the last per-request timer would have
// woken), then ends until the next Arm.
Task<void> ReplyDeadlines::Timer(std::shared_ptr<State> s, uint64_t gen) {
  for (;;) {
    co_await s->rt->SleepUntil(s->wake_at);
    if (gen != s->timer_gen) co_return;  // replaced by a timer waking earlier
    const Ps now = s->rt->now();
    s->PopAnswered();
    Ps wake = s->ExpireDue(s, now);
    if (wake == 0) wake = s->last_deadline;
    if (wake <= now) break;
    s->wake_at = wake;
  }
  s->timer_running = false;
}

// One unanswered request past its deadline: asks the liveness check, as
// often as it says the chain is only slow, one `timeout` apart.
Task<void> ReplyDeadlines::Expire(std::shared_ptr<State> s, Ticket t) {
  const Ps timeout = s->q[t - s->head].timeout;
  for (;;) {
    bool running = false;
    if (s->alive) running = co_await s->alive();  // (gcc 12: not inside a condition)
    if (s->Answered(t)) co_return;
    if (!running) break;
    co_await s->rt->SleepFor(timeout);
    if (s->Answered(t)) co_return;
  }
  Entry& e = s->q[t - s->head];
  e.timed_out = true;
  if (e.qp->state() != fabric::QpState::kErr) e.qp->Modify(fabric::QpState::kErr);
}

}  // namespace dmb::systems::chain
