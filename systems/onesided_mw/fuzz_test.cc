// A malicious CN against OneSidedMW's Alloc and Free QPs ([OSMW] §4.4): at
// least 10,000 SEND payloads (random bytes, and well-formed requests naming
// random or other CNs' access QPs, reply buffers and handles; several
// allocation requests in flight at once; renewals that lie about how many
// replies the CN took) while honest CNs allocate, write, read back and free. No isolation property
// may break and the honest CNs must finish. A failure prints the seed to reproduce.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "fabric/rng.h"
#include "harness/testbed.h"
#include "systems/onesided_mw/onesided_mw.h"

namespace dmb::systems::onesided_mw {
namespace {

using harness::Testbed;

constexpr uint32_t kG = 3;
constexpr uint32_t kLanes = 4;  // allocations in flight on one Alloc QP
constexpr uint32_t kInstances = 4 * kLanes;

struct World {
  Testbed* tb = nullptr;
  dmb::Rng rng{1};
  bool fuzz_done = false;
  // Honest chunks currently held: chunk address -> (cn, tag).
  std::map<uint64_t, uint64_t> honest_live;
  std::set<uint64_t> honest_handles;
  std::vector<uint32_t> honest_qpns;
  // Violations.
  uint64_t bad_data = 0, dup_grant = 0, attacker_read_honest = 0, honest_errors = 0;
  // Counts.
  uint64_t payloads = 0, random_sends = 0, alloc_reqs = 0, free_reqs = 0, attacker_grants = 0;
  uint64_t attacker_reads = 0, attacker_reads_ok = 0, honest_rounds = 0, honest_oom = 0;
  uint64_t renewals = 0, salvaged = 0;
};

// The attacker: CN 2 with one access group (lanes it may name) and a raw
// management pair whose clients it drives byte by byte.
struct Attacker {
  CnSide* cn = nullptr;
  OsmwMn* mn = nullptr;
  AccessGroup* g = nullptr;
  fabric::Pd* pd = nullptr;
  fabric::Mr* mr = nullptr;
  uint64_t buf = 0;
  uint32_t pair = 0;
  std::unique_ptr<AllocClient> ac;
  std::unique_ptr<FreeClient> fc;
  std::vector<AllocGrant> grants;

