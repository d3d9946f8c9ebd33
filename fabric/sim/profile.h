// A NIC/host calibration profile for the simulator: every primitive the
// simulator charges time for, each with its unit and its source.
//
// Contract: values come from primitive-level measurements (one READ, one MW
// bind, one MR registration, one chained WR, ...) or are labelled
// "assumption" when no primitive source exists. No application-level result
// may be used here. Derived values (solved so that a primitive measurement is
// reproduced) say what they were solved from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/time.h"

namespace dmb::sim {

struct ProfileParam {
  std::string name;
  double value;
  std::string unit;
  std::string source;
};

struct CpuCostDef {
  std::string name;  // e.g. "verbs.mr_reg_base"
  double us;
  std::string source;
};

struct Profile {
  std::string name;
  // PCIe between host memory and the RNIC.
  double pcie_oneway_ns;     // posted write / doorbell one-way latency
  double pcie_bytes_per_ns;  // DMA bandwidth
  // Network.
  double link_gbps;          // per port, each direction
  double wire_latency_ns;    // one way, cable + switch
  double wire_header_bytes;  // per packet
  double mtu_bytes;
  // RNIC.
  double nic_pus;                    // parallel WR processing units
  double nic_wr_proc_ns;             // per WR, per side (requester or responder)
  double nic_atomic_ns;              // atomic unit occupancy per atomic
  double nic_umr_ns;                 // MW bind (UMR) / local invalidate
  double offload_penalty_ns_per_qp;  // added per WR per QP holding offloaded WRs
  // Which QPs "contain offloaded logic" ([OSMW] §3.2; the text does not
  // decide; profile_cx5.cc argues for 0): 1 = every cross-channel QP in
  // RTR/RTS (the MN's loopback worker and control QPs too), 0 = only those
  // connected to another node (the CN-facing chain QPs: Alloc, Free, ODRP's R).
  double offload_counts_loopback;
  // What the penalty costs: 1 = processing-unit time on every WR (a
  // throughput effect), 0 = latency only (the PU is free after nic_wr_proc_ns).
  double offload_occupies_pu;
  // A gate opening: a SEND_ENABLE, or the CQE that releases a stalled WAIT
  // (seen when the RNIC generates it), until the gated QP can start its next
  // WQE, fetched anew (a self-modifying chain's WQEs are read after the gate).
  double gate_fetch_ns;
  double cqe_notify_ns;     // CQE in host memory -> polling CPU sees it
  double retry_timeout_us;  // ack timeout x (retry_cnt + 1): peer gone
  double rnr_delay_us;      // RNR NAK back-off before a SEND is retried
  std::vector<CpuCostDef> cpu_costs;

  static Profile Cx5();
  // Profile by name: "cx5", optionally with readings of the offload penalty
  // appended: "+all_cross_channel" (offload_counts_loopback = 1; "+cn_facing"
  // names the default, 0), "+latency_only"
  // (offload_occupies_pu = 0), and of the MN's notification path: "+mn_poll"
  // (mn.cq_wakeup = 0: MN threads busy-poll), e.g. "cx5+all_cross_channel+latency_only". Throws
  // std::invalid_argument naming the known profiles and readings.
  static Profile ByName(std::string_view name);
  std::vector<ProfileParam> Describe() const;
  // Sets CPU cost `cost` (a reading); throws std::logic_error if there is none.
  void SetCpuCost(std::string_view cost, double us);
  // Stable hash of every value (goes into results' meta.json).
  uint64_t Hash() const;
};

}  // namespace dmb::sim
