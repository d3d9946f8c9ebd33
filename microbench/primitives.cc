#include "microbench/primitives.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fabric/histogram.h"
#include "fabric/sim/sim_cluster.h"
#include "systems/common/chain_wr.h"

namespace dmb::microbench {
namespace {

using namespace dmb::fabric;
using sim::SimCluster;

constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic | kMwBind;

// One node's registered buffer.
struct Buffer {
  Node* node;
  Pd* pd;
  uint64_t addr;
  Mr* mr;
};

Buffer MakeBuffer(SimCluster& cl, Node* n, uint64_t bytes) {
  Buffer b{n, n->AllocPd(), n->memory().Alloc(bytes, 4096), nullptr};
  cl.RunToCompletion([](Buffer* b, uint64_t len) -> Task<void> {
    b->mr = co_await b->node->RegMr(b->pd, b->addr, len, kAll);
  }(&b, bytes));
  return b;
}

Qp* MakeQp(Node* n, Pd* pd, Cq* cq, QpInitAttr a = {}) {
  a.pd = pd;
  a.send_cq = a.recv_cq = cq;
  return n->CreateQp(a);
}

Node* AddNode(SimCluster& cl, const std::string& name, uint64_t mem = 256ull << 20) {
  NodeConfig c;
  c.name = name;
  c.memory_bytes = mem;
  return cl.AddNode(c);
}

// Mean latency (us) of `iters` sequential WRs built by `make`, as the posting
// thread sees them (post -> completion observed).
template <typename MakeWr>
double SequentialLatencyUs(SimCluster& cl, Qp* qp, Cq* cq, int iters, MakeWr make) {
  Histogram h;
  cl.RunToCompletion([](SimCluster& cl, Qp* qp, Cq* cq, int iters, MakeWr make,
                        Histogram* h) -> Task<void> {
    for (int i = 0; i < iters; ++i) {
      const Ps t0 = cl.sim().now();
      if (qp->PostSend(make(i)) != 0) throw std::runtime_error("post failed");
      const WorkCompletion wc = co_await cq->Next();
      if (wc.status != WcStatus::kSuccess) {
        throw std::runtime_error("primitive WR failed: " + std::string(WcStatusName(wc.status)));
      }
      h->Record(cl.sim().now() - t0);
    }
  }(cl, qp, cq, iters, make, &h));
  return h.mean_us();
}

double OneSidedLatencyUs(const sim::Profile& p, uint64_t seed, Opcode op, uint32_t bytes,
                         int offloaded) {
  LoadSpec s;
  s.opcode = op;
  s.bytes = bytes;
  s.ops_per_qp = 200;
  s.offloaded_mn_qps = offloaded;
  return RunLoad(p, s, seed).lat_us_mean;
}

double MwBindLatencyUs(const sim::Profile& p, uint64_t seed) {
  SimCluster cl(seed, p);
  Node* mn = AddNode(cl, "mn");
  Buffer b = MakeBuffer(cl, mn, 1 << 20);
  Cq* cq = mn->CreateCq(64);
  Qp* qp = MakeQp(mn, b.pd, cq);
  cl.Connect(qp, qp);
  Mw* mw = mn->AllocMw(b.pd, MwType::kType1);
  // Rebind a type-1 window over a 4 KB chunk each time (constant-cost op).
  return SequentialLatencyUs(cl, qp, cq, 100, [&](int i) {
    SendWr wr;
    wr.opcode = Opcode::kBindMw;
    wr.bind_mw_rkey = mw->rkey();
    wr.bind_new_rkey = (mw->rkey() & ~0xffu) | static_cast<uint32_t>((i + 1) & 0xff);
    wr.bind_mr_lkey = b.mr->lkey();
    wr.bind_addr = b.addr + 4096 * (i % 64);
    wr.bind_length = 4096;
    wr.bind_access = kRemoteRead | kRemoteWrite;
    return wr;
  });
}

double MrRegUs(const sim::Profile& p, uint64_t seed, uint64_t bytes) {
  SimCluster cl(seed, p);
  Node* mn = AddNode(cl, "mn", 4ull << 30);
  Pd* pd = mn->AllocPd();
  const uint64_t addr = mn->memory().Alloc(bytes, 4096);
  const Ps t0 = cl.sim().now();
  cl.RunToCompletion([](Node* n, Pd* pd, uint64_t a, uint64_t len) -> Task<void> {
    co_await n->RegMr(pd, a, len, kAll);
  }(mn, pd, addr, bytes));
  return PsToUs(cl.sim().now() - t0);
}

// Marginal cost of one more WR in a chain: fenced 8-byte loopback READs on
// the memory node, each depending on the one before (as in ODRP's chains).
double ChainedWrUs(const sim::Profile& p, uint64_t seed) {
  SimCluster cl(seed, p);
  Node* mn = AddNode(cl, "mn");
  Buffer b = MakeBuffer(cl, mn, 1 << 20);
  Cq* cq = mn->CreateCq(256);
  Qp* qp = MakeQp(mn, b.pd, cq, {.max_send_wr = 128});
  cl.Connect(qp, qp);
  constexpr int kN = 32;
  for (int i = 0; i < kN; ++i) {
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(i);
    wr.opcode = Opcode::kRead;
    wr.flags = kSignaled | kFence;
    wr.sg_list = {{b.addr + 8 * (i + 1), 8, b.mr->lkey()}};
    wr.remote_addr = b.addr + 8 * i;
    wr.rkey = b.mr->rkey();
    if (qp->PostSend(wr) != 0) throw std::runtime_error("post failed");
  }
  cl.sim().Run();
  WorkCompletion wcs[kN];
  const int n = cq->Poll(wcs);
  if (n != kN) throw std::runtime_error("chain did not complete");
  return PsToUs(wcs[kN - 1].timestamp_ps - wcs[0].timestamp_ps) / (kN - 1);
}

// Marginal cost of one more gated step, as RedN-style chains order a WR that
// consumes an earlier WR's result: worker QP L is managed; control QP C, per
// step, WAITs for L's previous completion and ENABLEs L's next WR. L's WRs
// alternate as in the source's pair: a signaled 8-byte loopback FETCH_ADD and
// an EndianSwap READ (one 8-byte READ scattered by 8 one-byte SGEs).
double GatedStepUs(const sim::Profile& p, uint64_t seed) {
  SimCluster cl(seed, p);
  Node* mn = AddNode(cl, "mn");
  Buffer b = MakeBuffer(cl, mn, 1 << 20);
  Cq* lcq = mn->CreateCq(256);
  Cq* ccq = mn->CreateCq(256);
  Qp* l =
      MakeQp(mn, b.pd, lcq,
             {.max_send_wr = 128, .max_send_sge = 8, .cross_channel = true, .manage_send = true});
  Qp* c = MakeQp(mn, b.pd, ccq, {.max_send_wr = 256, .cross_channel = true});
  cl.Connect(l, l);
  cl.Connect(c, c);
  constexpr int kN = 32;
  for (int i = 0; i < kN; ++i) {
    const uint64_t src = b.addr + 8 * i;
    const uint64_t dst = b.addr + 8 * (i + 1);
    SendWr wr;
    if (i % 2 == 0) {
      wr.wr_id = static_cast<uint64_t>(i);
      wr.opcode = Opcode::kFetchAndAdd;
      wr.sg_list = {{dst, 8, b.mr->lkey()}};
      wr.remote_addr = src;
      wr.rkey = b.mr->rkey();
      wr.compare_add = 1;
    } else {
      wr = systems::chain::SwapReadWr(src, b.mr->rkey(), dst, b.mr->lkey(), i);
    }
    wr.flags = kSignaled;
    if (l->PostSend(wr) != 0) throw std::runtime_error("post failed");
  }
  for (int i = 0; i < kN; ++i) {
    if (c->PostSend(systems::chain::WaitWr(lcq, i)) != 0 ||
        c->PostSend(systems::chain::EnableWr(l, i + 1)) != 0) {
      throw std::runtime_error("post failed");
    }
  }
  cl.sim().Run();
  WorkCompletion wcs[kN];
  const int n = lcq->Poll(wcs);
  if (n != kN) throw std::runtime_error("gated chain did not complete");
  return PsToUs(wcs[kN - 1].timestamp_ps - wcs[0].timestamp_ps) / (kN - 1);
}

uint32_t NextRkey(uint32_t rkey) { return (rkey & ~0xffu) | ((rkey + 1) & 0xffu); }

void CheckWc(const WorkCompletion& wc, const char* what) {
  if (wc.status != WcStatus::kSuccess) {
    throw std::runtime_error(std::string(what) +
                             " failed: " + std::string(WcStatusName(wc.status)));
  }
}

}  // namespace

MrRegResult MeasureMrReg(const sim::Profile& p, uint64_t bytes, int regions, uint64_t seed,
                         uint64_t page_bytes) {
  if (bytes == 0 || regions < 1) throw std::invalid_argument("MeasureMrReg: empty region");
  const uint64_t span = (bytes + page_bytes - 1) / page_bytes * page_bytes;
  SimCluster cl(seed, p);
  NodeConfig c;
  c.name = "mn";
  c.memory_bytes = span * static_cast<uint64_t>(regions) + (64ull << 20);
  c.page_bytes = page_bytes;
  Node* mn = cl.AddNode(c);
  Pd* pd = mn->AllocPd();
  std::vector<uint64_t> addrs;
  for (int i = 0; i < regions; ++i) addrs.push_back(mn->memory().Alloc(bytes, page_bytes));
  MrRegResult r;
  cl.RunToCompletion([](SimCluster& cl, Node* n, Pd* pd, std::vector<uint64_t> addrs, uint64_t len,
                        MrRegResult* r) -> Task<void> {
    std::vector<Mr*> mrs;
    for (const uint64_t a : addrs) {
      const Ps t0 = cl.sim().now();
      mrs.push_back(co_await n->RegMr(pd, a, len, kAll));
      r->reg.Record(cl.sim().now() - t0);
    }
    for (Mr* mr : mrs) {
      const Ps t0 = cl.sim().now();
      co_await n->DeregMr(mr);
      r->dereg.Record(cl.sim().now() - t0);
    }
  }(cl, mn, pd, addrs, bytes, &r));
  return r;
}

MwBindResult MeasureMwBind(const sim::Profile& p, MwType type, uint64_t bytes, int windows,
                           uint64_t seed) {
  if (bytes == 0 || windows < 1) throw std::invalid_argument("MeasureMwBind: empty window");
  SimCluster cl(seed, p);
  Node* mn = AddNode(cl, "mn", (bytes + 4095) / 4096 * 4096 + (256ull << 20));
  Buffer b = MakeBuffer(cl, mn, bytes);
  Cq* cq = mn->CreateCq(64);
  Qp* qp = MakeQp(mn, b.pd, cq);
  cl.Connect(qp, qp);
  std::vector<Mw*> mws;
  for (int i = 0; i < windows; ++i) mws.push_back(mn->AllocMw(b.pd, type));
  MwBindResult r;
  cl.RunToCompletion([](SimCluster& cl, Qp* qp, Cq* cq, Buffer b, uint64_t len, MwType type,
                        std::vector<Mw*> mws, MwBindResult* r) -> Task<void> {
    constexpr uint32_t kAccess = kRemoteRead | kRemoteWrite;
    auto post_bind = [&](Mw* mw) {
      int rc;
      if (type == MwType::kType1) {
        rc = qp->BindMw(mw, 0, b.mr, b.addr, len, kAccess, NextRkey(mw->rkey()));
      } else {
        SendWr wr;
        wr.opcode = Opcode::kBindMw;
        wr.bind_mw_rkey = mw->rkey();
        wr.bind_new_rkey = NextRkey(mw->rkey());
        wr.bind_mr_lkey = b.mr->lkey();
        wr.bind_addr = b.addr;
        wr.bind_length = len;
        wr.bind_access = kAccess;
        rc = qp->PostSend(wr);
      }
      if (rc != 0) throw std::runtime_error("posting a bind failed");
    };
    for (Mw* mw : mws) {
      const Ps t0 = cl.sim().now();
      post_bind(mw);
      CheckWc(co_await cq->Next(), "MW bind");
      r->bind.Record(cl.sim().now() - t0);
    }
    for (Mw* mw : mws) {
      const Ps t0 = cl.sim().now();
      if (type == MwType::kType2) {
        SendWr inv;
        inv.opcode = Opcode::kLocalInv;
        inv.invalidate_rkey = mw->rkey();
        if (qp->PostSend(inv) != 0) throw std::runtime_error("posting LOCAL_INV failed");
        CheckWc(co_await cq->Next(), "LOCAL_INV");
        r->invalidate.Record(cl.sim().now() - t0);
      }
      post_bind(mw);
      CheckWc(co_await cq->Next(), "MW rebind");
      r->rebind.Record(cl.sim().now() - t0);
    }
  }(cl, qp, cq, b, bytes, type, mws, &r));
  return r;
}

namespace {

// RunLoad's MN-side QPs holding offloaded (cross-channel) WRs. They face
// another node (idle), as the paper's management QPs face CNs: they count
// under both readings of the offload penalty (profile
// offload_counts_loopback).
void AddOffloadedQps(SimCluster& cl, Node* mn, const Buffer& mb, Cq* mcq, int n) {
  Node* idle = n > 0 ? AddNode(cl, "offload-peer", 64ull << 20) : nullptr;
  Pd* ipd = idle ? idle->AllocPd() : nullptr;
  Cq* icq = idle ? idle->CreateCq(16, true) : nullptr;
  for (int i = 0; i < n; ++i) {
    Qp* q = MakeQp(mn, mb.pd, mcq, {.cross_channel = true});
    cl.Connect(q, MakeQp(idle, ipd, icq));
  }
}

// One CN QP of RunLoad: its slot of the CN's buffer and the MN slot it
// targets.
struct LoadLane {
  Qp* qp;
  Cq* cq;
  uint64_t local;
  uint32_t lkey;
  uint64_t remote;
};

// spec.cns CNs with spec.qps_per_cn QPs each, every one connected to the MN.
std::vector<LoadLane> AddLoadLanes(SimCluster& cl, Node* mn, const Buffer& mb, Cq* mcq,
                                   const LoadSpec& spec) {
  std::vector<LoadLane> lanes;
  for (int c = 0; c < spec.cns; ++c) {
    Node* cn = AddNode(cl, "cn" + std::to_string(c));
    const uint64_t per_qp = std::max<uint64_t>(spec.bytes, 64);
    Buffer cb = MakeBuffer(cl, cn, per_qp * spec.qps_per_cn);
    for (int q = 0; q < spec.qps_per_cn; ++q) {
      Cq* cq = cn->CreateCq(static_cast<uint32_t>(spec.depth) + 1);
      Qp* qp = MakeQp(cn, cb.pd, cq, {.max_send_wr = static_cast<uint32_t>(spec.depth)});
      cl.Connect(qp, MakeQp(mn, mb.pd, mcq));
      const uint64_t slot = lanes.size();
      lanes.push_back(
          {qp, cq, cb.addr + per_qp * q, cb.mr->lkey(), mb.addr + (slot * per_qp) % (60ull << 20)});
    }
  }
  return lanes;
}

// s.ops_per_qp WRs on one lane, s.depth outstanding; each WR's latency
// (post to completion) goes to *lat.
Task<void> DriveLane(SimCluster& cl, LoadLane l, LoadSpec s, uint32_t rkey, Histogram* lat,
                     uint64_t* done) {
  SendWr wr;
  wr.opcode = s.opcode;
  wr.sg_list = {{l.local, s.opcode == Opcode::kFetchAndAdd ? 8u : s.bytes, l.lkey}};
  wr.remote_addr = l.remote;
  wr.rkey = rkey;
  wr.compare_add = 1;
  std::vector<Ps> posted(static_cast<size_t>(s.depth));
  uint64_t issued = 0, completed = 0;
  auto post = [&]() {
    wr.wr_id = issued;
    posted[issued % posted.size()] = cl.sim().now();
    if (l.qp->PostSend(wr) != 0) throw std::runtime_error("post failed");
    ++issued;
  };
  while (issued < s.ops_per_qp && issued < static_cast<uint64_t>(s.depth)) post();
  while (completed < s.ops_per_qp) {
    const WorkCompletion wc = co_await l.cq->Next();
    if (wc.status != WcStatus::kSuccess) {
      throw std::runtime_error("load WR failed: " + std::string(WcStatusName(wc.status)));
    }
    lat->Record(cl.sim().now() - posted[wc.wr_id % posted.size()]);
    ++completed;
    if (issued < s.ops_per_qp) post();
  }
  *done += completed;
}

}  // namespace

LoadResult RunLoad(const sim::Profile& profile, const LoadSpec& spec, uint64_t seed) {
  SimCluster cl(seed, profile);
  Node* mn = AddNode(cl, "mn", 1ull << 30);
  Buffer mb = MakeBuffer(cl, mn, 64ull << 20);
  Cq* mcq = mn->CreateCq(16, true);
  AddOffloadedQps(cl, mn, mb, mcq, spec.offloaded_mn_qps);
  const std::vector<LoadLane> lanes = AddLoadLanes(cl, mn, mb, mcq, spec);
  Histogram lat;
  uint64_t done = 0;
  const Ps t0 = cl.sim().now();
  const uint64_t e0 = cl.sim().events_executed();
  for (const LoadLane& l : lanes) {
    cl.runtime().Spawn(DriveLane(cl, l, spec, mb.mr->rkey(), &lat, &done));
  }
  cl.sim().Run();
  LoadResult r;
  r.ops = done;
  r.elapsed_ps = cl.sim().now() - t0;
  r.events = cl.sim().events_executed() - e0;
  r.trace_hash = cl.sim().trace_hash();
  r.lat_us_mean = lat.mean_us();
  r.lat_us_p99 = lat.p99_us();
  return r;
}

std::vector<PrimitiveResult> RunCalibration(const sim::Profile& p, uint64_t seed,
                                            uint64_t* trace_hash) {
  std::vector<PrimitiveResult> out;
  const double read_4k_us = OneSidedLatencyUs(p, seed, Opcode::kRead, 4096, 0);
  out.push_back({"read_4k_lat_us", read_4k_us, 2.9, "us",
                 "ODRP Fig 11 / §6.3: one-sided 4 KB READ, 1 worker"});
  out.push_back({"write_4k_lat_us", OneSidedLatencyUs(p, seed, Opcode::kWrite, 4096, 0), 2.9, "us",
                 "ODRP Fig 11 / §6.3: one-sided 4 KB WRITE, 1 worker"});
  out.push_back({"mw_bind_lat_us", MwBindLatencyUs(p, seed), 1.1, "us",
                 "Patronus §2.2 Fig 1: MW bind median latency"});
  out.push_back({"mr_reg_4k_us", MrRegUs(p, seed, 4096), 80, "us",
                 "ODRP §2.2: registering a 4 KB MR takes ~80 us"});
  out.push_back({"mr_reg_1m_us", MrRegUs(p, seed, 1 << 20), 600, "us",
                 "ODRP §2.2: registering a 1 MB MR takes ~600 us"});
  out.push_back({"chained_wr_us", ChainedWrUs(p, seed), 0.9, "us",
                 "ODRP §6.4 Fig 12: 8 READs -> 1 READ with 8 SGEs saves 6.2 us (0.89 us/WR)"});
  out.push_back({"gated_step_us", GatedStepUs(p, seed), 1.2, "us",
                 "ODRP §6.4 Fig 12: CalcTTAddr drops one FAA and one EndianSwap WR, 2.4 us "
                 "(1.2 us per dependent, WAIT/ENABLE-gated WR)"});
  const double loaded = OneSidedLatencyUs(p, seed, Opcode::kRead, 4096, 96);
  out.push_back({"read_lat_offload96_ratio", loaded / read_4k_us, 1.126, "x",
                 "OneSidedMW §3.2: READ latency +12.6% with 96 MN QPs holding offloaded logic"});
  LoadSpec tput;
  tput.cns = 4;
  tput.qps_per_cn = 8;
  tput.depth = 16;
  tput.bytes = 8;
  tput.ops_per_qp = 4000;
  const LoadResult reads = RunLoad(p, tput, seed);
  if (trace_hash) *trace_hash = reads.trace_hash;
  tput.opcode = Opcode::kFetchAndAdd;
  tput.ops_per_qp = 500;
  const LoadResult faas = RunLoad(p, tput, seed);
  out.push_back({"faa_vs_read_tput_ratio", reads.mops() / faas.mops(), 10, "x",
                 "ODRP §6.2: FAA throughput an order of magnitude below READ/WRITE"});
  out.push_back({"nic_small_read_mops", reads.mops(), 70, "Mops",
                 "Patronus §1: ~70 Mops/s on a 100 Gbps ConnectX-5"});
  return out;
}

}  // namespace dmb::microbench
