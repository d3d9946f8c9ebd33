#include "apps/swap/swap_run.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "apps/swap/cgroup_memory.h"
#include "apps/swap/pager.h"
#include "apps/swap/swap_space.h"
#include "apps/swap/workloads.h"
#include "harness/cpu_sampling.h"
#include "systems/common/wait_list.h"
#include "systems/knobs.h"

namespace dmb::apps::swap {
namespace {

using systems::ConfigError;

struct Costs {
  fabric::CpuCost app, minor, major, reclaim;
};

// Barrier of one task's trace threads.
struct Barrier {
  uint32_t threads = 1, arrived = 0;
  uint64_t generation = 0;
  systems::WaitList wake;
  Task<void> Arrive() {
    const uint64_t g = generation;
    if (++arrived == threads) {
      arrived = 0;
      ++generation;
      wake.NotifyAll();
      co_return;
    }
    while (generation == g) co_await wake.Wait();
  }
};

struct TaskState {
  std::unique_ptr<CgroupMemory> cg;
  Barrier barrier;
  uint32_t threads_left = 0;
  Ps start_ps = 0, end_ps = 0;
};

struct CnState {
  systems::CnSide* cn = nullptr;
  std::unique_ptr<SwapSpace> space;
  std::unique_ptr<Pager> pager;
  std::vector<TaskState*> tasks;
  uint32_t app_cores = 1, reclaim_core = 0;
  uint32_t tasks_left = 0;
  systems::WaitList reclaim_wake;
};

struct Run {
  harness::Testbed* tb = nullptr;
  const Trace* trace = nullptr;
  Costs costs;
  std::vector<std::unique_ptr<CnState>> cns;
  std::vector<std::unique_ptr<TaskState>> tasks;
  SwapRunResult* r = nullptr;
  uint32_t tasks_left = 0;
  systems::WaitList all_done;
};

Task<void> CpuWork(fabric::Node* n, fabric::CpuCost c, uint64_t times) {
  if (times > 0) co_await n->cpu().Work(c, times);
}

// Evicts `pages` of `cg` on `core`, writing its dirty pages; waits for them.
Task<void> Reclaim(Run* run, CnState* cs, CgroupMemory* cg, uint32_t core, uint64_t pages) {
  const ReclaimResult rr = cg->Reclaim(core, pages);
  run->r->kept_no_slot += rr.no_slot;
  // Slots the allocator took back are released before anything suspends
  // (and before the new copies are queued: a slot given back in this call
  // may be among those just handed out again).
  cs->pager->Release(cs->space->TakeReleased());
  std::vector<Pager::WriteTicket> tickets;
  for (const SwapIo& io : rr.writes) tickets.push_back(cs->pager->QueueWrite(io));
  co_await CpuWork(cs->cn->node(), run->costs.reclaim, rr.writes.size() + rr.clean_dropped);
  for (size_t i = 0; i < rr.writes.size(); ++i) {
    co_await cs->pager->SwapOut(core, rr.writes[i], tickets[i]);
  }
  cs->pager->Release(cs->space->TakeReleased());
}

// Fastswap's dedicated reclaim core: keeps every cgroup of the CN under high.
Task<void> Reclaimer(Run* run, CnState* cs) {
  while (cs->tasks_left > 0) {
    bool any = false;
    for (TaskState* t : cs->tasks) {
      if (t->cg == nullptr) continue;
      const ReclaimNeed need = t->cg->Need();
      if (need.mode == ReclaimMode::kNone) continue;
      any = true;
      run->r->reclaimed_bg += need.pages;
      co_await Reclaim(run, cs, t->cg.get(), cs->reclaim_core, need.pages);
    }
    if (!any) co_await cs->reclaim_wake.Wait();
  }
}

struct Pending {
  uint64_t app_pages = 0;
};

Task<void> Flush(Run* run, CnState* cs, Pending* p) {
  const uint64_t n = std::exchange(p->app_pages, 0);
  co_await CpuWork(cs->cn->node(), run->costs.app, n);
}

// The slow part of a page touch: a swap-cache hit or a major fault.
Task<void> HandleFault(Run* run, CnState* cs, uint32_t core, SwapIo io, const TouchResult& tr,
                       std::optional<uint64_t> pre_slot, uint64_t version, Pending* p) {
  fabric::Node* node = cs->cn->node();
  co_await Flush(run, cs, p);
  if (tr.fault == Fault::kSwapCacheHit) {
    ++run->r->minor_faults;
    co_await CpuWork(node, run->costs.minor, 1);
    if (pre_slot && cs->pager->Reading(*pre_slot)) co_await cs->pager->AwaitRead(*pre_slot);
    co_return;
  }
  ++run->r->major_faults;
  co_await CpuWork(node, run->costs.major, 1);
  const Ps t0 = run->tb->now();
  co_await cs->pager->SwapIn(core, io, IoRole::kSync, version);
  run->r->sync_lat.Record(run->tb->now() - t0);
}

// A task thread on `core` replays the trace: its own touches, unmaps, and
// every barrier. Only faults, reclaim, CPU work and barriers suspend: a page
// hit must not co_await (a loop of awaits that complete at once grows the
// stack in unoptimized builds).
Task<void> TaskThread(Run* run, CnState* cs, TaskState* t, uint8_t thread, uint32_t core) {
  Pending p;
  CgroupMemory& cg = *t->cg;
  for (const TraceEvent& e : run->trace->events) {
    if (e.op == TraceOp::kBarrier) {
      if (p.app_pages > 0) co_await Flush(run, cs, &p);
      co_await t->barrier.Arrive();
      continue;
    }
    if (e.thread != thread || e.op == TraceOp::kMap) continue;
    if (e.op == TraceOp::kUnmap) {
      cg.Unmap(e.first_page, e.pages, core);
      cs->pager->Release(cs->space->TakeReleased());
      continue;
    }
    const bool write = e.op == TraceOp::kWrite;
    for (uint64_t page = e.first_page; page < e.first_page + e.pages; ++page) {
      const std::optional<uint64_t> pre_slot =
          cg.state(page) == PageState::kResident ? cg.slot(page) : std::nullopt;
      const TouchResult tr = cg.Touch(page, write, core);
      uint64_t version = 0;
      ++p.app_pages;
      ++run->r->touches;
      if (tr.fault == Fault::kFirstTouch) ++run->r->first_touches;
      if (tr.fault == Fault::kMajor) {
        // Pinned now: Touch may have freed the slot already (a write, or
        // swap more than half full), and the READ must still find it.
        version = cs->pager->Pin(*tr.sync_read_slot);
        for (const SwapIo& ra : tr.readahead) cs->pager->Prefetch(core, ra);
      }
      // Before the fault suspends: once given back, a slot can be handed
      // out again by a core that runs meanwhile (the reclaim core), and its
      // new copy must not find the old one still held.
      cs->pager->Release(cs->space->TakeReleased());
      if (tr.fault == Fault::kSwapCacheHit || tr.fault == Fault::kMajor) {
        const SwapIo io{cg.id(), page, tr.sync_read_slot.value_or(0)};
        co_await HandleFault(run, cs, core, io, tr, pre_slot, version, &p);
      }
      cs->pager->Release(cs->space->TakeReleased());
      const ReclaimNeed need = cg.Need();
      if (need.mode == ReclaimMode::kDirect) {
        co_await Flush(run, cs, &p);
        run->r->reclaimed_direct += need.pages;
        co_await Reclaim(run, cs, &cg, core, need.pages);
      } else if (need.mode == ReclaimMode::kBackground) {
        cs->reclaim_wake.NotifyAll();
      }
    }
  }
  if (p.app_pages > 0) co_await Flush(run, cs, &p);
  if (--t->threads_left > 0) co_return;
  cg.Exit(core);
  cs->pager->Release(cs->space->TakeReleased());
  t->end_ps = run->tb->now();
  if (--cs->tasks_left == 0) cs->reclaim_wake.NotifyAll();
  if (--run->tasks_left == 0) run->all_done.NotifyAll();
}

uint64_t PeakMappedPages(const Trace& t) {
  uint64_t now = 0, peak = 0;
  for (const TraceEvent& e : t.events) {
    if (e.op == TraceOp::kMap) peak = std::max(peak, now += e.pages);
    if (e.op == TraceOp::kUnmap) now -= std::min<uint64_t>(now, e.pages);
  }
  return std::max<uint64_t>(peak, 1);
}

void CheckSpec(const SwapRunSpec& s) {
  if (!(s.local_ratio > 0 && s.local_ratio <= 1)) {
    throw ConfigError("swap: local_ratio must be in (0, 1], got " + std::to_string(s.local_ratio));
  }
  if (!(s.scale > 0 && s.scale <= 1)) {
    throw ConfigError("swap: scale must be in (0, 1], got " + std::to_string(s.scale));
  }
  if (s.tasks < 1) throw ConfigError("swap: tasks must be >= 1");
  if (!(s.swap_gb > 0)) throw ConfigError("swap: swap_gb must be > 0");
  const std::vector<std::string> names = WorkloadNames();
  if (std::find(names.begin(), names.end(), s.workload) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError("swap: unknown workload \"" + s.workload + "\"; known: " + known);
  }
  try {
    CheckKnobs(s.workload, s.workload_knobs);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("swap: ") + e.what());
  }
  ParseSegmentPolicy(s.segment_policy);
  if (s.cpu_samples < 3) throw ConfigError("swap: cpu_samples must be >= 3");
}

Trace LoadTrace(const SwapRunSpec& s, bool* cached) {
  *cached = false;
  if (s.trace_dir.empty()) {
    return RecordWorkload(s.workload, s.scale, s.seed, true, nullptr, s.workload_knobs);
  }
  TraceCache cache(s.trace_dir);
  return WorkloadTrace(cache, s.workload, s.scale, s.seed, cached, s.workload_knobs);
}

// "kmeans-32g" -> "kmeans": the application whose CPU cost applies.
std::string AppName(const std::string& workload) { return workload.substr(0, workload.find('-')); }

Costs ResolveCosts(fabric::Node* cn, const std::string& workload) {
  return {cn->Cost("swap.app_page_" + AppName(workload)), cn->Cost("swap.fault_minor"),
          cn->Cost("swap.fault_major"), cn->Cost("swap.reclaim_page")};
}

void BuildCns(Run* run, const SwapRunSpec& s, uint64_t area_slots, uint64_t segment_bytes,
              uint32_t cn_cores) {
  harness::Testbed& tb = *run->tb;
  const size_t cns = tb.mm().num_cns();
  const uint32_t threads = run->trace->threads;
  for (size_t c = 0; c < cns; ++c) {
    auto cs = std::make_unique<CnState>();
    cs->cn = &tb.cn(c);
    const uint32_t local_tasks = static_cast<uint32_t>((s.tasks - c + cns - 1) / cns);
    cs->app_cores = std::clamp<uint32_t>(local_tasks * threads, 1, std::max(1u, cn_cores - 1));
    cs->reclaim_core = cs->app_cores;
    SwapSpaceSpec ss;
    ss.area = {.pages = area_slots,
               .cpus = cs->app_cores + 1,
               .rotational = s.rotational,
               .seed = s.seed * 1000003 + c};
    cs->space = std::make_unique<SwapSpace>(ss);
    PagerSpec ps{area_slots, segment_bytes, ParseSegmentPolicy(s.segment_policy), cs->app_cores + 1,
                 s.lane_depth};
    cs->pager = std::make_unique<Pager>(*cs->cn, tb.runtime(), cs->space->map(), ps);
    run->cns.push_back(std::move(cs));
  }
}

// Fastswap lets a cgroup run 2,048 pages over memory.high before its own
// threads reclaim. That is 0.8% of a 1 GB budget at the paper's scale; the
// same fraction of a scaled budget keeps how far the reclaim core may lag
// (at least one 32-page batch).
uint64_t DirectReclaimOver(double scale) {
  return std::max<uint64_t>(32, static_cast<uint64_t>(2048 * scale));
}

void BuildTasks(Run* run, const SwapRunSpec& s, uint64_t ws_pages, uint64_t high_pages) {
  for (int i = 0; i < s.tasks; ++i) {
    CnState& cs = *run->cns[static_cast<size_t>(i) % run->cns.size()];
    auto t = std::make_unique<TaskState>();
    CgroupSpec cg;
    cg.pages = run->trace->address_pages;
    cg.high_pages = high_pages;
    cg.reclaim_cpu = cs.reclaim_core;
    cg.direct_reclaim_over_pages = DirectReclaimOver(s.scale);
    (void)ws_pages;
    t->cg = std::make_unique<CgroupMemory>(*cs.space, cg);
    t->barrier.threads = run->trace->threads;
    t->threads_left = run->trace->threads;
    cs.tasks.push_back(t.get());
    ++cs.tasks_left;
    run->tasks.push_back(std::move(t));
  }
  run->tasks_left = static_cast<uint32_t>(s.tasks);
}

Task<void> Setup(Run* run, bool whole, systems::Status* st) {
  for (auto& cs : run->cns) {
    *st = co_await cs->pager->Open();
    if (st->ok() && whole) *st = co_await cs->pager->MapWhole();
    if (!st->ok()) co_return;
  }
}

Task<void> Main(Run* run) {
  fabric::Runtime& rt = run->tb->runtime();
  for (auto& cs : run->cns) {
    cs->pager->Begin();
    rt.Spawn(Reclaimer(run, cs.get()));
    for (size_t k = 0; k < cs->tasks.size(); ++k) {
      TaskState* t = cs->tasks[k];
      t->start_ps = rt.now();
      for (uint32_t th = 0; th < run->trace->threads; ++th) {
        const uint32_t core = static_cast<uint32_t>(k * run->trace->threads + th) % cs->app_cores;
        rt.Spawn(TaskThread(run, cs.get(), t, static_cast<uint8_t>(th), core));
      }
    }
  }
  while (run->tasks_left > 0) co_await run->all_done.Wait();
  for (auto& cs : run->cns) cs->pager->End();
  for (auto& cs : run->cns) co_await cs->pager->Quiesce();
}

void Summarize(const Run& run, Ps begin, Ps end, const SwapRunSpec& s, SwapRunResult* r) {
  r->run_ps = end - begin;
  double sum = 0;
  for (const auto& t : run.tasks) {
    const double job_s = PsToS(t->end_ps - t->start_ps);
    sum += job_s;
    r->job_s_max = std::max(r->job_s_max, job_s);
  }
  r->job_s_mean = sum / static_cast<double>(run.tasks.size());
  double util = 0;
  int paging_cns = 0;
  for (const auto& cs : run.cns) {
    const PagerStats& ps = cs->pager->stats();
    if (!cs->tasks.empty()) {  // a CN without tasks maps nothing: no utilization
      util += cs->pager->Utilization();
      ++paging_cns;
    }
    r->peak_mapped_bytes += cs->pager->peak_mapped_bytes();
    r->reads += ps.reads;
    r->writes += ps.writes;
    r->allocs += ps.allocs;
    r->frees += ps.frees;
    r->alloc_lat.Merge(ps.alloc_lat);
    if (ps.stamp_mismatches > 0 && r->stamp_mismatches == 0) r->first_mismatch = ps.first_mismatch;
    r->stamp_mismatches += ps.stamp_mismatches;
    if (ps.failures > 0 && r->failures == 0) r->first_failure = ps.first_failure;
    r->failures += ps.failures;
  }
  r->mem_util = paging_cns > 0 ? util / paging_cns : 1.0;
  const fabric::Cpu& cpu = run.tb->mn_node()->cpu();
  r->mn_cpu_peak = harness::SteadyPeakCores(cpu, {begin, end}, s.cpu_samples);
  r->mn_cpu_mean = end > begin ? cpu.BusyFraction(begin, end) * cpu.cores() : 0;
}

}  // namespace

