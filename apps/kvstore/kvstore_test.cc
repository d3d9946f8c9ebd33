// KV store on the simulated cluster, against every approach that can host it.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "apps/kvstore/kv_client.h"
#include "harness/testbed.h"
#include "tests/suite_util.h"

namespace dmb::apps::kv {
namespace {

using harness::Testbed;
using harness::TestbedSpec;
using systems::Code;
using systems::Status;

struct Host {
  std::string name;
  std::string system;
  std::map<std::string, std::string> knobs;
};

void PrintTo(const Host& h, std::ostream* os) { *os << h.name; }

std::vector<Host> Hosts() {
  return {{"static_mr", "static_mr", {{"granularity", "256KB"}}},
          {"fine_mr", "fine_mr", {{"granularity", "16KB"}}},
          {"rpc_mw", "rpc_mw", {}},
          {"rpc_mw_type2", "rpc_mw", {{"mw_type", "2"}}},
          {"finemem", "finemem", {}},
          {"onesided_mw", "onesided_mw", {}}};
}

TestbedSpec Spec(const Host& s, int cns, uint64_t pool = 64ull << 20) {
  TestbedSpec t;
  t.system = s.system;
  t.knobs = s.knobs;
  t.cns = cns;
  t.pool_bytes = pool;
  return t;
}

// `n` distinct keys "<prefix><i>" that fall into `partition`.
std::vector<std::string> KeysFor(const KvOptions& o, uint32_t partition, size_t n,
                                 const std::string& prefix) {
  std::vector<std::string> out;
  for (uint64_t i = 0; out.size() < n; ++i) {
    std::string k = prefix + std::to_string(i);
    if (KvClient::PartitionOf(k, o) == partition) out.push_back(std::move(k));
  }
  return out;
}

std::string Value(uint64_t tag, size_t len) {
  std::string v(len, '\0');
  for (size_t i = 0; i < len; ++i) v[i] = static_cast<char>(suite::PatternByte(tag, i));
  return v;
}

// 1 B .. ~3 KB: every class of 4 KB chunks (header + key + value <= 4 KB).
size_t ValueLen(uint64_t i) {
  static const size_t kLens[] = {1, 7, 40, 100, 500, 1000, 1500, 2900, 3000, 64};
  return kLens[i % std::size(kLens)];
}

class KvHosts : public ::testing::TestWithParam<Host> {};

TEST_P(KvHosts, RoundTripUpdateDeleteAndNoPhantoms) {
  Testbed tb(Spec(GetParam(), 1));
  KvOptions o;
  o.buckets_per_partition = 256;
  int checked = 0;
  tb.Run([](Testbed& tb, KvOptions o, int* checked) -> Task<void> {
    KvClient kv(tb.mm(), o, 0, 0);
    CO_ASSERT_OK(co_await kv.Open());
    if (kv.commit_mode() == CommitMode::kWrite) {
      EXPECT_FALSE(kv.commit_note().empty());
      std::cout << "[ " << tb.mm().system() << " ] " << kv.commit_note() << "\n";
    }
    const auto keys = KeysFor(o, 0, 200, "key-");
    std::map<std::string, std::string> model;
    for (size_t i = 0; i < keys.size(); ++i) {
      model[keys[i]] = Value(i, ValueLen(i));
      CO_ASSERT_OK(co_await kv.Put(keys[i], model[keys[i]]));
    }
    EXPECT_EQ(kv.stats().inserts, keys.size());
    // Update every third key with another size (another class, mostly).
    for (size_t i = 0; i < keys.size(); i += 3) {
      model[keys[i]] = Value(1000 + i, ValueLen(i + 5));
      CO_ASSERT_OK(co_await kv.Put(keys[i], model[keys[i]]));
    }
    EXPECT_EQ(kv.stats().updates, (keys.size() + 2) / 3);
    // Delete every fifth.
    for (size_t i = 0; i < keys.size(); i += 5) {
      auto d = co_await kv.Delete(keys[i]);
      CO_ASSERT_OK(d.status);
      EXPECT_TRUE(d.value) << keys[i];
      model.erase(keys[i]);
      auto again = co_await kv.Delete(keys[i]);
      CO_ASSERT_OK(again.status);
      EXPECT_FALSE(again.value) << keys[i] << " deleted twice";
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      auto g = co_await kv.Get(keys[i]);
      CO_ASSERT_OK(g.status);
      auto it = model.find(keys[i]);
      if (it == model.end()) {
        EXPECT_FALSE(g.value.has_value()) << keys[i] << " was deleted";
      } else {
        CO_ASSERT_TRUE(g.value.has_value());
        EXPECT_TRUE(*g.value == it->second) << keys[i] << ": " << g.value->size() << " B read, "
                                            << it->second.size() << " B written";
      }
      ++*checked;
    }
    for (const auto& k : KeysFor(o, 0, 100, "never-")) {
      auto g = co_await kv.Get(k);
      CO_ASSERT_OK(g.status);
      EXPECT_FALSE(g.value.has_value()) << "phantom " << k;
    }
    EXPECT_EQ(kv.alloc_stats().blocks_in_use, model.size());
    CO_ASSERT_OK(co_await kv.Close());
  }(tb, o, &checked));
  EXPECT_EQ(checked, 200);
  EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, 0u);
}

TEST_P(KvHosts, ConcurrentClientsOnSeveralCnsKeepTheirPartitions) {
  constexpr int kCns = 2, kThreads = 4, kKeys = 40, kOps = 160;
  Testbed tb(Spec(GetParam(), kCns));
  KvOptions o;
  o.num_cns = kCns;
  o.threads_per_cn = kThreads;
  o.buckets_per_partition = 64;
  int verified = 0;
  auto client = [](Testbed& tb, KvOptions o, uint32_t cn, uint32_t t, int* verified) -> Task<void> {
    KvClient kv(tb.mm(), o, cn, t);
    CO_ASSERT_OK(co_await kv.Open());
    const auto keys = KeysFor(o, kv.partition(), kKeys, "c");
    std::mt19937_64 rng(kv.partition() + 1);
    std::map<std::string, std::string> model;
    for (int i = 0; i < kOps; ++i) {
      const std::string& k = keys[rng() % keys.size()];
      if (rng() % 4 == 0) {
        auto d = co_await kv.Delete(k);
        CO_ASSERT_OK(d.status);
        EXPECT_EQ(d.value, model.erase(k) == 1) << k;
      } else {
        std::string v = Value(kv.partition() * 100000 + i, ValueLen(rng()));
        CO_ASSERT_OK(co_await kv.Put(k, v));
        model[k] = std::move(v);
      }
    }
    for (const auto& k : keys) {
      auto g = co_await kv.Get(k);
      CO_ASSERT_OK(g.status);
      auto it = model.find(k);
      EXPECT_EQ(g.value.has_value(), it != model.end()) << k;
      if (g.value && it != model.end()) {
        EXPECT_TRUE(*g.value == it->second) << k;
      }
      ++*verified;
    }
    EXPECT_EQ(kv.alloc_stats().blocks_in_use, model.size());
    CO_ASSERT_OK(co_await kv.Close());
  };
  std::vector<Task<void>> tasks;
  for (uint32_t cn = 0; cn < kCns; ++cn) {
    for (uint32_t t = 0; t < kThreads; ++t) tasks.push_back(client(tb, o, cn, t, &verified));
  }
  tb.RunAll(std::move(tasks));
  EXPECT_EQ(verified, kCns * kThreads * kKeys);
  EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, 0u);
}

