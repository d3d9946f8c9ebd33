// ODRP's Load, Unmapped Store, Mapped Store and Invalidate WR chains running on the simulated MN
// RNIC: bytes, statuses, the free page queue and the TT after each request, and no MN CPU time
// after the chains were armed.
#include "systems/odrp/chains.h"

#include <memory>
#include <set>
#include <vector>

#include "fabric/sim/test_util.h"

namespace dmb::systems::odrp {
namespace {

using namespace dmb::sim::testing;

constexpr Ps kTimeout = 2 * kPsPerMs;
constexpr uint32_t kSlots = 4;
constexpr uint64_t kForgePage = 1000;  // PipeStores: a misaligned tt_addr (entry 9 + 1 byte)

std::vector<uint8_t> Pattern(uint32_t seed) {
  std::vector<uint8_t> p(kPageBytes);
  for (uint32_t i = 0; i < kPageBytes; ++i) {
    p[i] = static_cast<uint8_t>((seed * 131 + i * 7 + (i >> 8)) & 0xff);
  }
  return p;
}

// One CN: its node, its TT and chains on the MN, its clients.
struct Cn {
  Node* node = nullptr;
  Pd* pd = nullptr;
  Mr* mr = nullptr;
  uint64_t buf = 0;  // [hdr load, store, mstore, inval: 128 each][pad][src page][dst page]
  const CnTable* table = nullptr;
  std::unique_ptr<Chain> load_chain, store_chain, mstore_chain, inval_chain;
  std::unique_ptr<ChainClient> load, store, mstore, inval;
  std::unique_ptr<SwapClient> swap;
  uint64_t src() const { return buf + 4096; }
  uint64_t dst() const { return buf + 8192; }
};

class OdrpChainTest : public SimFixture {
 protected:
  void Build(uint64_t pages, int cns = 1, uint64_t swap_pages = 64) {
    mn_ = AddNode("mn");
    cluster_->RunToCompletion([](OdrpChainTest* t, uint64_t pages) -> Task<void> {
      t->odrp_ = co_await OdrpMetadata::Create(t->cluster_.get(), t->mn_, {.pages = pages});
    }(this, pages));
    for (int i = 0; i < cns; ++i) AddCn("cn" + std::to_string(i), swap_pages);
    cpu_after_setup_ = mn_->cpu().busy_ps();
  }

  void AddCn(const std::string& name, uint64_t swap_pages) {
    auto cn = std::make_unique<Cn>();
    cn->node = AddNode(name);
    cn->pd = cn->node->AllocPd();
    cn->buf = cn->node->memory().Alloc(3 * 4096, 4096);
    cn->mr = RegMr(cn->node, cn->pd, cn->buf, 3 * 4096);
    Cn* c = cn.get();
    cluster_->RunToCompletion([](OdrpMetadata* mn, Cn* c, uint64_t swap_pages) -> Task<void> {
      c->table = co_await mn->AddCn(swap_pages);
      c->load_chain = co_await Chain::Create(mn, c->table, ChainKind::kLoad, kSlots);
      c->store_chain = co_await Chain::Create(mn, c->table, ChainKind::kUnmappedStore, kSlots);
      c->mstore_chain = co_await Chain::Create(mn, c->table, ChainKind::kMappedStore, kSlots);
      c->inval_chain = co_await Chain::Create(mn, c->table, ChainKind::kInvalidate, kSlots);
    }(odrp_.get(), c, swap_pages));
    Runtime* rt = &cluster_->runtime();
    c->load =
        std::make_unique<ChainClient>(c->node, c->pd, rt, c->load_chain->geometry(), c->mr, c->buf);
    c->store = std::make_unique<ChainClient>(c->node, c->pd, rt, c->store_chain->geometry(), c->mr,
                                             c->buf + 128);
    cluster_->Connect(c->load->qp(), c->load_chain->cn_qp());
    c->mstore = std::make_unique<ChainClient>(c->node, c->pd, rt, c->mstore_chain->geometry(),
                                              c->mr, c->buf + 256);
    c->inval = std::make_unique<ChainClient>(c->node, c->pd, rt, c->inval_chain->geometry(), c->mr,
                                             c->buf + 384);
    cluster_->Connect(c->store->qp(), c->store_chain->cn_qp());
    cluster_->Connect(c->mstore->qp(), c->mstore_chain->cn_qp());
    cluster_->Connect(c->inval->qp(), c->inval_chain->cn_qp());
    cluster_->RunToCompletion([](Cn* c) -> Task<void> {
      co_await c->load_chain->Arm();
      co_await c->store_chain->Arm();
      co_await c->mstore_chain->Arm();
      co_await c->inval_chain->Arm();
    }(c));
    c->swap = std::make_unique<SwapClient>(c->load.get(), c->store.get(), c->table->tt_base,
                                           swap_pages, c->mstore.get(), c->inval.get());
    cns_.push_back(std::move(cn));
  }

