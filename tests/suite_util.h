// Helpers for the suites that run against every registered approach.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "harness/testbed.h"
#include "systems/common/rpc.h"
#include "systems/registry.h"

namespace dmb::suite {

// ASSERT_* cannot be used inside coroutines (they `return`): these record the
// failure and leave the coroutine.
#define CO_ASSERT_TRUE(c)                      \
  if (!(c)) {                                  \
    ADD_FAILURE() << "CO_ASSERT_TRUE(" #c ")"; \
    co_return;                                 \
  }
#define CO_ASSERT_OK(expr)                                             \
  if (const auto co_assert_st_ = (expr); !co_assert_st_.ok()) {        \
    ADD_FAILURE() << #expr << " failed: " << co_assert_st_.ToString(); \
    co_return;                                                         \
  }

// Every approach, and every suite variant it declares, as "system" or
// "system:variant".
inline std::vector<std::string> AllSystems() {
  std::vector<std::string> out;
  for (const auto* s : systems::Registry::All()) {
    out.push_back(s->name);
    for (const auto& v : s->suite_variants) out.push_back(s->name + ":" + v.first);
  }
  return out;
}
inline std::string SystemOf(const std::string& param) { return param.substr(0, param.find(':')); }
inline std::string CaseName(std::string param) {
  for (char& c : param) {
    if (c == ':') c = '_';
  }
  return param;
}

// Knobs that make a suite run fast everywhere (small chunks where the
// approach has a granularity knob); everything else at its default.
inline std::map<std::string, std::string> SuiteKnobs(const std::string& param) {
  const auto& info = systems::Registry::Get(SystemOf(param));
  std::map<std::string, std::string> k = info.suite_knobs;
  const size_t colon = param.find(':');
  for (const auto& v : info.suite_variants) {
    if (colon != std::string::npos && v.first == param.substr(colon + 1)) {
      for (const auto& [name, value] : v.second) k[name] = value;
    }
  }
  return k;
}

inline harness::TestbedSpec SuiteSpec(const std::string& param, int cns = 2,
                                      uint64_t pool_bytes = 16ull << 20, uint64_t seed = 1) {
  harness::TestbedSpec s;
  s.system = SystemOf(param);
  s.knobs = SuiteKnobs(param);
  s.cns = cns;
  s.pool_bytes = pool_bytes;
  s.seed = seed;
  // The Soft-RoCE tier (tests/rxe) runs the same suite over real verbs: the
  // CNs in this process on DMB_SUITE_CN_DEVICE, the MN in a `dmbench mn`
  // daemon process on DMB_SUITE_MN_DEVICE, one fresh daemon per test.
  if (const char* b = std::getenv("DMB_SUITE_BACKEND"); b && std::string(b) == "ibv") {
    s.backend = "ibv";
    s.mn_endpoint = "spawn";
    const char* mn_dev = std::getenv("DMB_SUITE_MN_DEVICE");
    const char* cn_dev = std::getenv("DMB_SUITE_CN_DEVICE");
    s.mn_device = mn_dev ? mn_dev : "rxe0";
    s.devices = {cn_dev ? cn_dev : "rxe1"};
  }
  return s;
}

// The suites run an approach only where the MN's RNIC has what it declares
// it needs (SystemInfo::needs), and skip naming what is missing otherwise
// (as rdma-core's own tests skip on a missing device feature). Call it
// first in a test (a fixture's SetUp).
#define DMB_SKIP_UNLESS_SUPPORTED(spec)                                                     \
  if (!(spec).mn_endpoint.empty() && !::dmb::systems::Registry::BuiltIn((spec).system)) {   \
    GTEST_SKIP() << (spec).system << " is added by this test process only; the MN daemon "  \
                 << "(`dmbench mn`) knows the built-in approaches";                         \
  }                                                                                         \
  if (const auto missing_ = ::dmb::harness::MissingMnCaps(spec); !missing_.empty()) {       \
    std::string m_;                                                                         \
    for (const auto& c_ : missing_) m_ += (m_.empty() ? "" : ", ") + c_;                    \
    GTEST_SKIP() << (spec).system << " needs " << m_ << ", which the MN's RNIC lacks (see " \
                 << "`dmbench devices`)";                                                   \
  }

// A CN that writes its own RPC: the first `send_bytes` bytes of `req` as one
// SEND on `lane` (lane 0 of a group carries Alloc and Free), posted as
// RpcCn::Call posts it but with whatever fields and length the attacker
// picks. The MN's reply, or kLaneBroken when the lane failed.
inline Task<systems::Result<systems::RpcReply>> RawRpc(fabric::Node* cn_node, systems::Lane& lane,
                                                       const systems::RpcRequest& req,
                                                       uint32_t send_bytes) {
  static uint64_t next_wr_id = 1ull << 62;  // apart from the CN's own wr_ids
  systems::Result<systems::RpcReply> out;
  cn_node->memory().Write(lane.ctrl_addr, &req, sizeof(req));
  fabric::RecvWr r;
  r.wr_id = next_wr_id++;
  r.sg_list = {
      {lane.ctrl_addr + systems::kRpcSlotBytes, systems::kRpcSlotBytes, lane.group->lkey()}};
  fabric::SendWr s;
  s.wr_id = next_wr_id++;
  s.opcode = fabric::Opcode::kSend;
  s.flags = 0;
  s.sg_list = {{lane.ctrl_addr, send_bytes, lane.group->lkey()}};
  if (lane.qp->PostRecv(r) != 0 || lane.qp->PostSend(s) != 0) {
    out.status = systems::Status(systems::Code::kLaneBroken, "cannot post on the lane");
    co_return out;
  }
  const fabric::WorkCompletion wc = co_await lane.cq->NextFor(r.wr_id);
  if (wc.status != fabric::WcStatus::kSuccess) {
    out.status =
        systems::Status(systems::Code::kLaneBroken, std::string(fabric::WcStatusName(wc.status)));
    co_return out;
  }
  cn_node->memory().Read(lane.ctrl_addr + systems::kRpcSlotBytes, &out.value, sizeof(out.value));
  co_return out;
}

// Deterministic byte pattern for (tag, position).
inline uint8_t PatternByte(uint64_t tag, uint64_t pos) {
  uint64_t x = (tag + 1) * 0x9e3779b97f4a7c15ull + pos * 0xbf58476d1ce4e5b9ull;
  return static_cast<uint8_t>(x >> 56);
}

}  // namespace dmb::suite
