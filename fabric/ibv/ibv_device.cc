#include "fabric/ibv/ibv_device.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace dmb::fabric::ibv {
namespace {

int MtuBytes(ibv_mtu m) { return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 0; }

// Upstream rdma-core exposes neither cross-channel WAIT/ENABLE nor a BIND_MW
// that names another QP, nor masked atomics through plain verbs.
DeviceCaps CapsOf(const ibv_device_attr& a, std::vector<std::string>* notes) {
  DeviceCaps c;
  c.mw_type1 = a.max_mw > 0 && (a.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
  c.mw_type2 = a.max_mw > 0 && (a.device_cap_flags &
                                (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B));
  c.atomics = a.atomic_cap != IBV_ATOMIC_NONE;
  c.masked_atomics = false;
  c.cross_channel = false;
  c.qpn_in_bind = false;
  if (notes) {
    notes->push_back(
        "cross_channel (WAIT/SEND_EN/RECV_EN) and qpn_in_bind are not exposed by upstream "
        "rdma-core: ODRP and OneSidedMW need the mlx5 WQE encoders on ConnectX");
    notes->push_back("masked_atomics: mlx5 extended atomics are not reachable through plain verbs");
  }
  return c;
}

bool IsV4Mapped(const uint8_t g[16]) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g, kPrefix, 12) == 0;
}

// Prefers a RoCEv2 GID with an IPv4-mapped address, then any RoCEv2 GID,
// then index 0 (InfiniBand).
int PickGid(ibv_context* ctx, const ibv_port_attr& pa, uint8_t port) {
  int best = -1, best_score = -1;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid_entry e;
    if (ibv_query_gid_ex(ctx, port, i, &e, 0) != 0) continue;
    bool zero = true;
    for (uint8_t b : e.gid.raw) zero = zero && b == 0;
    if (zero) continue;
    int score = 1;
    if (e.gid_type == IBV_GID_TYPE_ROCE_V2) score = IsV4Mapped(e.gid.raw) ? 4 : 3;
    if (score > best_score) best = i, best_score = score;
  }
  return best < 0 ? 0 : best;
}

std::string DeviceNames() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  std::string names;
  for (int i = 0; list && i < n; ++i)
    names += std::string(names.empty() ? "" : ", ") + ibv_get_device_name(list[i]);
  if (list) ibv_free_device_list(list);
  return names.empty() ? "none" : names;
}

}  // namespace

std::string GidToString(const uint8_t gid[16]) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid, buf, sizeof buf);
  return buf;
}

Device OpenDevice(const std::string& name, int gid_index) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    throw std::runtime_error(
        "no RDMA device found (ibv_get_device_list: 0 devices). Use the sim backend on this "
        "machine, or run the Soft-RoCE tier with `make test-rxe`");
  }
  Device d;
  for (int i = 0; i < n && !d.ctx; ++i) {
    if (name.empty() || name == ibv_get_device_name(list[i])) {
      d.ctx = ibv_open_device(list[i]);
      d.name = ibv_get_device_name(list[i]);
    }
  }
  ibv_free_device_list(list);
  if (!d.ctx) {
    throw std::runtime_error("RDMA device '" + name +
                             "' not found; devices present: " + DeviceNames());
  }
  if (ibv_query_device(d.ctx, &d.attr) != 0) {
    throw std::runtime_error("ibv_query_device(" + d.name + ") failed: " + strerror(errno));
  }
  ibv_port_attr pa;
  if (ibv_query_port(d.ctx, 1, &pa) != 0) {
    throw std::runtime_error("ibv_query_port(" + d.name + ", 1) failed: " + strerror(errno));
  }
  if (pa.state != IBV_PORT_ACTIVE) {
    throw std::runtime_error("RDMA device " + d.name + " port 1 is " +
                             ibv_port_state_str(pa.state) + ", not ACTIVE");
  }
  d.addr.port = 1;
  d.addr.lid = pa.lid;
  d.addr.is_roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  d.addr.active_mtu = pa.active_mtu;
  const int gi = gid_index >= 0 ? gid_index : PickGid(d.ctx, pa, 1);
  ibv_gid gid;
  if (ibv_query_gid(d.ctx, 1, gi, &gid) != 0) {
    throw std::runtime_error("ibv_query_gid(" + d.name + ", index " + std::to_string(gi) +
                             ") failed: " + strerror(errno));
  }
  std::memcpy(d.addr.gid, gid.raw, 16);
  d.addr.gid_index = static_cast<uint8_t>(gi);
  d.caps = CapsOf(d.attr, nullptr);
  return d;
}

void CloseDevice(Device& d) {
  if (d.ctx) ibv_close_device(d.ctx);
  d.ctx = nullptr;
}

std::vector<DeviceInfo> ListDevices() {
  std::vector<DeviceInfo> out;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; list && i < n; ++i) {
    DeviceInfo info;
    info.name = ibv_get_device_name(list[i]);
    ibv_context* ctx = ibv_open_device(list[i]);
    if (!ctx) {
      info.notes.push_back(std::string("cannot open: ") + strerror(errno));
      out.push_back(info);
      continue;
    }
    ibv_device_attr a;
    ibv_port_attr pa;
    if (ibv_query_device(ctx, &a) == 0 && ibv_query_port(ctx, 1, &pa) == 0) {
      info.transport = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand";
      info.port_state = ibv_port_state_str(pa.state);
      info.port_active = pa.state == IBV_PORT_ACTIVE;
      info.active_mtu_bytes = MtuBytes(pa.active_mtu);
      info.max_qp_wr = a.max_qp_wr;
      info.max_mr = a.max_mr;
      info.max_mw = a.max_mw;
      info.max_qp_rd_atom = a.max_qp_rd_atom;
      info.max_mr_size = a.max_mr_size;
      info.caps = CapsOf(a, &info.notes);
      info.gid_index = PickGid(ctx, pa, 1);
      ibv_gid gid;
      if (ibv_query_gid(ctx, 1, info.gid_index, &gid) == 0) info.gid = GidToString(gid.raw);
    }
    ibv_close_device(ctx);
    out.push_back(info);
  }
  if (list) ibv_free_device_list(list);
  return out;
}

}  // namespace dmb::fabric::ibv