  // Stores `page`; on success also checks, at the instant the CN's store
  // returns, that the MN page the TT entry names already holds the bytes
  // (the notification is ordered after the data).
  Status Store(Cn* c, uint64_t swap_addr, const std::vector<uint8_t>& page) {
    c->node->memory().Write(c->src(), page.data(), page.size());
    Status st;
    std::vector<uint8_t> at_notify;
    cluster_->RunToCompletion([](OdrpChainTest* t, Cn* c, uint64_t a, Status* out,
                                 std::vector<uint8_t>* snap) -> Task<void> {
      *out = co_await c->swap->Store(a, c->src(), c->mr->lkey(), kTimeout);
      if (out->ok()) *snap = t->MnPage(t->odrp_->LoadTtEntry(c->table->cn, a));
    }(this, c, swap_addr, &st, &at_notify));
    if (st.ok()) {
      EXPECT_EQ(at_notify, page) << "notified before the page landed";
    }
    return st;
  }
  // Loads into dst (pre-filled with 0xee); returns the status and the bytes.
  Status Load(Cn* c, uint64_t swap_addr, std::vector<uint8_t>* out) {
    c->node->memory().Fill(c->dst(), 0xee, kPageBytes);
    Status st;
    cluster_->RunToCompletion([](Cn* c, uint64_t a, Status* out) -> Task<void> {
      *out = co_await c->swap->Load(a, c->dst(), c->mr->rkey(), kTimeout);
    }(c, swap_addr, &st));
    out->resize(kPageBytes);
    c->node->memory().Read(c->dst(), out->data(), kPageBytes);
    return st;
  }
  // Invalidates; on success also checks, at the instant the CN's call
  // returns, that the TT entry is already zero and the old tail element
  // already holds the freed page (the notification is ordered after both).
  Status Invalidate(Cn* c, uint64_t swap_addr) {
    const uint64_t page = odrp_->LoadTtEntry(c->table->cn, swap_addr);
    const uint64_t old_tail = odrp_->LoadTail();
    Status st;
    uint64_t entry = ~0ull, element = 0;
    cluster_->RunToCompletion([](OdrpChainTest* t, Cn* c, uint64_t a, uint64_t old_tail,
                                 Status* out, uint64_t* entry, uint64_t* element) -> Task<void> {
      *out = co_await c->swap->Invalidate(a, kTimeout);
      if (out->ok()) {
        *entry = t->odrp_->LoadTtEntry(c->table->cn, a);
        *element = t->ElementAt(old_tail);
      }
    }(this, c, swap_addr, old_tail, &st, &entry, &element));
    if (st.ok()) {
      EXPECT_EQ(entry, 0u) << "notified before the TT entry was zeroed";
      EXPECT_EQ(element, page) << "notified before the page was enqueued";
    }
    return st;
  }
  // Raw chain requests (the CN's own ChainClients, no SwapClient bitmap or
  // address check): what a malicious CN can send.
  Status RawLoad(Cn* c, uint64_t tt) {
    c->node->memory().Fill(c->dst(), 0xee, kPageBytes);
    Status st;
    cluster_->RunToCompletion([](Cn* c, uint64_t tt, Status* out) -> Task<void> {
      *out = co_await c->load->Load(tt, c->dst(), c->mr->rkey(), kTimeout);
    }(c, tt, &st));
    return st;
  }
  Status RawStore(Cn* c, ChainKind kind, uint64_t tt, const std::vector<uint8_t>& page) {
    c->node->memory().Write(c->src(), page.data(), page.size());
    Status st;
    ChainClient* cl = kind == ChainKind::kUnmappedStore ? c->store.get() : c->mstore.get();
    cluster_->RunToCompletion(
        [](Cn* c, ChainClient* cl, ChainKind kind, uint64_t tt, Status* out) -> Task<void> {
          if (kind == ChainKind::kUnmappedStore) {  // (gcc 12: no co_await inside ?:)
            *out = co_await cl->UnmappedStore(tt, c->src(), c->mr->lkey(), kTimeout);
          } else {
            *out = co_await cl->MappedStore(tt, c->src(), c->mr->lkey(), kTimeout);
          }
        }(c, cl, kind, tt, &st));
    return st;
  }
  Status RawInvalidate(Cn* c, uint64_t tt) {
    Status st;
    cluster_->RunToCompletion([](Cn* c, uint64_t tt, Status* out) -> Task<void> {
      *out = co_await c->inval->Invalidate(tt, kTimeout);
    }(c, tt, &st));
    return st;
  }
  // Replaces CN c's chain of `kind` (e.g. one a refused request faulted) by a
  // fresh one with a fresh client, as OdrpMnSide::RebuildChain does.
  void Fresh(Cn* c, ChainKind kind) {
    std::unique_ptr<Chain>* chain = kind == ChainKind::kLoad            ? &c->load_chain
                                    : kind == ChainKind::kUnmappedStore ? &c->store_chain
                                    : kind == ChainKind::kMappedStore   ? &c->mstore_chain
                                                                        : &c->inval_chain;
    std::unique_ptr<ChainClient>* client = kind == ChainKind::kLoad            ? &c->load
                                           : kind == ChainKind::kUnmappedStore ? &c->store
                                           : kind == ChainKind::kMappedStore   ? &c->mstore
                                                                               : &c->inval;
    const uint64_t hdr = c->buf + 128 * static_cast<uint64_t>(kind);
    graveyard_.push_back(std::move(*chain));
    old_clients_.push_back(std::move(*client));  // c->swap still names it: use Raw*
    cluster_->RunToCompletion(
        [](OdrpMetadata* mn, Cn* c, ChainKind kind, std::unique_ptr<Chain>* out) -> Task<void> {
          *out = co_await Chain::Create(mn, c->table, kind, kSlots);
        }(odrp_.get(), c, kind, chain));
    *client = std::make_unique<ChainClient>(c->node, c->pd, &cluster_->runtime(),
                                            (*chain)->geometry(), c->mr, hdr);
    cluster_->Connect((*client)->qp(), (*chain)->cn_qp());
    cluster_->RunToCompletion([](Chain* ch) -> Task<void> { co_await ch->Arm(); }(chain->get()));
  }
  // A pipelined Load chain of CN c with `lanes` lanes and its client: one
  // header and one destination page per request in flight.
  struct Pipe {
    std::unique_ptr<Chain> chain;
    std::unique_ptr<ChainClient> client;
    Node* node = nullptr;
    Mr* mr = nullptr;
    uint64_t buf = 0;  // [lanes x 128 B headers, padded to 4 KB][lanes x 4 KB destinations]
    uint64_t dst(uint32_t i) const { return buf + 4096 * (1 + i); }
  };
  std::unique_ptr<Pipe> MakePipe(Cn* c, uint32_t lanes) {
    auto p = std::make_unique<Pipe>();
    p->node = c->node;
    p->buf = c->node->memory().Alloc(4096 * (1 + lanes), 4096);
    p->mr = RegMr(c->node, c->pd, p->buf, 4096 * (1 + lanes));
    cluster_->RunToCompletion(
        [](OdrpMetadata* mn, Cn* c, uint32_t lanes, std::unique_ptr<Chain>* out) -> Task<void> {
          *out = co_await Chain::Create(mn, c->table, ChainKind::kLoad, 4 * lanes, lanes);
        }(odrp_.get(), c, lanes, &p->chain));
    p->client = std::make_unique<ChainClient>(c->node, c->pd, &cluster_->runtime(),
                                              p->chain->geometry(), p->mr, p->buf);
    cluster_->Connect(p->client->qp(), p->chain->cn_qp());
    cluster_->RunToCompletion([](Chain* ch) -> Task<void> { co_await ch->Arm(); }(p->chain.get()));
    return p;
  }
  // Loads tts[i] into p.dst(i % lanes), all issued at once (the client keeps
  // `lanes` in flight); returns each status. *elapsed: until the last
  // returned; (*pages)[i]: what dst held when load i returned ok.
  std::vector<Status> PipeLoads(Pipe* p, const std::vector<uint64_t>& tts, Ps* elapsed = nullptr,
                                std::vector<std::vector<uint8_t>>* pages = nullptr) {
    std::vector<Status> st(tts.size());
    if (pages != nullptr) pages->assign(tts.size(), {});

    const uint32_t lanes = p->chain->geometry().lanes;
    const Ps t0 = rt().now();
    Ps last = t0;
    size_t returned = 0;
    for (size_t i = 0; i < tts.size(); ++i) {
      rt().Spawn([](Pipe* p, uint64_t tt, uint64_t dst, Status* out, Runtime* rt, Ps* last,
                    size_t* returned, Node* node,
                    std::vector<uint8_t>* page) -> Task<void> {
        *out = co_await p->client->Load(tt, dst, p->mr->rkey(), kTimeout);
        *last = std::max(*last, rt->now());
        ++*returned;
        if (out->ok() && page != nullptr) {
          page->resize(kPageBytes);
          node->memory().Read(dst, page->data(), kPageBytes);
        }
      }(p, tts[i], p->dst(static_cast<uint32_t>(i % lanes)), &st[i], &rt(), &last, &returned,
                                                p->node,
                                                pages == nullptr ? nullptr : &(*pages)[i]));
    }
    sim().Run();
    // A load still waiting when nothing is left to run would read as OK.
    EXPECT_EQ(returned, tts.size()) << "loads that never returned";
    if (elapsed != nullptr) *elapsed = last - t0;
    return st;
  }
  // A pipelined Mapped Store chain of CN c with `lanes` lanes and its
  // client: one header (and reply word) per lane, one source page per store.
  struct StorePipe {
    std::unique_ptr<Chain> chain;
    std::unique_ptr<ChainClient> client;
    Node* node = nullptr;
    Mr* mr = nullptr;
    uint64_t buf = 0;  // [lanes x 128 B headers, padded to 4 KB][kSources x 4 KB sources]
    static constexpr uint32_t kSources = 16;
    uint64_t src(uint32_t i) const { return buf + 4096 * (1 + i % kSources); }
  };
  std::unique_ptr<StorePipe> MakeStorePipe(Cn* c, uint32_t lanes,
                                           ChainKind kind = ChainKind::kMappedStore) {
    auto p = std::make_unique<StorePipe>();
    p->node = c->node;
    const uint64_t bytes = 4096 * (1 + StorePipe::kSources);
    p->buf = c->node->memory().Alloc(bytes, 4096);
    p->mr = RegMr(c->node, c->pd, p->buf, bytes);
    cluster_->RunToCompletion([](OdrpMetadata* mn, Cn* c, uint32_t lanes, ChainKind kind,
                                 std::unique_ptr<Chain>* out) -> Task<void> {
      *out = co_await Chain::Create(mn, c->table, kind, 4 * lanes, lanes);
    }(odrp_.get(), c, lanes, kind, &p->chain));
    p->client = std::make_unique<ChainClient>(c->node, c->pd, &cluster_->runtime(),
                                              p->chain->geometry(), p->mr, p->buf);
    cluster_->Connect(p->client->qp(), p->chain->cn_qp());
    cluster_->RunToCompletion([](Chain* ch) -> Task<void> { co_await ch->Arm(); }(p->chain.get()));
    return p;
  }
  struct StoreResult {
    Status st;
    uint64_t n = 0;         // the request number the client gave it
    bool in_place = false;  // ok and the MN page held the bytes when the reply came
  };
  // Stores Pattern(seeds[i]) (from src(i)) into CN c's swap page pages[i]
  // (Mapped or Unmapped Store, by the pipe's kind), all issued at once (the
  // client keeps `lanes` in flight). *elapsed: until the last returned.
  // `tts`: raw tt_addrs instead (a malicious CN), in_place then false.
  std::vector<StoreResult> PipeStores(Cn* c, StorePipe* p, const std::vector<uint64_t>& pages,
                                      const std::vector<uint32_t>& seeds, Ps* elapsed = nullptr) {
    std::vector<StoreResult> out(pages.size());
    const Ps t0 = rt().now();
    Ps last = t0;
    for (size_t i = 0; i < pages.size(); ++i) {
      const uint32_t k = static_cast<uint32_t>(i);
      p->node->memory().Write(p->src(k), Pattern(seeds[i]).data(), kPageBytes);
      rt().Spawn([](OdrpChainTest* t, Cn* c, StorePipe* p, uint64_t swap, uint64_t src,
                    uint32_t seed, StoreResult* r, Ps* last) -> Task<void> {
        // kForgePage: entry 9's address plus one byte (a malicious CN).
        const uint64_t tt = swap == kForgePage * kPageBytes
                                ? c->table->tt_base + 9 * kTtEntryBytes + 1
                                : TtEntryAddr(c->table->tt_base, swap);
        if (p->chain->geometry().kind == ChainKind::kMappedStore) {
          r->st = co_await p->client->MappedStore(tt, src, p->mr->lkey(), kTimeout);
        } else {
          r->st = co_await p->client->UnmappedStore(tt, src, p->mr->lkey(), kTimeout);
        }
        r->n = p->client->last_request();
        *last = std::max(*last, t->rt().now());
        r->in_place = r->st.ok() && t->HoldsAt(c, swap, Pattern(seed));
      }(this, c, p, pages[i] * kPageBytes, p->src(k), seeds[i], &out[i], &last));
    }
    sim().Run();
    if (elapsed != nullptr) *elapsed = last - t0;
    return out;
  }
  // The page mapped at CN c's swap page holds `bytes` (false: unmapped).
  bool HoldsAt(Cn* c, uint64_t swap, const std::vector<uint8_t>& bytes) {
    const uint64_t page = odrp_->LoadTtEntry(c->table->cn, swap);
    return page != 0 && MnPage(page) == bytes;
  }
  // Invalidates CN c's swap pages through the pipe (an Invalidate chain), all
  // issued at once. ok[i]: the reply came, and at that instant the entry
  // was 0 and its page back in the ring (the notification follows both).
  std::vector<StoreResult> PipeFrees(Cn* c, StorePipe* p, const std::vector<uint64_t>& pages,
                                     Ps* elapsed = nullptr) {
    std::vector<StoreResult> out(pages.size());
    const Ps t0 = rt().now();
    Ps last = t0;
    for (size_t i = 0; i < pages.size(); ++i) {
      const uint64_t swap = pages[i] * kPageBytes;
      rt().Spawn([](OdrpChainTest* t, Cn* c, StorePipe* p, uint64_t swap, uint64_t page,
                    StoreResult* r, Ps* last) -> Task<void> {
        r->st = co_await p->client->Invalidate(TtEntryAddr(c->table->tt_base, swap), kTimeout);
        r->n = p->client->last_request();
        *last = std::max(*last, t->rt().now());
        r->in_place =
            r->st.ok() && t->odrp_->LoadTtEntry(c->table->cn, swap) == 0 && t->InRing(page);
      }(this, c, p, swap, odrp_->LoadTtEntry(c->table->cn, swap), &out[i], &last));
    }
    sim().Run();
    if (elapsed != nullptr) *elapsed = last - t0;
    return out;
  }
  bool InRing(uint64_t page) {
    for (uint64_t i = 0; i < odrp_->layout().ring_slots; ++i) {
      if (odrp_->LoadElement(i) == page) return true;
    }
    return false;
  }
  // The instance that served a chain's last request.
  static uint32_t LastSlot(const Chain& ch) {
    return static_cast<uint32_t>((ch.requests_taken() - 1) % ch.geometry().slots);
  }
  // Head, tail, every ring element and the first `entries` TT entries of
  // every CN.
  std::vector<uint64_t> Snapshot(uint64_t entries = 64) {
    std::vector<uint64_t> s = {odrp_->LoadHead(), odrp_->LoadTail()};
    for (uint64_t i = 0; i < odrp_->layout().ring_slots; ++i) s.push_back(odrp_->LoadElement(i));
    for (const auto& c : cns_) {
      for (uint64_t i = 0; i < entries; ++i) {
        s.push_back(odrp_->LoadTtEntry(c->table->cn, i * kPageBytes));
      }
    }
    return s;
  }
  // The ring element at `addr` (an absolute element address), BE-decoded.
  uint64_t ElementAt(uint64_t addr) { return odrp_->LoadElement((addr - odrp_->ring_addr()) / 8); }
  std::vector<uint8_t> MnPage(uint64_t addr) {
    std::vector<uint8_t> p(kPageBytes);
    mn_->memory().Read(addr, p.data(), kPageBytes);
    return p;
  }
  Cn* cn(int i) { return cns_.at(i).get(); }

  Node* mn_ = nullptr;
  std::unique_ptr<OdrpMetadata> odrp_;
  std::vector<std::unique_ptr<Cn>> cns_;
  std::vector<std::unique_ptr<Chain>> graveyard_;  // replaced chains (their QPs stay in ERR)
  std::vector<std::unique_ptr<ChainClient>> old_clients_;
  Ps cpu_after_setup_ = 0;
};

TEST_F(OdrpChainTest, UnmappedStoreAllocatesAPageFromTheRing) {
  Build(/*pages=*/8);
  Cn* c = cn(0);
  const MnLayout& lay = odrp_->layout();
  ASSERT_EQ(odrp_->LoadHead(), odrp_->ring_addr());
  ASSERT_EQ(odrp_->LoadElement(0), odrp_->page_addr(0));
  const uint64_t swap = 3 * kPageBytes;
  const auto page = Pattern(1);

  const Status st = Store(c, swap, page);
  ASSERT_TRUE(st.ok()) << st.ToString();

  EXPECT_EQ(odrp_->LoadHead(), lay.Advance(odrp_->ring_addr(), 1)) << "head advanced by one";
  EXPECT_EQ(odrp_->LoadTail(), lay.Advance(odrp_->ring_addr(), 8)) << "tail untouched";
  EXPECT_EQ(odrp_->LoadTtEntry(0, swap), odrp_->page_addr(0)) << "TT maps the dequeued page";
  EXPECT_EQ(odrp_->LoadElement(0), 0u) << "the dequeued ring slot is zeroed";
  EXPECT_EQ(odrp_->LoadElement(1), odrp_->page_addr(1)) << "the next slot is untouched";
  EXPECT_EQ(MnPage(odrp_->page_addr(0)), page) << "the page holds the CN's bytes";
  EXPECT_EQ(MnPage(odrp_->page_addr(1)), std::vector<uint8_t>(kPageBytes, 0));
  for (uint64_t i = 0; i < 64; ++i) {
    if (i != 3) {
      EXPECT_EQ(odrp_->LoadTtEntry(0, i * kPageBytes), 0u) << "entry " << i;
    }
  }
  EXPECT_TRUE(c->swap->mapped(swap));
  EXPECT_FALSE(c->store_chain->Faulted());
  EXPECT_EQ(c->store_chain->requests_taken(), 1u);
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_) << "no MN CPU on the data path";
}

TEST_F(OdrpChainTest, LoadReturnsTheStoredPage) {
  Build(8);
  Cn* c = cn(0);
  const uint64_t swap = 7 * kPageBytes;
  const auto page = Pattern(2);
  ASSERT_TRUE(Store(c, swap, page).ok());
  const uint64_t head = odrp_->LoadHead();

  std::vector<uint8_t> got;
  const Status st = Load(c, swap, &got);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(got, page);
  EXPECT_EQ(odrp_->LoadHead(), head) << "a load allocates nothing";
  EXPECT_EQ(odrp_->LoadTtEntry(0, swap), odrp_->page_addr(0));
  EXPECT_EQ(c->load_chain->requests_taken(), 1u);
  EXPECT_FALSE(c->load_chain->Faulted());
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_);
}