// Deleting every key returns every value chunk; what stays in use at the MN
// is exactly the index; Close returns that too.
TEST_P(KvHosts, DeletingEverythingReturnsEveryValueChunk) {
  Testbed tb(Spec(GetParam(), 1));
  KvOptions o;
  o.buckets_per_partition = 512;
  tb.Run([](Testbed& tb, KvOptions o) -> Task<void> {
    KvClient kv(tb.mm(), o, 0, 0);
    CO_ASSERT_OK(co_await kv.Open());
    const size_t index_chunks = kv.index_chunks();
    const uint64_t g = tb.mm().caps().granularity_bytes;
    EXPECT_EQ(index_chunks, (512 * kBucketBytes + g - 1) / g);
    EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, index_chunks);
    const auto keys = KeysFor(o, 0, 300, "d");
    for (size_t i = 0; i < keys.size(); ++i) {
      CO_ASSERT_OK(co_await kv.Put(keys[i], Value(i, ValueLen(i))));
    }
    const SlabStats full = kv.alloc_stats();
    EXPECT_GT(full.chunks_held, 0u);
    EXPECT_EQ(full.blocks_in_use, keys.size());
    EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, index_chunks + full.chunks_held);
    for (const auto& k : keys) {
      auto d = co_await kv.Delete(k);
      CO_ASSERT_OK(d.status);
      EXPECT_TRUE(d.value);
    }
    const SlabStats& s = kv.alloc_stats();
    EXPECT_EQ(s.blocks_in_use, 0u);
    EXPECT_EQ(s.chunks_held, 0u);
    EXPECT_EQ(s.chunks_returned, s.chunks_allocated);
    EXPECT_EQ(s.peak_chunks_held, full.chunks_held);
    EXPECT_EQ(s.peak_bytes_held(), full.chunks_held * g);
    EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, index_chunks);
    CO_ASSERT_OK(co_await kv.Close());
    EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, 0u);
  }(tb, o));
}

