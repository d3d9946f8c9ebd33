#include "fabric/backend.h"

#include <stdexcept>

#include "fabric/sim/sim_cluster.h"
#ifdef DMB_HAVE_IBV
#include "fabric/ibv/ibv_cluster.h"
#endif

namespace dmb::fabric {
namespace {

class SimBackend : public Backend {
 public:
  SimBackend(uint64_t seed, const std::string& profile)
      : cluster_(seed, sim::Profile::ByName(profile)) {}
  std::string_view kind() const override { return "sim"; }
  Cluster& cluster() override { return cluster_; }
  void Run(Task<void> task) override { cluster_.RunToCompletion(std::move(task)); }
  void Shutdown() override { cluster_.sim().Shutdown(); }

 private:
  sim::SimCluster cluster_;
};

}  // namespace

std::unique_ptr<Backend> MakeBackend(const BackendOptions& opts) {
  if (opts.kind == "sim") return std::make_unique<SimBackend>(opts.seed, opts.profile);
  if (opts.kind == "ibv") {
#ifdef DMB_HAVE_IBV
    return ibv::MakeIbvBackend(opts);
#else
    throw std::invalid_argument(
        "backend 'ibv' is not compiled in: install libibverbs-dev (Debian: apt-get install "
        "libibverbs-dev) and re-run cmake");
#endif
  }
  throw std::invalid_argument("unknown backend '" + opts.kind + "'; known backends: sim, ibv");
}

}  // namespace dmb::fabric