TEST_F(OdrpChainTest, TwoStoresGetDifferentPages) {
  Build(8);
  Cn* c = cn(0);
  const auto a = Pattern(10), b = Pattern(11);
  ASSERT_TRUE(Store(c, 0, a).ok());
  ASSERT_TRUE(Store(c, 5 * kPageBytes, b).ok());
  const uint64_t pa = odrp_->LoadTtEntry(0, 0), pb = odrp_->LoadTtEntry(0, 5 * kPageBytes);
  EXPECT_EQ(pa, odrp_->page_addr(0));
  EXPECT_EQ(pb, odrp_->page_addr(1));
  EXPECT_NE(pa, pb);
  EXPECT_EQ(MnPage(pa), a);
  EXPECT_EQ(MnPage(pb), b);
  EXPECT_EQ(odrp_->LoadHead(), odrp_->layout().Advance(odrp_->ring_addr(), 2));
  EXPECT_EQ(odrp_->LoadElement(0), 0u);
  EXPECT_EQ(odrp_->LoadElement(1), 0u);
  EXPECT_EQ(odrp_->LoadElement(2), odrp_->page_addr(2));
  std::vector<uint8_t> got;
  ASSERT_TRUE(Load(c, 0, &got).ok());
  EXPECT_EQ(got, a);
  ASSERT_TRUE(Load(c, 5 * kPageBytes, &got).ok());
  EXPECT_EQ(got, b);
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_);
}

TEST_F(OdrpChainTest, LoadOfAnUnmappedEntryFaultsAndReturnsNoData) {
  Build(8);
  Cn* c = cn(0);
  // Bypass the CN's bitmap: ask the load chain for an entry that is 0.
  const uint64_t tt = TtEntryAddr(c->table->tt_base, 9 * kPageBytes);
  c->node->memory().Fill(c->dst(), 0xee, kPageBytes);
  Status st;
  cluster_->RunToCompletion([](Cn* c, uint64_t tt, Status* out) -> Task<void> {
    *out = co_await c->load->Load(tt, c->dst(), c->mr->rkey(), kTimeout);
  }(c, tt, &st));
  EXPECT_EQ(st.code(), Code::kLaneBroken) << st.ToString();
  std::vector<uint8_t> got(kPageBytes);
  c->node->memory().Read(c->dst(), got.data(), kPageBytes);
  EXPECT_EQ(got, std::vector<uint8_t>(kPageBytes, 0xee)) << "no data reached the CN";
  // The WRITE_WITH_IMM from the null page address failed its local check on
  // the MN: R is in ERR; L (the TT READ) itself succeeded.
  EXPECT_TRUE(c->load_chain->Faulted());
  EXPECT_EQ(c->load_chain->cn_qp()->state(), QpState::kErr);
  EXPECT_GE(c->load_chain->cn_qp()->counters().errors, 1u);
  EXPECT_NE(c->load_chain->worker_qp()->state(), QpState::kErr);
  EXPECT_EQ(c->load->qp()->state(), QpState::kErr) << "the CN gave up (timeout)";
  // The SwapClient refuses such a load up front (its bitmap).
  std::vector<uint8_t> dummy;
  EXPECT_EQ(Load(c, 9 * kPageBytes, &dummy).code(), Code::kInvalidArgument);
  // The store chain is separate and still works.
  const auto page = Pattern(3);
  const Status s2 = Store(c, 9 * kPageBytes, page);
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  EXPECT_EQ(MnPage(odrp_->LoadTtEntry(0, 9 * kPageBytes)), page);
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_);
}

TEST_F(OdrpChainTest, ChainsRecycleWithoutTheMnCpu) {
  // 3 laps and then some of 4 pre-posted instances on each chain.
  Build(32);
  Cn* c = cn(0);
  constexpr uint32_t kRequests = 3 * kSlots + 1;
  for (uint32_t i = 0; i < kRequests; ++i) {
    const Status st = Store(c, i * kPageBytes, Pattern(100 + i));
    ASSERT_TRUE(st.ok()) << "store " << i << ": " << st.ToString();
    ASSERT_EQ(odrp_->LoadTtEntry(0, i * kPageBytes), odrp_->page_addr(i)) << "store " << i;
  }
  for (uint32_t i = 0; i < kRequests; ++i) {
    std::vector<uint8_t> got;
    const uint64_t swap = ((i * 5) % kRequests) * kPageBytes;  // another order
    const Status st = Load(c, swap, &got);
    ASSERT_TRUE(st.ok()) << "load " << i << ": " << st.ToString();
    ASSERT_EQ(got, Pattern(100 + static_cast<uint32_t>(swap / kPageBytes))) << "load " << i;
  }
  EXPECT_EQ(c->store_chain->requests_taken(), kRequests);
  EXPECT_EQ(c->load_chain->requests_taken(), kRequests);
  EXPECT_EQ(odrp_->LoadHead(), odrp_->layout().Advance(odrp_->ring_addr(), kRequests));
  for (uint32_t i = 0; i < kRequests; ++i) EXPECT_EQ(odrp_->LoadElement(i), 0u);
  EXPECT_EQ(odrp_->LoadElement(kRequests), odrp_->page_addr(kRequests));
  EXPECT_FALSE(c->store_chain->Faulted());
  EXPECT_FALSE(c->load_chain->Faulted());
  // The managed SQs ran far past what the MN CPU posted.
  EXPECT_GT(c->store_chain->worker_qp()->counters().send_wrs_executed,
            uint64_t{kSlots} * c->store_chain->geometry().l_wrs);
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_) << "recycling used no MN CPU";
}

TEST_F(OdrpChainTest, StoreIntoAnEmptyQueueFaultsAndMapsNothing) {
  Build(/*pages=*/2);
  Cn* c = cn(0);
  ASSERT_TRUE(Store(c, 0, Pattern(20)).ok());
  ASSERT_TRUE(Store(c, kPageBytes, Pattern(21)).ok());
  const Status st = Store(c, 2 * kPageBytes, Pattern(22));
  EXPECT_EQ(st.code(), Code::kLaneBroken) << st.ToString();
  EXPECT_FALSE(c->swap->mapped(2 * kPageBytes));
  EXPECT_EQ(odrp_->LoadTtEntry(0, 2 * kPageBytes), 0u) << "nothing mapped";
  EXPECT_EQ(MnPage(odrp_->page_addr(0)), Pattern(20)) << "allocated pages untouched";
  EXPECT_EQ(MnPage(odrp_->page_addr(1)), Pattern(21));
  // The dequeue read the zeroed element: U7's null local address faulted L
  // before U5 mapped anything; R0 then found the ticket's 0 (N never ran)
  // and faulted: no notification.
  EXPECT_EQ(c->store_chain->worker_qp()->state(), QpState::kErr);
  EXPECT_EQ(c->store_chain->cn_qp()->state(), QpState::kErr);
  const Chain::LaneProgress p = c->store_chain->LastInstance(0);
  EXPECT_EQ(p.steps, kStoreU7 + 1) << "stopped at U7";
  EXPECT_EQ(c->store_chain->DequeuedElement(p.slot), 0u) << "the MN sees the queue was empty";
  // The failed dequeue still advanced the head ([ODRP] §4.3: MN CPU repairs).
  EXPECT_EQ(odrp_->LoadHead(), odrp_->layout().Advance(odrp_->ring_addr(), 3));
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_);
}

TEST_F(OdrpChainTest, ACnThatVanishesMidStoreLeavesTheMnOneClaimPerLaneToRepair) {
  // The CN's QP fails while its store runs on the MN: the notification
  // (R0) is never acknowledged, R goes to ERR and flushes its RQ. Those
  // flush completions pass the WAIT on rcq of the lane's next C_w instance
  // (R1 enabled it right behind R0), which runs once with no request: its
  // tt_addr is 0 (lap 0; later laps: the ticket zeroed it), so U1 claims
  // one more position and CHK refuses it. That claim is what the MN's repair
  // reads (LastInstance, ClaimedPosition: odrp.h "Recovery"); the element is
  // still in place (U6 never ran), nothing is mapped.
  Build(8);
  Cn* c = cn(0);
  ASSERT_TRUE(Store(c, 0, Pattern(40)).ok());
  c->node->memory().Write(c->src(), Pattern(41).data(), kPageBytes);
  Status st;
  rt().Spawn([](Runtime* rt, Qp* qp) -> Task<void> {
    co_await rt->SleepFor(UsToPs(5));
    qp->Modify(QpState::kErr);
  }(&rt(), c->store->qp()));
  cluster_->RunToCompletion([](Cn* c, Status* out) -> Task<void> {
    *out = co_await c->swap->Store(kPageBytes, c->src(), c->mr->lkey(), kTimeout);
  }(c, &st));
  EXPECT_EQ(st.code(), Code::kLaneBroken) << st.ToString();
  sim().Run();  // let the MN's retries run out
  EXPECT_EQ(c->store_chain->cn_qp()->state(), QpState::kErr) << "R0 was never acknowledged";
  // The MN side of the store itself completed; only its notification was lost.
  EXPECT_EQ(odrp_->LoadTtEntry(0, kPageBytes), odrp_->page_addr(1));
  EXPECT_EQ(MnPage(odrp_->page_addr(1)), Pattern(41));
  // The replayed instance: one claim, refused, nothing mapped or zeroed.
  EXPECT_EQ(odrp_->LoadHead(), odrp_->layout().Advance(odrp_->ring_addr(), 3));
  const Chain::LaneProgress p = c->store_chain->LastInstance(0);
  EXPECT_EQ(p.slot, 2u);
  EXPECT_EQ(p.steps, kStoreChk + 1) << "refused at CHK";
  EXPECT_EQ(c->store_chain->ClaimedPosition(p.slot), odrp_->element_addr(2));
  EXPECT_EQ(odrp_->LoadElement(2), odrp_->page_addr(2)) << "still in the queue's ring";
  for (uint64_t i = 2; i < 8; ++i) EXPECT_EQ(odrp_->LoadTtEntry(0, i * kPageBytes), 0u);
  EXPECT_EQ(MnPage(odrp_->page_addr(2)), std::vector<uint8_t>(kPageBytes, 0));
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_);
}

TEST_F(OdrpChainTest, ATtAddressOfAnotherCnFaultsInsteadOfReadingIt) {
  Build(8, /*cns=*/2);
  Cn* a = cn(0);
  Cn* b = cn(1);
  ASSERT_TRUE(Store(a, 0, Pattern(30)).ok());
  // CN b names CN a's mapped entry: b's chain carries tt[b]'s rkey, whose
  // bounds exclude it.
  const uint64_t foreign = TtEntryAddr(a->table->tt_base, 0);
  b->node->memory().Fill(b->dst(), 0xee, kPageBytes);
  Status st;
  cluster_->RunToCompletion([](Cn* c, uint64_t tt, Status* out) -> Task<void> {
    *out = co_await c->load->Load(tt, c->dst(), c->mr->rkey(), kTimeout);
  }(b, foreign, &st));
  EXPECT_EQ(st.code(), Code::kLaneBroken) << st.ToString();
  std::vector<uint8_t> got(kPageBytes);
  b->node->memory().Read(b->dst(), got.data(), kPageBytes);
  EXPECT_EQ(got, std::vector<uint8_t>(kPageBytes, 0xee)) << "CN a's page did not leak";
  EXPECT_EQ(b->load_chain->worker_qp()->state(), QpState::kErr) << "the TT READ was refused";
  // CN a is unaffected.
  ASSERT_TRUE(Load(a, 0, &got).ok());
  EXPECT_EQ(got, Pattern(30));
}

