// MemoryManager: the one interface every disaggregated-memory approach
// implements and every experiment and app is written against.
//
// An approach has an MN side (memory, metadata, keys, pre-posted work, RPC
// service on the MN's few cores, crash reclamation) and one CN side per
// compute node (allocate, free, read, write). Both are created from a Config
// by the registry (registry.h). Adding an approach = one folder + one line in
// registry.cc; the conformance and attack suites then run against it.
//
// Threads and lanes: an application thread owns an AccessGroup, a set of
// lanes. A lane is one RC QP from the CN to the MN (plus its CQ); a chunk is
// allocated for a group and is usable through every lane of that group (with
// type-2 MWs, through no other QP). Reads and Writes may be in flight
// together on one lane, up to caps().lane_depth of them (a QP keeps several
// WRs outstanding; each operation waits for its own completion). Alloc, Free,
// Extend and RecoverLane need their lane to themselves: with
// control_on_lane0, nothing else is outstanding on lane 0 while Alloc or Free
// runs.
//
// Timing rule: nothing here holds a latency. Costs come from the verbs posted
// and from CPU work declared with named costs (Node::Cost).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fabric/node.h"
#include "systems/knobs.h"
#include "systems/status.h"

namespace dmb::systems {

// Who can reach a chunk's memory once it is handed out.
enum class Isolation : uint8_t {
  kRegion,      // coarse MR: any QP of the PD holding its rkey, chunk bounds not enforced per CN
  kChunkRkey,   // per-chunk rkey usable from any QP of the MN's PD (MR or type-1 MW):
                // after a rebind the old key differs in 8 bits only (guessable)
  kChunkQp,     // per-chunk type-2 MW: only through the owner's QP(s)
  kTranslated,  // no rkey at all: a CN names its pages through its own translation
                // table, which only its own MN-side chains reach (ODRP)
};
std::string_view IsolationName(Isolation i);

struct Capabilities {
  uint64_t granularity_bytes = 0;  // size of one chunk
  uint32_t fixed_io_bytes = 0;     // 0: any offset/length inside a chunk
  Isolation isolation = Isolation::kRegion;
  bool mn_cpu_on_alloc = false;   // does an allocation/free run on the MN CPU?
  bool mn_cpu_on_access = false;  // does a read/write?
  int max_group_lanes = 16;       // lanes per access group
  // Reads and Writes one lane may have in flight at once: the QP's initiator
  // depth for READs (QpInitAttr::max_rd_atomic), which every lane QP keeps.
  uint32_t lane_depth = 16;
  bool leases = false;  // chunks expire unless extended (Extend)
  // Alloc and Free use the group's lane 0 (its RPC request/reply slots, or
  // chains hosted there): no other operation may be outstanding on lane 0
  // meanwhile. False: they use QPs of their own (OneSidedMW's Alloc/Free
  // pair) and may overlap any access.
  bool control_on_lane0 = true;
};

// A lease on a chunk (Patronus): the header the CN may CAS to extend it.
struct Lease {
  uint64_t header_addr = 0;  // MN address of the 8-byte expiry word
  uint32_t header_rkey = 0;
  uint64_t expires_us = 0;  // what the CN last wrote/was granted (virtual us)
};

// A chunk of MN memory handed to a CN.
struct Chunk {
  uint64_t addr = 0;  // MN virtual address of the first byte
  uint64_t bytes = 0;
  uint64_t id = 0;  // the approach's handle (the MN checks it on free)
  // rkeys[i] is for lane i of the owning group; a single rkey serves all lanes.
  std::vector<uint32_t> rkeys;
  Lease lease;
  uint32_t RkeyForLane(size_t lane_index) const {
    return rkeys.size() == 1 ? rkeys[0] : rkeys.at(lane_index);
  }
};

class AccessGroup;

// One RC QP from a CN to the MN, with its CQ and a control area in the
// group's registered buffer (RPC request/reply slots).
struct Lane {
  AccessGroup* group = nullptr;
  size_t index = 0;  // position in the group
  fabric::Qp* qp = nullptr;
  fabric::Cq* cq = nullptr;
  uint32_t mn_qpn = 0;     // the MN end's QP number
  uint64_t ctrl_addr = 0;  // 256 B in the group MR: request at +0, reply at +128
  uint64_t recoveries = 0;
  bool broken() const { return qp->state() == fabric::QpState::kErr; }
};

// A thread's lanes and its registered local buffer. The data area
// [buffer_addr(), +buffer_bytes()) is where Read lands and Write takes from.
class AccessGroup {
 public:
  AccessGroup(uint32_t cn_index, fabric::Mr* mr, uint64_t data_addr, uint64_t data_bytes)
      : cn_index_(cn_index), mr_(mr), data_addr_(data_addr), data_bytes_(data_bytes) {}
  uint32_t cn_index() const { return cn_index_; }
  size_t size() const { return lanes_.size(); }
  Lane& lane(size_t i) { return *lanes_.at(i); }
  uint64_t buffer_addr() const { return data_addr_; }
  uint64_t buffer_bytes() const { return data_bytes_; }
  uint32_t lkey() const { return mr_->lkey(); }
  fabric::Mr* mr() const { return mr_; }
  void AddLane(std::unique_ptr<Lane> l) { lanes_.push_back(std::move(l)); }

