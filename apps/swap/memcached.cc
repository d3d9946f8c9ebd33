#include "apps/swap/memcached.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "apps/swap/traced_array.h"

namespace dmb::apps::swap {
namespace {

constexpr uint32_t kNil = ~0u;
constexpr uint32_t kChunkBits = 14;  // chunks per page <= 1 MB / 96 B < 2^14
constexpr uint32_t kMaxKeyBytes = 250;

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer: the key hash
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

double EtcKeySizeQuantile(double u) {
  const double loc = 30.7984, scale = 8.20449, shape = 0.078688;
  return loc + scale / shape * (std::pow(-std::log(u), -shape) - 1);
}

double EtcValueSizeQuantile(double u) {
  const double scale = 214.476, shape = 0.348238;
  return scale / shape * (std::pow(1 - u, -shape) - 1);
}

uint32_t EtcKeySize(Rng& rng) {
  double k = std::round(EtcKeySizeQuantile(rng.Uniform()));
  return static_cast<uint32_t>(std::clamp(k, 1.0, double{kMaxKeyBytes}));
}

uint32_t EtcValueSize(Rng& rng, uint32_t key_bytes, uint64_t item_max) {
  double cap = static_cast<double>(item_max - kMemcachedHeaderBytes - key_bytes);
  return static_cast<uint32_t>(std::min(std::round(EtcValueSizeQuantile(rng.Uniform())), cap));
}

// Rejection-inversion (Hormann & Derflinger 1996, as in Apache Commons RNG)
// over ranks 1..n with h(x) = x^-s and H its integral.
namespace {

double Log1pOverX(double x) {
  return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - x / 4));
}
double Expm1OverX(double x) {
  return std::fabs(x) > 1e-8 ? std::expm1(x) / x : 1 + x / 2 * (1 + x / 3 * (1 + x / 4));
}

}  // namespace

ZipfSampler::ZipfSampler(uint64_t n, double s) : n_(n), s_(s) {
  h_x1_ = HIntegral(1.5) - 1;
  h_n_ = HIntegral(static_cast<double>(n) + 0.5);
  cut_ = 2 - HIntegralInverse(HIntegral(2.5) - H(2));
}

double ZipfSampler::H(double x) const { return std::exp(-s_ * std::log(x)); }

double ZipfSampler::HIntegral(double x) const {
  double lx = std::log(x);
  return Expm1OverX((1 - s_) * lx) * lx;
}

double ZipfSampler::HIntegralInverse(double x) const {
  double t = std::max(-1.0, x * (1 - s_));
  return std::exp(Log1pOverX(t) * x);
}

uint64_t ZipfSampler::Sample(Rng& rng) const {
  while (true) {
    double u = h_n_ + rng.Uniform() * (h_x1_ - h_n_);
    double x = HIntegralInverse(u);
    double k = std::clamp(std::floor(x + 0.5), 1.0, static_cast<double>(n_));
    if (k - x <= cut_ || u >= HIntegral(k + 0.5) - H(k)) return static_cast<uint64_t>(k) - 1;
  }
}

namespace {

struct ItemMeta {
  uint32_t key = kNil, h_next = kNil, prev = kNil, next = kNil;
  uint32_t value = 0, nkey = 0;
};

struct SlabPage {
  uint64_t addr;
  uint32_t cls;
  std::vector<ItemMeta> items;  // per chunk
};

struct SlabClass {
  uint32_t size = 0, perslab = 0, pages = 0;
  std::vector<uint32_t> free;  // LIFO of chunk handles: page << kChunkBits | chunk
  uint32_t head = kNil, tail = kNil;
};

// memcached's slabs_init with factor 1.25 and item_size_max = page_bytes.
std::vector<SlabClass> SlabClasses(uint64_t page_bytes) {
  std::vector<SlabClass> v;
  uint32_t size = kMemcachedHeaderBytes + 48;
  while (size <= page_bytes / 1.25) {
    size = (size + 7) / 8 * 8;
    v.push_back({.size = size, .perslab = static_cast<uint32_t>(page_bytes / size)});
    size = static_cast<uint32_t>(size * 1.25);
  }
  v.push_back({.size = static_cast<uint32_t>(page_bytes), .perslab = 1});
  return v;
}

}  // namespace

