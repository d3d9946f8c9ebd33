#include "systems/common/reply_deadlines.h"

#include <gtest/gtest.h>

#include <vector>

#include "fabric/sim/test_util.h"

namespace dmb::systems::chain {
namespace {

using namespace dmb::fabric;

constexpr Ps kTimeout = UsToPs(1000);

class ReplyDeadlinesTest : public sim::testing::SimFixture {
 protected:
  ReplyDeadlinesTest() {
    Node* n = AddNode("cn");
    Pd* pd = n->AllocPd();
    cq_ = n->CreateCq(16);
    qp_ = MakeQp(n, pd, cq_);
    cluster_->Connect(qp_, qp_);
  }
  // Runs `t` and every timer it leaves behind until no event is left.
  void RunAll(Task<void> t) {
    sim().Spawn(std::move(t));
    sim().Run();
  }
  Cq* cq_ = nullptr;
  Qp* qp_ = nullptr;
};

// 1,000 requests answered 10 us after they were armed, one every 5 us: no
// deadline passes, and the one timer wakes about once per timeout instead
// of once per request; the run still ends at the last request's deadline.
TEST_F(ReplyDeadlinesTest, AnsweredRequestsCostOneWakePerTimeoutNotOnePerRequest) {
  ReplyDeadlines d(&rt());
  int timed_out = 0;
  auto request = [](Runtime* rt, ReplyDeadlines* d, Qp* qp, int* out) -> Task<void> {
    const ReplyDeadlines::Ticket t = d->Arm(qp, kTimeout);
    co_await rt->SleepFor(UsToPs(10));
    *out += d->Settle(t) ? 1 : 0;
  };
  auto client = [&](Runtime* rt) -> Task<void> {
    for (int i = 0; i < 1000; ++i) {
      rt->Spawn(request(rt, &d, qp_, &timed_out));
      co_await rt->SleepFor(UsToPs(5));
    }
  };
  const uint64_t events_before = sim().events_executed();
  RunAll(client(&rt()));
  EXPECT_EQ(timed_out, 0);
  EXPECT_EQ(qp_->state(), QpState::kRts);
  EXPECT_EQ(d.pending(), 0u);
  // 1,000 x (spawn, sleep) for the requests, 1,000 x (sleep) for the client:
  // 3,000 events; a timer per request would add 2,000 more.
  const uint64_t events = sim().events_executed() - events_before;
  EXPECT_LT(events, 3000u + 20u) << events;
  EXPECT_EQ(sim().now(), UsToPs(999 * 5) + kTimeout);
}

// No reply and no liveness check: at the deadline the QP goes to ERR, which
// flushes the RECV the reply would have taken, so the wait ends then.
TEST_F(ReplyDeadlinesTest, AnUnansweredRequestMovesTheQpToErrAtItsDeadline) {
  ReplyDeadlines d(&rt());
  WorkCompletion wc;
  Ps wait_ended_at = 0;
  bool timed_out = false;
  auto waiter = [&](Runtime* rt) -> Task<void> {
    co_await rt->SleepFor(UsToPs(7));
    RecvWr rr;
    rr.wr_id = 42;
    EXPECT_EQ(qp_->PostRecv(rr), 0);
    const ReplyDeadlines::Ticket t = d.Arm(qp_, kTimeout);
    wc = co_await cq_->Next();
    wait_ended_at = rt->now();
    timed_out = d.Settle(t);
  };
  RunAll(waiter(&rt()));
  EXPECT_TRUE(timed_out);
  EXPECT_EQ(qp_->state(), QpState::kErr);
  EXPECT_EQ(wc.wr_id, 42u);
  EXPECT_NE(wc.status, WcStatus::kSuccess);
  EXPECT_GE(wait_ended_at, UsToPs(7) + kTimeout);
  EXPECT_LT(wait_ended_at, UsToPs(8) + kTimeout);
}

// A liveness check that says "only slow" twice, then "faulted": asked at each
// deadline, one timeout apart; ERR after the third answer.
TEST_F(ReplyDeadlinesTest, ALivenessCheckExtendsTheWaitOneTimeoutPerYes) {
  ReplyDeadlines d(&rt());
  std::vector<Ps> asked_at;
  d.set_liveness([&]() -> Task<bool> {
    asked_at.push_back(rt().now());
    co_return asked_at.size() < 3;
  });
  bool timed_out = false;
  auto waiter = [&](Runtime* rt) -> Task<void> {
    const ReplyDeadlines::Ticket t = d.Arm(qp_, kTimeout);
    while (qp_->state() != QpState::kErr) co_await rt->SleepFor(UsToPs(1));
    timed_out = d.Settle(t);
  };
  RunAll(waiter(&rt()));
  EXPECT_TRUE(timed_out);
  ASSERT_EQ(asked_at.size(), 3u);
  EXPECT_EQ(asked_at[0], kTimeout);
  EXPECT_EQ(asked_at[1], 2 * kTimeout);
  EXPECT_EQ(asked_at[2], 3 * kTimeout);
}

// The reply arrives while the liveness check runs: no ERR, not timed out.
TEST_F(ReplyDeadlinesTest, AReplyDuringTheLivenessCheckWins) {
  ReplyDeadlines d(&rt());
  ReplyDeadlines::Ticket ticket = 0;
  bool timed_out = true;
  d.set_liveness([&]() -> Task<bool> {
    co_await rt().SleepFor(UsToPs(3));  // the MN CPU reads the chain
    timed_out = d.Settle(ticket);       // meanwhile the reply came
    co_return false;
  });
  ticket = d.Arm(qp_, kTimeout);
  sim().Run();
  EXPECT_FALSE(timed_out);
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

// A shorter timeout armed behind a longer one still fires at its own
// deadline, and the longer one at its own: the timer is re-armed earlier.
TEST_F(ReplyDeadlinesTest, AShorterTimeoutArmedLaterFiresFirst) {
  ReplyDeadlines d(&rt());
  std::vector<Ps> asked_at;
  d.set_liveness([&]() -> Task<bool> {
    asked_at.push_back(rt().now());
    co_return false;
  });
  auto waiter = [&](Runtime* rt) -> Task<void> {
    d.Arm(qp_, kTimeout);
    co_await rt->SleepFor(UsToPs(10));
    d.Arm(qp_, UsToPs(100));
  };
  RunAll(waiter(&rt()));
  ASSERT_EQ(asked_at.size(), 2u);
  EXPECT_EQ(asked_at[0], UsToPs(110));
  EXPECT_EQ(asked_at[1], kTimeout);
}

}  // namespace
}  // namespace dmb::systems::chain