  void NewClients(fabric::Runtime* rt) {
    ac = std::make_unique<AllocClient>(cn->node(), pd, rt, mr, buf, kG, kInstances, kLanes);
    fc = std::make_unique<FreeClient>(cn->node(), pd, rt, mr, buf + 8192,
                                      cn->node()->CreateCq(64, true), kInstances, kG, kLanes);
  }
};

Task<void> SetUpAttacker(Testbed& tb, Attacker* a) {
  a->cn = &tb.cn(2);
  a->mn = &dynamic_cast<OsmwMn&>(tb.mm().mn());
  a->g = co_await a->cn->OpenGroup(kG - 1, 1 << 16);
  fabric::Node* n = a->cn->node();
  a->pd = a->g->mr()->pd();
  a->buf = n->memory().Alloc(1 << 14, 4096);
  a->mr = co_await n->RegMr(a->pd, a->buf, 1 << 14, fabric::kLocalWrite | fabric::kRemoteWrite);
  a->NewClients(&tb.runtime());
  a->pair = co_await a->mn->OpenPair(a->cn->cn_index(), a->ac->qp(), a->fc->qps());
}

// A SEND of `len` random bytes on `qp` (unsignaled: nobody waits for it).
void RandomSend(World& w, Attacker& a, fabric::Qp* qp) {
  const uint32_t len = 1 + static_cast<uint32_t>(w.rng.Uniform(200));
  const uint64_t at = a.buf + 12288;
  for (uint32_t i = 0; i < len; i += 8) a.cn->node()->memory().StoreU64(at + i, w.rng.Next());
  fabric::SendWr s;
  s.opcode = fabric::Opcode::kSend;
  s.flags = 0;
  s.sg_list = {{at, len, a.mr->lkey()}};
  (void)qp->PostSend(s);
  ++w.random_sends;
}

uint32_t PickQpn(World& w, Attacker& a) {
  switch (w.rng.Uniform(4)) {
    case 0:
      return a.g->lane(w.rng.Uniform(a.g->size())).mn_qpn;
    case 1:
      return w.honest_qpns.empty() ? 0 : w.honest_qpns[w.rng.Uniform(w.honest_qpns.size())];
    case 2:
      return static_cast<uint32_t>(w.rng.Uniform(4096));
    default:
      return static_cast<uint32_t>(w.rng.Next());
  }
}

uint64_t PickHandle(World& w, Attacker& a) {
  const uint64_t r = w.rng.Uniform(5);
  if (r == 0 && !w.honest_handles.empty()) {
    auto it = w.honest_handles.begin();
    std::advance(it, static_cast<long>(w.rng.Uniform(w.honest_handles.size())));
    return *it;
  }
  if (r == 1 && !a.grants.empty()) return a.grants[w.rng.Uniform(a.grants.size())].handle;
  Metadata& md = a.mn->metadata();
  if (r == 2)
    return md.entry_addr(static_cast<uint32_t>(w.rng.Uniform(md.layout().entries))) +
           w.rng.Uniform(64) - 32;
  if (r == 3) return md.ring_addr() + 8 * w.rng.Uniform(64);
  return w.rng.Next();
}

// The attacker tries to read: through its own lanes, with the rkeys of its
// grants, of random windows, at chunk addresses; anything an honest CN holds
// must stay out of reach.
Task<void> TryRead(World& w, Attacker& a) {
  Chunk c;
  c.bytes = a.mn->metadata().config().chunk_bytes;
  if (!a.grants.empty() && w.rng.Uniform(2)) {
    const AllocGrant& gr = a.grants[w.rng.Uniform(a.grants.size())];
    c.addr = gr.base;
    c.rkeys = {gr.rkeys[w.rng.Uniform(gr.rkeys.size())]};
  } else {
    Metadata& md = a.mn->metadata();
    const uint32_t i = static_cast<uint32_t>(w.rng.Uniform(md.layout().entries));
    c.addr = md.chunk_addr(i);
    c.rkeys = {md.mw(i, static_cast<uint32_t>(w.rng.Uniform(kG)))->rkey()};
  }
  Lane& lane = a.g->lane(w.rng.Uniform(a.g->size()));
  ++w.attacker_reads;
  Status st = co_await a.cn->Read(lane, c, 0, 64, a.g->buffer_addr());
  if (st.ok()) {
    ++w.attacker_reads_ok;
    w.attacker_read_honest += w.honest_live.count(c.addr);
  }
  if (lane.broken()) (void)co_await a.cn->RecoverLane(lane);
}

// What a renewing CN says it took of the old chain's replies (AllocSettle::
// accepted, FreeSettle::confirmed): a lie as often as not. 0 claims every
// grant in the slots, the maximum none, a small number some.
uint64_t PickSettleCount(World& w) {
  switch (w.rng.Uniform(4)) {
    case 0:
      return 0;
    case 1:
      return ~uint64_t{0};
    default:
      return w.rng.Uniform(2 * kInstances);
  }
}

// The attacker keeps (and later reads through, frees, names as held) every
// grant a renewal tells it of: if a lie could make the MN hand it an honest
// chunk, TryRead or the honest CNs' data would show it.
void TakeSalvaged(World& w, Attacker& a, AllocSettle& settle) {
  w.salvaged += settle.salvaged.size();
  for (AllocGrant& g : settle.salvaged) a.grants.push_back(std::move(g));
}

Task<void> RenewAlloc(World& w, Testbed& tb, Attacker& a) {
  a.ac = std::make_unique<AllocClient>(a.cn->node(), a.pd, &tb.runtime(), a.mr, a.buf, kG,
                                       kInstances, kLanes);
  AllocSettle settle{.accepted = PickSettleCount(w)};
  (void)co_await a.mn->RenewAlloc(a.pair, a.ac->qp(), &settle);
  TakeSalvaged(w, a, settle);
  ++w.renewals;
}

Task<void> RenewFree(World& w, Testbed& tb, Attacker& a) {
  a.NewClients(&tb.runtime());
  std::vector<uint64_t> held;
  for (const auto& g : a.grants) held.push_back(g.handle);
  AllocSettle alloc_settle{.accepted = PickSettleCount(w)};
  FreeSettle free_settle{.confirmed = PickSettleCount(w)};
  const Status st =
      co_await a.mn->RenewFree(a.pair, a.fc->qps(), a.ac->qp(), held, &alloc_settle, &free_settle);
  if (!st.ok()) ADD_FAILURE() << "free chain renewal: " << st.ToString();
  TakeSalvaged(w, a, alloc_settle);
  ++w.renewals;
}

// One allocation request naming random QPs; `*failed` when it got no grant.
Task<void> AllocOne(World& w, Attacker& a, Ps timeout, uint32_t* pending, bool* failed,
                    WaitList* done) {
  std::vector<uint32_t> qpns;
  for (uint32_t k = 1; k < kG; ++k) qpns.push_back(PickQpn(w, a));
  ++w.alloc_reqs;
  auto r = co_await a.ac->Allocate(qpns, timeout);
  if (r.ok()) {
    ++w.attacker_grants;
    a.grants.push_back(r.value);
  } else {
    *failed = true;
  }
  --*pending;
  done->NotifyAll();
}

// Up to kLanes requests at once through the attacker's Alloc QP. True when
// any failed (the chain needs renewing).
Task<bool> AllocBurst(World& w, Testbed& tb, Attacker& a, Ps timeout) {
  uint32_t pending = 1 + static_cast<uint32_t>(w.rng.Uniform(kLanes));
  bool failed = false;
  WaitList done;
  const uint32_t n = pending;
  for (uint32_t i = 0; i < n; ++i)
    tb.runtime().Spawn(AllocOne(w, a, timeout, &pending, &failed, &done));
  while (pending > 0) co_await done.Wait();
  co_return failed;
}

Task<void> Fuzz(World& w, Testbed& tb, Attacker& a, int payloads) {
  const Ps timeout = 300 * kPsPerUs;
  bool alloc_dirty = false, free_dirty = false;
  for (int i = 0; i < payloads; ++i) {
    ++w.payloads;
    switch (w.rng.Uniform(4)) {
      case 0:  // random bytes on the Alloc QP; half the time the chain is kept
        RandomSend(w, a, a.ac->qp());
        alloc_dirty = true;
        co_await tb.runtime().SleepFor(10 * kPsPerUs);
        if (w.rng.Uniform(2)) {
          co_await RenewAlloc(w, tb, a);
          alloc_dirty = false;
        }
        break;
      case 1: {  // 1..kLanes well-formed requests in flight, naming any QPs
        if (co_await AllocBurst(w, tb, a, timeout)) {
          co_await RenewAlloc(w, tb, a);
          alloc_dirty = false;
        }
        break;
      }
      case 2:
        RandomSend(w, a, a.fc->qp());
        free_dirty = true;
        co_await tb.runtime().SleepFor(10 * kPsPerUs);
        if (w.rng.Uniform(2)) {
          co_await RenewFree(w, tb, a);
          free_dirty = false;
        }
        break;
      default: {
        const uint64_t h = PickHandle(w, a);
        ++w.free_reqs;
        Status st = co_await a.fc->Free(h, timeout);
        if (st.ok()) {
          std::erase_if(a.grants, [h](const AllocGrant& g) { return g.handle == h; });
        } else {
          co_await RenewFree(w, tb, a);
          free_dirty = false;
        }
      }
    }
    if (i % 8 == 0) co_await TryRead(w, a);
  }
  (void)alloc_dirty;
  (void)free_dirty;
  w.fuzz_done = true;
}

Task<void> Honest(World& w, Testbed& tb, uint32_t cn, uint64_t tag) {
  CnSide& c = tb.cn(cn);
  AccessGroup* g = co_await c.OpenGroup(kG - 1, 1 << 16);
  for (size_t l = 0; l < g->size(); ++l) w.honest_qpns.push_back(g->lane(l).mn_qpn);
  auto& mem = c.node()->memory();
  for (uint64_t round = 0; !w.fuzz_done; ++round) {
    auto r = co_await c.Alloc(*g);
    if (!r.ok()) {
      if (r.status.code() == Code::kOutOfMemory) {
        ++w.honest_oom;
      } else {
        ++w.honest_errors;
        ADD_FAILURE() << "honest CN " << cn << ": " << r.status.ToString();
      }
      co_await tb.runtime().SleepFor(50 * kPsPerUs);
      continue;
    }
    const Chunk ch = r.value;
    w.dup_grant += w.honest_live.count(ch.addr);
    w.honest_live[ch.addr] = tag;
    w.honest_handles.insert(ch.id);
    const uint64_t word = (tag << 32) | round;
    for (int k = 0; k < 8; ++k) mem.StoreU64(g->buffer_addr() + 8 * k, word ^ k);
    Status st = co_await c.Write(g->lane(round % g->size()), ch, 0, 64, g->buffer_addr());
    w.honest_errors += !st.ok();
    co_await tb.runtime().SleepFor(1000 * kPsPerUs);  // think time: the attacker runs
    mem.Fill(g->buffer_addr() + 4096, 0, 64);
    st = co_await c.Read(g->lane((round + 1) % g->size()), ch, 0, 64, g->buffer_addr() + 4096);
    w.honest_errors += !st.ok();
    for (int k = 0; k < 8; ++k)
      w.bad_data += mem.LoadU64(g->buffer_addr() + 4096 + 8 * k) != (word ^ k);
    w.honest_live.erase(ch.addr);
    w.honest_handles.erase(ch.id);
    st = co_await c.Free(*g, ch);
    if (!st.ok()) {
      ++w.honest_errors;
      ADD_FAILURE() << "honest CN " << cn << " free: " << st.ToString();
    }
    ++w.honest_rounds;
  }
}

TEST(OneSidedMwFuzz, MaliciousPayloadsNeverBreakIsolation) {
  uint64_t seed = 1;
  if (const char* s = std::getenv("DMB_FUZZ_SEED")) seed = std::strtoull(s, nullptr, 10);
  int payloads = 10000;
  if (const char* s = std::getenv("DMB_FUZZ_PAYLOADS")) payloads = std::atoi(s);
  harness::TestbedSpec spec;
  spec.system = "onesided_mw";
  spec.cns = 3;
  spec.pool_bytes = 8ull << 20;  // 2048 chunks of 4 KB
  spec.seed = seed;
  // The attacker forces thousands of chain renewals: no limit here (the
  // renewal limit has its own test), and each renewal gives the old chains'
  // memory back, so the default MN memory suffices.
  spec.knobs = {{"chain_instances", std::to_string(kInstances)},
                {"alloc_lanes", std::to_string(kLanes)},
                {"group_size", "3"},
                {"max_renewals", std::to_string(int64_t{1} << 40)}};
  Testbed tb(spec);
  World w;
  w.tb = &tb;
  w.rng = dmb::Rng(seed, "fuzz");
  Attacker a;
  tb.Run(SetUpAttacker(tb, &a));
  std::vector<Task<void>> tasks;
  tasks.push_back(Fuzz(w, tb, a, payloads));
  for (uint32_t cn = 0; cn < 2; ++cn) {
    for (uint64_t t = 0; t < 2; ++t) tasks.push_back(Honest(w, tb, cn, 1 + cn * 2 + t));
  }
  tb.RunAll(std::move(tasks));
  // The attacker crashes: everything it holds comes back, nothing else.
  ReclaimReport rep;
  tb.Run([](Testbed& tb, ReclaimReport* rep) -> Task<void> {
    *rep = co_await tb.mm().mn().ReclaimCn(2);
  }(tb, &rep));
  const auto& st = a.mn->osmw_stats();
  std::cout << "seed=" << seed << ": " << w.payloads << " payloads (" << w.random_sends
            << " random SENDs, " << w.alloc_reqs << " alloc requests with random QPs, "
            << w.free_reqs << " frees of random handles); attacker grants " << w.attacker_grants
            << ", attacker reads " << w.attacker_reads_ok << "/" << w.attacker_reads
            << " succeeded, " << w.attacker_read_honest << " reached an honest chunk; "
            << w.renewals << " chain renewals (" << w.salvaged
            << " grants salvaged with lying reply counts), " << st.entries_reclaimed
            << " entries reclaimed, crash reclaim " << rep.chunks_reclaimed
            << "; honest: " << w.honest_rounds << " rounds, " << w.honest_oom << " out-of-memory, "
            << w.honest_errors << " errors, " << w.bad_data << " bad words, " << w.dup_grant
            << " duplicate grants; chunks in use after: " << tb.mm().mn().stats().chunks_in_use
            << "\n";
  const std::string repro = "reproduce with DMB_FUZZ_SEED=" + std::to_string(seed);
  EXPECT_GE(w.payloads, static_cast<uint64_t>(payloads)) << repro;
  EXPECT_EQ(w.bad_data, 0u) << repro;
  EXPECT_EQ(w.dup_grant, 0u) << repro;
  EXPECT_EQ(w.attacker_read_honest, 0u) << repro;
  EXPECT_GT(w.salvaged, 0u) << repro;  // the lying counts reached the settlement
  EXPECT_EQ(w.honest_errors, 0u) << repro;
  EXPECT_GT(w.honest_rounds, 100u) << repro;
  EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, 0u) << repro;
}

}  // namespace
}  // namespace dmb::systems::onesided_mw