TEST_F(OdrpChainTest, MappedStoreOverwritesThePageInPlace) {
  Build(8);
  Cn* c = cn(0);
  const uint64_t swap = 2 * kPageBytes;
  const auto a = Pattern(50), b = Pattern(51);
  ASSERT_TRUE(Store(c, swap, a).ok());
  ASSERT_EQ(odrp_->LoadTtEntry(0, swap), odrp_->page_addr(0));
  const uint64_t head = odrp_->LoadHead(), tail = odrp_->LoadTail();

  // The swap page is mapped: the SwapClient takes the Mapped Store chain
  // (Store() also checks the bytes were in place when the CN was notified).
  const Status st = Store(c, swap, b);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c->mstore_chain->requests_taken(), 1u);
  EXPECT_EQ(c->store_chain->requests_taken(), 1u) << "no second allocation";
  EXPECT_EQ(odrp_->LoadTtEntry(0, swap), odrp_->page_addr(0)) << "same page";
  EXPECT_EQ(MnPage(odrp_->page_addr(0)), b) << "new bytes, in place";
  EXPECT_EQ(odrp_->LoadHead(), head) << "nothing dequeued";
  EXPECT_EQ(odrp_->LoadTail(), tail) << "nothing enqueued";
  EXPECT_EQ(odrp_->LoadElement(0), 0u);
  for (uint64_t i = 1; i < 8; ++i) {
    EXPECT_EQ(odrp_->LoadElement(i), odrp_->page_addr(i)) << "ring slot " << i;
    EXPECT_EQ(MnPage(odrp_->page_addr(i)), std::vector<uint8_t>(kPageBytes, 0)) << "page " << i;
  }
  for (uint64_t i = 0; i < 64; ++i) {
    if (i != 2) {
      EXPECT_EQ(odrp_->LoadTtEntry(0, i * kPageBytes), 0u) << "entry " << i;
    }
  }
  std::vector<uint8_t> got;
  ASSERT_TRUE(Load(c, swap, &got).ok());
  EXPECT_EQ(got, b);
  EXPECT_FALSE(c->mstore_chain->Faulted());
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_) << "no MN CPU on the data path";
}

TEST_F(OdrpChainTest, InvalidateReturnsThePageToTheRingAndAStoreReusesIt) {
  // 7 pages in an 8-slot ring: the tail starts at the last slot, so the
  // enqueue wraps it (masked FAA) back to slot 0.
  Build(7);
  Cn* c = cn(0);
  const MnLayout& lay = odrp_->layout();
  ASSERT_EQ(lay.ring_slots, 8u);
  ASSERT_EQ(odrp_->LoadTail(), odrp_->element_addr(7));
  const uint64_t swap = 4 * kPageBytes;
  const auto a = Pattern(60);
  ASSERT_TRUE(Store(c, swap, a).ok());
  ASSERT_EQ(odrp_->LoadTtEntry(0, swap), odrp_->page_addr(0));
  ASSERT_EQ(odrp_->LoadElement(7), 0u);
  const uint64_t head = odrp_->LoadHead();

  const Status st = Invalidate(c, swap);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(odrp_->LoadTail(), odrp_->ring_addr()) << "tail + 8, wrapped inside the ring";
  EXPECT_EQ(odrp_->LoadTail(), lay.Advance(odrp_->element_addr(7), 1));
  uint8_t raw[8];
  mn_->memory().Read(odrp_->element_addr(7), raw, 8);
  uint8_t want[8];
  fabric::StoreBe64(want, odrp_->page_addr(0));
  EXPECT_EQ(std::vector<uint8_t>(raw, raw + 8), std::vector<uint8_t>(want, want + 8))
      << "the old tail slot holds the page address, big-endian";
  EXPECT_EQ(odrp_->LoadTtEntry(0, swap), 0u) << "unmapped";
  EXPECT_EQ(odrp_->LoadHead(), head) << "head untouched";
  EXPECT_EQ(odrp_->LoadElement(0), 0u) << "slot 0 (dequeued earlier) still empty";
  for (uint64_t i = 1; i < 7; ++i) EXPECT_EQ(odrp_->LoadElement(i), odrp_->page_addr(i));
  EXPECT_EQ(MnPage(odrp_->page_addr(0)), a) << "the check READ wrote nothing";
  EXPECT_FALSE(c->swap->mapped(swap));
  EXPECT_EQ(c->inval_chain->requests_taken(), 1u);
  EXPECT_FALSE(c->inval_chain->Faulted());
  std::vector<uint8_t> got;
  EXPECT_EQ(Load(c, swap, &got).code(), Code::kInvalidArgument) << "the bitmap knows";

  // Pages 1..6 go first (slots 1..6), then slot 7 hands out the freed page.
  for (uint64_t i = 1; i <= 6; ++i) {
    ASSERT_TRUE(Store(c, (8 + i) * kPageBytes, Pattern(70 + i)).ok()) << i;
    ASSERT_EQ(odrp_->LoadTtEntry(0, (8 + i) * kPageBytes), odrp_->page_addr(i)) << i;
  }
  const auto b = Pattern(80);
  ASSERT_TRUE(Store(c, 20 * kPageBytes, b).ok());
  EXPECT_EQ(odrp_->LoadTtEntry(0, 20 * kPageBytes), odrp_->page_addr(0)) << "the freed page";
  EXPECT_EQ(MnPage(odrp_->page_addr(0)), b);
  EXPECT_EQ(odrp_->LoadElement(7), 0u);
  EXPECT_EQ(odrp_->LoadHead(), odrp_->ring_addr()) << "head wrapped too";
  // Re-storing the invalidated swap page allocates again (Unmapped Store);
  // the queue is empty now, so that faults (empty-queue detection).
  EXPECT_EQ(Store(c, swap, a).code(), Code::kLaneBroken);
  EXPECT_EQ(odrp_->LoadTtEntry(0, swap), 0u);
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_);
}

TEST_F(OdrpChainTest, InvalidatingAnUnmappedEntryIsRefusedAndChangesNothing) {
  Build(8);
  Cn* c = cn(0);
  ASSERT_TRUE(Store(c, 0, Pattern(90)).ok());
  const uint64_t unmapped = 3 * kPageBytes;
  // The SwapClient refuses up front (its bitmap).
  EXPECT_EQ(Invalidate(c, unmapped).code(), Code::kInvalidArgument);
  EXPECT_EQ(c->inval_chain->requests_taken(), 0u);

  auto snapshot = [&] {
    std::vector<uint64_t> s = {odrp_->LoadHead(), odrp_->LoadTail()};
    for (uint64_t i = 0; i < odrp_->layout().ring_slots; ++i) s.push_back(odrp_->LoadElement(i));
    for (uint64_t i = 0; i < 64; ++i) s.push_back(odrp_->LoadTtEntry(0, i * kPageBytes));
    return s;
  };
  const std::vector<uint64_t> before = snapshot();
  const std::vector<uint8_t> page0 = MnPage(odrp_->page_addr(0));
  // Bypass the bitmap: ask the chain itself to free an entry that is 0.
  Status st;
  cluster_->RunToCompletion([](Cn* c, uint64_t tt, Status* out) -> Task<void> {
    *out = co_await c->inval->Invalidate(tt, kTimeout);
  }(c, TtEntryAddr(c->table->tt_base, unmapped), &st));
  EXPECT_EQ(st.code(), Code::kLaneBroken) << st.ToString();
  sim().Run();
  EXPECT_EQ(snapshot(), before) << "ring, head, tail and TT unchanged";
  EXPECT_EQ(odrp_->LoadTail(), before[1]) << "the FAA on the tail never ran";
  EXPECT_EQ(MnPage(odrp_->page_addr(0)), page0);
  // The check READ at address 0 was refused: L is in ERR; R0 found the
  // ticket's 0 (N never ran) and faulted: no notification.
  EXPECT_EQ(c->inval_chain->worker_qp()->state(), QpState::kErr);
  EXPECT_EQ(c->inval_chain->cn_qp()->state(), QpState::kErr);
  EXPECT_EQ(c->inval_chain->LastInstance(0).steps, kInvV4 + 1) << "nothing after the check ran";
  EXPECT_EQ(c->inval_chain->requests_taken(), 1u);

  // A Mapped Store to an unmapped entry (bitmap bypassed) faults the same way
  // and writes no page.
  c->node->memory().Write(c->src(), Pattern(91).data(), kPageBytes);
  cluster_->RunToCompletion([](Cn* c, uint64_t tt, Status* out) -> Task<void> {
    *out = co_await c->mstore->MappedStore(tt, c->src(), c->mr->lkey(), kTimeout);
  }(c, TtEntryAddr(c->table->tt_base, unmapped), &st));
  EXPECT_EQ(st.code(), Code::kLaneBroken) << st.ToString();
  sim().Run();
  EXPECT_EQ(c->mstore_chain->worker_qp()->state(), QpState::kErr);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(MnPage(odrp_->page_addr(0)), page0);
  for (uint64_t i = 1; i < 8; ++i) {
    EXPECT_EQ(MnPage(odrp_->page_addr(i)), std::vector<uint8_t>(kPageBytes, 0)) << "page " << i;
  }
  // The other chains are separate and still work.
  ASSERT_TRUE(Store(c, unmapped, Pattern(92)).ok());
  EXPECT_EQ(odrp_->LoadTtEntry(0, unmapped), odrp_->page_addr(1));
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_);
}

TEST_F(OdrpChainTest, AMisalignedTtAddressIsRefusedByMappedStoreAndInvalidate) {
  Build(8);
  Cn* c = cn(0);
  ASSERT_TRUE(Store(c, 0, Pattern(110)).ok());
  ASSERT_TRUE(Store(c, kPageBytes, Pattern(111)).ok());
  auto snapshot = [&] {
    std::vector<uint64_t> s = {odrp_->LoadHead(), odrp_->LoadTail()};
    for (uint64_t i = 0; i < odrp_->layout().ring_slots; ++i) s.push_back(odrp_->LoadElement(i));
    for (uint64_t i = 0; i < 64; ++i) s.push_back(odrp_->LoadTtEntry(0, i * kPageBytes));
    return s;
  };
  const std::vector<uint64_t> before = snapshot();
  // Straddles entries 0 and 1, both mapped.
  const uint64_t bad = c->table->tt_base + 4;
  Status st;
  cluster_->RunToCompletion([](Cn* c, uint64_t tt, Status* out) -> Task<void> {
    *out = co_await c->inval->Invalidate(tt, kTimeout);
  }(c, bad, &st));
  EXPECT_EQ(st.code(), Code::kLaneBroken) << st.ToString();
  c->node->memory().Write(c->src(), Pattern(112).data(), kPageBytes);
  cluster_->RunToCompletion([](Cn* c, uint64_t tt, Status* out) -> Task<void> {
    *out = co_await c->mstore->MappedStore(tt, c->src(), c->mr->lkey(), kTimeout);
  }(c, bad, &st));
  EXPECT_EQ(st.code(), Code::kLaneBroken) << st.ToString();
  sim().Run();
  EXPECT_EQ(c->inval_chain->worker_qp()->state(), QpState::kErr);
  EXPECT_EQ(c->mstore_chain->worker_qp()->state(), QpState::kErr);
  EXPECT_EQ(snapshot(), before) << "ring, head, tail and TT unchanged";
  EXPECT_EQ(MnPage(odrp_->page_addr(0)), Pattern(110));
  EXPECT_EQ(MnPage(odrp_->page_addr(1)), Pattern(111));
  for (uint64_t i = 2; i < 8; ++i) {
    EXPECT_EQ(MnPage(odrp_->page_addr(i)), std::vector<uint8_t>(kPageBytes, 0)) << "page " << i;
  }
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_);
}

