// Memcached serving Facebook's ETC workload (OneSidedMW §6.2: one server
// thread, four client threads, 32 GB working set), with every access to the
// server's memory recorded.
//
// Memory, laid out as memcached 1.4 does:
// - Slab allocator: 1 MB slab pages (memcached's -I, `slab_page_bytes`),
//   each its own mmap (glibc serves a 1 MB malloc with mmap), memset when a
//   class takes it and split into the class's free list; chunk sizes
//   96 B x 1.25^i (truncated, 8-byte aligned) up to 1/1.25 of a page, then
//   one whole-page class. An item is a 48 B header, its key and its value,
//   in the smallest class that fits. A class's free chunks form a LIFO list
//   threaded through their headers. A class gets a new page while
//   pages stay within `memory_bytes` (memcached's -m), or if it has none
//   (memcached's rule); otherwise it evicts its LRU tail, reusing the chunk.
// - Hash table: 2^hashpower buckets of 8-byte item pointers, chains threaded
//   through the headers' h_next; when items exceed 1.5 per bucket it is
//   doubled: a new table, every chain rehashed (reading keys), the old freed.
// - LRU per class: a doubly linked list through the headers; every GET bumps
//   its item to the head, so every GET writes its item's page.
// A GET reads the bucket and the chain's headers and keys, writes the item's
// header (refcount, flags, LRU links and its neighbours') and reads the value
// (sendmsg from the item). A SET allocates, writes the whole item, then
// replaces the key's old item (unlinked from hash and LRU, freed) if any.
//
// Requests (ETC, Atikoglu et al. SIGMETRICS'12 §5): key sizes
// GEV(30.7984, 8.20449, 0.078688) rounded into [1, 250]; value sizes
// GeneralizedPareto(0, 214.476, 0.348238) rounded, capped so an item fits
// a slab page; key popularity Zipf(`skew`) over the loaded keys, ranks
// scattered over keys by a random permutation; GET:SET = `gets_per_set`:1 (30:1); a SET
// draws a fresh value size. All samplers are inverse-CDF (Zipf by
// rejection-inversion) over Rng, so a trace depends only on the seed.
//
// Phases: the load SETs new keys 0, 1, ... (one key size each, kept for the
// run) until a SET would have to evict, i.e. the slab memory is full; the
// run issues `ops_per_item` x loaded keys requests, client c's requests from
// its own stream, dealt round-robin to the server.
//
// Threads: the server thread is trace thread 0 and makes every access
// (including the table expansion memcached leaves to its maintenance
// thread); clients touch no server memory, so the trace has one thread.
// Connection buffers (a few always-hot pages) are not modelled.
//
// Every class in use holds at least one page, so below about 50 slab pages
// the memory does not shrink with `memory_bytes` (the "memcached" workload
// shrinks the pages instead, as -I allows).
//
// Contract: key ids < 2^32 - 1; key_bytes in [1, 250]; slab_page_bytes a
// power of two in [4 KB, 1 MB]; 48 + key_bytes + value_bytes <= slab_page_bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "apps/swap/rng.h"
#include "apps/swap/trace.h"

namespace dmb::apps::swap {

inline constexpr uint64_t kMemcachedSlabBytes = 1ull << 20;
inline constexpr uint32_t kMemcachedHeaderBytes = 48;

// ETC's size distributions as quantile functions (inverse CDFs), u in [0, 1).
double EtcKeySizeQuantile(double u);    // GEV(30.7984, 8.20449, 0.078688)
double EtcValueSizeQuantile(double u);  // GPareto(0, 214.476, 0.348238)
uint32_t EtcKeySize(Rng& rng);          // rounded into [1, 250]
// Rounded, capped at item_max - 48 - key_bytes.
uint32_t EtcValueSize(Rng& rng, uint32_t key_bytes, uint64_t item_max = kMemcachedSlabBytes);

// Zipf(s) over ranks 0..n-1, P(k) proportional to (k + 1)^-s, by Hormann and
// Derflinger's rejection-inversion: exact, O(1) state, any s > 0. n >= 1.
class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double s);
  uint64_t Sample(Rng& rng) const;

 private:
  double H(double x) const;
  double HIntegral(double x) const;
  double HIntegralInverse(double x) const;
  uint64_t n_;
  double s_, h_x1_, h_n_, cut_;
};

struct MemcachedStats {
  uint64_t items = 0;  // live items
  uint64_t gets = 0, hits = 0, sets = 0, evictions = 0;
  uint64_t slab_pages = 0, buckets = 0;
};

struct MemcachedState;

// The server: its memory over traced regions of `rec`, its request handlers
// recording what memcached's worker thread touches (on thread 0).
class MemcachedServer {
 public:
  MemcachedServer(TraceRecorder& rec, uint64_t memory_bytes, uint32_t hashpower = 16,
                  uint64_t slab_page_bytes = kMemcachedSlabBytes);
  ~MemcachedServer();  // frees (unmaps) the table and the slab pages
  MemcachedServer(const MemcachedServer&) = delete;
  MemcachedServer& operator=(const MemcachedServer&) = delete;

  // The item's address (its header's first byte), or nullopt on a miss.
  std::optional<uint64_t> Get(uint32_t key);
  // Stores the item; returns false, changing nothing, if that would need an
  // eviction and !may_evict.
  bool Set(uint32_t key, uint32_t key_bytes, uint32_t value_bytes, bool may_evict = true);
  const MemcachedStats& stats() const;

 private:
  std::unique_ptr<MemcachedState> s_;
};

struct MemcachedParams {
  uint64_t memory_bytes = 0;  // slab memory (-m) the load fills
  double skew = 0.99;         // Zipf exponent of key popularity
  double ops_per_item = 2;    // run-phase requests per loaded key
  uint32_t gets_per_set = 30;
  uint32_t clients = 4;
  uint32_t hashpower = 16;  // memcached's default initial table: 2^16 buckets
  uint64_t slab_page_bytes = kMemcachedSlabBytes;  // -I: also the largest item
  uint64_t seed = 0;
};

struct MemcachedResult {
  Trace trace;
  uint64_t loaded = 0;  // keys the load phase stored
  MemcachedStats run;   // the run phase's requests; memory as at the end
};

MemcachedResult RunMemcached(const MemcachedParams& p, const RecorderOptions& rec = {});

}  // namespace dmb::apps::swap
