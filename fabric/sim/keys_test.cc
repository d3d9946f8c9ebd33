#include "fabric/sim/keys.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "fabric/verbs.h"

namespace dmb::sim {
namespace {

TEST(KeyTable, IndexZeroIsReservedAndUnknownIndexesAreNotFound) {
  KeyTable t;
  EXPECT_EQ(t.Find(0), nullptr);
  EXPECT_EQ(t.Find(1), nullptr);
  EXPECT_EQ(t.Add("mn"), 1u);
  EXPECT_EQ(t.Add("mn"), 2u);
  EXPECT_NE(t.Find(2), nullptr);
  EXPECT_EQ(t.Find(0), nullptr);
  EXPECT_EQ(t.Find(3), nullptr);
  EXPECT_EQ(t.Find(UINT32_MAX), nullptr);
}

TEST(KeyTable, OnlyAnAllocatedWindowIsLive) {
  KeyTable t;
  KeyTable::Entry* e = t.Find(t.Add("mn"));
  EXPECT_EQ(e->mr, nullptr);
  EXPECT_EQ(e->LiveMw(), nullptr);  // a fresh entry holds nothing
  e->mw.index_ = 1;                 // what AllocMw does
  EXPECT_EQ(e->LiveMw(), &e->mw);
  e->mw.allocated_ = false;  // what DeallocMw does
  EXPECT_EQ(e->LiveMw(), nullptr);
}

TEST(KeyTable, EntriesStayPutAndAlignedAsTheTableGrows) {
  KeyTable t;
  const uint32_t first = t.Add("mn");
  KeyTable::Entry* e = t.Find(first);
  e->mw.index_ = first;
  e->mw.addr_ = 0x1234;
  for (int i = 0; i < 10000; ++i) {
    KeyTable::Entry* n = t.Find(t.Add("mn"));
    ASSERT_EQ(reinterpret_cast<uintptr_t>(n) % 64, 0u);
    ASSERT_EQ(n->LiveMw(), nullptr);
  }
  EXPECT_EQ(t.count(), 10002u);
  EXPECT_EQ(t.Find(first), e);
  EXPECT_EQ(e->mw.addr_, 0x1234u);
  EXPECT_EQ(e->LiveMw(), &e->mw);
}

TEST(KeyTable, RefusesAnIndexPastItsLimitNamingTheNode) {
  KeyTable t(/*max_keys=*/4);
  for (int i = 0; i < 3; ++i) t.Add("mn0");
  try {
    t.Add("mn0");
    FAIL() << "max_keys 4 holds indexes 1..3 only";
  } catch (const fabric::VerbsError& e) {
    EXPECT_NE(std::string(e.what()).find("mn0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(t.count(), 4u);
  EXPECT_EQ(t.Find(4), nullptr);
}

}  // namespace
}  // namespace dmb::sim