TEST_F(OdrpChainTest, StoreInvalidateCyclesRecycleChainsAndPages) {
  // 4 pages, 13 cycles of unmapped store / mapped store / load / invalidate:
  // every chain runs 3 laps and then some of its 4 instances, and head and
  // tail go round the 4-slot ring three times.
  Build(4);
  Cn* c = cn(0);
  const MnLayout& lay = odrp_->layout();
  constexpr uint32_t kCycles = 3 * kSlots + 1;
  for (uint32_t i = 0; i < kCycles; ++i) {
    const uint64_t swap = (i % 3) * kPageBytes;
    const uint64_t page = odrp_->page_addr(i % 4);  // FIFO: freed pages come back in order
    ASSERT_FALSE(c->swap->mapped(swap)) << i;
    ASSERT_TRUE(Store(c, swap, Pattern(200 + i)).ok()) << "unmapped store " << i;
    ASSERT_EQ(odrp_->LoadTtEntry(0, swap), page) << i;
    ASSERT_EQ(odrp_->LoadHead(), lay.Advance(odrp_->ring_addr(), i + 1)) << i;
    ASSERT_TRUE(Store(c, swap, Pattern(300 + i)).ok()) << "mapped store " << i;
    ASSERT_EQ(odrp_->LoadTtEntry(0, swap), page) << i;
    ASSERT_EQ(MnPage(page), Pattern(300 + i)) << i;
    std::vector<uint8_t> got;
    ASSERT_TRUE(Load(c, swap, &got).ok()) << "load " << i;
    ASSERT_EQ(got, Pattern(300 + i)) << i;
    const Status st = Invalidate(c, swap);
    ASSERT_TRUE(st.ok()) << "invalidate " << i << ": " << st.ToString();
    ASSERT_EQ(odrp_->LoadTtEntry(0, swap), 0u) << i;
    ASSERT_EQ(odrp_->LoadTail(), lay.Advance(odrp_->ring_addr(), 4 + i + 1)) << i;
    ASSERT_EQ(odrp_->LoadElement(i % 4), page) << "freed into the old tail slot, " << i;
  }
  for (Chain* ch :
       {c->store_chain.get(), c->mstore_chain.get(), c->load_chain.get(), c->inval_chain.get()}) {
    EXPECT_EQ(ch->requests_taken(), kCycles) << ChainKindName(ch->geometry().kind);
    EXPECT_FALSE(ch->Faulted()) << ChainKindName(ch->geometry().kind);
    EXPECT_GT(ch->worker_qp()->counters().send_wrs_executed,
              uint64_t{kSlots} * ch->geometry().l_wrs)
        << ChainKindName(ch->geometry().kind);
  }
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(odrp_->LoadElement(i), odrp_->page_addr(i));
  for (uint64_t i = 0; i < 64; ++i) EXPECT_EQ(odrp_->LoadTtEntry(0, i * kPageBytes), 0u);
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_) << "recycling used no MN CPU";
}

// Issue 13 attack, end to end. Page addresses are stored BIG-ENDIAN, so an
// 8-byte write one byte into an entry stores the page address shifted right
// by 8 bits: with the pool at 0x1000 and 256 pages, page 255 (0x100000) lands
// as 0x1000, the victim's page 0. Before the fix the attacker's Unmapped
// Store at tt_base + 8k + 1 forged entry k -> the victim's page, then loaded,
// overwrote and freed it through its own (aligned) entry k.
TEST_F(OdrpChainTest, AMisalignedUnmappedStoreCannotForgeAnEntryToAnotherCnsPage) {
  Build(/*pages=*/256, /*cns=*/2, /*swap_pages=*/512);
  Cn* victim = cn(0);
  Cn* attacker = cn(1);
  const uint64_t v_page = odrp_->page_addr(0);
  const uint64_t bait = v_page << 8;  // the page whose address, shifted, reads as v_page
  ASSERT_EQ((bait - odrp_->page_addr(0)) % kPageBytes, 0u);
  const uint64_t bait_index = (bait - odrp_->page_addr(0)) / kPageBytes;
  ASSERT_LT(bait_index, 256u) << "the pool must hold the bait page";
  ASSERT_TRUE(Store(victim, 0, Pattern(1)).ok());
  ASSERT_EQ(odrp_->LoadTtEntry(0, 0), v_page);
  // The attacker takes every page up to the bait (legitimately).
  for (uint64_t i = 1; i < bait_index; ++i) {
    ASSERT_TRUE(Store(attacker, i * kPageBytes, Pattern(2)).ok()) << i;
  }
  ASSERT_EQ(odrp_->LoadElement(bait_index), bait) << "the next dequeue takes the bait";
  const uint64_t k = 300;  // an unmapped entry of the attacker's own table
  const uint64_t entry = attacker->table->tt_base + k * kTtEntryBytes;
  const uint64_t head = odrp_->LoadHead();
  const Status st = RawStore(attacker, ChainKind::kUnmappedStore, entry + 1, Pattern(3));
  EXPECT_FALSE(st.ok()) << "a misaligned tt_addr was accepted";
  EXPECT_EQ(odrp_->LoadTtEntry(1, k * kPageBytes), 0u) << "forged entry " << k;
  EXPECT_EQ(odrp_->LoadTtEntry(1, (k + 1) * kPageBytes), 0u);
  EXPECT_EQ(attacker->store_chain->worker_qp()->state(), QpState::kErr) << "the RNIC refused it";
  // Refused after the dequeue claimed the bait: the MN's repair
  // (OdrpMnSide::RecoverDequeue) reads the claimed position and the element,
  // both of this request, and the element is still in its slot to move back.
  EXPECT_EQ(attacker->store_chain->ClaimedPosition(LastSlot(*attacker->store_chain)), head);
  EXPECT_EQ(attacker->store_chain->DequeuedElement(LastSlot(*attacker->store_chain)), bait);
  EXPECT_EQ(odrp_->LoadElement(bait_index), bait) << "the claimed page is not lost";
  EXPECT_EQ(MnPage(bait), std::vector<uint8_t>(kPageBytes, 0)) << "nothing stored in it";
  // Load, overwrite and free the victim's page through entry k.
  EXPECT_FALSE(RawLoad(attacker, entry).ok());
  std::vector<uint8_t> got(kPageBytes);
  attacker->node->memory().Read(attacker->dst(), got.data(), kPageBytes);
  EXPECT_NE(got, Pattern(1)) << "the victim's page leaked";
  EXPECT_FALSE(RawStore(attacker, ChainKind::kMappedStore, entry, Pattern(4)).ok());
  EXPECT_FALSE(RawInvalidate(attacker, entry).ok());
  sim().Run();
  EXPECT_EQ(odrp_->LoadTtEntry(0, 0), v_page);
  EXPECT_EQ(MnPage(v_page), Pattern(1)) << "the victim's page was overwritten";
  for (uint64_t i = 0; i < odrp_->layout().ring_slots; ++i) {
    EXPECT_NE(odrp_->LoadElement(i), v_page) << "the victim's page was freed into slot " << i;
  }
  std::vector<uint8_t> mine;
  ASSERT_TRUE(Load(victim, 0, &mine).ok());
  EXPECT_EQ(mine, Pattern(1));
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_);
}

// A Load one byte into an entry reads that entry shifted left by 8 bits:
// the attacker's page 0 (0x1000) reads as page 255 (0x100000), the victim's.
TEST_F(OdrpChainTest, AMisalignedLoadCannotReadAnotherCnsPage) {
  Build(/*pages=*/256, /*cns=*/2, /*swap_pages=*/512);
  Cn* attacker = cn(0);
  Cn* victim = cn(1);
  ASSERT_TRUE(Store(attacker, 0, Pattern(5)).ok());
  const uint64_t secret = odrp_->LoadTtEntry(0, 0) << 8;
  uint64_t at = 0;
  for (uint64_t i = 0; i < 255 && at == 0; ++i) {
    ASSERT_TRUE(Store(victim, i * kPageBytes, Pattern(6)).ok()) << i;
    if (odrp_->LoadTtEntry(1, i * kPageBytes) == secret) at = i * kPageBytes;
  }
  ASSERT_NE(at, 0u) << "the victim holds the page the shifted read names";
  EXPECT_FALSE(RawLoad(attacker, attacker->table->tt_base + 1).ok());
  std::vector<uint8_t> got(kPageBytes);
  attacker->node->memory().Read(attacker->dst(), got.data(), kPageBytes);
  EXPECT_NE(got, Pattern(6)) << "the victim's page leaked";
  EXPECT_EQ(attacker->load_chain->worker_qp()->state(), QpState::kErr)
      << "the TT read itself must refuse the address";
}

// Every chain refuses a misaligned tt_addr and one outside the CN's table (past
// its end, straddling its end, before it, in another CN's table) on the
// RNIC, changing nothing; a fresh chain then serves the CN again.
TEST_F(OdrpChainTest, EveryChainRefusesMisalignedAndOutOfTableAddresses) {
  Build(/*pages=*/16, /*cns=*/2, /*swap_pages=*/16);
  Cn* c = cn(0);
  ASSERT_TRUE(Store(c, 0, Pattern(120)).ok());
  ASSERT_TRUE(Store(c, kPageBytes, Pattern(121)).ok());
  ASSERT_TRUE(Store(cn(1), 0, Pattern(122)).ok());
  const uint64_t base = c->table->tt_base, end = base + 16 * kTtEntryBytes;
  const std::vector<uint64_t> bad = {base + 4,
                                     base + 1,
                                     base + 7,
                                     end,
                                     end - 4,
                                     base - 8,
                                     TtEntryAddr(cn(1)->table->tt_base, 0),
                                     ~uint64_t{7}};
  const std::vector<uint8_t> p0 = MnPage(odrp_->page_addr(0)), p1 = MnPage(odrp_->page_addr(1));
  for (ChainKind kind : {ChainKind::kLoad, ChainKind::kUnmappedStore, ChainKind::kMappedStore,
                         ChainKind::kInvalidate}) {
    for (uint64_t tt : bad) {
      SCOPED_TRACE(std::string(ChainKindName(kind)) + " tt_addr " + std::to_string(tt) + " (base " +
                   std::to_string(base) + ")");
      const std::vector<uint64_t> before = Snapshot(16);
      Status st;
      if (kind == ChainKind::kLoad) {
        st = RawLoad(c, tt);
      } else if (kind == ChainKind::kInvalidate) {
        st = RawInvalidate(c, tt);
      } else {
        st = RawStore(c, kind, tt, Pattern(123));
      }
      sim().Run();
      EXPECT_EQ(st.code(), Code::kLaneBroken) << st.ToString();
      Chain* ch = kind == ChainKind::kLoad            ? c->load_chain.get()
                  : kind == ChainKind::kUnmappedStore ? c->store_chain.get()
                  : kind == ChainKind::kMappedStore   ? c->mstore_chain.get()
                                                      : c->inval_chain.get();
      EXPECT_EQ(ch->worker_qp()->state(), QpState::kErr) << "refused by the entry's first step";
      if (kind == ChainKind::kLoad || kind == ChainKind::kMappedStore) {
        // R0 runs on the address its lane's ticket zeroed and faults.
        EXPECT_EQ(ch->RefusedRequest(), ch->requests_taken() - 1) << "the MN names it";
      }
      if (kind == ChainKind::kLoad) {
        std::vector<uint8_t> dst(kPageBytes);
        c->node->memory().Read(c->dst(), dst.data(), kPageBytes);
        EXPECT_EQ(dst, std::vector<uint8_t>(kPageBytes, 0xee)) << "nothing was sent to the CN";
      }
      std::vector<uint64_t> after = Snapshot(16);
      if (kind == ChainKind::kUnmappedStore) {
        // The dequeue ran before the refusal (the MN's repair moves the
        // claimed page back); its element is still in place.
        const uint64_t slot = (before[0] - odrp_->ring_addr()) / kElementBytes;
        EXPECT_EQ(after[0], odrp_->layout().Advance(before[0], 1));
        EXPECT_EQ(ch->ClaimedPosition(LastSlot(*ch)), before[0]);
        EXPECT_EQ(ch->DequeuedElement(LastSlot(*ch)), odrp_->LoadElement(slot));
        after[0] = before[0];
      }
      EXPECT_EQ(after, before) << "ring, head, tail and TTs unchanged";
      EXPECT_EQ(MnPage(odrp_->page_addr(0)), p0);
      EXPECT_EQ(MnPage(odrp_->page_addr(1)), p1);
      Fresh(c, kind);
    }
  }
  ASSERT_TRUE(RawLoad(c, TtEntryAddr(base, kPageBytes)).ok());
  std::vector<uint8_t> got(kPageBytes);
  c->node->memory().Read(c->dst(), got.data(), kPageBytes);
  EXPECT_EQ(got, Pattern(121));
  EXPECT_EQ(MnPage(odrp_->LoadTtEntry(1, 0)), Pattern(122));
}

