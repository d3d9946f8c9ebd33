// ReplyDeadlines: the reply deadlines of one chain client's requests, kept by
// one timer instead of a coroutine sleeping out every request's timeout.
//
// Why (issue 18): a chain request is answered in ~10-20 us and its deadline
// is 1 ms, so a sleeping coroutine per request kept ~500 dead timers in the
// event heap of a 6-CN ODRP swap run (of ~730 pending events) and cost a
// coroutine frame per request: 17% of that run's wall time.
//
// Contract (per request, what chain::ArmDeadline did):
//  - Arm(qp, timeout) right before awaiting a request's reply on `qp`;
//    Settle(ticket) when the wait ended: true if the deadline passed first
//    (and `qp` was moved to ERR, which flushed the RECV the reply would
//    have taken, so the wait ended).
//  - When a deadline passes unanswered: the liveness check (set_liveness),
//    if any, is asked; true = the chain is only slow: wait another `timeout`
//    and ask again; false or no check: qp -> ERR.
//  - An answered request costs nothing at its deadline. The timer wakes at
//    the earliest unanswered deadline, so about once per `timeout` while
//    requests flow, and last at the latest deadline armed: a run ends at the
//    virtual time it ended at with a coroutine per request.
//  - One client, one runtime, cooperative: no locking. The client may be
//    destroyed with its timer still sleeping; the timer holds the state.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>

#include "fabric/node.h"
#include "fabric/task.h"
#include "fabric/time.h"
#include "systems/common/chain_wr.h"

namespace dmb::systems::chain {

class ReplyDeadlines {
 public:
  using Ticket = uint64_t;
  explicit ReplyDeadlines(fabric::Runtime* rt);

  void set_liveness(LivenessCheck alive);
  // The deadline of the request about to await its reply on `qp`: now + timeout.
  Ticket Arm(fabric::Qp* qp, Ps timeout);
  // The request's wait ended. True if its deadline had passed (qp -> ERR).
  // Call once per ticket.
  bool Settle(Ticket t);
  // Armed and not yet settled (tests).
  size_t pending() const;

 private:
  struct Entry {
    Ps deadline;
    Ps timeout;
    fabric::Qp* qp;
    bool done = false;       // settled
    bool expired = false;    // its deadline passed: Expire owns it
    bool timed_out = false;  // Expire moved qp to ERR
  };
  struct State {
    fabric::Runtime* rt;
    LivenessCheck alive;
    std::deque<Entry> q;  // tickets head .. head + q.size() - 1
    Ticket head = 0;
    Ps last_deadline = 0;  // the latest armed
    Ps wake_at = 0;        // when the running timer wakes
    uint64_t timer_gen = 0;
    bool timer_running = false;
    bool Answered(Ticket t) const { return t < head || q[t - head].done; }
    void PopAnswered();
    // Expires every unanswered entry due at `now`; returns the earliest
    // deadline still to wait for (0: none).
    Ps ExpireDue(const std::shared_ptr<State>& self, Ps now);
  };
  static Task<void> Timer(std::shared_ptr<State> s, uint64_t gen);
  static Task<void> Expire(std::shared_ptr<State> s, Ticket t);

  std::shared_ptr<State> s_;
};

}  // namespace dmb::systems::chain
