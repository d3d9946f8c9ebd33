// Opening RDMA devices and describing what they can do (`dmbench devices`).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/node.h"

namespace dmb::fabric::ibv {

// Where a port is reached: what a peer's RTR needs besides the QP number.
struct PortAddr {
  uint8_t gid[16] = {};
  uint16_t lid = 0;
  uint8_t port = 1;
  uint8_t gid_index = 0;
  bool is_roce = true;  // Ethernet link layer: route by GID (GRH), not by LID
  ibv_mtu active_mtu = IBV_MTU_1024;
};

struct DeviceInfo {
  std::string name;
  std::string transport;     // "InfiniBand" / "RoCE" (from the port's link layer)
  std::string port_state;    // ibv_port_state_str: "active", "down", ...
  bool port_active = false;  // IBV_PORT_ACTIVE (not a match on the string)
  int active_mtu_bytes = 0;
  std::string gid;  // the GID dmbench would use
  int gid_index = -1;
  uint32_t max_qp_wr = 0, max_mr = 0, max_mw = 0, max_qp_rd_atom = 0;
  uint64_t max_mr_size = 0;
  DeviceCaps caps;
  std::vector<std::string> notes;  // why a capability is missing
};

// An open device: context, port and the GID dmbench routes by.
struct Device {
  ibv_context* ctx = nullptr;
  ibv_device_attr attr = {};
  PortAddr addr;
  DeviceCaps caps;
  std::string name;
};

// Opens `name` ("" = the first device). Throws std::runtime_error naming the
// device and listing the ones present when it is missing.
Device OpenDevice(const std::string& name, int gid_index = -1);
void CloseDevice(Device& d);

std::vector<DeviceInfo> ListDevices();
std::string GidToString(const uint8_t gid[16]);

}  // namespace dmb::fabric::ibv