// Issue 13 ordering audit, Load: R0 sends the page L0's entry read put in
// its WQE, and only L's ENABLE of R (whose index comes from the CN) releases
// it. The attacker raises that index by one instance (in request 1, for
// instance 3), so R also runs instance 0's R0 before request 4 exists: it
// sent the page request 0 loaded, which the attacker has since freed and the
// victim now holds. L0 (Z) of every instance zeroes the previous instance's
// page address, so that R0 faults instead.
TEST_F(OdrpChainTest, ARaisedEnableNeverMakesLoadSendAStalePage) {
  Build(/*pages=*/8, /*cns=*/2);
  Cn* a = cn(0);
  Cn* v = cn(1);
  ASSERT_TRUE(Store(a, 0, Pattern(70)).ok());
  ASSERT_TRUE(Store(a, kPageBytes, Pattern(71)).ok());
  const uint64_t freed = odrp_->LoadTtEntry(0, 0);
  std::vector<uint8_t> got;
  ASSERT_TRUE(Load(a, 0, &got).ok());  // request 0 (instance 0) loads `freed`
  ASSERT_TRUE(Invalidate(a, 0).ok());
  uint64_t at = ~0ull;
  for (uint64_t i = 0; i < 8 && at == ~0ull; ++i) {
    ASSERT_TRUE(Store(v, i * kPageBytes, Pattern(72)).ok()) << i;
    if (odrp_->LoadTtEntry(1, i * kPageBytes) == freed) at = i * kPageBytes;
  }
  ASSERT_NE(at, ~0ull) << "the victim holds the freed page";
  const uint32_t r_wrs = a->load_chain->geometry().r_wrs;
  a->load->set_tamper([r_wrs](uint64_t n, std::vector<uint64_t>* vals) {
    if (n == 1) (*vals)[4] += r_wrs;  // C4's ENABLE R of instance 3: one instance more
  });
  RecvWr extra;  // a RECV for the early R0's WRITE_WITH_IMM
  extra.wr_id = 99;
  ASSERT_EQ(a->load->qp()->PostRecv(extra), 0);
  for (int i = 1; i <= 3; ++i) {
    const Status st = Load(a, kPageBytes, &got);
    // Request 3's reply may be flushed: the early R0 faults R while R0(3)
    // is still unacknowledged.
    if (i == 3 && !st.ok()) break;
    ASSERT_TRUE(st.ok()) << "request " << i << ": " << st.ToString();
    ASSERT_EQ(got, Pattern(71)) << "request " << i;
  }
  sim().Run();
  a->node->memory().Read(a->dst(), got.data(), kPageBytes);
  EXPECT_NE(got, Pattern(72)) << "the victim's page leaked through a stale R0";
  EXPECT_TRUE(a->load_chain->Faulted()) << "the early R0 found 0 and faulted";
  EXPECT_EQ(MnPage(freed), Pattern(72));
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_);
}

// Issue 13 ordering audit, every chain: a CN opens every gate of C after C0
// in the re-arm values it sends (each ENABLE of L covers the whole instance,
// each WAIT on lcq waits for nothing), so L runs each instance straight
// through and only the RNIC's FENCEs order a step after the earlier step
// whose result it consumes (U2, U4, CHK, U5; M2; V3, V4, V6, V7). Without
// them a step reads the WQE field or scratch word an earlier lap left: a
// store maps or writes a stale page, an invalidation frees one.
TEST_F(OdrpChainTest, OpenGatesNeverMakeAStepConsumeAStaleResult) {
  Build(4);
  Cn* c = cn(0);
  auto open_gates = [](uint32_t c_values) {
    return [c_values](uint64_t, std::vector<uint64_t>* v) {
      for (uint32_t i = 1; i + 1 < c_values; ++i) {
        (*v)[i] = i % 2 == 1 ? (*v)[c_values - 1] : 0;  // ENABLE L: all; WAIT lcq: none
      }
    };
  };
  c->store->set_tamper(open_gates(6));  // C0..C5
  // Mapped Store: its L gates only (C1 ENABLE L_w: the whole instance; C2,
  // C4 WAIT lcq_w: nothing). C4 also gates R0 (which the ticket T guards:
  // AnEarlyNotificationOfAPipelinedMappedStoreNeverReportsAStoreThatNeverRan).
  c->mstore->set_tamper([](uint64_t, std::vector<uint64_t>* v) {
    (*v)[1] = (*v)[3];
    (*v)[2] = 0;
  });
  c->inval->set_tamper(open_gates(8));  // C0..C7
  const MnLayout& lay = odrp_->layout();
  constexpr uint32_t kCycles = 3 * kSlots + 1;
  for (uint32_t i = 0; i < kCycles; ++i) {
    SCOPED_TRACE("cycle " + std::to_string(i));
    const uint64_t swap = (i % 3) * kPageBytes;
    const uint64_t page = odrp_->page_addr(i % 4);
    ASSERT_TRUE(Store(c, swap, Pattern(400 + i)).ok());
    ASSERT_EQ(odrp_->LoadTtEntry(0, swap), page);
    ASSERT_EQ(odrp_->LoadHead(), lay.Advance(odrp_->ring_addr(), i + 1));
    ASSERT_EQ(MnPage(page), Pattern(400 + i));
    ASSERT_TRUE(Store(c, swap, Pattern(500 + i)).ok());
    ASSERT_EQ(MnPage(page), Pattern(500 + i));
    std::vector<uint8_t> got;
    ASSERT_TRUE(Load(c, swap, &got).ok());
    ASSERT_EQ(got, Pattern(500 + i));
    ASSERT_TRUE(Invalidate(c, swap).ok());
    ASSERT_EQ(odrp_->LoadTtEntry(0, swap), 0u);
    ASSERT_EQ(odrp_->LoadTail(), lay.Advance(odrp_->ring_addr(), 4 + i + 1));
    ASSERT_EQ(odrp_->LoadElement(i % 4), page);
  }
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(odrp_->LoadElement(i), odrp_->page_addr(i));
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_after_setup_);
}

// Issue 13 ordering audit, the cross-QP case that was open: Unmapped Store
// (A1/A2) and Invalidate (V1/V2) hand the CN's one tt_addr to the step that
// checks the entry and to the step that writes it. A CN that lowers C0's
// count (a re-arm value) lets L run the instance before its request lands,
// and a raw SEND can land at any moment: if it lands between the two copies,
// the entry checked is not the entry written. The test writes ta[s] as that
// RECV would, at every 20 ns over the instance's first 3 us (the sim would
// deliver a SEND there; the write hits the window exactly), with a
// misaligned tt_addr that the check would refuse:
//   Unmapped Store: checked the CN's old (aligned) entry, wrote the page
//     address across entries k and k+1 (a forged entry, as in
//     AMisalignedUnmappedStoreCannotForgeAnEntryToAnotherCnsPage).
//   Invalidate: checked and freed the page of the old entry, zeroed bytes of
//     entries k, k+1: the old entry stays mapped to a page back in the free
//     queue, which the next store hands to another CN.
class LateRequestBed : public OdrpChainTest {
 public:
  void TestBody() override {}
  // Request `m` (m % kSlots == 1) of `kind` runs with C0 lowered; at `delta`
  // after its first L step started, ta[1] becomes `late`. Returns what the
  // instance did to entries k and k+1, and whether the old entry's page was
  // freed while still mapped.
  struct Outcome {
    bool forged = false;            // entries k, k+1 no longer both 0
    bool freed_but_mapped = false;  // Invalidate: the old entry's page in the queue
    bool faulted = false;           // the check refused the late (misaligned) copy
  };
  Outcome Run(ChainKind kind, Ps delta) {
    Build(/*pages=*/16);
    Cn* c = cn(0);
    constexpr uint32_t kM = 5;  // slot 1: ta[1] holds request 1's tt_addr
    ChainClient* cl = kind == ChainKind::kUnmappedStore ? c->store.get() : c->inval.get();
    Chain* ch = kind == ChainKind::kUnmappedStore ? c->store_chain.get() : c->inval_chain.get();
    // Request kM - 2 carries the re-arm values of the instance serving kM.
    cl->set_tamper([](uint64_t n, std::vector<uint64_t>* v) {
      if (n == kM - 2) (*v)[0] -= 1;  // C0: WAIT for request kM - 1, not kM
    });
    // Requests 0..4 of the chain, the last one last (instance kM starts right
    // after it); request 1 names swap page 1, mapped at the end.
    for (uint32_t i = 0; i < kM; ++i) EXPECT_TRUE(Store(c, i * kPageBytes, Pattern(i)).ok()) << i;
    if (kind == ChainKind::kInvalidate) {
      for (uint32_t i = 0; i < kM; ++i) {
        EXPECT_TRUE(Invalidate(c, i * kPageBytes).ok()) << i;
        if (i == 1) {
          EXPECT_TRUE(Store(c, i * kPageBytes, Pattern(i)).ok());
        }
      }
    }
    const uint64_t page1 = odrp_->LoadTtEntry(0, 1 * kPageBytes);
    // The ticket T of instance 2 zeroed ta[1] (an early instance reads 0 and
    // is refused whatever lands): put request 1's tt_addr back, so that this
    // test checks the snapshot S alone.
    uint8_t be[8];  // as the RECV scattered it (the header is big-endian)
    fabric::StoreBe64(be, TtEntryAddr(c->table->tt_base, kPageBytes));
    mn_->memory().Write(ch->request_tt_addr(1), be, 8);
    const uint64_t k = 9, late = c->table->tt_base + k * kTtEntryBytes + 1;
    const uint64_t first = uint64_t{kM} * ch->geometry().l_wrs;
    rt().Spawn([](Runtime& rt, Chain* ch, Node* mn, uint64_t first, Ps delta, uint64_t at,
                  uint64_t late) -> Task<void> {
      while (ch->worker_qp()->counters().send_wrs_executed <= first) {
        co_await rt.SleepFor(5 * kPsPerNs);
      }
      co_await rt.SleepFor(delta);
      mn->memory().StoreU64(at, late);
    }(rt(), ch, mn_, first, delta, ch->request_tt_addr(1), late));
    sim().Run();
    Outcome o;
    o.faulted = ch->worker_qp()->state() == QpState::kErr;
    o.forged = odrp_->LoadTtEntry(0, k * kPageBytes) != 0 ||
               odrp_->LoadTtEntry(0, (k + 1) * kPageBytes) != 0;
    if (kind == ChainKind::kInvalidate && odrp_->LoadTtEntry(0, 1 * kPageBytes) == page1) {
      for (uint64_t i = 0; i < odrp_->layout().ring_slots; ++i) {
        o.freed_but_mapped |= odrp_->LoadElement(i) == page1;
      }
    }
    return o;
  }
};

TEST(OdrpChainRace, ALateRequestNeverSplitsTheEntryCheckedFromTheEntryWritten) {
  for (const ChainKind kind : {ChainKind::kUnmappedStore, ChainKind::kInvalidate}) {
    int forged = 0, freed_but_mapped = 0, faulted = 0, trials = 0;
    for (Ps delta = 0; delta < 3 * kPsPerUs; delta += 20 * kPsPerNs, ++trials) {
      LateRequestBed bed;
      const LateRequestBed::Outcome o = bed.Run(kind, delta);
      forged += o.forged;
      freed_but_mapped += o.freed_but_mapped;
      faulted += o.faulted;
    }
    std::cout << ChainKindName(kind) << ": " << trials << " landing times, " << faulted
              << " refused (the late copy reached the check), " << forged << " forged entries, "
              << freed_but_mapped << " pages freed while mapped\n";
    EXPECT_EQ(forged, 0) << ChainKindName(kind);
    EXPECT_EQ(freed_but_mapped, 0) << ChainKindName(kind);
    EXPECT_GT(faulted, 0) << "no landing time reached the instance's copies";
    EXPECT_LT(faulted, trials) << "every landing time reached the copies";
  }
}

// The invariant behind it, which the sweep above cannot break in the sim
// (the simulated loopback responder serves A1's and A2's reads of ta[s] at
// one instant: bisected to 1 ps, the outcome flips from "both copies late"
// to "both early" with nothing between; a real RNIC's two DMA reads can
// straddle a RECV's scatter): the word the CN's RECV writes is read once
// per instance, into a snapshot that every consumer copies from.
TEST_F(OdrpChainTest, TheCnsTtAddrIsReadOncePerInstance) {
  Build(4);
  for (Chain* ch : {cn(0)->store_chain.get(), cn(0)->inval_chain.get()}) {
    const ChainGeometry& g = ch->geometry();
    for (uint32_t s = 0; s < g.slots; ++s) {
      int reads = 0;
      for (uint64_t i = uint64_t{s} * g.l_wrs; i < uint64_t{s + 1} * g.l_wrs; ++i) {
        uint8_t be[8];
        mn_->memory().Read(ch->worker_qp()->SendWqeAddr(i) + WqeLayout::kRemoteAddr, be, 8);
        reads += fabric::LoadBe64(be) == ch->request_tt_addr(s);
      }
      EXPECT_EQ(reads, 1) << ChainKindName(g.kind) << " instance " << s;
    }
  }
}

