#include "apps/kvstore/key_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "apps/kvstore/key_gen.h"
#include "apps/kvstore/mt64.h"
#include "apps/kvstore/race_index.h"

namespace dmb::apps::kv {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Drawn(const KeyStream& s, uint64_t count) {
  KeyGen gen(s.partitions, s.partition, s.key_bytes, Mt64(s.rng_seed));
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < count; ++i) keys.push_back(gen.Next());
  return keys;
}

class KeyCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("key_cache_test." + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> Get(uint64_t count, bool* hit) {
    return FirstKeys(dir_, stream_, count, hit);
  }
  std::string FileBytes() {
    std::ifstream in(dir_ / stream_.FileName(), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void WriteFile(const std::string& bytes) {
    std::ofstream(dir_ / stream_.FileName(), std::ios::binary | std::ios::trunc) << bytes;
  }

  fs::path dir_;
  KeyStream stream_{24, 5, 16, 0x1234abcdull};
};

TEST_F(KeyCacheTest, AMissDrawsAndStoresAHitReadsTheSameKeys) {
  const std::vector<std::string> want = Drawn(stream_, 500);
  bool hit = true;
  EXPECT_EQ(Get(500, &hit), want);
  EXPECT_FALSE(hit);
  EXPECT_TRUE(fs::exists(dir_ / stream_.FileName()));
  EXPECT_EQ(Get(500, &hit), want);
  EXPECT_TRUE(hit);
  // A prefix comes from the same file.
  EXPECT_EQ(Get(200, &hit), std::vector<std::string>(want.begin(), want.begin() + 200));
  EXPECT_TRUE(hit);
}

TEST_F(KeyCacheTest, MoreKeysThanTheFileHoldsAreDrawnAndStored) {
  bool hit = true;
  (void)Get(100, &hit);
  EXPECT_EQ(Get(300, &hit), Drawn(stream_, 300));
  EXPECT_FALSE(hit);
  EXPECT_EQ(Get(300, &hit), Drawn(stream_, 300));
  EXPECT_TRUE(hit);
}

TEST_F(KeyCacheTest, ADamagedOrTruncatedFileIsDrawnAgain) {
  const std::vector<std::string> want = Drawn(stream_, 100);
  (void)Get(100, nullptr);
  const std::string good = FileBytes();
  bool hit = true;

  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 1;  // a byte of the last key
  WriteFile(flipped);
  EXPECT_EQ(Get(100, &hit), want);
  EXPECT_FALSE(hit) << "the body's hash did not catch a flipped byte";
  EXPECT_EQ(FileBytes(), good) << "the damaged file was not rewritten";

  WriteFile(good.substr(0, good.size() - 16));
  EXPECT_EQ(Get(100, &hit), want);
  EXPECT_FALSE(hit) << "a truncated file was used";

  WriteFile(good + "x");
  EXPECT_EQ(Get(100, &hit), want);
  EXPECT_FALSE(hit) << "a file with trailing bytes was used";
}

TEST_F(KeyCacheTest, AnotherStreamsFileIsNotUsed) {
  const KeyStream other{24, 6, 16, 0x1234abcdull};
  (void)FirstKeys(dir_, other, 100, nullptr);
  std::ifstream in(dir_ / other.FileName(), std::ios::binary);
  WriteFile(std::string(std::istreambuf_iterator<char>(in), {}));  // copied to our name
  bool hit = true;
  EXPECT_EQ(Get(100, &hit), Drawn(stream_, 100));
  EXPECT_FALSE(hit);
}

// A file that is whole and names this stream but holds other keys (the key
// definition changed since it was written) fails the fresh draw's check.
TEST_F(KeyCacheTest, KeysThatAFreshDrawDoesNotStartWithAreNotUsed) {
  std::vector<std::string> wrong = Drawn(stream_, 50);
  wrong[0][0] = wrong[0][0] == 'a' ? 'b' : 'a';
  std::string body;
  for (const std::string& k : wrong) body += k;
  WriteFile(stream_.KeyLine(wrong.size(), Fnv1a(body)) + body);
  bool hit = true;
  EXPECT_EQ(Get(50, &hit), Drawn(stream_, 50));
  EXPECT_FALSE(hit);
}

TEST_F(KeyCacheTest, ADirectoryThatCannotBeWrittenCostsOnlyTheCache) {
  fs::create_directories(dir_.parent_path());
  std::ofstream(dir_) << "a file where the directory should be";
  bool hit = true;
  EXPECT_EQ(Get(40, &hit), Drawn(stream_, 40));
  EXPECT_FALSE(hit);
  fs::remove(dir_);
}

// Three streams' files of 100 keys each in a directory that keeps two: the
// least recently used goes when a third is stored, and a hit is a use.
TEST_F(KeyCacheTest, TheLeastRecentlyUsedFilesGoWhenTheDirectoryIsFull) {
  const KeyStream a{24, 1, 16, 7}, b{24, 2, 16, 7}, c{24, 3, 16, 7};
  const uint64_t unlimited = ~uint64_t{0};
  (void)FirstKeys(dir_, a, 100, nullptr, unlimited);
  (void)FirstKeys(dir_, b, 100, nullptr, unlimited);
  const uint64_t file_bytes = fs::file_size(dir_ / a.FileName());
  ASSERT_EQ(fs::file_size(dir_ / b.FileName()), file_bytes);
  const auto t0 = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(dir_ / a.FileName(), t0);  // a: older
  fs::last_write_time(dir_ / b.FileName(), t0 + std::chrono::minutes(1));
  bool hit = false;
  EXPECT_EQ(FirstKeys(dir_, a, 100, &hit, unlimited), Drawn(a, 100));
  EXPECT_TRUE(hit) << "a hit makes a the most recently used";
  EXPECT_EQ(FirstKeys(dir_, c, 100, &hit, 2 * file_bytes), Drawn(c, 100));
  EXPECT_FALSE(hit);
  EXPECT_TRUE(fs::exists(dir_ / a.FileName()));
  EXPECT_FALSE(fs::exists(dir_ / b.FileName())) << "b was the least recently used";
  EXPECT_TRUE(fs::exists(dir_ / c.FileName())) << "the file just stored is kept";
  // Files that are not key files are not the cache's to remove; a limit
  // below one file keeps the file just stored alone.
  std::ofstream(dir_ / "notes.txt") << "mine";
  PruneKeyDir(dir_, c.FileName(), 0);
  EXPECT_FALSE(fs::exists(dir_ / a.FileName()));
  EXPECT_TRUE(fs::exists(dir_ / c.FileName()));
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));
}

TEST_F(KeyCacheTest, NoKeysNeedNoFile) {
  bool hit = true;
  EXPECT_TRUE(Get(0, &hit).empty());
  EXPECT_FALSE(fs::exists(dir_));
}

}  // namespace
}  // namespace dmb::apps::kv
