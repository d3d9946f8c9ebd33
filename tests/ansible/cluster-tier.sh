#!/bin/bash
# cluster-tier.sh BUILD_DIR OUT_DIR [VM_RUN_ARG...] - the Ansible cluster tier
# (make test-ansible-cluster): an RDMA cluster of three Soft-RoCE hosts in a
# QEMU guest, driven by ansible-playbook on this machine.
#
# BUILD_DIR: the build whose dmbench and dmb_micro are shipped to the hosts and
# merge the results (make passes build/release). OUT_DIR: the results, logs
# and vm-run.sh's share (make passes build/<preset>/ansible-cluster).
# VM_RUN_ARGs (e.g. -t 1200) go to tests/rxe/vm-run.sh.
#
# The guest (tests/rxe/vm-run.sh -n P1 -n P2 -n P3, running cluster-guest.sh)
# holds the cluster: three hosts in network namespaces, each with its own sshd,
# address and Soft-RoCE device: dmbh1 the mn host (rxe0), dmbh2 and dmbh3 cn
# hosts (rxe1, rxe2); the daemon and the CN talk over the hosts' own addresses
# (dmb_mn_address=10.79.0.11). Each host's sshd is reached from here at
# 127.0.0.1:Pi through QEMU's user networking (a management NIC per host). The
# Ansible controller runs here, at native speed, not in the emulated guest:
# there, every Python import goes over 9p under TCG and one task took about 80 s.
# One ssh connection per host serves all three playbook runs (ControlPersist).
#
# Then: site.yml twice (the second run must change nothing; binaries shipped
# from BUILD_DIR), figure.yml -e figure=figure-10 -e backend=ibv on
# $CLUSTER_FILTER (default: RPC-MW type-1 allocation, which rxe runs, and ODRP
# allocation, which it cannot: no cross-channel QPs). Checks: the CSV holds
# both points with meta.json backend ibv naming hosts and devices; RPC-MW's row
# has allocations and no failure; ODRP's row is skipped naming cross_channel;
# rxe0's and rxe1's packet counters, read in the guest (over ssh to dmbh1)
# before and after the figure, rose (the RDMA traffic crossed from the cn host's device to
# the mn host's and back). Then the key-value store over real verbs:
# figure.yml -e figure=figure-6 -e backend=ibv -e params="keys=300
# pool=256MB" on $CLUSTER_KV_FILTER (default: RPC-MW type-2, 2 KB chunks, 1 KB
# values, fillsync, 24 threads; the spec's 1 GB pool would need 512 Ki windows,
# more than rxe allocates); its row must count 300 operations, no failure, not
# skipped. The guest then shuts down cleanly. Results in
# OUT_DIR: results/figure-10/ and figure-6/, ansible-*.log, ansible-live.log as the playbooks
# run, vm-run.log (the guest's side), net/ (sshd configs and logs), and the
# wall time of each phase at the end of the output.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
B=$(cd "${1:?usage: cluster-tier.sh BUILD_DIR OUT_DIR [VM_RUN_ARG...]}" && pwd)
mkdir -p "${2:?usage: cluster-tier.sh BUILD_DIR OUT_DIR [VM_RUN_ARG...]}"
OUT=$(cd "$2" && pwd)
VM_ARGS=("${@:3}")
source "$HERE/tier-lib.sh"
FILTER=${CLUSTER_FILTER:-alloc-[or][dp]*[1p]-threads_1-seed1}
export LIVE_LOG=$OUT/ansible-live.log
command -v ansible-playbook >/dev/null || fail "ansible-playbook missing: apt-get install ansible (make deps)"
[ -x /usr/sbin/sshd ] || fail "sshd missing (the guest runs this machine's): apt-get install openssh-server (make deps)"

T=$(mktemp -d /tmp/dmb-cluster-tier.XXXXXX)
NET=$OUT/net
rm -rf "$NET" "$OUT/results" "$OUT"/ansible-*.log
mkdir -p "$NET" "$T/cp"
ssh-keygen -q -t ed25519 -N '' -f "$NET/id_ed25519"
ssh-keygen -q -t ed25519 -N '' -f "$NET/ssh_host_ed25519_key"
# Three free ports on 127.0.0.1 for the hosts' sshds.
mapfile -t P < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print("\n".join(str(x.getsockname()[1]) for x in s))')

# Phase timing: phase NAME marks the end of the phase that ran since the last mark.
t_last=$(date +%s) phases=()
phase() {
  local now
  now=$(date +%s)
  phases+=("$1: $((now - t_last)) s")
  t_last=$now
}

