#!/bin/bash
# cluster-tier.sh BUILD_DIR - the Ansible cluster tier, inside the QEMU guest
# of tests/rxe/vm-run.sh (make test-ansible-cluster, part of make test):
#
#   tests/rxe/vm-run.sh -s SHARE_DIR -- tests/ansible/cluster-tier.sh BUILD_DIR
#
# BUILD_DIR: the build whose dmbench and dmb_micro are shipped to the hosts and
# merge the results (make test-ansible-cluster passes build/release).
#
# Three hosts in network namespaces, each with its own sshd and address
# (netns-hosts.sh) and its own Soft-RoCE device: dmbh1 the mn host (rxe0),
# dmbh2 and dmbh3 cn hosts (rxe1, rxe2). rxe0 and rxe1 are guest-up.sh's pair
# over veth0/veth1; rxe2 sits on its own veth pair. The devices stay in the
# guest's first namespace (rxe in Linux 6.1 only listens there) and each host's
# processes use theirs by name (dmb_rdma_device), as RDMA devices are shared
# across namespaces; the daemon and the CN talk over the hosts' own addresses.
# Then: site.yml twice (the second run must change nothing; binaries shipped
# from BUILD_DIR), figure.yml -e figure=figure-10 -e backend=ibv on
# $CLUSTER_FILTER (default: RPC-MW type-1 allocation, which rxe runs, and ODRP
# allocation, which it cannot: no cross-channel QPs). Checks: the CSV holds
# both points with meta.json backend ibv naming hosts and devices; RPC-MW's row
# has allocations and no failure; ODRP's row is skipped naming cross_channel;
# rxe0's and rxe1's packet counters rose (the RDMA traffic crossed from the cn
# host's device to the mn host's and back). Results in $VM_SHARE (make's
# build/<preset>/ansible-cluster): results/figure-10/, ansible-*.log, and
# ansible-live.log as the playbooks run.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
B=$(cd "${1:?usage: cluster-tier.sh BUILD_DIR}" && pwd)
source "$HERE/tier-lib.sh"
OUT=${VM_SHARE:-$B/ansible-cluster}
FILTER=${CLUSTER_FILTER:-alloc-[or][dp]*[1p]-threads_1-seed1}
export LIVE_LOG=$OUT/ansible-live.log

[ -d /sys/class/infiniband/rxe0 ] || "$ROOT/tests/rxe/guest-up.sh" >/dev/null ||
  fail "Soft-RoCE devices did not come up (tests/rxe/guest-up.sh)"
if [ ! -d /sys/class/infiniband/rxe2 ]; then
  ip link add veth2 type veth peer name veth3
  ip link set veth2 up
  ip link set veth3 up
  ip addr add 10.77.1.1/24 dev veth2
  rdma link add rxe2 type rxe netdev veth2
fi
mkdir -p /run/lock
need_netns_hosts
T=$(mktemp -d /tmp/dmb-cluster-tier.XXXXXX)
start_hosts "$T" 3
trap 'cp "$T"/*.log "$OUT/" 2>/dev/null || true; stop_hosts "$T"' EXIT

inv=$T/inventory.ini
{
  echo "[mn]"
  echo "dmbh1 ansible_host=10.79.0.11 dmb_rdma_device=rxe0 dmb_prefix=$T/dmbh1 dmb_work_dir=$T/dmbh1/work"
  echo "[cn]"
  echo "dmbh2 ansible_host=10.79.0.12 dmb_rdma_device=rxe1 dmb_prefix=$T/dmbh2 dmb_work_dir=$T/dmbh2/work"
  echo "dmbh3 ansible_host=10.79.0.13 dmb_rdma_device=rxe2 dmb_prefix=$T/dmbh3 dmb_work_dir=$T/dmbh3/work"
  connection_vars all "$T"
} >"$inv"
common=(-i "$inv" -e dmb_install=ship -e "dmb_controller_build=$B")

counters() { for d in rxe0 rxe1; do
  c=/sys/class/infiniband/$d/ports/1/hw_counters
  echo "$d $(cat "$c/sent_pkts") $(cat "$c/rcvd_pkts")"
done; }

step "site.yml, first run"
playbook site.yml "${common[@]}"
cp "$T/last.log" "$T/ansible-site-1.log"
step "site.yml, second run: nothing may change"
playbook site.yml "${common[@]}"
cp "$T/last.log" "$T/ansible-site-2.log"
expect_no_change "$T/last.log"

before=$(counters)
step "figure.yml figure=figure-10 backend=ibv filter=$FILTER"
rm -rf "$OUT/results"
playbook figure.yml "${common[@]}" -e figure=figure-10 -e backend=ibv -e "filter=$FILTER" \
  -e "dmb_results=$OUT/results" || { cp "$T/last.log" "$T/ansible-figure.log"; fail "figure.yml failed"; }
cp "$T/last.log" "$T/ansible-figure.log"
after=$(counters)

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
echo "cluster tier: ok"