INSTANTIATE_TEST_SUITE_P(Approaches, KvHosts, ::testing::ValuesIn(Hosts()),
                         [](const auto& info) { return info.param.name; });

// Every host's chunks grant remote atomics (MRs and windows registered with
// REMOTE_ATOMIC), so every one commits slots by CAS when asked to; a host
// that refused them would fail Open here with kUnsupported, naming why.
TEST(KvStore, CommitsByCasWhereChunksAcceptAtomics) {
  for (const Host& s : Hosts()) {
    Testbed tb(Spec(s, 1));
    tb.Run([](Testbed& tb) -> Task<void> {
      KvOptions o;
      o.commit = CommitPolicy::kCas;
      KvClient kv(tb.mm(), o, 0, 0);
      CO_ASSERT_OK(co_await kv.Open());
      EXPECT_EQ(kv.commit_mode(), CommitMode::kCas) << tb.mm().system();
      CO_ASSERT_OK(co_await kv.Put("a", "1"));
      CO_ASSERT_OK(co_await kv.Put("a", "22"));
      auto g = co_await kv.Get("a");
      CO_ASSERT_OK(g.status);
      EXPECT_EQ(g.value.value_or(""), "22");
      EXPECT_EQ(kv.stats().commit_retries, 0u);
      CO_ASSERT_OK(co_await kv.Close());
    }(tb));
  }
}

TEST(KvStore, OdrpCannotHostTheStore) {
  TestbedSpec t;
  t.system = "odrp";
  t.pool_bytes = 16ull << 20;
  Testbed tb(t);
  tb.Run([](Testbed& tb) -> Task<void> {
    KvClient kv(tb.mm(), KvOptions{}, 0, 0);
    Status st = co_await kv.Open();
    EXPECT_EQ(st.code(), Code::kUnsupported) << st.ToString();
    EXPECT_NE(st.message().find("odrp: fixed 4"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("needs variable-size I/O and CAS"), std::string::npos)
        << st.ToString();
    // Nothing usable afterwards, and nothing allocated.
    Status put = co_await kv.Put("k", "v");
    EXPECT_EQ(put.code(), Code::kInvalidArgument) << put.ToString();
  }(tb));
  EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, 0u);
}

TEST(KvStore, KeysOfAnotherPartitionAreRefused) {
  Testbed tb(Spec(Hosts()[0], 2));
  tb.Run([](Testbed& tb) -> Task<void> {
    KvOptions o;
    o.num_cns = 2;
    o.threads_per_cn = 2;
    KvClient kv(tb.mm(), o, 0, 0);
    CO_ASSERT_OK(co_await kv.Open());
    const std::string foreign = KeysFor(o, 3, 1, "f")[0];
    Status put = co_await kv.Put(foreign, "v");
    EXPECT_EQ(put.code(), Code::kInvalidArgument);
    EXPECT_NE(put.message().find("key belongs to CN 1 thread 1"), std::string::npos)
        << put.ToString();
    auto g = co_await kv.Get(foreign);
    EXPECT_EQ(g.status.code(), Code::kInvalidArgument);
    auto d = co_await kv.Delete(foreign);
    EXPECT_EQ(d.status.code(), Code::kInvalidArgument);
    EXPECT_EQ(kv.stats().inserts, 0u);
    EXPECT_EQ(kv.alloc_stats().chunks_allocated, 0u);
    CO_ASSERT_OK(co_await kv.Close());
  }(tb));
}

