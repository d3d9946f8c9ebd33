#!/bin/bash
# netns-hosts.sh up|down DIR [N [MAC...]] - N test "hosts" for the Ansible
# tiers: network namespaces dmbh1..dmbhN on bridge dmbbr0 (10.79.0.1/24 in the
# calling namespace, host i = 10.79.0.(10+i)), each running its own sshd (key
# auth as root, keys and configs in DIR; keys already there are kept). Each
# host's ssh sessions get HOME=DIR/home/NAME, an empty home of its own: bash
# run by sshd reads ~/.bashrc even for a command, and the caller's (say, one
# that runs `pyenv init`, dozens of processes) cost about 10 s a task in the
# emulated guest. They share this machine's filesystem and kernel; traffic
# stays inside it. `up` writes DIR/hosts (name address per line); `down` stops
# the sshds and removes the namespaces and the bridge.
#
# MACs (the cluster tier's guest, tests/rxe/vm-run.sh -n): the NIC with the
# i-th MAC moves into host i as mgmt0 with 10.0.2.15/24 (QEMU user
# networking's guest address) and host i's sshd listens there too, so the
# port QEMU forwards to that NIC reaches host i's sshd.
#
# Adapted from shared/netns/netns-hosts.sh (own names, so it cannot collide
# with that recipe's labh*/labbr0).
set -euo pipefail
cmd=${1:?usage: netns-hosts.sh up|down DIR [N [MAC...]]}
D=${2:?usage: netns-hosts.sh up|down DIR [N [MAC...]]}
N=${3:-3}
MACS=("${@:4}")
# nic_by_mac MAC: the name of this namespace's interface with that address.
nic_by_mac() {
  local f
  for f in /sys/class/net/*/address; do
    if grep -qix "$1" "$f"; then basename "$(dirname "$f")"; return 0; fi
  done
  echo "netns-hosts.sh: no interface has MAC $1" >&2
  return 1
}
case $cmd in
up)
  [ ${#MACS[@]} -eq 0 ] || [ ${#MACS[@]} -eq "$N" ] || { echo "netns-hosts.sh: $N hosts need $N MACs, got ${#MACS[@]}" >&2; exit 2; }
  mkdir -p "$D" /run/sshd
  chmod 755 /run/sshd
  [ -f "$D/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$D/id_ed25519"
  [ -f "$D/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$D/ssh_host_ed25519_key"
  cp "$D/id_ed25519.pub" "$D/authorized_keys"
  chmod 600 "$D/authorized_keys"
  ip link add dmbbr0 type bridge 2>/dev/null || true
  ip addr replace 10.79.0.1/24 dev dmbbr0
  ip link set dmbbr0 up
  : >"$D/hosts"
  for i in $(seq 1 "$N"); do
    ns=dmbh$i a=10.79.0.$((10 + i))
    ip netns add "$ns" 2>/dev/null || true
    ip link add "v$ns" type veth peer name eth0 netns "$ns" 2>/dev/null || true
    ip link set "v$ns" master dmbbr0 up
    ip -n "$ns" addr replace "$a/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    listen=$a
    if [ ${#MACS[@]} -gt 0 ]; then
      nic=$(nic_by_mac "${MACS[i - 1]}")
      ip link set "$nic" down
      ip link set "$nic" name "dmbm$i"
      ip link set "dmbm$i" netns "$ns"
      ip -n "$ns" link set "dmbm$i" name mgmt0
      ip -n "$ns" addr replace 10.0.2.15/24 dev mgmt0
      ip -n "$ns" link set mgmt0 up
      listen="$a
ListenAddress 10.0.2.15"
    fi
    mkdir -p "$D/home/$ns"
    cat >"$D/sshd_$ns.conf" <<C
ListenAddress $listen
SetEnv HOME=$D/home/$ns
Port 22
HostKey $D/ssh_host_ed25519_key
PidFile $D/sshd_$ns.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile $D/authorized_keys
StrictModes no
UsePAM no
MaxStartups 50
Subsystem sftp internal-sftp
C
    ip netns exec "$ns" /usr/sbin/sshd -f "$D/sshd_$ns.conf" -E "$D/sshd_$ns.log"
    echo "$ns $a" >>"$D/hosts"
  done
  ;;
down)
  for i in $(seq 1 "$N"); do
    ns=dmbh$i
    if [ -f "$D/sshd_$ns.pid" ]; then kill "$(cat "$D/sshd_$ns.pid")" 2>/dev/null || true; fi
    ip link del "v$ns" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del dmbbr0 2>/dev/null || true
  ;;
*)
  echo "netns-hosts.sh: unknown command '$cmd' (up or down)" >&2
  exit 2
  ;;
esac
