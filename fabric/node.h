// Nodes, their memory and CPUs, and the cluster that connects them.
// Backend-neutral: sim/ implements these on a virtual clock, ibv/ on hardware.
//
// Timing rule: nothing above fabric/ advances time. Code above fabric declares
// CPU work by a named cost (Node::Cost) and awaits Cpu::Work; the backend
// decides what that costs (sim: the calibrated profile; ibv: real CPU time).
#pragma once

#include <coroutine>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/task.h"
#include "fabric/time.h"
#include "fabric/verbs.h"

namespace dmb::fabric {

// Byte-addressed node memory. Addresses are node-local virtual addresses in
// [0, size_bytes()). Read/Write are the node's own CPU loads and stores (no
// protection: the CPU owns its memory; remote access goes through the RNIC).
class Memory {
 public:
  virtual ~Memory() = default;
  virtual uint64_t size_bytes() const = 0;
  virtual void Read(uint64_t addr, void* dst, uint64_t n) const = 0;
  virtual void Write(uint64_t addr, const void* src, uint64_t n) = 0;
  virtual void Fill(uint64_t addr, uint8_t byte, uint64_t n) = 0;
  // Reserves `bytes` aligned to `align` (a power of two); the bytes read as
  // zero. Throws VerbsError (ENOMEM) naming the node when the memory is
  // exhausted.
  virtual uint64_t Alloc(uint64_t bytes, uint64_t align = 64) = 0;
  // Gives back what one Alloc returned (the same address and size) for later
  // Allocs; the bytes read as zero again. Nothing may use the range any more
  // (deregister MRs over it first). Throws std::invalid_argument naming the
  // node when [addr, addr+bytes) is not one live allocation (a double free).
  virtual void Free(uint64_t addr, uint64_t bytes) = 0;
  // Bytes reserved by Alloc and not freed: what the node's software holds
  // (the pool, metadata, work queue rings, scratch).
  virtual uint64_t in_use_bytes() const = 0;
  // Host bytes actually backing touched pages (sparse memories).
  virtual uint64_t resident_bytes() const = 0;

  uint64_t LoadU64(uint64_t addr) const {
    uint64_t v;
    Read(addr, &v, 8);
    return v;
  }
  void StoreU64(uint64_t addr, uint64_t v) { Write(addr, &v, 8); }
  uint32_t LoadU32(uint64_t addr) const {
    uint32_t v;
    Read(addr, &v, 4);
    return v;
  }
  void StoreU32(uint64_t addr, uint32_t v) { Write(addr, &v, 4); }
};

// Memory::Alloc for memories that hand out addresses bottom-up: the first
// `align`-aligned address at or above *next_free with `bytes` left below
// `size`; advances *next_free. Throws std::invalid_argument (alignment not a
// power of two) or VerbsError(ENOMEM) naming the node.
uint64_t BumpAlloc(uint64_t* next_free, uint64_t size, uint64_t bytes, uint64_t align,
                   const std::string& node_name);

// A named CPU cost, resolved once from the node's calibration profile.
struct CpuCost {
  uint32_t id = 0;
  Ps ps = 0;
};

// A node's CPU cores, a queueing resource: Work runs on the earliest-free core.
class Cpu {
 public:
  struct WorkAwaiter {
    Cpu* cpu;
    CpuCost cost;
    uint64_t multiplier;
    bool await_ready() const noexcept { return cost.ps <= 0 || multiplier == 0; }
    void await_suspend(std::coroutine_handle<> h) { cpu->Submit(h, cost, multiplier); }
    void await_resume() const noexcept {}
  };

  virtual ~Cpu() = default;
  virtual int cores() const = 0;
  // Runs `cost` (times `multiplier`, e.g. per page) on one core.
  WorkAwaiter Work(CpuCost cost, uint64_t multiplier = 1) {
    return WorkAwaiter{this, cost, multiplier};
  }
  virtual Ps busy_ps() const = 0;  // summed over cores since start
  // Highest busy fraction of all cores together over any aligned window of
  // `window_ps` that started at or after `since_ps`.
  virtual double PeakBusyFraction(Ps window_ps, Ps since_ps = 0) const = 0;
  // Busy fraction of all cores together over [from_ps, to_ps) (a tool's
  // sample over one interval). 0 for an empty interval.
  virtual double BusyFraction(Ps from_ps, Ps to_ps) const = 0;
  // Busy time per named cost (name -> ps), for "why" breakdowns.
  virtual std::vector<std::pair<std::string, Ps>> BusyByCost() const = 0;

