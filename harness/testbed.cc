#include "harness/testbed.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "systems/common/wait_list.h"
#include "systems/registry.h"
#ifdef DMB_HAVE_IBV
#include "fabric/ibv/ibv_cluster.h"
#include "fabric/ibv/ibv_device.h"
#include "systems/remote/remote_mn.h"
#endif

namespace dmb::harness {

Testbed::Testbed(const TestbedSpec& spec) : spec_(spec) {
  systems::Deployment d;
  if (spec.backend != "sim" && spec.backend != "ibv") {
    throw systems::ConfigError("unknown backend '" + spec.backend + "'; known backends: sim, ibv");
  }
  backend_ = fabric::MakeBackend(
      {.kind = spec.backend, .seed = spec.seed, .profile = spec.profile, .devices = spec.devices});
  cluster_ = &backend_->cluster();
  sim_ = dynamic_cast<sim::SimCluster*>(cluster_);
  if (spec.backend == "ibv") BuildIbv(&d);
  d.cluster = cluster_;
  d.pool_bytes = spec.pool_bytes;
  if (!d.remote_mn) {
    fabric::NodeConfig mc;
    mc.name = "mn0";
    mc.memory_bytes = spec.pool_bytes + std::max(spec.mn_extra_bytes, spec.pool_bytes);
    mc.cpu_cores = spec.mn_cores;
    mc.caps = spec.mn_caps;
    mn_ = cluster_->AddNode(mc);
  }
  d.mn = mn_;
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

sim::SimCluster& Testbed::cluster() {
  if (!sim_)
    throw std::logic_error("this needs the simulator; the testbed runs on " + spec_.backend);
  return *sim_;
}

void Testbed::Run(Task<void> task) {
  // A run that ended because a spawned MN daemon died (its lanes broke, its
  // bootstrap socket closed) names the death, not the symptom, whether the
  // watcher or the symptom came first. A killed daemon closes its sockets and
  // QPs before it can be reaped (deregistering its pool can take a second
  // under emulation), so a failed run waits up to 2 s for it.
  try {
    backend_->Run(std::move(task));
  } catch (...) {
    ThrowIfMnDaemonDied(std::chrono::seconds(2));
    throw;
  }
  ThrowIfMnDaemonDied(std::chrono::milliseconds(0));
}

#ifdef DMB_HAVE_IBV
void Testbed::BuildIbv(systems::Deployment* d) {
  auto* ibv = dynamic_cast<fabric::ibv::IbvCluster*>(cluster_);
  if (spec_.mn_endpoint.empty()) return;  // MN in this process
  std::string endpoint = spec_.mn_endpoint;
  // The operator token (reclaim, shutdown): ours when we spawned the daemon,
  // else whatever DMB_MN_TOKEN says (the daemon's operator may share it).
  std::string token = std::getenv("DMB_MN_TOKEN") ? std::getenv("DMB_MN_TOKEN") : "";
  if (endpoint == "spawn") {
    SpawnMnDaemon();
    std::ifstream pf(mn_dir_ + "/port");
    int port = 0;
    pf >> port;
    endpoint = "127.0.0.1:" + std::to_string(port);
    std::ifstream(mn_dir_ + "/port.token") >> token;
  }
  const auto& info = systems::Registry::Get(spec_.system);
  const systems::Knobs knobs = systems::ValidateKnobs(info.name, info.knobs, spec_.knobs);
  auto rm = std::make_unique<systems::remote::RemoteMn>(ibv, endpoint, spec_.system, knobs,
                                                        static_cast<uint32_t>(spec_.cns), token);
  mn_ = rm->node();
  d->remote_mn = rm.get();
  d->cn_index_base = rm->cn_index_base();
  remote_mn_ = std::move(rm);
}

// Starts `dmbench mn` for this testbed's approach and waits for its port.
void Testbed::SpawnMnDaemon() {
  const char* bin = std::getenv("DMB_DMBENCH");
  const std::string exe = bin ? bin : DMB_DMBENCH_PATH;
  char tmpl[] = "/tmp/dmb-mn-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  mn_dir_ = tmpl;
  std::vector<std::string> args = {exe,           "mn",
                                   "--system",    spec_.system,
                                   "--port",      "0",
                                   "--port-file", mn_dir_ + "/port",
                                   "--pool",      std::to_string(spec_.pool_bytes),
                                   "--mn-cores",  std::to_string(spec_.mn_cores)};
  if (!spec_.mn_device.empty()) args.insert(args.end(), {"--device", spec_.mn_device});
  if (std::getenv("DMB_MN_VERBOSE")) args.push_back("--verbose");
  for (const auto& [k, v] : spec_.knobs) args.insert(args.end(), {"--set", k + "=" + v});
  mn_pid_ = fork();
  if (mn_pid_ < 0) throw std::runtime_error("fork failed");
  if (mn_pid_ == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::ifstream(mn_dir_ + "/port").good()) {
      WatchMnDaemon();
      return;
    }
    int status = 0;
    if (waitpid(mn_pid_, &status, WNOHANG) == mn_pid_) {
      mn_pid_ = -1;
      throw std::runtime_error("the MN daemon (" + exe + " mn --system " + spec_.system +
                               ") exited with status " + std::to_string(WEXITSTATUS(status)) +
                               " before listening; see its error above");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  StopMnDaemon();
  throw std::runtime_error("the MN daemon did not start listening within 120 s");
}

// A daemon that dies (a crash, a kill) fails the run at once, naming how it
// died, instead of leaving the CNs waiting for replies until the stall limit.
// The poller runs every loop turn, so it reads the runtime's clock (the TSC
// where steady_clock is a system call, as on a TCG guest's HPET: one per turn
// put a system call on every READ's path) and looks at the child every 100 ms.
void Testbed::WatchMnDaemon() {
  auto* ibv = dynamic_cast<fabric::ibv::IbvCluster*>(cluster_);
  fabric::ibv::IbvRuntime& rt = ibv->rt();
  rt.AddPoller([this, &rt, last = rt.now()]() mutable -> int {
    constexpr Ps kLookEveryPs = 100 * kPsPerMs;
    const Ps now = rt.now();
    if (mn_pid_ <= 0 || now - last < kLookEveryPs) return 0;
    last = now;
    ThrowIfMnDaemonDied(std::chrono::milliseconds(0));
    return 0;
  });
}

void Testbed::ThrowIfMnDaemonDied(std::chrono::milliseconds grace) {
  if (mn_pid_ <= 0) return;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  while (waitpid(mn_pid_, &status, WNOHANG) != mn_pid_) {
    if (std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  mn_pid_ = -1;
  throw std::runtime_error("the MN daemon (dmbench mn --system " + spec_.system + ") " +
                           (WIFSIGNALED(status)
                                ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                : "exited with status " + std::to_string(WEXITSTATUS(status))) +
                           " while CNs were using it; its error (if any) is printed above");
}

void Testbed::StopMnDaemon() {
  if (mn_pid_ <= 0) return;
  if (remote_mn_) {
    try {
      static_cast<systems::remote::RemoteMn*>(remote_mn_.get())->Shutdown();
    } catch (const std::exception&) {
    }
  }
  for (int i = 0; i < 100; ++i) {
    if (waitpid(mn_pid_, nullptr, WNOHANG) == mn_pid_) {
      mn_pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (mn_pid_ > 0) {
    kill(mn_pid_, SIGKILL);
    waitpid(mn_pid_, nullptr, 0);
    mn_pid_ = -1;
  }
  if (!mn_dir_.empty()) {
    std::remove((mn_dir_ + "/port").c_str());
    std::remove((mn_dir_ + "/port.token").c_str());
    rmdir(mn_dir_.c_str());
  }
}
#else
void Testbed::BuildIbv(systems::Deployment*) {
  throw systems::ConfigError(
      "backend 'ibv' is not compiled in: install libibverbs-dev and re-run cmake");
}
void Testbed::SpawnMnDaemon() {}
void Testbed::WatchMnDaemon() {}
void Testbed::ThrowIfMnDaemonDied(std::chrono::milliseconds) {}
void Testbed::StopMnDaemon() {}
#endif

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
  backend_->Shutdown();
  mm_.reset();
  StopMnDaemon();
}

fabric::DeviceCaps MnCaps(const TestbedSpec& spec) {
  if (spec.backend != "ibv") return spec.mn_caps;
#ifdef DMB_HAVE_IBV
  const std::string want = !spec.mn_device.empty() ? spec.mn_device
                           : !spec.devices.empty() ? spec.devices.front()
                                                   : std::string();
  const auto devs = fabric::ibv::ListDevices();
  for (const auto& d : devs) {
    if (want.empty() || d.name == want) return d.caps;
  }
  throw systems::ConfigError("no RDMA device '" + want + "' (`dmbench devices` lists them)");
#else
  throw systems::ConfigError("built without libibverbs: no ibv backend");
#endif
}

std::vector<std::string> MissingMnCaps(const TestbedSpec& spec) {
  const systems::SystemInfo& info = systems::Registry::Get(spec.system);
  const systems::Knobs k = systems::ValidateKnobs(info.name, info.knobs, spec.knobs);
  return fabric::MissingCaps(MnCaps(spec), info.Needs(k));
}

}  // namespace dmb::harness