// Issue 13: several Loads are inside ONE chain at once. W = 4 lanes behind
// one R; 16 loads issued together keep 4 in flight (the client's window) and
// take well under 16 one-at-a-time loads; every page arrives intact.
TEST_F(OdrpChainTest, OnePipelinedLoadChainCarriesWRequestsAtOnce) {
  Build(/*pages=*/16);
  Cn* c = cn(0);
  for (uint32_t k = 0; k < 4; ++k) ASSERT_TRUE(Store(c, k * kPageBytes, Pattern(130 + k)).ok());
  auto p = MakePipe(c, 4);
  const Ps cpu_armed = mn_->cpu().busy_ps();
  std::vector<uint64_t> tts;
  for (uint32_t i = 0; i < 16; ++i)
    tts.push_back(TtEntryAddr(c->table->tt_base, i % 4 * kPageBytes));
  Ps one = 0, all = 0;
  for (const Status& st : PipeLoads(p.get(), {tts[0]}, &one)) ASSERT_TRUE(st.ok()) << st.ToString();
  for (const Status& st : PipeLoads(p.get(), tts, &all)) ASSERT_TRUE(st.ok()) << st.ToString();
  for (uint32_t k = 0; k < 4; ++k) {
    std::vector<uint8_t> got(kPageBytes);
    c->node->memory().Read(p->dst(k), got.data(), kPageBytes);
    EXPECT_EQ(got, Pattern(130 + k)) << "destination " << k;
  }
  std::cout << "[ odrp ] one load " << PsToUs(one) << " us; 16 loads through one 4-lane chain "
            << PsToUs(all) << " us\n";
  EXPECT_EQ(p->client->max_in_flight(), 4u) << "the window was full";
  EXPECT_LT(all, 16 * one / 2) << "16 overlapped loads take far less than 16 loads";
  EXPECT_EQ(p->chain->requests_taken(), 17u);
  EXPECT_FALSE(p->chain->Faulted());
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_armed) << "no MN CPU after Arm";
}

// Issue 13 attack on a pipelined chain (W = 2, 8 instances). Lap 0 loads
// the attacker's page A into every R0 (requests 0..7); A is freed and the
// victim gets its page. In lap 1 the attacker's request 8 carries, for
// instance 13 (another instance of the same chain, in flight with 8..15),
// an ENABLE of L_1 that skips instance 13's ticket and L1, a WAIT on lcq_1
// already met and a gate WAIT of 0: C_1 releases R0(13) before any L step
// of its own ran. R0(13)'s page address is the one lap 0 left unless the
// ticket zeroed it; with the ticket R0 faults, without it the victim's page
// reaches the attacker as request 13's reply (fails with T a NOP).
TEST_F(OdrpChainTest, AnEarlyInstanceOfAPipelinedLoadChainNeverSendsAStalePage) {
  Build(/*pages=*/8, /*cns=*/2);
  Cn* a = cn(0);
  Cn* v = cn(1);
  ASSERT_TRUE(Store(a, 0, Pattern(80)).ok());
  ASSERT_TRUE(Store(a, kPageBytes, Pattern(81)).ok());
  const uint64_t freed = odrp_->LoadTtEntry(0, 0);
  auto p = MakePipe(a, 2);
  const uint64_t ta = TtEntryAddr(a->table->tt_base, 0),
                 tb = TtEntryAddr(a->table->tt_base, kPageBytes);
  for (const Status& st : PipeLoads(p.get(), std::vector<uint64_t>(8, ta))) ASSERT_TRUE(st.ok());
  ASSERT_TRUE(Invalidate(a, 0).ok());
  uint64_t at = ~0ull;
  for (uint64_t i = 0; i < 8 && at == ~0ull; ++i) {
    ASSERT_TRUE(Store(v, i * kPageBytes, Pattern(82)).ok()) << i;
    if (odrp_->LoadTtEntry(1, i * kPageBytes) == freed) at = i * kPageBytes;
  }
  ASSERT_NE(at, ~0ull) << "the victim holds the freed page";
  const ChainGeometry g = p->chain->geometry();
  p->client->set_tamper([g](uint64_t n, std::vector<uint64_t>* vals) {
    if (n != 8) return;
    const uint64_t j = (n + g.slots - g.rearm_lag()) / g.lanes;  // instance 13, lane 1
    (*vals)[1] = j * g.l_wrs;  // C1: ENABLE L_1 stops before T(13), L1(13)
    (*vals)[2] = j;            // C2: WAIT lcq_1 already met
    (*vals)[3] = 0;            // C3: the gate open
  });
  std::vector<std::vector<uint8_t>> pages;
  const std::vector<Status> st = PipeLoads(p.get(), std::vector<uint64_t>(8, tb), nullptr, &pages);
  sim().Run();
  for (size_t i = 0; i < st.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(8 + i));
    if (st[i].ok()) {
      EXPECT_NE(pages[i], Pattern(82)) << "the victim's page leaked through a stale R0";
      EXPECT_EQ(pages[i], Pattern(81));
    }
    if (i + 8 >= 13) {
      EXPECT_FALSE(st[i].ok()) << "R0(13) faulted: no reply from it on";
    }
  }
  EXPECT_TRUE(p->chain->Faulted());
  EXPECT_EQ(MnPage(freed), Pattern(82));
  EXPECT_EQ(p->chain->RefusedRequest(), 13u) << "the MN names the request that faulted";
}

}  // namespace
}  // namespace dmb::systems::odrp

