// RunSwap: Fastswap-style swapping to remote memory on a Testbed, driven by a
// workload's recorded trace (OneSidedMW §5.1, §6.2; Figures 2, 8, 9 and the
// ablation), in virtual time.
//
// Shape. `tasks` copies of the workload, dealt round-robin over the
// testbed's CNs (task i on CN i % cns), each in its own cgroup whose
// memory.high is local_ratio x the trace's peak mapped pages. A task's trace
// threads run as coroutines on their own CN cores (core ids 0.. in task
// order; more threads than cores - 1 share them), meeting at the trace's
// barriers. Every CN has one SwapSpace (swap_gb x scale of 4 KB slots,
// Linux 4.15's allocator, per-CPU slot caches, readahead) and one Pager
// (pager.h); its last core id is Fastswap's dedicated reclaim core.
//
// What a page touch costs (CN CPU work by named costs, all in the profile
// with their sources; I/O from the fabric):
//   hit / first touch     the application's own work: swap.app_page_<app>
//                          (the workload's name up to its first '-') per page
//                          touched (also for every other kind below);
//   swap-cache hit        swap.fault_minor, then the readahead READ of the
//                          page if it has not landed yet;
//   major fault           swap.fault_major, the readahead window's READs
//                          posted on the prefetch lane, then the faulting
//                          page's READ on the sync lane (the task waits);
//   over memory.high      by up to 2,048 pages (x scale, at least 32: the
//                          same fraction of a scaled budget): the reclaim core evicts in
//                          batches (swap.reclaim_page each, WRITEs for dirty
//                          pages, segments allocated on demand); by more: the
//                          task reclaims the excess itself and waits for its
//                          WRITEs (direct reclaim).
// Slots freed by the model (writes after swap-in, munmap, exit, swap more
// than half full) release their remote copies; an empty segment is freed.
//
// Results: job time per task (start to exit), mean and max; synchronous
// swap-in latency (major fault's READ, queueing on its lane included); MN
// memory utilization (Pager::Utilization averaged over the CNs that run
// tasks); peak and mean
// MN CPU (cores busy; peak over the run cut into cpu_samples intervals, the
// first and last dropped, as for the KV store); counts; stamp mismatches
// (must be 0) and failures.
//
// Throws std::invalid_argument (ConfigError) for a bad spec: an unknown
// workload, local_ratio outside (0, 1], a segment that is not a multiple of
// 4 KB, a swap area too small for the tasks' swapped pages.
#pragma once

#include <cstdint>
#include <string>

#include "apps/swap/workloads.h"
#include "fabric/histogram.h"
#include "harness/testbed.h"

namespace dmb::apps::swap {

struct SwapRunSpec {
  std::string workload = "kmeans";
  WorkloadKnobs workload_knobs;  // memcached's skew (workloads.h)
  double scale = 1.0 / 256;      // of the paper's working set and swap area
  int tasks = 1;                 // over all CNs
  double local_ratio = 0.5;
  double swap_gb = 32;                  // per CN at scale 1 ([OSMW] §6)
  std::string segment_policy = "lazy";  // lazy | keep | whole (segment_table.h)
  bool rotational = false;              // the swap-slot allocator's other mode
  uint32_t lane_depth = 16;             // 4 KB I/Os in flight per pager lane (pager.h)
  std::string trace_dir;                // trace cache ("" = none: record every time)
  uint64_t seed = 1;
  int cpu_samples = 20;
};

struct SwapRunResult {
  std::string knobs;
  uint64_t segment_bytes = 0;
  uint64_t working_set_pages = 0;  // per task: the trace's peak mapped pages
  uint64_t high_pages = 0;
  uint64_t area_slots = 0;  // per CN
  bool trace_cached = false;
  Ps run_ps = 0;  // first task start to last task exit
  double job_s_mean = 0, job_s_max = 0;
  Histogram sync_lat;
  uint64_t touches = 0, first_touches = 0, minor_faults = 0, major_faults = 0;
  uint64_t reclaimed_bg = 0, reclaimed_direct = 0, writes = 0, reads = 0;
  uint64_t kept_no_slot = 0;  // victims kept because swap was full
  uint64_t allocs = 0, frees = 0;
  Histogram alloc_lat;
  double mem_util = 0;             // mean over CNs
  uint64_t peak_mapped_bytes = 0;  // sum over CNs
  double mn_cpu_peak = 0, mn_cpu_mean = 0;
  uint64_t stamp_mismatches = 0;
  std::string first_mismatch;
  uint64_t failures = 0;
  std::string first_failure;
};

SwapRunResult RunSwap(harness::Testbed& tb, const SwapRunSpec& spec);

}  // namespace dmb::apps::swap
