// KeyCache: a KeyGen stream's first keys, kept on disk, so the points of a
// figure (every approach and granularity at one seed draws the same keys)
// draw them once instead of once a point. KeyGen keeps one candidate in
// `partitions`, so drawing is a KV point's largest CPU cost outside virtual
// time: 15% of a 1M-key fillsync point at 24 threads (perf), more at 288.
//
// A file is <dir>/keys-p<partitions>-<partition>-b<key_bytes>-r<rng seed,
// hex>.keys holding one text line (the stream's identity, the key count and
// an FNV-1a-64 of the body) and then the keys' bytes back to back.
//
// Contract: FirstKeys returns, key for key, the first `count` results of
// KeyGen(partitions, partition, key_bytes, Mt64(rng_seed)).Next() (see
// key_cache_test), whatever the cache holds:
//  - a file is used only when its line names this stream, holds at least
//    `count` keys and its body's hash matches; and its first keys must equal
//    the ones KeyGen draws afresh (a changed key definition is caught there);
//  - otherwise the keys are drawn and the file is rewritten (a temporary name
//    renamed into place, so a reader sees a whole file or none);
//  - a directory that cannot be written costs the cache, not the run;
//  - the directory keeps at most `max_dir_bytes` of key files: after a
//    store, the least recently used others go (a hit counts as a use).
// The results of a run do not depend on the cache: keys are drawn outside
// virtual time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dmb::apps::kv {

struct KeyStream {
  uint32_t partitions = 1;
  uint32_t partition = 0;
  uint32_t key_bytes = 16;
  uint64_t rng_seed = 0;  // Mt64's seed
  std::string FileName() const;
  std::string KeyLine(uint64_t count, uint64_t body_hash) const;
};

// Where the tools keep keys: $DMB_KEY_DIR, else ~/.cache/dmbench/keys
// (/tmp/.cache/... without a HOME).
std::filesystem::path DefaultKeyDir();
// The most bytes of key files a directory keeps: $DMB_KEY_CACHE_MB (MiB),
// else 1024 (64 streams of a million 16-byte keys).
uint64_t KeyCacheMaxBytes();

// The stream's first `count` keys (see the contract above); *hit says
// whether they came from `dir`.
std::vector<std::string> FirstKeys(const std::filesystem::path& dir, const KeyStream& s,
                                   uint64_t count, bool* hit = nullptr,
                                   uint64_t max_dir_bytes = KeyCacheMaxBytes());

// Removes the least recently used key files (*.keys, by modification time)
// of `dir` until the rest take at most `max_bytes`; never the one named
// `keep`. Files another process removes meanwhile are skipped.
void PruneKeyDir(const std::filesystem::path& dir, const std::string& keep, uint64_t max_bytes);

}  // namespace dmb::apps::kv