SwapRunResult RunSwap(harness::Testbed& tb, const SwapRunSpec& spec) {
  CheckSpec(spec);
  SwapRunResult r;
  const Trace trace = LoadTrace(spec, &r.trace_cached);
  r.knobs = tb.mm().knobs().ToString();
  r.segment_bytes = tb.mm().caps().granularity_bytes;
  if (r.segment_bytes == 0 || r.segment_bytes % kPageBytes != 0) {
    throw ConfigError("swap: pages are 4 KB, so the granularity must be a multiple of 4KB, got " +
                      systems::FormatSize(r.segment_bytes));
  }
  r.working_set_pages = PeakMappedPages(trace);
  r.high_pages = static_cast<uint64_t>(spec.local_ratio * static_cast<double>(r.working_set_pages));
  r.area_slots = static_cast<uint64_t>(spec.swap_gb * spec.scale * (1ull << 30)) / kPageBytes;
  const size_t cns = tb.mm().num_cns();
  const uint64_t tasks_per_cn = (static_cast<uint64_t>(spec.tasks) + cns - 1) / cns;
  // At least the pages over memory.high must fit (the kernel then frees the
  // slots of swapped-in pages, vm_swap_full, and keeps victims it has no
  // slot for).
  if (tasks_per_cn * (r.working_set_pages - r.high_pages) + 1 > r.area_slots) {
    throw ConfigError("swap: " + std::to_string(tasks_per_cn) + " tasks of " +
                      std::to_string(r.working_set_pages) + " pages (" +
                      std::to_string(r.high_pages) + " local) need a larger swap area than " +
                      std::to_string(r.area_slots) + " slots; raise swap_gb");
  }
  Run run;
  run.tb = &tb;
  run.trace = &trace;
  run.r = &r;
  run.costs = ResolveCosts(tb.cn(0).node(), spec.workload);
  BuildCns(&run, spec, r.area_slots, r.segment_bytes,
           static_cast<uint32_t>(tb.cn(0).node()->cpu().cores()));
  BuildTasks(&run, spec, r.working_set_pages, r.high_pages);
  systems::Status st;
  tb.Run(Setup(&run, ParseSegmentPolicy(spec.segment_policy) == SegmentPolicy::kWhole, &st));
  if (!st.ok()) {
    throw ConfigError("swap: setting up remote memory failed: " + st.ToString() +
                      "; a larger pool may help");
  }
  const Ps begin = tb.now();
  tb.Run(Main(&run));
  const Ps end =
      std::max_element(run.tasks.begin(), run.tasks.end(),
                       [](const auto& a, const auto& b) { return a->end_ps < b->end_ps; })
          ->get()
          ->end_ps;
  Summarize(run, begin, end, spec, &r);
  return r;
}

}  // namespace dmb::apps::swap