namespace dmb::systems::odrp {
namespace {

// Issue 13: several Mapped Stores are inside ONE chain at once. W = 4 lanes
// behind one R; 16 stores (each its own page and source) issued together
// keep 4 in flight and take well under 16 one-at-a-time stores; every reply
// comes only once its page holds the bytes.
TEST_F(OdrpChainTest, OnePipelinedMappedStoreChainCarriesWStoresAtOnce) {
  Build(/*pages=*/32);
  Cn* c = cn(0);
  for (uint32_t k = 0; k < 16; ++k) ASSERT_TRUE(Store(c, k * kPageBytes, Pattern(k)).ok());
  auto p = MakeStorePipe(c, 4);
  const Ps cpu_armed = mn_->cpu().busy_ps();
  Ps one = 0, all = 0;
  for (const StoreResult& r : PipeStores(c, p.get(), {0}, {200}, &one)) {
    ASSERT_TRUE(r.in_place) << r.st.ToString();
  }
  std::vector<uint64_t> pages;
  std::vector<uint32_t> seeds;
  for (uint32_t k = 0; k < 16; ++k) pages.push_back(k), seeds.push_back(300 + k);
  const std::vector<StoreResult> rs = PipeStores(c, p.get(), pages, seeds, &all);
  for (uint32_t k = 0; k < 16; ++k) {
    EXPECT_TRUE(rs[k].in_place) << "store " << k << ": " << rs[k].st.ToString();
    EXPECT_EQ(MnPage(odrp_->LoadTtEntry(0, k * kPageBytes)), Pattern(300 + k)) << "page " << k;
  }
  std::cout << "[ odrp ] one mapped store " << PsToUs(one)
            << " us; 16 stores through one 4-lane chain " << PsToUs(all) << " us\n";
  EXPECT_EQ(p->client->max_in_flight(), 4u) << "the window was full";
  EXPECT_LT(all, 16 * one / 2) << "16 overlapped stores take far less than 16 stores";
  EXPECT_EQ(p->chain->requests_taken(), 17u);
  EXPECT_FALSE(p->chain->Faulted());
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_armed) << "no MN CPU after Arm";
}

// The ticket T on Mapped Store (W = 2, 8 instances). Lap 0 (requests 0..7)
// leaves a valid source in every R0 (M3). In lap 1 the CN's request 8
// carries, for instance 13, C_1 values that enable none of 13's L steps and
// wait for nothing: C_1 releases R up to R0(13) (an ENABLE enables every WQE
// below its index, so R0(12) too) before M1..M3(13) ran, maybe before
// M3(12). Their sources are what lap 0's M3 left unless T zeroed them; with
// T, the first early R0 faults (the attacker's own requests fail); without
// it (T a NOP) the CN gets request 13's reply while its page still holds
// the old bytes.
TEST_F(OdrpChainTest, AnEarlyNotificationOfAPipelinedMappedStoreNeverReportsAStoreThatNeverRan) {
  Build(/*pages=*/32);
  Cn* c = cn(0);
  for (uint32_t k = 0; k < 16; ++k) ASSERT_TRUE(Store(c, k * kPageBytes, Pattern(k)).ok());
  auto p = MakeStorePipe(c, 2);
  std::vector<uint64_t> pages;
  std::vector<uint32_t> seeds;
  for (uint32_t k = 0; k < 8; ++k) pages.push_back(k), seeds.push_back(100 + k);
  for (const StoreResult& r : PipeStores(c, p.get(), pages, seeds)) ASSERT_TRUE(r.in_place);
  const ChainGeometry g = p->chain->geometry();
  p->client->set_tamper([g](uint64_t n, std::vector<uint64_t>* v) {
    if (n != 8) return;
    const uint64_t j = (n + g.slots - g.rearm_lag()) / g.lanes;  // instance 13, lane 1
    (*v)[1] = (*v)[3] = j * g.l_wrs;  // C1, C3: ENABLE L_1 stops before T(13)
    (*v)[2] = (*v)[4] = 3 * j;        // C2, C4: WAIT lcq_1 already met
    (*v)[5] = 0;                      // C5: the gate open
  });
  for (uint32_t k = 0; k < 8; ++k) pages[k] = 8 + k, seeds[k] = 200 + k;
  const std::vector<StoreResult> rs = PipeStores(c, p.get(), pages, seeds);
  for (const StoreResult& r : rs) {
    SCOPED_TRACE("request " + std::to_string(r.n));
    if (r.st.ok()) {
      EXPECT_TRUE(r.in_place) << "notified of a store whose page does not hold the bytes";
    }
    if (r.n >= 13) {
      EXPECT_FALSE(r.st.ok()) << "an early R0 faulted: no reply from R0(13) on";
    }
  }
  EXPECT_TRUE(p->chain->Faulted());
  EXPECT_EQ(p->chain->cn_qp()->state(), QpState::kErr) << "an early R0 found 0 and faulted";
}

// The ticket's second field (M1's tt_addr). On an RNIC that flushes every
// outstanding RECV when R goes to ERR, the flush completions pass C_w's WAIT
// on rcq, so a lane whose next C_w instance R1 had enabled would run that
// instance once more without a request: M1 on the tt_addr, M2 on the page
// the same slot staged a lap before, over newer bytes. T zeroes the lane's
// previous instance's M1 tt_addr (an M1 at 0 is refused). The sim flushes
// RECVs only up to those the MN CPU posted (the first lap), so the replay
// itself cannot run here; the test checks the invariant (fails with T's
// second SGE removed): after lap 0 every instance but each lane's last holds
// tt_addr 0. Then a store after the first lap that names an unmapped entry
// is refused: its M2 faults, C_w's WAIT for M3 holds R, and the MN names it
// by the gate's count; nothing else changed.
TEST_F(OdrpChainTest, AFinishedPipelinedStoreLeavesNoTtAddrToReplay) {
  Build(/*pages=*/32);
  Cn* c = cn(0);
  for (uint32_t k = 0; k < 8; ++k) ASSERT_TRUE(Store(c, k * kPageBytes, Pattern(k)).ok());
  auto p = MakeStorePipe(c, 2);
  std::vector<uint64_t> pages;
  std::vector<uint32_t> seeds;
  for (uint32_t k = 0; k < 8; ++k) pages.push_back(k), seeds.push_back(100 + k);
  for (const StoreResult& r : PipeStores(c, p.get(), pages, seeds)) ASSERT_TRUE(r.in_place);
  const ChainGeometry& g = p->chain->geometry();
  for (uint32_t s = 0; s < g.slots; ++s) {
    const uint64_t m1 =
        p->chain->lane_worker_qp(s % g.lanes)->SendWqeAddr(s / g.lanes * g.l_wrs + 1);
    uint8_t be[8];
    mn_->memory().Read(m1 + WqeLayout::kRemoteAddr, be, 8);
    const uint64_t tt = s + g.lanes >= g.slots ? TtEntryAddr(c->table->tt_base, s * kPageBytes) : 0;
    EXPECT_EQ(fabric::LoadBe64(be), tt) << "instance " << s << "'s M1 tt_addr";
  }
  for (uint32_t k = 0; k < 8; ++k) ASSERT_TRUE(Store(c, k * kPageBytes, Pattern(300 + k)).ok());
  const std::vector<StoreResult> rs = PipeStores(c, p.get(), {20}, {400});  // unmapped
  EXPECT_FALSE(rs[0].st.ok());
  sim().Run();
  EXPECT_TRUE(p->chain->Faulted());
  EXPECT_EQ(p->chain->RefusedRequest(), 8u);
  for (uint32_t k = 0; k < 8; ++k) {
    EXPECT_EQ(MnPage(odrp_->LoadTtEntry(0, k * kPageBytes)), Pattern(300 + k))
        << "page " << k << ": a stale store replayed";
  }
  EXPECT_EQ(odrp_->LoadTtEntry(0, 20 * kPageBytes), 0u);
}

// Several stores in flight through one chain (W = 4), one naming an
// unmapped entry: the MN names that request as the one refused; every other
// either got its reply with its page in place or was flushed behind the
// fault, and succeeds when retried on a fresh chain. No entry or queue
// element changed.
TEST_F(OdrpChainTest, ARefusedStoreAmongStoresInFlightIsTheOnlyOneRefused) {
  Build(/*pages=*/32);
  Cn* c = cn(0);
  for (uint32_t k = 0; k < 8; ++k) ASSERT_TRUE(Store(c, k * kPageBytes, Pattern(k)).ok());
  const std::vector<uint64_t> before = Snapshot();
  auto p = MakeStorePipe(c, 4);
  std::vector<uint64_t> pages = {0, 1, 2, 3, 4, 20, 5, 6, 7};
  std::vector<uint32_t> seeds;
  for (uint32_t k = 0; k < pages.size(); ++k) seeds.push_back(500 + k);
  const std::vector<StoreResult> rs = PipeStores(c, p.get(), pages, seeds);
  EXPECT_TRUE(p->chain->Faulted());
  const uint64_t refused = p->chain->RefusedRequest();
  std::vector<uint64_t> retry_pages;
  std::vector<uint32_t> retry_seeds;
  for (size_t i = 0; i < rs.size(); ++i) {
    SCOPED_TRACE("store " + std::to_string(i) + " (request " + std::to_string(rs[i].n) + ")");
    if (pages[i] == 20) {
      EXPECT_FALSE(rs[i].st.ok());
      EXPECT_EQ(refused, rs[i].n) << "the MN names the refused store";
      continue;
    }
    EXPECT_NE(refused, rs[i].n);
    if (rs[i].st.ok()) {
      EXPECT_TRUE(rs[i].in_place);
    } else {
      retry_pages.push_back(pages[i]), retry_seeds.push_back(seeds[i]);
    }
  }
  EXPECT_EQ(Snapshot(), before) << "no TT entry, head, tail or element changed";
  auto fresh = MakeStorePipe(c, 4);
  for (const StoreResult& r : PipeStores(c, fresh.get(), retry_pages, retry_seeds)) {
    EXPECT_TRUE(r.in_place) << r.st.ToString();
  }
  for (size_t i = 0; i < pages.size(); ++i) {
    if (pages[i] != 20) {
      EXPECT_EQ(MnPage(odrp_->LoadTtEntry(0, pages[i] * kPageBytes)), Pattern(seeds[i])) << i;
    }
  }
}

// Issue 13: several Unmapped Stores (allocations) and several Invalidates
// (frees) are inside ONE chain each at once. W = 4 lanes behind one R; 16
// requests issued together keep 4 in flight and take well under 16
// one-at-a-time requests (checked to fail: with MakeStorePipe(c, 1, ...)
// both ratios are about 1); every reply comes only once its effect is in
// place (a store's page holds the bytes; a free's entry is 0 and its page
// back in the ring), and no page is handed out twice.
TEST_F(OdrpChainTest, PipelinedUnmappedStoreAndInvalidateChainsCarryWRequestsAtOnce) {
  Build(/*pages=*/64);
  Cn* c = cn(0);
  auto st = MakeStorePipe(c, 4, ChainKind::kUnmappedStore);
  auto fr = MakeStorePipe(c, 4, ChainKind::kInvalidate);
  const Ps cpu_armed = mn_->cpu().busy_ps();
  Ps one = 0, all = 0, one_free = 0, all_free = 0;
  ASSERT_TRUE(PipeStores(c, st.get(), {0}, {600}, &one)[0].in_place);
  std::vector<uint64_t> pages;
  std::vector<uint32_t> seeds;
  for (uint32_t k = 1; k <= 16; ++k) pages.push_back(k), seeds.push_back(600 + k);
  const std::vector<StoreResult> rs = PipeStores(c, st.get(), pages, seeds, &all);
  std::set<uint64_t> mapped;
  for (uint32_t k = 0; k < 16; ++k) {
    EXPECT_TRUE(rs[k].in_place) << "store " << k << ": " << rs[k].st.ToString();
  }
  for (uint32_t k = 0; k <= 16; ++k) mapped.insert(odrp_->LoadTtEntry(0, k * kPageBytes));
  EXPECT_EQ(mapped.size(), 17u) << "17 different pages";
  EXPECT_EQ(odrp_->LoadHead(), odrp_->layout().Advance(odrp_->ring_addr(), 17));
  EXPECT_EQ(st->client->max_in_flight(), 4u) << "the window was full";
  ASSERT_TRUE(PipeFrees(c, fr.get(), {0}, &one_free)[0].in_place);
  for (const StoreResult& r : PipeFrees(c, fr.get(), pages, &all_free)) {
    EXPECT_TRUE(r.in_place) << "free " << r.n << ": " << r.st.ToString();
  }
  EXPECT_EQ(odrp_->LoadTail(), odrp_->layout().Advance(odrp_->ring_addr(), 64 + 17));
  EXPECT_EQ(fr->client->max_in_flight(), 4u);
  std::cout << "[ odrp ] one unmapped store " << PsToUs(one) << " us, 16 through one 4-lane chain "
            << PsToUs(all) << " us; one invalidate " << PsToUs(one_free) << " us, 16 "
            << PsToUs(all_free) << " us\n";
  EXPECT_LT(all, 16 * one / 2) << "16 overlapped stores take far less than 16 stores";
  EXPECT_LT(all_free, 16 * one_free / 2) << "16 overlapped frees take far less than 16 frees";
  EXPECT_FALSE(st->chain->Faulted());
  EXPECT_FALSE(fr->chain->Faulted());
  EXPECT_EQ(mn_->cpu().busy_ps(), cpu_armed) << "no MN CPU after Arm";
}

// The ticket T on Unmapped Store (W = 2, 8 instances), as on Mapped Store:
// request 8 carries, for instance 13, C_1 values that enable none of 13's
// L steps and wait for nothing, so C_1 releases R0(13) before U1..N(13)
// ran. R0's source is what lap 0's N left unless T zeroed it; with T the
// early R0 faults, without it (checked: T a NOP in TicketWr) the CN gets
// request 13's reply while no page was even allocated for it.
TEST_F(OdrpChainTest, AnEarlyNotificationOfAPipelinedUnmappedStoreNeverReportsAStoreThatNeverRan) {
  Build(/*pages=*/32);
  Cn* c = cn(0);
  auto p = MakeStorePipe(c, 2, ChainKind::kUnmappedStore);
  std::vector<uint64_t> pages;
  std::vector<uint32_t> seeds;
  for (uint32_t k = 0; k < 8; ++k) pages.push_back(k), seeds.push_back(100 + k);
  for (const StoreResult& r : PipeStores(c, p.get(), pages, seeds)) ASSERT_TRUE(r.in_place);
  const ChainGeometry g = p->chain->geometry();
  p->client->set_tamper([g](uint64_t n, std::vector<uint64_t>* v) {
    if (n != 8) return;
    const uint64_t j = (n + g.slots - g.rearm_lag()) / g.lanes;  // instance 13, lane 1
    for (int i : {1, 3, 5}) (*v)[i] = j * g.l_wrs;               // ENABLE L_1: nothing of 13
    for (int i : {2, 4, 6}) (*v)[i] = j * g.l_signaled();        // WAIT lcq_1: already met
    (*v)[7] = 0;                                                 // WAIT gcq: open
  });
  for (uint32_t k = 0; k < 8; ++k) pages[k] = 8 + k, seeds[k] = 200 + k;
  for (const StoreResult& r : PipeStores(c, p.get(), pages, seeds)) {
    SCOPED_TRACE("request " + std::to_string(r.n));
    if (r.st.ok()) {
      EXPECT_TRUE(r.in_place) << "notified of an allocation that did not store the bytes";
    }
    if (r.n >= 13) {
      EXPECT_FALSE(r.st.ok()) << "an early R0 faulted: no reply from R0(13) on";
    }
  }
  EXPECT_TRUE(p->chain->Faulted());
  EXPECT_EQ(p->chain->cn_qp()->state(), QpState::kErr) << "an early R0 found 0 and faulted";
}

// A misaligned tt_addr among allocations in flight (W = 4): CHK refuses it
// (checked to fail with CHK's FETCH_ADD made an 8-byte READ: entries 9 and
// 10 then hold a forged page address), nothing is forged, every other
// request either got its reply with its page in place or was flushed behind
// the fault (its page then mapped with its bytes, or not at all), no page
// is mapped twice, and the refused lane's last instance shows the claim the
// MN's repair moves back (element still in its slot).
TEST_F(OdrpChainTest, AMisalignedUnmappedStoreAmongStoresInFlightCannotForgeAnEntry) {
  Build(/*pages=*/32, /*cns=*/2);
  Cn* c = cn(0);
  ASSERT_TRUE(Store(cn(1), 0, Pattern(50)).ok());
  const uint64_t victim = odrp_->LoadTtEntry(1, 0);
  auto p = MakeStorePipe(c, 4, ChainKind::kUnmappedStore);
  const std::vector<uint64_t> pages = {0, 1, 2, 3, 4, kForgePage, 5, 6, 7};
  std::vector<uint32_t> seeds;
  for (uint32_t k = 0; k < pages.size(); ++k) seeds.push_back(500 + k);
  const std::vector<StoreResult> rs = PipeStores(c, p.get(), pages, seeds);
  sim().Run();
  EXPECT_TRUE(p->chain->Faulted());
  EXPECT_EQ(odrp_->LoadTtEntry(0, 9 * kPageBytes), 0u) << "forged entry 9";
  EXPECT_EQ(odrp_->LoadTtEntry(0, 10 * kPageBytes), 0u) << "forged entry 10";
  EXPECT_EQ(odrp_->LoadTtEntry(1, 0), victim);
  EXPECT_EQ(MnPage(victim), Pattern(50));
  std::set<uint64_t> mapped = {victim};
  for (size_t i = 0; i < rs.size(); ++i) {
    SCOPED_TRACE("store " + std::to_string(i) + " (request " + std::to_string(rs[i].n) + ")");
    if (pages[i] == kForgePage) {
      EXPECT_FALSE(rs[i].st.ok());
      const Chain::LaneProgress lp = p->chain->LastInstance(rs[i].n % 4);
      EXPECT_EQ(lp.steps, kStoreChk + 1) << "refused at CHK";
      const uint64_t pos = p->chain->ClaimedPosition(lp.slot);
      EXPECT_EQ(p->chain->DequeuedElement(lp.slot), ElementAt(pos)) << "still in its slot";
      EXPECT_NE(ElementAt(pos), 0u);
      continue;
    }
    if (rs[i].st.ok()) {
      EXPECT_TRUE(rs[i].in_place);
    }
    const uint64_t page = odrp_->LoadTtEntry(0, pages[i] * kPageBytes);
    if (page == 0) continue;
    EXPECT_EQ(MnPage(page), Pattern(seeds[i])) << "mapped, so its bytes are there";
    EXPECT_TRUE(mapped.insert(page).second) << "page mapped twice";
  }
}

}  // namespace
}  // namespace dmb::systems::odrp
