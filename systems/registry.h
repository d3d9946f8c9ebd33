// The registry: every approach by name, with its knobs and a factory.
//
// Adding an approach (README, "Adding an approach touches three files"):
// write systems/<name>/<name>.cc with a `const SystemInfo k<Name>`, list it in
// systems/CMakeLists.txt, and add `extern const SystemInfo k<Name>;` and
// `&k<Name>` to kAll in registry.cc. The conformance and attack suites
// (tests/) and every CLI command pick it up from here. The worked example,
// tests/worked_example_test.cc, is a whole approach in one test file.
#pragma once

#include <cerrno>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fabric/verbs.h"
#include "systems/knobs.h"
#include "systems/memory_manager.h"

namespace dmb::systems {

struct SystemInfo {
  std::string name;     // e.g. "rpc_mw"
  std::string summary;  // one line for --help and `dmbench systems`
  std::vector<KnobDef> knobs;
  std::function<std::unique_ptr<MemoryManager>(const Deployment&, const Knobs&)> make;
  // Named knob sets the shared suites run besides the defaults (e.g. rpc_mw's
  // "type2"), so every mode of an approach is held to the same contract.
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> suite_variants = {};
  // Knobs the shared suites set so that they run fast (small chunks), before
  // a variant's own.
  std::map<std::string, std::string> suite_knobs = {};
  // The MN RNIC capabilities (DeviceCaps field names, e.g. "cross_channel")
  // the approach needs with these knobs: what its MN checks at start, and what
  // the suites skip on when a device lacks it. Empty function: none.
  std::function<std::vector<std::string>(const Knobs&)> needs = {};
  std::vector<std::string> Needs(const Knobs& k) const {
    return needs ? needs(k) : std::vector<std::string>{};
  }
  // What these knobs need of the MN pool beyond their own ranges (a chunk no
  // larger than the pool, at most so many chunks): throws ConfigError naming
  // the knob, the pool and the fix. Registry::Create runs it before building
  // an MN, and `dmbench run` for every point before any point runs, so a
  // spec's bad combination fails at once. Empty function: no limit.
  std::function<void(const Knobs&, uint64_t pool_bytes)> check_pool = {};
  void CheckPool(const Knobs& k, uint64_t pool_bytes) const {
    if (check_pool) check_pool(k, pool_bytes);
  }
};

// check_pool for approaches that carve the pool into `granularity` chunks:
// a chunk must fit in the pool.
void GranularityFitsPool(const std::string& system, const Knobs& knobs, uint64_t pool_bytes);

// The ConfigError for an MN that ran out of a resource (node memory, MR/MW
// keys: a VerbsError with ENOMEM) while its approach was being set up for a
// `pool_bytes` pool: it names the system, its knobs and the pool, and how to
// fix it. What an MN sets up grows with the pool's chunks, so a granularity
// knob, when the approach has one, is part of the fix.
ConfigError SetupExhausted(const std::string& system, const Knobs& knobs, uint64_t pool_bytes,
                           const fabric::VerbsError& e);

struct Config {
  std::string system;
  std::map<std::string, std::string> knobs;
};

class Registry {
 public:
  static const std::vector<const SystemInfo*>& All();
  // Adds an approach kept outside dmb_systems (a test's, such as the worked
  // example's), after those of kAll. Call it before anything reads All(), i.e.
  // from a static initializer; throws ConfigError when the name is taken.
  static void Add(const SystemInfo* info);
  // False for an approach added by Add: only this process knows it (a
  // `dmbench mn` daemon, say, cannot run it).
  static bool BuiltIn(const std::string& name);
  // Throws ConfigError "unknown system 'x'; known systems: ..." when absent.
  static const SystemInfo& Get(const std::string& name);
  // Validates the config and builds the approach on `d` (not yet started).
  static std::unique_ptr<MemoryManager> Create(const Config& cfg, const Deployment& d);
};

// Assembles an approach from its MN side and CN side classes:
//   Mn(const Deployment&, const Knobs&) and
//   Cn(const Deployment&, uint32_t cn_index, MnControl* mn, const Knobs&).
// With Deployment::remote_mn set, only the CN sides are built.
template <typename Mn, typename Cn>
class BasicManager : public MemoryManager {
 public:
  BasicManager(std::string system, const Deployment& d, const Knobs& knobs)
      : system_(std::move(system)), knobs_(knobs), pool_bytes_(d.pool_bytes) {
    if (d.remote_mn) {
      mn_side_ = d.remote_mn;
    } else {
      try {
        mn_ = std::make_unique<Mn>(d, knobs);
      } catch (const fabric::VerbsError& e) {
        if (e.err() != ENOMEM) throw;
        throw SetupExhausted(system_, knobs_, pool_bytes_, e);
      }
      mn_side_ = mn_.get();
    }
    for (uint32_t i = 0; i < d.cns.size(); ++i) {
      cns_.push_back(std::make_unique<Cn>(d, d.cn_index_base + i, mn_side_, knobs));
    }
  }
  const std::string& system() const override { return system_; }
  const Knobs& knobs() const override { return knobs_; }
  MnSide& mn() override { return *mn_side_; }
  CnSide& cn(size_t i) override { return *cns_.at(i); }
  size_t num_cns() const override { return cns_.size(); }
  Task<void> Start() override {
    if (!mn_) co_return;
    std::optional<ConfigError> exhausted;  // (no co_await in a handler)
    try {
      co_await mn_->Start();
    } catch (const fabric::VerbsError& e) {
      if (e.err() != ENOMEM) throw;
      exhausted = SetupExhausted(system_, knobs_, pool_bytes_, e);
    }
    if (exhausted) throw *exhausted;
  }
  Mn& typed_mn() {
    if (!mn_) throw std::logic_error(system_ + ": the MN side runs in another process");
    return *mn_;
  }

 private:
  std::string system_;
  Knobs knobs_;
  uint64_t pool_bytes_;
  std::unique_ptr<Mn> mn_;
  MnSide* mn_side_ = nullptr;
  std::vector<std::unique_ptr<Cn>> cns_;
};

}  // namespace dmb::systems