t_start=$t_last
step "booting the guest (tests/rxe/vm-run.sh ${VM_ARGS[*]} -n ${P[*]}; its side in $OUT/vm-run.log)"
"$ROOT/tests/rxe/vm-run.sh" -s "$OUT" -n "${P[0]}" -n "${P[1]}" -n "${P[2]}" "${VM_ARGS[@]}" -- \
  "$HERE/cluster-guest.sh" "$NET" >"$OUT/vm-run.log" 2>&1 &
vm=$!
# finish: let the guest shut down (NET/done), close the ssh connections; the
# guest's exit status, or 1 when it had to be stopped.
finish() {
  local s rc=0
  touch "$NET/done"
  for s in "$T"/cp/*; do [ -S "$s" ] && ssh -o ControlPath="$s" -O exit x 2>/dev/null; done
  for _ in $(seq 120); do kill -0 "$vm" 2>/dev/null || break; sleep 1; done
  if kill -0 "$vm" 2>/dev/null; then
    echo "the guest did not shut down within 120 s of NET/done: stopping it" >&2
    kill "$vm"
    rc=1
  fi
  wait "$vm" || rc=$?
  return $rc
}
trap 'cp "$T"/*.log "$OUT/" 2>/dev/null || true; finish >/dev/null 2>&1 || true; rm -rf "$T"' EXIT

until [ -e "$NET/ready" ]; do
  [ ! -e "$NET/guest-failed" ] || fail "the guest could not set up the hosts: $(cat "$NET/guest-failed") (see $OUT/vm-run.log)"
  kill -0 "$vm" 2>/dev/null || fail "the guest exited before the hosts were up: $(tail -5 "$OUT/vm-run.log" | tr '\n' ' ')"
  sleep 1
done
phase "guest boot + Soft-RoCE devices + hosts up"

inv=$T/inventory.ini
host() {   # NAME PORT DEVICE; paths are the guest's (/run: its own tmpfs)
  echo "$1 ansible_host=127.0.0.1 ansible_port=$2 dmb_rdma_device=$3 dmb_prefix=/run/dmb-cluster/$1 dmb_work_dir=/run/dmb-cluster/$1/work"
}
{
  echo "[mn]"
  host dmbh1 "${P[0]}" rxe0
  echo "[cn]"
  host dmbh2 "${P[1]}" rxe1
  host dmbh3 "${P[2]}" rxe2
  connection_vars all "$OUT"
} >"$inv"
# One master connection per host for all three runs, opened here (an emulated
# sshd can take longer than Ansible's 10 s to say hello); no compression (the
# bytes only cross this machine, and the guest's CPU is emulated).
ssh_cp=(-o ControlMaster=auto -o ControlPersist=30m -o "ControlPath=$T/cp/%h-%p")
export ANSIBLE_SSH_ARGS="${ssh_cp[*]}" ANSIBLE_TIMEOUT=120
common=(-i "$inv" -e dmb_install=ship -e "dmb_controller_build=$B" -e dmb_mn_address=10.79.0.11)
guest_ssh() {   # PORT CMD...: a command on the host at 127.0.0.1:PORT
  ssh "${ssh_cp[@]}" -o ConnectTimeout=120 -i "$NET/id_ed25519" -p "$1" -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR root@127.0.0.1 "${@:2}"
}
step "logging in to dmbh1..3 (ssh 127.0.0.1:${P[*]})"
logins=()
for i in 0 1 2; do
  guest_ssh "${P[i]}" true &
  logins+=($!)
done
for i in 0 1 2; do
  wait "${logins[i]}" || fail "cannot log in to dmbh$((i + 1)) (ssh 127.0.0.1:${P[i]}; $NET/sshd_dmbh$((i + 1)).log)"
done
phase "ssh logins"

# counters: rxe0's and rxe1's packet counters, read in the guest via dmbh1, in
# the guest's first namespaces (a device's hw_counters are not in a host's sysfs).
counters() {
  guest_ssh "${P[0]}" nsenter -t 1 -m -n sh -c \
    "'for d in rxe0 rxe1; do c=/sys/class/infiniband/\$d/ports/1/hw_counters; echo \$d \$(cat \$c/sent_pkts) \$(cat \$c/rcvd_pkts); done'" ||
    fail "cannot read the Soft-RoCE counters on dmbh1 (ssh 127.0.0.1:${P[0]}, nsenter -t 1)"
}

step "site.yml, first run"
playbook site.yml "${common[@]}"
cp "$T/last.log" "$T/ansible-site-1.log"
phase "site.yml, first run"
step "site.yml, second run: nothing may change"
playbook site.yml "${common[@]}"
cp "$T/last.log" "$T/ansible-site-2.log"
expect_no_change "$T/last.log"
phase "site.yml, second run"

before=$(counters)
[ "$(echo "$before" | wc -l)" = 2 ] || fail "unexpected counters from dmbh1: $before"
step "figure.yml figure=figure-10 backend=ibv filter=$FILTER"
playbook figure.yml "${common[@]}" -e figure=figure-10 -e backend=ibv -e "filter=$FILTER" \
  -e "dmb_results=$OUT/results" || { cp "$T/last.log" "$T/ansible-figure.log"; fail "figure.yml failed"; }
cp "$T/last.log" "$T/ansible-figure.log"
after=$(counters)
phase "figure.yml backend=ibv"

R=$OUT/results/figure-10
csv=$R/figure-10.csv
[ -f "$csv" ] || fail "no $csv"
cat "$csv"
col() { head -1 "$csv" | tr ',' '\n' | grep -nx "$1" | cut -d: -f1; }
row() { grep "^figure-10,$1," "$csv" || fail "no row for $1 in the CSV"; }
field() { echo "$1" | cut -d, -f"$(col "$2")"; }
rpc=$(row "rpc_mw,type1,alloc")
[ "$(field "$rpc" count)" -gt 0 ] 2>/dev/null || fail "RPC-MW's row has no allocations: $rpc"
[ "$(field "$rpc" failures)" = 0 ] || fail "RPC-MW's row has failed allocations: $rpc"
[ -z "$(field "$rpc" skipped)" ] || fail "RPC-MW was skipped: $rpc"
odrp=$(row "odrp,,alloc")
field "$odrp" skipped | grep -q cross_channel || fail "ODRP's row is not skipped for cross_channel: $odrp"
grep -q '"backend": "ibv"' "$R/meta.json" || fail "meta.json does not say backend ibv"
for w in dmbh1 dmbh2 rxe0 rxe1 '"mn_cpus": "0"'; do
  grep -q "$w" "$R/meta.json" || fail "meta.json does not name $w"
done
echo "CSV: RPC-MW type-1 measured on ibv, ODRP skipped (cross_channel); meta.json names backend, hosts, devices"

echo "counters before: $before"
echo "counters after:  $after"
while read -r d s0 r0 && read -r _ s1 r1 <&3; do
  [ $((s1 - s0)) -gt 100 ] && [ $((r1 - r0)) -gt 100 ] ||
    fail "$d sent $((s1 - s0)) and received $((r1 - r0)) packets during the figure: no RDMA traffic"
  echo "$d: sent $((s1 - s0)), received $((r1 - r0)) packets during the figure"
done < <(echo "$before") 3< <(echo "$after")

KV_FILTER=${CLUSTER_KV_FILTER:-kv-rpc_mw-type2_2KB-value_1024-workload_fillsync-threads_24-seed1}
step "figure.yml figure=figure-6 backend=ibv params=keys=300 pool=256MB filter=$KV_FILTER"
playbook figure.yml "${common[@]}" -e figure=figure-6 -e backend=ibv -e "filter=$KV_FILTER" \
  -e "params='keys=300 pool=256MB'" -e "dmb_results=$OUT/results" ||
  { cp "$T/last.log" "$T/ansible-figure-6.log"; fail "figure.yml figure=figure-6 failed"; }
cp "$T/last.log" "$T/ansible-figure-6.log"
phase "figure.yml figure-6 backend=ibv"
csv=$OUT/results/figure-6/figure-6.csv
[ -f "$csv" ] || fail "no $csv"
kv=$(grep "^figure-6,rpc_mw,type2-2KB,kv," "$csv") || fail "no RPC-MW type-2 key-value row in $csv"
[ "$(field "$kv" count)" = 300 ] || fail "the key-value row did not count 300 operations: $kv"
[ "$(field "$kv" failures)" = 0 ] || fail "the key-value row has failures: $kv"
[ -z "$(field "$kv" skipped)" ] || fail "the key-value point was skipped: $kv"
grep -q '"backend": "ibv"' "$OUT/results/figure-6/meta.json" || fail "figure-6's meta.json does not say backend ibv"
grep -q '"params": "keys=300 pool=256MB"' "$OUT/results/figure-6/meta.json" ||
  fail "figure-6's meta.json does not record the params"
echo "CSV: the key-value store (RPC-MW type-2, fillsync, 300 keys) measured on ibv: $kv"

step "shutting the guest down"
cp "$T"/*.log "$OUT/"
finish || fail "the guest did not finish cleanly (exit $?; $OUT/vm-run.log): $(tail -5 "$OUT/vm-run.log" | tr '\n' ' ')"
trap 'rm -rf "$T"' EXIT
phase "guest shutdown"
echo "phases: $(printf '%s; ' "${phases[@]}")total $(($(date +%s) - t_start)) s"
echo "cluster tier: ok"