TEST(KvStore, SizeLimitsAreReported) {
  Testbed tb(Spec(Hosts()[2], 1));  // rpc_mw, 4 KB chunks
  tb.Run([](Testbed& tb) -> Task<void> {
    {
      KvOptions o;
      o.size_classes = {64, 8192};
      KvClient kv(tb.mm(), o, 0, 0);
      Status st = co_await kv.Open();
      EXPECT_EQ(st.code(), Code::kUnsupported) << st.ToString();
      EXPECT_NE(st.message().find("larger than the approach's chunk"), std::string::npos)
          << st.ToString();
    }
    KvClient kv(tb.mm(), KvOptions{}, 0, 0);
    CO_ASSERT_OK(co_await kv.Open());
    Status big = co_await kv.Put("big", std::string(4096, 'x'));
    EXPECT_EQ(big.code(), Code::kUnsupported) << big.ToString();
    EXPECT_NE(big.message().find("largest size class is 4KB"), std::string::npos) << big.ToString();
    CO_ASSERT_OK(co_await kv.Put("fits", std::string(4096 - 8 - 4, 'y')));
    auto g = co_await kv.Get("fits");
    CO_ASSERT_OK(g.status);
    EXPECT_EQ(g.value.value_or("").size(), 4084u);
    CO_ASSERT_OK(co_await kv.Close());
  }(tb));
}

TEST(KvStore, FullIndexPartitionIsOutOfMemoryWithoutLeaking) {
  Testbed tb(Spec(Hosts()[0], 1));
  tb.Run([](Testbed& tb) -> Task<void> {
    KvOptions o;
    o.buckets_per_partition = 1;  // both candidates are bucket 0: 8 slots
    KvClient kv(tb.mm(), o, 0, 0);
    CO_ASSERT_OK(co_await kv.Open());
    const auto keys = KeysFor(o, 0, 9, "full");
    for (int i = 0; i < 8; ++i) CO_ASSERT_OK(co_await kv.Put(keys[i], "v" + std::to_string(i)));
    Status st = co_await kv.Put(keys[8], "v8");
    EXPECT_EQ(st.code(), Code::kOutOfMemory) << st.ToString();
    EXPECT_NE(st.message().find("buckets_per_partition"), std::string::npos) << st.ToString();
    EXPECT_EQ(kv.alloc_stats().blocks_in_use, 8u);
    // An update still fits (same slot), and every key reads back.
    CO_ASSERT_OK(co_await kv.Put(keys[3], "updated"));
    for (int i = 0; i < 8; ++i) {
      auto g = co_await kv.Get(keys[i]);
      CO_ASSERT_OK(g.status);
      EXPECT_EQ(g.value.value_or("?"), i == 3 ? "updated" : "v" + std::to_string(i));
    }
    auto g = co_await kv.Get(keys[8]);
    CO_ASSERT_OK(g.status);
    EXPECT_FALSE(g.value.has_value());
    CO_ASSERT_OK(co_await kv.Close());
  }(tb));
}

// Values live in MN memory: overwriting the stored bytes there (as another
// party with the memory could) is what the next Get returns.
TEST(KvStore, GetReadsTheBytesInMnMemory) {
  Testbed tb(Spec(Hosts()[0], 1));
  tb.Run([](Testbed& tb) -> Task<void> {
    KvClient kv(tb.mm(), KvOptions{}, 0, 0);
    CO_ASSERT_OK(co_await kv.Open());
    const std::string value = "needle-" + Value(7, 200);
    CO_ASSERT_OK(co_await kv.Put("k", value));
    // Find the value's bytes in the MN pool and change its first byte.
    auto& mem = tb.mn_node()->memory();
    const uint64_t size = mem.size_bytes();
    std::vector<char> buf(1 << 20);
    uint64_t found = 0;
    for (uint64_t a = 0; a < size && !found; a += buf.size() - 256) {
      const uint64_t n = std::min<uint64_t>(buf.size(), size - a);
      mem.Read(a, buf.data(), n);
      std::string_view hay(buf.data(), n);
      const size_t pos = hay.find(value);
      if (pos != std::string_view::npos) found = a + pos;
    }
    CO_ASSERT_TRUE(found != 0);
    const char patched = 'N';
    mem.Write(found, &patched, 1);
    auto g = co_await kv.Get("k");
    CO_ASSERT_OK(g.status);
    CO_ASSERT_TRUE(g.value.has_value());
    EXPECT_EQ(g.value->substr(0, 7), "Needle-");
    CO_ASSERT_OK(co_await kv.Close());
  }(tb));
}

}  // namespace
}  // namespace dmb::apps::kv
