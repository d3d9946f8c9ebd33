// RunKvWorkload: the OneSidedMW paper's KV-store workloads (§6.1, Figures 6
// and 7) on a Testbed: in virtual time on the simulator, wall clock on ibv.
//
// Clients: cns x threads KvClients, one per partition (see kv_client.h), all
// opened before anything is measured. Every key a client inserts belongs to
// its own partition: keys are `key_bytes` random alphanumerics drawn from a
// per-partition generator seeded from `seed`, kept only if
// KvClient::PartitionOf names the client (same seed => same keys, ops and
// numbers).
//
// Workloads (phase 1 is measured; phase 2 when the workload has one):
//   fillsync  phase 1: each client inserts its share of `keys` new keys;
//             phase 2 (deleterandom): it deletes a random 90% of them.
//   ycsbd     phase 1: each client runs its share of `keys` ops, 50% inserts
//             of new keys and 50% reads of a key it already inserted (a read
//             before any insert is an insert); phase 2 as fillsync.
//   insert    phase 1 only: inserts, as fillsync (Figure 7).
// Each phase starts when every client is ready (barrier) and ends when the
// last one finishes.
//
// Memory: the store's MN bytes are the chunks its clients hold (value slabs
// and index), tracked exactly after every op. dealloc_rate = (peak - held
// after the workload) / peak: the fraction of its peak footprint the store
// gave back to the MN by deleting (0 when nothing is deleted or when no
// chunk empties, e.g. 16 MB static_mr regions).
//
// MN CPU: cores busy (1.0 = one core saturated), from the MN CPU's own
// accounting (work counted when it runs, not when it is queued). Mean: over
// phase 1. Peak: as a sampling tool (top, mpstat) reports it over a run much
// longer than its interval: each phase is cut into `cpu_samples` intervals,
// the first and the last are dropped (start-up burst, ramp-down while the
// last clients finish) and peak = the busiest interval left, over all phases.
// The interval scales with the run, so a 4x longer run samples the same
// steady state (a fixed 100 us window caught the first allocations' burst:
// 100% peak at a 0.9% mean). Only on the simulator (mn_cpu_measured): on ibv
// the MN is a `dmbench mn` daemon (another process, maybe another host) or an
// in-process node whose CPU accounting is empty (declared CPU costs are free
// there), so no MN CPU figure exists and none is reported.
//
// Time: virtual on the simulator; wall clock (steady_clock) on ibv, where the
// clients are coroutines of this process's one polling thread.
#pragma once

#include <cstdint>
#include <string>

#include "fabric/histogram.h"
#include "harness/testbed.h"

namespace dmb::apps::kv {

struct KvWorkloadSpec {
  std::string workload = "fillsync";  // fillsync | ycsbd | insert
  int threads = 1;                    // clients per CN (the testbed's CNs all run clients)
  uint64_t keys = 100000;             // fillsync/insert: keys over all clients; ycsbd: ops
  // What value_bytes sizes (`size_is`):
  //   "block": the whole KV block, header + key + value (the paper's Figures 6
  //            and 7 label their panels with it: their deallocation rates are
  //            0.9^k for k 1 KB blocks per chunk, 0.656 at 4 KB, 0.811 at 2 KB),
  //            so a "1 KB" point fills the 1 KB size class exactly;
  //   "value": the value alone (db_bench's --value_size), the block is 8 B +
  //            key + value and a "1 KB" point takes a 2 KB block.
  uint32_t value_bytes = 1024;
  std::string size_is = "block";
  uint32_t key_bytes = 16;
  uint64_t seed = 1;
  double delete_fraction = 0.9;  // of each client's inserted keys, in phase 2
  int cpu_samples = 20;          // MN CPU peak: intervals per phase (>= 3)
};

struct KvWorkloadResult {
  std::string knobs;
  std::string commit;  // "cas" | "write"
  uint64_t granularity_bytes = 0;
  uint64_t buckets_per_partition = 0;
  int threads_total = 0;
  // Phase 1.
  Ps phase1_ps = 0;
  uint64_t ops = 0;  // phase-1 ops, all clients
  uint64_t inserts = 0, gets = 0;
  uint64_t block_bytes = 0;  // one KV block: 8 B header + key + value
  Histogram lat, insert_lat, get_lat;
  // Phase 2 (deletes); 0 without one.
  Ps phase2_ps = 0;
  uint64_t deletes = 0;
  Histogram delete_lat;
  // Ops that did not do what they should (error, lost key); first one's text.
  uint64_t failures = 0;
  std::string first_failure;
  bool first_failure_oom = false;
  // Store memory on the MN.
  uint64_t peak_mn_bytes = 0;
  uint64_t final_mn_bytes = 0;  // after the workload, before Close
  double dealloc_rate = 0;
  // MN CPU, cores busy: only when mn_cpu_measured (the simulator's MN).
  bool mn_cpu_measured = false;
  double mn_cpu_peak = 0;
  double mn_cpu_mean = 0;  // over phase 1

  double tput_mops() const { return phase1_ps > 0 ? ops / PsToUs(phase1_ps) : 0; }
  double delete_tput_mops() const { return phase2_ps > 0 ? deletes / PsToUs(phase2_ps) : 0; }
};

// The value length a client stores: value_bytes, or (size_is "block") what
// is left of value_bytes after the header and the key. Throws ConfigError
// when a block is too small to hold the header, the key and one value byte,
// or size_is is neither.
uint32_t ValueLength(const KvWorkloadSpec& spec);

// Throws systems::ConfigError for bad input, an approach the store refuses
// (the store's kUnsupported message), a value no size class holds (naming
// the granularity that would), keys whose blocks cannot fit in the pool, or
// an index the pool cannot hold at open (kOutOfMemory); std::runtime_error
// if the store fails to open otherwise.
KvWorkloadResult RunKvWorkload(harness::Testbed& tb, const KvWorkloadSpec& spec);

}  // namespace dmb::apps::kv
