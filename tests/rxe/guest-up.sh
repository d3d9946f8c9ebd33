#!/bin/bash
# guest-up.sh - inside the vm-run.sh guest: two Soft-RoCE devices joined by a wire.
#
#   rxe0 on veth0 (10.77.0.1/24) <---- veth pair ----> rxe1 on veth1 (10.77.0.2/24)
#
# Each device gets a RoCEv2 GID for its IPv6 link-local address and an
# IPv4-mapped one (::ffff:10.77.0.x). rxe sends with the route looked up *via
# its own netdev*, so packets really cross the veth pair; since both ends sit in
# one network namespace (rxe in 6.1 only listens in the initial one), the kernel
# must accept packets whose source is one of its own addresses: accept_local=1,
# rp_filter=0. Waits until both ports are PORT_ACTIVE with their IPv4 GID.
# Exit 0 when up; 1 with a diagnosis otherwise.
set -u
fail() {
  echo "guest-up: FAILED: $*" >&2
  ip -br addr >&2
  rdma link show >&2
  dmesg | grep -iE 'rxe|rdma|infiniband' | tail -15 >&2
  exit 1
}
[ "$(id -u)" = 0 ] && [ -d /sys/class/net ] || fail "must run as root inside the guest (tests/rxe/vm-run.sh)"
for m in rdma_rxe ib_uverbs rdma_ucm veth; do modprobe "$m" || fail "modprobe $m"; done

sysctl() { echo "$2" >"/proc/sys/net/$1" || fail "cannot set net.$1"; }
ip link set lo up
ip link add veth0 type veth peer name veth1 || fail "cannot create veth pair"
for d in all veth0 veth1; do
  sysctl "ipv4/conf/$d/accept_local" 1
  sysctl "ipv4/conf/$d/rp_filter" 0
  sysctl "ipv6/conf/$d/accept_dad" 0   # link-local address (and its GID) at once
done
for i in 0 1; do
  ip addr add "10.77.0.$((i + 1))/24" dev "veth$i" || fail "ip addr on veth$i"
  ip link set "veth$i" up || fail "link up veth$i"
  rdma link add "rxe$i" type rxe netdev "veth$i" || fail "rdma link add rxe$i"
done

# PORT_ACTIVE and an IPv4-mapped GID (::ffff:a.b.c.d) on both devices, 20 s at most.
ready() {
  local p=/sys/class/infiniband/$1/ports/1
  grep -q ACTIVE "$p/state" 2>/dev/null && grep -qs '^0000:0000:0000:0000:0000:ffff:' "$p"/gids/*
}
for _ in $(seq 40); do
  ready rxe0 && ready rxe1 && break
  sleep 0.5
done
ready rxe0 && ready rxe1 || fail "rxe0/rxe1 not PORT_ACTIVE with an IPv4 GID after 20 s"

rdma link show
for d in rxe0 rxe1; do   # one process per device: fork+exec is slow under TCG
  ibv_devinfo -v -d "$d" | sed -n "s/^[[:space:]]*\(GID\[.*\)/$d \1/p"
done
