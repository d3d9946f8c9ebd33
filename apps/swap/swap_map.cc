#include "apps/swap/swap_map.h"

#include <algorithm>
#include <cassert>
#include <random>
#include <stdexcept>

namespace dmb::apps::swap {

SwapMap::SwapMap(const SwapAreaSpec& spec)
    : rotational_(spec.rotational),
      max_(spec.pages),
      usable_(spec.pages - 1),
      highest_bit_(spec.pages - 1),
      map_(spec.pages, 0),
      percpu_(spec.cpus) {
  if (spec.pages < 2 || spec.cpus == 0) throw std::invalid_argument("swap area too small");
  map_[0] = 1;  // SWAP_MAP_BAD: the header
  if (rotational_) return;
  // swapon: p->cluster_next = 1 + (prandom_u32() % p->highest_bit).
  std::mt19937_64 rng(spec.seed);
  cluster_next_ = spec.cluster_next.value_or(1 + rng() % highest_bit_);
  InitClusters();
}

// setup_swap_map_and_extents(): the header and the missing tail slots count
// as used; every empty cluster joins free_clusters column by column.
void SwapMap::InitClusters() {
  uint64_t nr_clusters = (max_ + kClusterSlots - 1) / kClusterSlots;
  count_.assign(nr_clusters, 0);
  cluster_free_.assign(nr_clusters, false);
  for (uint64_t i = max_; i < nr_clusters * kClusterSlots; ++i) IncCluster(i);
  IncCluster(0);
  uint64_t col = cluster_next_ / kClusterSlots % kClusterCols;
  uint64_t rows = (nr_clusters + kClusterCols - 1) / kClusterCols;
  for (uint64_t k = 0; k < kClusterCols; ++k) {
    uint64_t j = (k + col) % kClusterCols;
    for (uint64_t i = 0; i < rows; ++i) {
      uint64_t idx = i * kClusterCols + j;
      if (idx >= nr_clusters || count_[idx] != 0) continue;
      cluster_free_[idx] = true;
      free_clusters_.push_back(static_cast<uint32_t>(idx));
    }
  }
}

// inc_cluster_info_page(): a free cluster being allocated must be the list
// head (alloc_cluster) and leaves the list.
void SwapMap::IncCluster(uint64_t offset) {
  uint64_t idx = offset / kClusterSlots;
  if (cluster_free_[idx]) {
    assert(!free_clusters_.empty() && free_clusters_.front() == idx);
    free_clusters_.pop_front();
    cluster_free_[idx] = false;
  }
  ++count_[idx];
}

// dec_cluster_info_page(): an emptied cluster goes to the list tail
// (__free_cluster; no discard).
void SwapMap::DecCluster(uint64_t offset) {
  uint64_t idx = offset / kClusterSlots;
  assert(count_[idx] > 0);
  if (--count_[idx] == 0) {
    cluster_free_[idx] = true;
    free_clusters_.push_back(static_cast<uint32_t>(idx));
  }
}

// scan_swap_map_try_ssd_cluster().
bool SwapMap::TrySsdCluster(uint32_t cpu, uint64_t* offset, uint64_t* scan_base) {
  Percpu& pc = percpu_[cpu];
  while (true) {
    if (pc.null) {
      if (free_clusters_.empty()) return false;
      pc.null = false;
      pc.index = free_clusters_.front();
      pc.next = uint64_t{pc.index} * kClusterSlots;
    }
    uint64_t tmp = pc.next;
    uint64_t max = std::min<uint64_t>(max_, (uint64_t{pc.index} + 1) * kClusterSlots);
    while (tmp < max && map_[tmp] != 0) ++tmp;
    if (tmp >= max) {
      pc.null = true;
      continue;
    }
    pc.next = tmp + 1;
    *offset = *scan_base = tmp;
    return true;
  }
}

// scan_swap_map_ssd_cluster_conflict(): `offset` lies in a free cluster that
// is not the list head (another CPU may be about to take the head).
bool SwapMap::SsdClusterConflict(uint32_t cpu, uint64_t offset) {
  uint64_t idx = offset / kClusterSlots;
  bool conflict = !free_clusters_.empty() && idx != free_clusters_.front() && cluster_free_[idx];
  if (conflict) percpu_[cpu].null = true;
  return conflict;
}

// The rotational branch at the top of scan_swap_map_slots(): continue the
// current run, or start one at the first 256 free slots from lowest_bit.
void SwapMap::RotationalStart(uint64_t* offset, uint64_t* scan_base) {
  if (cluster_nr_ > 0) {
    --cluster_nr_;
    return;
  }
  cluster_nr_ = kClusterSlots - 1;
  if (usable_ - inuse_ < kClusterSlots) return;
  uint64_t off = lowest_bit_;
  uint64_t last = off + kClusterSlots - 1;
  for (; last <= highest_bit_; ++off) {
    if (map_[off] != 0) {
      last = off + kClusterSlots;
    } else if (off == last) {
      *scan_base = lowest_bit_;
      *offset = cluster_next_ = off - (kClusterSlots - 1);
      return;
    }
  }
  *offset = *scan_base = lowest_bit_;
}

// The `scan:` label: next free slot after *offset up to highest_bit, then
// from lowest_bit below scan_base.
bool SwapMap::Scan(uint64_t* offset, uint64_t scan_base) const {
  for (uint64_t o = *offset + 1; o <= highest_bit_; ++o) {
    if (map_[o] == 0) return *offset = o, true;
  }
  for (uint64_t o = lowest_bit_; o < scan_base; ++o) {
    if (map_[o] == 0) return *offset = o, true;
  }
  return false;
}

// swap_map[offset] = usage; inc_cluster_info_page(); swap_range_alloc().
void SwapMap::Take(uint64_t offset) {
  map_[offset] = 1;
  if (!rotational_) IncCluster(offset);
  if (offset == lowest_bit_) ++lowest_bit_;
  if (offset == highest_bit_) --highest_bit_;
  if (++inuse_ == usable_) {
    lowest_bit_ = max_;
    highest_bit_ = 0;
  }
}

std::vector<uint64_t> SwapMap::AllocSlots(uint32_t cpu, uint32_t nr) {
  std::vector<uint64_t> out;
  nr = static_cast<uint32_t>(std::min<uint64_t>({nr, kSwapBatch, free_pages()}));
  if (nr == 0) return out;
  uint64_t offset = cluster_next_;
  uint64_t scan_base = offset;
  bool scan = false;
  if (rotational_) {
    RotationalStart(&offset, &scan_base);
  } else {
    scan = !TrySsdCluster(cpu, &offset, &scan_base);
  }
  while (true) {
    if (scan) {
      if (!Scan(&offset, scan_base)) return out;  // no_page
      scan = false;
    }
    // checks:
    if (!rotational_) {
      while (SsdClusterConflict(cpu, offset)) {
        if (!out.empty()) return out;
        if (!TrySsdCluster(cpu, &offset, &scan_base)) {
          scan = true;
          break;
        }
      }
      if (scan) continue;
    }
    if (highest_bit_ == 0) return out;
    if (offset > highest_bit_) scan_base = offset = lowest_bit_;
    if (map_[offset] != 0) {
      if (!out.empty()) return out;
      scan = true;
      continue;
    }
    Take(offset);
    cluster_next_ = offset + 1;
    out.push_back(offset);
    if (out.size() == nr || offset >= highest_bit_) return out;
    if (!rotational_) {
      if (!TrySsdCluster(cpu, &offset, &scan_base)) return out;
      continue;
    }
    ++offset;
    if (cluster_nr_ == 0 || map_[offset] != 0) return out;
    --cluster_nr_;
  }
}

void SwapMap::FreeEntries(std::vector<uint64_t> slots) {
  std::sort(slots.begin(), slots.end());
  for (uint64_t s : slots) {
    if (s == 0 || s >= max_ || map_[s] == 0) throw std::logic_error("freeing a free swap slot");
    map_[s] = 0;
    if (!rotational_) DecCluster(s);
    // swap_range_free()
    if (s < lowest_bit_) lowest_bit_ = s;
    if (s > highest_bit_) highest_bit_ = s;
    --inuse_;
  }
}

std::vector<uint32_t> SwapMap::FreeClusterList() const {
  return {free_clusters_.begin(), free_clusters_.end()};
}

std::optional<uint32_t> SwapMap::PercpuCluster(uint32_t cpu) const {
  if (rotational_ || percpu_[cpu].null) return std::nullopt;
  return percpu_[cpu].index;
}

}  // namespace dmb::apps::swap
