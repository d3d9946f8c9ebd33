// Test fixture helpers: a cluster of nodes with registered buffers and
// connected QPs, plus a way to run one coroutine to completion.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "fabric/sim/sim_cluster.h"

namespace dmb::sim::testing {

using namespace dmb::fabric;

inline constexpr uint32_t kAllAccess =
    kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic | kMwBind;

struct Endpoint {
  Node* node = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
};

class SimFixture : public ::testing::Test {
 protected:
  explicit SimFixture(uint64_t seed = 1) : cluster_(std::make_unique<SimCluster>(seed)) {}

  Node* AddNode(const std::string& name, uint64_t mem = 64ull << 20, int cores = 1) {
    NodeConfig c;
    c.name = name;
    c.memory_bytes = mem;
    c.cpu_cores = cores;
    return cluster_->AddNode(c);
  }
  Runtime& rt() { return cluster_->runtime(); }
  Simulator& sim() { return cluster_->sim(); }

  // Registers an MR from inside a coroutine run to completion.
  Mr* RegMr(Node* n, Pd* pd, uint64_t addr, uint64_t len, uint32_t access = kAllAccess) {
    Mr* out = nullptr;
    cluster_->RunToCompletion(
        [](Node* n, Pd* pd, uint64_t a, uint64_t l, uint32_t acc, Mr** o) -> Task<void> {
          *o = co_await n->RegMr(pd, a, l, acc);
        }(n, pd, addr, len, access, &out));
    return out;
  }

  Qp* MakeQp(Node* n, Pd* pd, Cq* cq, QpInitAttr attr = {}) {
    attr.pd = pd;
    attr.send_cq = cq;
    attr.recv_cq = cq;
    return n->CreateQp(attr);
  }

  // Posts one WR and runs the simulation until its completion; returns it.
  WorkCompletion Exec(Qp* qp, Cq* cq, const SendWr& wr) {
    EXPECT_EQ(qp->PostSend(wr), 0);
    WorkCompletion wc;
    cluster_->RunToCompletion(
        [](Cq* cq, WorkCompletion* out) -> Task<void> { *out = co_await cq->Next(); }(cq, &wc));
    return wc;
  }

  static SendWr Read(uint64_t laddr, uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey,
                     uint64_t wr_id = 1) {
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = Opcode::kRead;
    wr.sg_list = {{laddr, len, lkey}};
    wr.remote_addr = raddr;
    wr.rkey = rkey;
    return wr;
  }
  static SendWr Write(uint64_t laddr, uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey,
                      uint64_t wr_id = 1) {
    SendWr wr = Read(laddr, lkey, len, raddr, rkey, wr_id);
    wr.opcode = Opcode::kWrite;
    return wr;
  }

  std::unique_ptr<SimCluster> cluster_;
};

}  // namespace dmb::sim::testing
