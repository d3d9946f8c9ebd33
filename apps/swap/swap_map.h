// SwapMap: Linux 4.15's swap-slot allocator for one swap area (mm/swapfile.c).
//
// Follows scan_swap_map_slots() and its helpers as they behave for one swap
// device without THP swap and without discard:
// - Non-rotational (SWP_SOLIDSTATE, the default): the area is cut into
//   256-slot clusters (SWAPFILE_CLUSTER, 1 MB of 4 KB pages). Free clusters
//   sit in a FIFO list (free_clusters) whose initial order is interleaved by
//   setup_swap_map_and_extents(): 64 columns (SWAP_CLUSTER_COLS), column j
//   holding clusters j, j+64, j+128, ..., the columns taken in order from the
//   start column cluster_next / 256 % 64, cluster_next being random at swapon
//   (1 + prandom_u32() % highest_bit). Each CPU fills its own current cluster
//   (percpu_cluster) in slot order; when it is used up the CPU takes the head
//   of the free list (a cluster leaves the list when its first slot is
//   allocated). A cluster whose last slot is freed joins the list's tail. A
//   CPU whose current cluster has turned free but is not the list head drops
//   it (scan_swap_map_ssd_cluster_conflict). With no free cluster left the
//   allocator scans linearly from cluster_next.
// - Rotational (the option): one global cursor; a new run starts at the first
//   run of 256 free slots at or above lowest_bit (unaligned), then fills it in
//   order; the percpu clusters do not exist.
// Slot 0 holds the swap header and is never handed out; slots past the last
// page of a partial last cluster do not exist.
//
// Not modelled: several swap devices and their priorities, discard, THP
// swap, and the vm_swap_full() reclaim of swap-cache-only slots during a
// scan (try_to_reclaim_swap); the paging model frees those slots itself.
//
// Contract: not thread-safe (the simulator is single-threaded); cpu < cpus.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace dmb::apps::swap {

inline constexpr uint32_t kClusterSlots = 256;  // SWAPFILE_CLUSTER (no CONFIG_THP_SWAP)
inline constexpr uint32_t kClusterCols = 64;    // SWAP_CLUSTER_COLS on x86-64
inline constexpr uint32_t kSwapBatch = 64;      // SWAP_BATCH: most slots per scan

struct SwapAreaSpec {
  uint64_t pages = 0;  // maxpages: slots including the header slot 0; >= 2
  uint32_t cpus = 1;
  bool rotational = false;
  uint64_t seed = 0;  // draws cluster_next at swapon (non-rotational)
  // Test hook: the cluster_next swapon would draw (non-rotational only).
  std::optional<uint64_t> cluster_next;
};

class SwapMap {
 public:
  explicit SwapMap(const SwapAreaSpec& spec);

  // scan_swap_map_slots() run on `cpu` via get_swap_pages(): up to
  // min(nr, 64, free slots) slots, in the order handed out; fewer (or none)
  // when the cluster logic stops early or the area is full.
  std::vector<uint64_t> AllocSlots(uint32_t cpu, uint32_t nr);
  // swapcache_free_entries(): sorts `slots` and frees each (swap_entry_free).
  // Every slot must be in use.
  void FreeEntries(std::vector<uint64_t> slots);

  bool InUse(uint64_t slot) const { return map_[slot] != 0; }
  uint64_t max_pages() const { return max_; }
  uint64_t usable_pages() const { return usable_; }  // si->pages (header excluded)
  uint64_t inuse_pages() const { return inuse_; }
  uint64_t free_pages() const { return usable_ - inuse_; }  // nr_swap_pages
  // vm_swap_full(): fewer than half of the slots free.
  bool SwapFull() const { return free_pages() * 2 < usable_; }
  bool rotational() const { return rotational_; }
  uint32_t cpus() const { return static_cast<uint32_t>(percpu_.size()); }

  // Free-cluster list, head first (empty when rotational).
  std::vector<uint32_t> FreeClusterList() const;
  // `cpu`'s current cluster, if any (non-rotational).
  std::optional<uint32_t> PercpuCluster(uint32_t cpu) const;
  uint64_t cluster_next() const { return cluster_next_; }
  uint32_t ClusterCount(uint32_t cluster) const { return count_[cluster]; }

 private:
  struct Percpu {
    bool null = true;
    uint32_t index = 0;
    uint64_t next = 0;
  };

  void InitClusters();
  bool TrySsdCluster(uint32_t cpu, uint64_t* offset, uint64_t* scan_base);
  bool SsdClusterConflict(uint32_t cpu, uint64_t offset);
  void RotationalStart(uint64_t* offset, uint64_t* scan_base);
  bool Scan(uint64_t* offset, uint64_t scan_base) const;
  void Take(uint64_t offset);
  void IncCluster(uint64_t offset);
  void DecCluster(uint64_t offset);

  bool rotational_;
  uint64_t max_;
  uint64_t usable_;
  uint64_t inuse_ = 0;
  uint64_t lowest_bit_ = 1;
  uint64_t highest_bit_;
  uint64_t cluster_next_ = 1;
  uint32_t cluster_nr_ = 0;      // rotational: slots left in the current run
  std::vector<uint8_t> map_;     // swap_map: 0 free, else in use
  std::vector<uint32_t> count_;  // per cluster: slots in use (header, tail count too)
  std::vector<bool> cluster_free_;
  std::deque<uint32_t> free_clusters_;
  std::vector<Percpu> percpu_;
};

}  // namespace dmb::apps::swap