// Chunk handles name items; buckets hold handle + 1 (0 is NULL).
struct MemcachedState {
  TraceRecorder& rec;
  uint64_t limit;
  uint64_t page_bytes;
  std::vector<SlabClass> classes = SlabClasses(page_bytes);
  std::vector<SlabPage> pages;
  std::unique_ptr<TracedArray<uint64_t>> table;
  MemcachedStats stats;

  SlabClass& Class(uint32_t h) { return classes[pages[h >> kChunkBits].cls]; }
  ItemMeta& Meta(uint32_t h) { return pages[h >> kChunkBits].items[h & ((1u << kChunkBits) - 1)]; }
  uint64_t Addr(uint32_t h) {
    return pages[h >> kChunkBits].addr + uint64_t{h & ((1u << kChunkBits) - 1)} * Class(h).size;
  }
  void Header(uint32_t h, bool write) { rec.Touch(0, Addr(h), kMemcachedHeaderBytes, write); }
  void HeaderAndKey(uint32_t h) {
    rec.Touch(0, Addr(h), kMemcachedHeaderBytes + Meta(h).nkey, false);
  }
  uint64_t Bucket(uint32_t key, uint64_t buckets) { return Mix(key) & (buckets - 1); }
  uint32_t Chain(uint64_t b) { return static_cast<uint32_t>(table->Get(b)) - 1; }
  void SetChain(uint64_t b, uint32_t h) { table->Set(b, uint64_t{h} + 1); }
};

