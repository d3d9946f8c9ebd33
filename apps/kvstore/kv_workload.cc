#include "apps/kvstore/kv_workload.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/kvstore/key_cache.h"
#include "apps/kvstore/kv_client.h"
#include "apps/kvstore/mt64.h"
#include "apps/kvstore/race_index.h"
#include "harness/cpu_sampling.h"
#include "systems/common/wait_list.h"
#include "systems/knobs.h"

namespace dmb::apps::kv {
namespace {

using systems::ConfigError;
using systems::Status;

// Deterministic per-partition stream (std::mt19937_64's output, which the
// standard fixes; distributions are not fixed, so none is used).
uint64_t StreamSeed(uint64_t seed, uint32_t partition, uint64_t purpose) {
  uint64_t z = seed ^ (0x9E3779B97F4A7C15ull * (partition + 1)) ^ (0xD1B54A32D192ED03ull * purpose);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Mt64 Stream(uint64_t seed, uint32_t partition, uint64_t purpose) {
  return Mt64(StreamSeed(seed, partition, purpose));
}

uint64_t Below(Mt64& rng, uint64_t n) { return n ? rng() % n : 0; }

struct Shared {
  harness::Testbed* tb = nullptr;
  const KvWorkloadSpec* spec = nullptr;
  KvOptions opts;
  uint64_t granularity = 0;
  int threads = 0;
  bool two_phases = false;
  // The MN CPU is the simulator's (sim backend): its busy time is sampled at
  // each barrier. Elsewhere it is not ours to read (see kv_workload.h).
  bool sample_mn_cpu = false;
  // Barrier.
  int arrived = 0;
  uint64_t generation = 0;
  systems::WaitList wake;
  std::vector<Ps> barrier_at;  // when each barrier released
  std::vector<Ps> busy_at;     // MN CPU busy_ps then
  // Results.
  KvWorkloadResult* r = nullptr;
  uint64_t held_chunks = 0, peak_chunks = 0;
};

Task<void> Barrier(Shared* sh) {
  const uint64_t gen = sh->generation;
  if (++sh->arrived == sh->threads) {
    sh->arrived = 0;
    ++sh->generation;
    sh->barrier_at.push_back(sh->tb->now());
    if (sh->sample_mn_cpu) sh->busy_at.push_back(sh->tb->mn_node()->cpu().busy_ps());
    sh->wake.NotifyAll();
    co_return;
  }
  while (sh->generation == gen) co_await sh->wake.Wait();
}

void Fail(Shared* sh, const Status& st, const std::string& what) {
  if (sh->r->failures++ == 0) {
    sh->r->first_failure = what + ": " + st.ToString();
    sh->r->first_failure_oom = st.code() == systems::Code::kOutOfMemory;
  }
}

// Keeps the store's MN footprint (sum over clients) and its peak exact.
struct Footprint {
  Shared* sh;
  const KvClient* kv;
  uint64_t mine = 0;
  void Update() {
    const uint64_t now = kv->alloc_stats().chunks_held + kv->index_chunks();
    sh->held_chunks = sh->held_chunks + now - mine;
    mine = now;
    sh->peak_chunks = std::max(sh->peak_chunks, sh->held_chunks);
  }
};

// Phase 2: deletes a random delete_fraction of the keys this client
// inserted (partial Fisher-Yates on `inserted`).
Task<void> DeletePhase(Shared* sh, KvClient* kv, std::vector<std::string>* inserted,
                       Footprint* fp) {
  const KvWorkloadSpec& spec = *sh->spec;
  KvWorkloadResult& r = *sh->r;
  fabric::Runtime& rt = sh->tb->runtime();
  std::vector<std::string>& keys = *inserted;
  const size_t n = keys.size();
  const size_t del = static_cast<size_t>(static_cast<double>(n) * spec.delete_fraction);
  Mt64 del_rng = Stream(spec.seed, kv->partition(), 3);
  for (size_t i = 0; i < del; ++i) std::swap(keys[i], keys[i + Below(del_rng, n - i)]);
  for (size_t i = 0; i < del; ++i) {
    const Ps t0 = rt.now();
    auto d = co_await kv->Delete(keys[i]);
    r.delete_lat.Record(rt.now() - t0);
    if (!d.ok()) {
      Fail(sh, d.status, "delete");
    } else if (!d.value) {
      Fail(sh, Status(systems::Code::kInvalidArgument, "key " + keys[i] + " not found"), "delete");
    }
    ++r.deletes;
    fp->Update();
  }
}

// One measured read of a key this client inserted (ycsbd).
Task<void> TimedGet(Shared* sh, KvClient* kv, const std::string& k, size_t value_size) {
  KvWorkloadResult& r = *sh->r;
  fabric::Runtime& rt = sh->tb->runtime();
  const Ps t0 = rt.now();
  auto g = co_await kv->Get(k);
  const Ps dt = rt.now() - t0;
  if (!g.ok()) {
    Fail(sh, g.status, "get");
  } else if (!g.value || g.value->size() != value_size) {
    Fail(sh, Status(systems::Code::kInvalidArgument, "key " + k + " lost"), "get");
  }
  r.lat.Record(dt);
  r.get_lat.Record(dt);
  ++r.gets;
}

// One measured insert of *k; the key moves to *inserted when it went in.
// (A pointer: passed by value, a std::string temporary built in the co_await
// expression was freed twice under Debian's GCC 12.2.)
Task<void> TimedPut(Shared* sh, KvClient* kv, std::string* k, const std::string& value,
                    std::vector<std::string>* inserted) {
  KvWorkloadResult& r = *sh->r;
  fabric::Runtime& rt = sh->tb->runtime();
  const Ps t0 = rt.now();
  const Status st = co_await kv->Put(*k, value);
  const Ps dt = rt.now() - t0;
  if (st.ok()) {
    inserted->push_back(std::move(*k));
  } else {
    Fail(sh, st, "put");
  }
  r.lat.Record(dt);
  r.insert_lat.Record(dt);
  ++r.inserts;
}

// A client's workload: phase 1 (the measured inserts, with ycsbd's reads),
// then phase 2 (deletes) when the workload has one; a barrier after each.
Task<void> Client(Shared* sh, KvClient* kv, uint64_t share) {
  const KvWorkloadSpec& spec = *sh->spec;
  const uint32_t p = kv->partition();
  // The partition's new keys, in KeyGen's order: `share` bounds the inserts
  // of every workload. Drawn before the phase starts (outside virtual time),
  // from the key cache when an earlier point drew them.
  const KeyStream stream{KvClient::Partitions(sh->opts), p, spec.key_bytes,
                         StreamSeed(spec.seed, p, 1)};
  std::vector<std::string> fresh = FirstKeys(DefaultKeyDir(), stream, share);
  uint64_t next_fresh = 0;
  Mt64 ops_rng = Stream(spec.seed, p, 2);
  const std::string value(ValueLength(spec), 'v');
  std::vector<std::string> inserted;
  Footprint fp{sh, kv};
  fp.Update();
  const bool ycsbd = spec.workload == "ycsbd";
  co_await Barrier(sh);
  for (uint64_t i = 0; i < share; ++i) {
    if (ycsbd && !inserted.empty() && (ops_rng() & 1)) {
      co_await TimedGet(sh, kv, inserted[Below(ops_rng, inserted.size())], value.size());
    } else {
      std::string k = std::move(fresh[next_fresh++]);
      co_await TimedPut(sh, kv, &k, value, &inserted);
    }
    ++sh->r->ops;
    fp.Update();
  }
  co_await Barrier(sh);
  if (sh->two_phases) {
    co_await DeletePhase(sh, kv, &inserted, &fp);
    co_await Barrier(sh);
  }
}

Task<void> Open(KvClient* kv, Status* st) { *st = co_await kv->Open(); }
Task<void> Close(KvClient* kv) { (void)co_await kv->Close(); }

std::string Size(uint64_t b) { return systems::FormatSize(b); }

}  // namespace

uint32_t ValueLength(const KvWorkloadSpec& spec) {
  if (spec.size_is == "value") return spec.value_bytes;
  if (spec.size_is != "block") {
    throw ConfigError("size_is '" + spec.size_is +
                      "': expected block (the size is the whole KV block) or value");
  }
  const uint64_t overhead = 8ull + spec.key_bytes;  // header + key
  if (spec.value_bytes <= overhead) {
    throw ConfigError("a " + Size(spec.value_bytes) + " KV block cannot hold the 8 B header, a " +
                      std::to_string(spec.key_bytes) + " B key and a value; use a size above " +
                      std::to_string(overhead) + " B, or size the value alone (kv_size=value)");
  }
  return static_cast<uint32_t>(spec.value_bytes - overhead);
}

namespace {

// Bad input, named before anything opens.
void CheckSpec(const KvWorkloadSpec& spec) {
  if (spec.workload != "fillsync" && spec.workload != "ycsbd" && spec.workload != "insert") {
    throw ConfigError("unknown workload '" + spec.workload + "'; known: fillsync, ycsbd, insert");
  }
  if (spec.threads < 1) throw ConfigError("threads must be at least 1");
  if (spec.key_bytes < 8) {
    throw ConfigError("key_bytes " + std::to_string(spec.key_bytes) +
                      ": keys need at least 8 bytes (random alphanumerics)");
  }
  if (spec.keys < 1) throw ConfigError("keys must be at least 1");
  (void)ValueLength(spec);  // a bad size_is or a block too small
  if (spec.cpu_samples < 3) {
    throw ConfigError("cpu_samples " + std::to_string(spec.cpu_samples) +
                      ": the peak drops the first and last interval, so at least 3");
  }
}

// Why the store could not open, as the error a user can act on.
[[noreturn]] void ThrowOpenError(const Status& st, uint64_t partitions, const Shared& sh,
                                 uint64_t granularity_bytes) {
  if (st.code() == systems::Code::kUnsupported) throw ConfigError(st.message());
  if (st.code() == systems::Code::kOutOfMemory) {
    throw ConfigError("opening the KV store (" + std::to_string(partitions) + " partitions of " +
                      std::to_string(sh.opts.buckets_per_partition) +
                      " buckets, each at least one " + Size(granularity_bytes) +
                      " chunk): " + st.ToString() + "; use a larger --pool");
  }
  throw std::runtime_error("opening the KV store: " + st.ToString());
}

// A KV block never spans chunks: one larger than the largest size class is
// refused, naming the granularity that would hold it.
void CheckBlockFits(const KvWorkloadSpec& spec, uint64_t block, uint64_t granularity_bytes,
                    const std::string& system) {
  const std::vector<uint32_t> classes = SlabAllocator::DefaultClasses(granularity_bytes);
  if (!classes.empty() && classes.back() >= block) return;
  const std::string what = "a " + std::to_string(spec.key_bytes) + " B key and a " +
                           std::to_string(ValueLength(spec)) + " B value need a " +
                           std::to_string(block) + " B KV block";
  uint64_t need = 64;
  while (need < block) need *= 2;
  if (need > 32768) {
    throw ConfigError(what + "; the store's largest size class is 32KB; use a smaller value");
  }
  throw ConfigError(what + ", larger than " + system + "'s " + Size(granularity_bytes) +
                    " chunks (a block never spans chunks); use a granularity >= " + Size(need) +
                    " (--set granularity=" + Size(need) + ") or a smaller value");
}

// Every key of fillsync and insert is inserted and holds a block of its size
// class, so more keys than the pool holds such blocks cannot succeed: said
// before the run, not after minutes of it (ycsbd inserts about half its ops).
void CheckPoolHolds(const KvWorkloadSpec& spec, uint64_t block, uint64_t pool_bytes) {
  if (spec.workload == "ycsbd") return;
  uint64_t cls = 64;
  while (cls < block) cls *= 2;
  const uint64_t need = spec.keys * cls;
  if (need <= pool_bytes) return;
  throw ConfigError(std::to_string(spec.keys) + " keys in " + Size(cls) + " blocks need at least " +
                    Size(need) + " of MN memory, more than the pool (" + Size(pool_bytes) +
                    "); use a larger --pool (pool: in a spec) or fewer keys");
}

// The phases' times, the MN CPU (when sampled) and memory figures, once
// every client is done.
void Summarize(const Shared& sh, harness::Testbed& tb, int cpu_samples, KvWorkloadResult* r) {
  // barrier_at: phase 1 starts, phase 1 ends [, phase 2 ends].
  r->phase1_ps = sh.barrier_at.at(1) - sh.barrier_at.at(0);
  if (sh.two_phases) r->phase2_ps = sh.barrier_at.at(2) - sh.barrier_at.at(1);
  r->mn_cpu_measured = sh.sample_mn_cpu;
  if (sh.sample_mn_cpu) {
    r->mn_cpu_mean = r->phase1_ps > 0 ? static_cast<double>(sh.busy_at[1] - sh.busy_at[0]) /
                                            static_cast<double>(r->phase1_ps)
                                      : 0;
    r->mn_cpu_peak = harness::SteadyPeakCores(tb.mn_node()->cpu(), sh.barrier_at, cpu_samples);
  }
  r->peak_mn_bytes = sh.peak_chunks * r->granularity_bytes;
  r->final_mn_bytes = sh.held_chunks * r->granularity_bytes;
  r->dealloc_rate = sh.peak_chunks ? static_cast<double>(sh.peak_chunks - sh.held_chunks) /
                                         static_cast<double>(sh.peak_chunks)
                                   : 0;
}

}  // namespace

KvWorkloadResult RunKvWorkload(harness::Testbed& tb, const KvWorkloadSpec& spec) {
  CheckSpec(spec);
  const int cns = static_cast<int>(tb.mm().num_cns());
  KvWorkloadResult r;
  r.threads_total = cns * spec.threads;
  const uint64_t n = static_cast<uint64_t>(r.threads_total);
  const uint64_t per = (spec.keys + n - 1) / n;  // most keys a partition gets
  Shared sh;
  sh.tb = &tb;
  sh.spec = &spec;
  sh.r = &r;
  sh.threads = r.threads_total;
  sh.two_phases = spec.workload != "insert";
  sh.sample_mn_cpu = tb.backend() == "sim";
  sh.opts.num_cns = static_cast<uint32_t>(cns);
  sh.opts.threads_per_cn = static_cast<uint32_t>(spec.threads);
  // 8 slots per bucket: at most half full, so a key always finds a slot.
  sh.opts.buckets_per_partition = std::max<uint64_t>(64, (per + 3) / 4);
  r.buckets_per_partition = sh.opts.buckets_per_partition;
  r.knobs = tb.mm().knobs().ToString();
  r.granularity_bytes = tb.mm().caps().granularity_bytes;

  // Clients before the testbed goes: declared after it by the caller.
  std::vector<std::unique_ptr<KvClient>> kvs;
  std::vector<Status> opened(n);
  std::vector<Task<void>> open;
  for (uint64_t i = 0; i < n; ++i) {
    kvs.push_back(std::make_unique<KvClient>(tb.mm(), sh.opts,
                                             static_cast<uint32_t>(i / spec.threads),
                                             static_cast<uint32_t>(i % spec.threads)));
    open.push_back(Open(kvs.back().get(), &opened[i]));
  }
  tb.RunAll(std::move(open));
  auto close_all = [&] {
    std::vector<Task<void>> close;
    for (auto& kv : kvs) close.push_back(Close(kv.get()));
    tb.RunAll(std::move(close));
  };
  for (const Status& st : opened) {
    if (st.ok()) continue;
    close_all();
    ThrowOpenError(st, n, sh, r.granularity_bytes);
  }
  r.commit = std::string(CommitModeName(kvs[0]->commit_mode()));
  // A KV block: u32 key length | u32 value length | key | value.
  r.block_bytes = 8ull + spec.key_bytes + ValueLength(spec);
  try {
    CheckBlockFits(spec, r.block_bytes, r.granularity_bytes, tb.mm().system());
    CheckPoolHolds(spec, r.block_bytes, tb.pool_bytes());
  } catch (...) {
    close_all();
    throw;
  }
  std::vector<Task<void>> clients;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t share = spec.keys / n + (i < spec.keys % n ? 1 : 0);
    clients.push_back(Client(&sh, kvs[i].get(), share));
  }
  tb.RunAll(std::move(clients));
  Summarize(sh, tb, spec.cpu_samples, &r);
  close_all();
  return r;
}

}  // namespace dmb::apps::kv