 private:
  uint32_t cn_index_;
  fabric::Mr* mr_;
  uint64_t data_addr_;
  uint64_t data_bytes_;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

// What a CN can ask of the MN outside the data path (connection setup). In
// the sim backend this is the MnSide itself; on real clusters a bootstrap
// channel forwards it.
class MnControl {
 public:
  virtual ~MnControl() = default;
  // Creates the MN end of a new lane for CN `cn_index` (not yet connected).
  virtual fabric::Qp* CreateLaneQp(uint32_t cn_index) = 0;
  // The lane is connected (RTS): the MN posts its receives.
  virtual void LaneConnected(uint32_t cn_index, fabric::Qp* mn_qp) = 0;
  // The CN gave up its lane whose MN end is QP `mn_qpn` (RecoverLane
  // replaced it): the MN destroys that QP once no request of it is being
  // served, and reuses its receive slots. Without it every recovery kept
  // one more MN QP, and a CN that broke its lanes over and over used up the
  // MN's memory and the lanes every CN shares. Throws std::invalid_argument
  // when `mn_qpn` is not a lane of CN `cn_index`.
  virtual void ReleaseLane(uint32_t cn_index, uint32_t mn_qpn) = 0;
  // Re-creating a QP pair costs CPU work on the MN (QP state changes).
  virtual Task<void> ChargeQpSetup() = 0;
  // What the MN publishes to every CN when it connects (addresses and rkeys
  // of shared metadata, e.g. FineMem's layout); empty for most approaches.
  // Valid after Start.
  virtual std::string Published() const { return {}; }
};

struct MnStats {
  uint64_t pool_bytes = 0;  // memory the approach manages
  uint64_t chunks_total = 0;
  uint64_t chunks_in_use = 0;
  uint64_t rpcs_served = 0;
  uint64_t rpcs_rejected = 0;  // malformed or not allowed (wrong owner, bad qpn)
};

struct ReclaimReport {
  uint64_t chunks_reclaimed = 0;
};

class MnSide : public MnControl {
 public:
  // Sets up memory, metadata, keys and serving coroutines; runs before any CN
  // connects. Registration costs are paid here (setup, not measured).
  virtual Task<void> Start() = 0;
  // CN `cn_index` crashed: return its chunks to the pool, nobody else's.
  virtual Task<ReclaimReport> ReclaimCn(uint32_t cn_index) = 0;
  virtual MnStats stats() const = 0;
  virtual fabric::Node* node() const = 0;
};

class CnSide {
 public:
  virtual ~CnSide() = default;
  virtual const Capabilities& caps() const = 0;
  virtual uint32_t cn_index() const = 0;
  virtual fabric::Node* node() const = 0;

  // Opens an access group: `lanes` QPs to the MN and a local buffer of
  // `buffer_bytes` registered on the CN (setup path: its costs are paid).
  virtual Task<AccessGroup*> OpenGroup(int lanes, uint64_t buffer_bytes) = 0;
  // Allocates one chunk of caps().granularity_bytes for `group`.
  virtual Task<Result<Chunk>> Alloc(AccessGroup& group) = 0;
  // Frees a chunk this CN allocated; the MN refuses anything else (kNotOwner).
  virtual Task<Status> Free(AccessGroup& group, const Chunk& chunk) = 0;
  // Moves `length` bytes between chunk offset `offset` and local address
  // `local_addr` (inside the group's buffer) through `lane`.
  virtual Task<Status> Read(Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                            uint64_t local_addr) = 0;
  virtual Task<Status> Write(Lane& lane, const Chunk& chunk, uint64_t offset, uint32_t length,
                             uint64_t local_addr) = 0;
  // Leases (caps().leases): pushes the expiry forward one-sidedly.
  virtual Task<Status> Extend(Lane& lane, Chunk& chunk) = 0;
  // A lane whose QP is in ERR (e.g. after an illegal access) is made usable
  // again: a fresh QP pair, or a pre-connected spare where the approach has one.
  virtual Task<Status> RecoverLane(Lane& lane) = 0;
};

// Where an approach runs: the cluster, its MN and its CNs.
//  - one process (sim, or ibv on one host): mn and cns are local nodes;
//  - MN daemon (`dmbench mn`): no cns, only the MN side is built;
//  - CN process (`dmbench cn`): mn is the remote MN node and remote_mn the
//    bootstrap channel to the daemon; only the CN sides are built.
struct Deployment {
  fabric::Cluster* cluster = nullptr;
  fabric::Node* mn = nullptr;
  std::vector<fabric::Node*> cns;
  uint64_t pool_bytes = 1ull << 30;  // MN memory the approach manages
  MnSide* remote_mn = nullptr;
  // CN i of this deployment is CN (cn_index_base + i) to the MN: CN processes
  // sharing one MN daemon get disjoint ranges (the daemon hands them out).
  uint32_t cn_index_base = 0;
};

class MemoryManager {
 public:
  virtual ~MemoryManager() = default;
  virtual const std::string& system() const = 0;
  virtual const Knobs& knobs() const = 0;
  virtual MnSide& mn() = 0;
  virtual CnSide& cn(size_t i) = 0;
  virtual size_t num_cns() const = 0;
  const Capabilities& caps() { return cn(0).caps(); }
  // Starts the MN side (setup work runs in virtual time).
  virtual Task<void> Start() = 0;
};

}  // namespace dmb::systems
