#include "microbench/testbed.h"

#include "systems/common/wait_list.h"

namespace dmb::microbench {

Testbed::Testbed(const TestbedSpec& spec)
    : cluster_(std::make_unique<sim::SimCluster>(spec.seed, sim::Profile::ByName(spec.profile))) {
  fabric::NodeConfig mc;
  mc.name = "mn0";
  mc.memory_bytes = spec.pool_bytes + (256ull << 20);
  mc.cpu_cores = spec.mn_cores;
  mn_ = cluster_->AddNode(mc);
  systems::Deployment d;
  d.cluster = cluster_.get();
  d.mn = mn_;
  d.pool_bytes = spec.pool_bytes;
  for (int i = 0; i < spec.cns; ++i) {
    fabric::NodeConfig c;
    c.name = "cn" + std::to_string(i);
    c.memory_bytes = 4ull << 30;
    c.cpu_cores = spec.cn_cores;
    d.cns.push_back(cluster_->AddNode(c));
  }
  mm_ = systems::Registry::Create({spec.system, spec.knobs}, d);
  Run(mm_->Start());
}

void Testbed::RunAll(std::vector<Task<void>> tasks) {
  struct Join {
    size_t left;
    systems::WaitList all_done;
  } join{tasks.size(), {}};
  auto one = [](Task<void> t, Join* j) -> Task<void> {
    co_await t;
    if (--j->left == 0) j->all_done.NotifyAll();
  };
  Run([](std::vector<Task<void>> tasks, Join* j, fabric::Runtime* rt,
         decltype(one) one) -> Task<void> {
    for (auto& t : tasks) rt->Spawn(one(std::move(t), j));
    if (j->left > 0) co_await j->all_done.Wait();
  }(std::move(tasks), &join, &cluster_->runtime(), one));
}

Testbed::~Testbed() {
  // Coroutines (MN workers) reference the approach: stop them first.
  cluster_->sim().Shutdown();
}

}  // namespace dmb::microbench
