#include "apps/swap/trace_cache.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dmb::apps::swap {

std::string TraceKey::FileName() const {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", scale);
  return workload + "-scale" + buf + "-seed" + std::to_string(seed) +
         (knobs.empty() ? "" : "-" + knobs) + ".trace";
}

std::string TraceKey::KeyLine() const {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", scale);
  return "workload=" + workload + " scale=" + buf + " seed=" + std::to_string(seed) +
         " version=" + version + (knobs.empty() ? "" : " knobs=" + knobs) + "\n";
}

TraceCache::TraceCache(std::filesystem::path dir) : dir_(std::move(dir)) {
  std::filesystem::create_directories(dir_);
}

bool TraceCache::Load(const TraceKey& key, Trace* out) const {
  std::ifstream in(PathOf(key), std::ios::binary);
  if (!in) return false;
  std::string line;
  if (!std::getline(in, line) || line + "\n" != key.KeyLine()) return false;
  std::ostringstream body;
  body << in.rdbuf();
  return Trace::Parse(body.str(), out);
}

void TraceCache::Store(const TraceKey& key, const Trace& t) const {
  std::filesystem::path tmp = PathOf(key);
  tmp += ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << key.KeyLine() << t.Serialize();
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, PathOf(key));
}

Trace TraceCache::GetOrRecord(const TraceKey& key, const std::function<Trace()>& record,
                              bool* hit) {
  Trace t;
  bool found = Load(key, &t);
  if (hit != nullptr) *hit = found;
  if (found) return t;
  t = record();
  Store(key, t);
  return t;
}

std::string DefaultTraceDir() {
  if (const char* d = std::getenv("DMB_TRACE_DIR"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/dmbench/traces";
}

}  // namespace dmb::apps::swap