namespace {

// assoc_find: the key's chain, comparing keys; *pred is the item before.
uint32_t Find(MemcachedState& s, uint32_t key, uint32_t* pred = nullptr) {
  uint32_t prev = kNil;
  for (uint32_t h = s.Chain(s.Bucket(key, s.table->size())); h != kNil; h = s.Meta(h).h_next) {
    s.HeaderAndKey(h);
    if (s.Meta(h).key == key) {
      if (pred != nullptr) *pred = prev;
      return h;
    }
    prev = h;
  }
  return kNil;
}

void HashInsert(MemcachedState& s, uint32_t h) {
  uint64_t b = s.Bucket(s.Meta(h).key, s.table->size());
  s.Meta(h).h_next = s.Chain(b);
  s.Header(h, true);
  s.SetChain(b, h);
}

void HashDelete(MemcachedState& s, uint32_t h) {
  uint32_t pred = kNil;
  Find(s, s.Meta(h).key, &pred);
  if (pred == kNil) {
    s.SetChain(s.Bucket(s.Meta(h).key, s.table->size()), s.Meta(h).h_next);
  } else {
    s.Meta(pred).h_next = s.Meta(h).h_next;
    s.Header(pred, true);
  }
}

void LruLink(MemcachedState& s, uint32_t h) {
  SlabClass& c = s.Class(h);
  s.Meta(h).prev = kNil;
  s.Meta(h).next = c.head;
  s.Header(h, true);
  if (c.head != kNil) {
    s.Meta(c.head).prev = h;
    s.Header(c.head, true);
  } else {
    c.tail = h;
  }
  c.head = h;
}

void LruUnlink(MemcachedState& s, uint32_t h) {
  SlabClass& c = s.Class(h);
  ItemMeta& m = s.Meta(h);
  if (m.prev != kNil) {
    s.Meta(m.prev).next = m.next;
    s.Header(m.prev, true);
  } else {
    c.head = m.next;
  }
  if (m.next != kNil) {
    s.Meta(m.next).prev = m.prev;
    s.Header(m.next, true);
  } else {
    c.tail = m.prev;
  }
  m.prev = m.next = kNil;
  s.Header(h, true);
}

// do_slabs_newslab: false past the limit unless the class has no page yet.
bool NewPage(MemcachedState& s, uint32_t cls) {
  SlabClass& c = s.classes[cls];
  if ((s.pages.size() + 1) * s.page_bytes > s.limit && c.pages > 0) return false;
  uint64_t addr = s.rec.Map(s.page_bytes);
  s.rec.Touch(0, addr, s.page_bytes, true);  // memset, then split into the free list
  uint32_t page = static_cast<uint32_t>(s.pages.size());
  s.pages.push_back({addr, cls, std::vector<ItemMeta>(c.perslab)});
  for (uint32_t i = 0; i < c.perslab; ++i) c.free.push_back(page << kChunkBits | i);
  ++c.pages;
  ++s.stats.slab_pages;
  return true;
}

// do_item_alloc: a free chunk, a new page's, or the LRU tail's evicted one.
uint32_t Alloc(MemcachedState& s, uint32_t cls, bool may_evict) {
  SlabClass& c = s.classes[cls];
  if (c.free.empty() && !NewPage(s, cls)) {
    if (!may_evict || c.tail == kNil) return kNil;
    uint32_t h = c.tail;
    s.Header(h, false);  // refcount and age checks
    HashDelete(s, h);
    LruUnlink(s, h);
    --s.stats.items;
    ++s.stats.evictions;
    return h;
  }
  uint32_t h = c.free.back();  // do_slabs_alloc: pop the head of the slots list
  c.free.pop_back();
  s.Header(h, true);
  if (!c.free.empty()) s.Header(c.free.back(), true);
  return h;
}

// do_slabs_free: push the chunk onto its class's slots list.
void Free(MemcachedState& s, uint32_t h) {
  SlabClass& c = s.Class(h);
  if (!c.free.empty()) s.Header(c.free.back(), true);
  c.free.push_back(h);
  s.Meta(h) = ItemMeta{};
  s.Header(h, true);
}

// assoc_expand + the maintenance thread's migration, bucket by bucket.
void Expand(MemcachedState& s) {
  const uint64_t old_size = s.table->size(), size = 2 * old_size;
  auto bigger = std::make_unique<TracedArray<uint64_t>>(s.rec, size);
  for (uint64_t b = 0; b < old_size; ++b) {
    for (uint32_t h = s.Chain(b); h != kNil;) {
      s.HeaderAndKey(h);  // rehash reads the key
      uint32_t next = s.Meta(h).h_next;
      uint64_t nb = s.Bucket(s.Meta(h).key, size);
      s.Meta(h).h_next = static_cast<uint32_t>(bigger->Get(nb)) - 1;
      s.Header(h, true);
      bigger->Set(nb, uint64_t{h} + 1);
      h = next;
    }
  }
  s.table = std::move(bigger);  // frees the old table
  s.stats.buckets = size;
}

uint32_t ClassFor(const MemcachedState& s, uint64_t bytes) {
  auto it = std::lower_bound(s.classes.begin(), s.classes.end(), bytes,
                             [](const SlabClass& c, uint64_t b) { return c.size < b; });
  return static_cast<uint32_t>(std::min<size_t>(it - s.classes.begin(), s.classes.size() - 1));
}

}  // namespace

MemcachedServer::MemcachedServer(TraceRecorder& rec, uint64_t memory_bytes, uint32_t hashpower,
                                 uint64_t slab_page_bytes)
    : s_(new MemcachedState{.rec = rec, .limit = memory_bytes, .page_bytes = slab_page_bytes}) {
  s_->table = std::make_unique<TracedArray<uint64_t>>(rec, uint64_t{1} << hashpower);
  s_->stats.buckets = s_->table->size();
}

MemcachedServer::~MemcachedServer() {
  s_->table.reset();
  for (const SlabPage& p : s_->pages) s_->rec.Unmap(p.addr, s_->page_bytes);
}

