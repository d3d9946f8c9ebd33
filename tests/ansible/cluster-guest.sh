#!/bin/bash
# cluster-guest.sh NET_DIR - the guest half of the Ansible cluster tier: what
# cluster-tier.sh boots with tests/rxe/vm-run.sh -n P1 -n P2 -n P3.
#
# Three Soft-RoCE devices: rxe0 and rxe1 are guest-up.sh's pair over
# veth0/veth1, rxe2 sits on its own veth pair. Three hosts in network
# namespaces (netns-hosts.sh with the keys of NET_DIR, its files in the
# guest's /run/dmb-net, copied back to NET_DIR at the end): dmbh1 (the mn host),
# dmbh2, dmbh3, each with its own sshd and address on bridge dmbbr0 and the
# vm-run.sh NIC with the i-th MAC of VM_NIC_MACS as its management NIC, which
# the host's 127.0.0.1:Pi reaches. The devices stay in the guest's first
# namespace (rxe in Linux 6.1 only listens there); RDMA devices are shared
# across namespaces, so each host's processes use theirs by name.
#
# Then it writes NET_DIR/ready and waits until the host writes NET_DIR/done
# (vm-run.sh's -t bounds the wait), stops the hosts and exits 0. A failure
# before ready is written to NET_DIR/guest-failed as well (the host stops
# waiting) and exits 1.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
NET=${1:?usage: cluster-guest.sh NET_DIR}
fail() {
  echo "cluster-guest: FAILED: $*" >&2
  echo "$*" >"$NET/guest-failed"
  exit 1
}
up() { echo "cluster-guest: $* at $(cut -d' ' -f1 /proc/uptime) s of guest uptime"; }

up "started"
"$ROOT/tests/rxe/guest-up.sh" >/dev/null || fail "Soft-RoCE devices did not come up (tests/rxe/guest-up.sh)"
ip link add veth2 type veth peer name veth3
ip link set veth2 up
ip link set veth3 up
ip addr add 10.77.1.1/24 dev veth2
rdma link add rxe2 type rxe netdev veth2 || fail "rdma link add rxe2"
up "rxe0, rxe1, rxe2 up"

read -ra macs <<<"${VM_NIC_MACS:-}"
[ ${#macs[@]} -eq 3 ] || fail "expected 3 NICs from vm-run.sh -n, VM_NIC_MACS='${VM_NIC_MACS:-}'"
modprobe virtio_net || fail "modprobe virtio_net"
for _ in $(seq 50); do
  [ "$(grep -ilxF -e "${macs[0]}" -e "${macs[1]}" -e "${macs[2]}" /sys/class/net/*/address | wc -l)" = 3 ] && break
  sleep 0.2
done
# The hosts' files (homes, sshd configs, logs) on the guest's tmpfs, not on 9p.
L=/run/dmb-net
mkdir -p "$L"
cp "$NET"/id_ed25519* "$NET"/ssh_host_ed25519_key* "$L/"
"$HERE/netns-hosts.sh" up "$L" 3 "${macs[@]}" || fail "netns-hosts.sh up"
up "hosts dmbh1..3 up"
touch "$NET/ready"

while [ ! -e "$NET/done" ]; do sleep 1; done
up "done"
"$HERE/netns-hosts.sh" down "$L" 3
cp "$L"/sshd_* "$NET/"
