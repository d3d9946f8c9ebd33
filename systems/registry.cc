#include "systems/registry.h"

namespace dmb::systems {

extern const SystemInfo kStaticMr;
extern const SystemInfo kFineMr;
extern const SystemInfo kRpcMw;
extern const SystemInfo kFineMem;
extern const SystemInfo kOneSidedMw;
extern const SystemInfo kOdrp;

namespace {

// Names given to Registry::Add (not built into dmb_systems).
std::vector<std::string>& Added() {
  static std::vector<std::string> added;
  return added;
}

std::vector<const SystemInfo*>& Approaches() {
  static std::vector<const SystemInfo*> kAll = {
      &kStaticMr, &kFineMr, &kRpcMw, &kFineMem, &kOneSidedMw, &kOdrp,
  };
  return kAll;
}

}  // namespace

ConfigError SetupExhausted(const std::string& system, const Knobs& knobs, uint64_t pool_bytes,
                           const fabric::VerbsError& e) {
  const std::string pool = "a " + FormatSize(pool_bytes) + " pool";
  const auto g = knobs.values().find("granularity");
  if (g == knobs.values().end()) {
    return ConfigError(system + " could not set up its MN for " + pool + ": " + e.what() +
                       ". Its MN-side structures grow with the pool: give a smaller pool "
                       "(--pool, or params: pool in a spec)");
  }
  const uint64_t chunks = pool_bytes / knobs.Size("granularity");
  return ConfigError(system + " could not set up its MN for " + pool + " at granularity=" +
                     g->second + " (" + std::to_string(chunks) + " chunks): " + e.what() +
                     ". Its MN-side keys, windows and metadata grow with the number of chunks: "
                     "give a larger granularity (--set granularity=..., or knobs: in a spec) or "
                     "a smaller pool (--pool, or params: pool in a spec)");
}

void GranularityFitsPool(const std::string& system, const Knobs& knobs, uint64_t pool_bytes) {
  const uint64_t g = knobs.Size("granularity");
  if (g > pool_bytes) {
    throw ConfigError(system + ".granularity: " + FormatSize(g) + " is larger than the " +
                      FormatSize(pool_bytes) +
                      " MN pool; use a smaller granularity or a larger pool");
  }
}

const std::vector<const SystemInfo*>& Registry::All() { return Approaches(); }

void Registry::Add(const SystemInfo* info) {
  for (const SystemInfo* s : Approaches()) {
    if (s->name == info->name) throw ConfigError("system '" + info->name + "' exists already");
  }
  Added().push_back(info->name);
  Approaches().push_back(info);
}

bool Registry::BuiltIn(const std::string& name) {
  for (const std::string& a : Added()) {
    if (a == name) return false;
  }
  return true;
}

const SystemInfo& Registry::Get(const std::string& name) {
  std::string names;
  for (const SystemInfo* s : All()) {
    if (s->name == name) return *s;
    names += (names.empty() ? "" : ", ") + s->name;
  }
  throw ConfigError("unknown system '" + name + "'; known systems: " + names);
}

std::unique_ptr<MemoryManager> Registry::Create(const Config& cfg, const Deployment& d) {
  const SystemInfo& info = Get(cfg.system);
  const Knobs knobs = ValidateKnobs(info.name, info.knobs, cfg.knobs);
  if (!d.cluster || !d.mn || (d.cns.empty() && d.remote_mn)) {
    throw ConfigError(info.name +
                      ": a deployment needs a cluster, an MN and (with a remote MN) a CN");
  }
  if (!d.remote_mn) info.CheckPool(knobs, d.pool_bytes);  // a daemon checks its own
  return info.make(d, knobs);
}

}  // namespace dmb::systems
