#include "apps/kvstore/key_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <system_error>
#include <tuple>

#include "apps/kvstore/key_gen.h"
#include "apps/kvstore/mt64.h"
#include "apps/kvstore/race_index.h"

namespace dmb::apps::kv {
namespace {

// Keys a cached file must share with a fresh draw before it is trusted.
constexpr uint64_t kCheckedKeys = 4;

KeyGen MakeGen(const KeyStream& s) {
  return KeyGen(s.partitions, s.partition, s.key_bytes, Mt64(s.rng_seed));
}

// The keys of a valid file, or none.
std::vector<std::string> Load(const std::filesystem::path& path, const KeyStream& s,
                              uint64_t count) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  unsigned long long held = 0, hash = 0;
  if (std::sscanf(line.c_str(), "%*s %*s count=%llu fnv=%llx", &held, &hash) != 2) return {};
  if (held < count || line + "\n" != s.KeyLine(held, hash)) return {};
  std::string body(held * s.key_bytes, '\0');
  if (!in.read(body.data(), static_cast<std::streamsize>(body.size())) || in.peek() != EOF ||
      Fnv1a(body) != hash) {
    return {};
  }
  std::vector<std::string> keys;
  keys.reserve(count);
  for (uint64_t i = 0; i < count; ++i) keys.push_back(body.substr(i * s.key_bytes, s.key_bytes));
  KeyGen fresh = MakeGen(s);
  for (uint64_t i = 0; i < count && i < kCheckedKeys; ++i) {
    if (fresh.Next() != keys[i]) return {};
  }
  return keys;
}

void Store(const std::filesystem::path& dir, const KeyStream& s,
           const std::vector<std::string>& keys) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return;
  std::string body;
  body.reserve(keys.size() * s.key_bytes);
  for (const std::string& k : keys) body += k;
  const std::filesystem::path path = dir / s.FileName();
  std::filesystem::path tmp = path;
  tmp += ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << s.KeyLine(keys.size(), Fnv1a(body)) << body;
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace

std::string KeyStream::FileName() const {
  char seed[17];
  std::snprintf(seed, sizeof(seed), "%016llx", static_cast<unsigned long long>(rng_seed));
  return "keys-p" + std::to_string(partitions) + "-" + std::to_string(partition) + "-b" +
         std::to_string(key_bytes) + "-r" + seed + ".keys";
}

std::string KeyStream::KeyLine(uint64_t count, uint64_t body_hash) const {
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(body_hash));
  return "dmbench-keys v1 count=" + std::to_string(count) + " fnv=" + hash + " " + FileName() +
         "\n";
}

std::filesystem::path DefaultKeyDir() {
  if (const char* d = std::getenv("DMB_KEY_DIR"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : "/tmp") / ".cache/dmbench/keys";
}

uint64_t KeyCacheMaxBytes() {
  constexpr uint64_t kDefaultMb = 1024;
  const char* v = std::getenv("DMB_KEY_CACHE_MB");
  const uint64_t mb = v && *v ? std::strtoull(v, nullptr, 10) : kDefaultMb;
  return mb << 20;
}

std::vector<std::string> FirstKeys(const std::filesystem::path& dir, const KeyStream& s,
                                   uint64_t count, bool* hit, uint64_t max_dir_bytes) {
  if (hit != nullptr) *hit = false;
  if (count == 0) return {};
  const std::filesystem::path path = dir / s.FileName();
  std::vector<std::string> keys = Load(path, s, count);
  if (hit != nullptr) *hit = keys.size() == count;
  if (keys.size() == count) {
    std::error_code ec;  // a use: the file is pruned last
    std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
    return keys;
  }
  keys.clear();
  keys.reserve(count);
  KeyGen gen = MakeGen(s);
  for (uint64_t i = 0; i < count; ++i) keys.push_back(gen.Next());
  Store(dir, s, keys);
  PruneKeyDir(dir, s.FileName(), max_dir_bytes);
  return keys;
}

void PruneKeyDir(const std::filesystem::path& dir, const std::string& keep, uint64_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::tuple<fs::file_time_type, uint64_t, fs::path>> files;  // oldest first, below
  uint64_t total = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".keys") continue;
    std::error_code e1, e2;
    const uint64_t bytes = fs::file_size(p, e1);
    const fs::file_time_type t = fs::last_write_time(p, e2);
    if (e1 || e2) continue;  // gone meanwhile
    total += bytes;
    if (p.filename() != keep) files.emplace_back(t, bytes, p);
  }
  std::sort(files.begin(), files.end());
  for (const auto& [t, bytes, p] : files) {
    if (total <= max_bytes) break;
    if (fs::remove(p, ec)) total -= bytes;
  }
}

}  // namespace dmb::apps::kv