 protected:
  virtual void Submit(std::coroutine_handle<> h, CpuCost cost, uint64_t multiplier) = 0;
};

// What a node's RNIC can do. An approach that needs a capability the device
// lacks fails at start naming it (RequireCaps). The sim models a ConnectX-5
// with cross-channel QPs; real devices report what their driver exposes.
struct DeviceCaps {
  bool mw_type1 = true;
  bool mw_type2 = true;
  bool atomics = true;         // RDMA CAS / FAA
  bool masked_atomics = true;  // masked FAA (mlx5 extended atomics)
  bool cross_channel = true;   // WAIT / SEND_ENABLE / RECV_ENABLE WQEs
  bool qpn_in_bind = true;     // BIND_MW naming a QP other than the poster
};
// Capability names are the field names above ("cross_channel"). Returns the
// names in `need` that `have` lacks; throws std::invalid_argument on an
// unknown name.
std::vector<std::string> MissingCaps(const DeviceCaps& have, const std::vector<std::string>& need);
// Throws VerbsError(EOPNOTSUPP) "<who> needs <caps> which device of node
// '<node>' lacks ..." when something is missing.
void RequireCaps(const class Node& node, const std::vector<std::string>& need,
                 const std::string& who);

struct NodeConfig {
  std::string name;
  uint64_t memory_bytes = 1ull << 30;
  int cpu_cores = 1;
  uint64_t page_bytes = 4096;  // OS page size backing MRs (4 KB or 2 MB)
  // sim: what the simulated RNIC offers (default: ConnectX-5 with
  // cross-channel QPs). ibv: ignored, the device says.
  DeviceCaps caps;
};

class Node {
 public:
  virtual ~Node() = default;
  virtual uint32_t id() const = 0;
  virtual const std::string& name() const = 0;
  virtual Memory& memory() = 0;
  virtual Cpu& cpu() = 0;
  // Resolves a calibrated CPU cost by name; throws std::invalid_argument listing
  // the known names when it does not exist.
  virtual CpuCost Cost(std::string_view name) const = 0;

  virtual Pd* AllocPd() = 0;
  // Registers [addr, addr+length) on this node's CPU (cost grows with the
  // number of pages). Throws VerbsError on bad arguments.
  virtual Task<Mr*> RegMr(Pd* pd, uint64_t addr, uint64_t length, uint32_t access) = 0;
  // Fails (VerbsError EBUSY) while memory windows are bound to the MR.
  virtual Task<void> DeregMr(Mr* mr) = 0;
  virtual Mw* AllocMw(Pd* pd, MwType type) = 0;
  virtual void DeallocMw(Mw* mw) = 0;
  // ignore_overrun: completions are only counted (for WAIT), never stored.
  virtual Cq* CreateCq(uint32_t capacity, bool ignore_overrun = false) = 0;
  virtual Qp* CreateQp(const QpInitAttr& attr) = 0;
  virtual Qp* QpByNum(uint32_t qp_num) = 0;
  // ibv_destroy_qp: the QP's outstanding WRs are dropped without completions,
  // requests that reach it afterwards get no answer (the requester's retries
  // run out), QpByNum no longer finds it, and its work queue rings go back to
  // node memory (sim). Deregister MRs the caller registered over its rings
  // first. Type-2 windows still bound to it stay bound to its number, which
  // the sim never gives another QP (hardware may reuse numbers, and rxe holds
  // the QP while windows are bound: invalidate them first). The pointer is
  // invalid afterwards. Throws VerbsError (EINVAL) for anything but a live QP
  // of this node.
  virtual void DestroyQp(Qp* qp) = 0;
  // ibv_destroy_cq. Throws VerbsError: EBUSY while a QP uses the CQ or a
  // coroutine awaits it; EINVAL for anything but a live CQ of this node.
  virtual void DestroyCq(Cq* cq) = 0;
  virtual DeviceCaps caps() const { return DeviceCaps{}; }
};

// Clock and coroutine scheduling.
class Runtime {
 public:
  struct SleepAwaiter {
    Runtime* rt;
    Ps until;
    bool await_ready() const noexcept { return until <= rt->now(); }
    void await_suspend(std::coroutine_handle<> h) { rt->ResumeAt(h, until); }
    void await_resume() const noexcept {}
  };

  virtual ~Runtime() = default;
  virtual Ps now() const = 0;
  // Starts `task` as an independent thread of control. Exceptions it throws
  // stop the run and are rethrown by the backend's run call.
  virtual void Spawn(Task<void> task) = 0;
  // Protocol timers (leases) and workload think time only: never a latency.
  SleepAwaiter SleepUntil(Ps t) { return SleepAwaiter{this, t}; }
  SleepAwaiter SleepFor(Ps d) { return SleepAwaiter{this, now() + d}; }

 protected:
  virtual void ResumeAt(std::coroutine_handle<> h, Ps t) = 0;
};

class Cluster {
 public:
  virtual ~Cluster() = default;
  virtual Runtime& runtime() = 0;
  virtual Node* AddNode(const NodeConfig& cfg) = 0;
  virtual Node* node(uint32_t id) = 0;
  virtual size_t num_nodes() const = 0;
  // Moves both QPs RESET -> INIT -> RTR -> RTS, each pointing at the other.
  // `a` and `b` may be on the same node (loopback).
  virtual void Connect(Qp* a, Qp* b) = 0;
};

}  // namespace dmb::fabric