std::optional<uint64_t> MemcachedServer::Get(uint32_t key) {
  MemcachedState& s = *s_;
  ++s.stats.gets;
  uint32_t h = Find(s, key);
  if (h == kNil) return std::nullopt;
  ++s.stats.hits;
  s.Header(h, true);  // refcount, ITEM_FETCHED, access time
  if (s.Class(h).head != h) {
    LruUnlink(s, h);
    LruLink(s, h);
  }
  const ItemMeta& m = s.Meta(h);
  s.rec.Touch(0, s.Addr(h) + kMemcachedHeaderBytes + m.nkey, m.value, false);  // sendmsg
  return s.Addr(h);
}

bool MemcachedServer::Set(uint32_t key, uint32_t key_bytes, uint32_t value_bytes, bool may_evict) {
  MemcachedState& s = *s_;
  uint64_t bytes = uint64_t{kMemcachedHeaderBytes} + key_bytes + value_bytes;
  uint32_t h = Alloc(s, ClassFor(s, bytes), may_evict);
  if (h == kNil) return false;
  ++s.stats.sets;
  s.Meta(h) = {.key = key, .value = value_bytes, .nkey = key_bytes};
  s.rec.Touch(0, s.Addr(h), bytes, true);  // header, key, value read off the socket
  uint32_t old = Find(s, key);
  if (old != kNil) {  // do_item_replace
    s.Header(old, true);
    HashDelete(s, old);
    LruUnlink(s, old);
    Free(s, old);
    --s.stats.items;
  }
  HashInsert(s, h);
  LruLink(s, h);
  ++s.stats.items;
  if (s.stats.items > s.table->size() * 3 / 2) Expand(s);
  return true;
}

const MemcachedStats& MemcachedServer::stats() const { return s_->stats; }

namespace {

// Loads keys 0, 1, ... until the slab memory is full; their key sizes.
std::vector<uint8_t> Load(MemcachedServer& server, const MemcachedParams& p, Rng& rng) {
  std::vector<uint8_t> key_bytes;
  while (key_bytes.size() < kNil) {
    uint32_t k = EtcKeySize(rng);
    uint32_t v = EtcValueSize(rng, k, p.slab_page_bytes);
    if (!server.Set(static_cast<uint32_t>(key_bytes.size()), k, v, false)) break;
    key_bytes.push_back(static_cast<uint8_t>(k));
  }
  return key_bytes;
}

void Serve(MemcachedServer& server, const MemcachedParams& p, const std::vector<uint8_t>& key_bytes,
           Rng& rng) {
  const uint64_t n = key_bytes.size();
  std::vector<uint32_t> key_of_rank(n);
  for (uint64_t i = 0; i < n; ++i) key_of_rank[i] = static_cast<uint32_t>(i);
  for (uint64_t i = n - 1; i > 0; --i) std::swap(key_of_rank[i], key_of_rank[rng.Below(i + 1)]);
  std::vector<Rng> clients;
  for (uint32_t c = 0; c < p.clients; ++c) clients.emplace_back(rng.Next());
  ZipfSampler zipf(n, p.skew);
  const uint64_t ops = static_cast<uint64_t>(std::llround(p.ops_per_item * n));
  for (uint64_t i = 0; i < ops; ++i) {
    Rng& c = clients[i % p.clients];
    bool set = c.Below(p.gets_per_set + 1) == 0;
    uint32_t key = key_of_rank[zipf.Sample(c)];
    if (set) {
      server.Set(key, key_bytes[key], EtcValueSize(c, key_bytes[key], p.slab_page_bytes));
    } else {
      server.Get(key);
    }
  }
}

}  // namespace

MemcachedResult RunMemcached(const MemcachedParams& p, const RecorderOptions& ro) {
  TraceRecorder rec(ro);
  Rng rng(p.seed);
  MemcachedResult r;
  {
    MemcachedServer server(rec, p.memory_bytes, p.hashpower, p.slab_page_bytes);
    std::vector<uint8_t> key_bytes = Load(server, p, rng);
    r.loaded = key_bytes.size();
    if (r.loaded > 0) Serve(server, p, key_bytes, rng);
    r.run = server.stats();
    r.run.sets -= r.loaded;
  }
  r.trace = rec.Finish();
  return r;
}

}  // namespace dmb::apps::swap
