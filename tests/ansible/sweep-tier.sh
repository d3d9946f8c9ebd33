#!/bin/bash
# sweep-tier.sh BUILD_DIR - the Ansible sweep tier (ctest ansible.sweep_tier):
# three worker hosts in network namespaces (netns-hosts.sh), each with its own
# sshd and address, prepared by ansible/site.yml (binaries shipped from
# BUILD_DIR; run twice, the second run must change nothing), then
# ansible/figure.yml backend=sim deals sweep-small.yaml's points over them.
# Checks: the merged CSV and compare.csv equal a local `dmbench run` of the
# same spec row for row; meta.json names the backend and the hosts; every
# worker ran its shard; a point lost on the controller and its worker is run
# again, and only it (resume); a bad filter fails naming host and task.
# Exit 77 (skipped) without root or network namespaces.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
B=$(cd "${1:?usage: sweep-tier.sh BUILD_DIR}" && pwd)
source "$HERE/tier-lib.sh"

need_netns_hosts
T=$(mktemp -d /tmp/dmb-sweep-tier.XXXXXX)
start_hosts "$T" 3
trap 'stop_hosts "$T"' EXIT

inv=$T/inventory.ini
{
  echo "[workers]"
  while read -r name addr; do
    echo "$name ansible_host=$addr dmb_prefix=$T/$name dmb_work_dir=$T/$name/work"
  done <"$T/net/hosts"
  connection_vars workers "$T"
} >"$inv"
common=(-i "$inv" -e dmb_install=ship -e "dmb_controller_build=$B")

step "site.yml, first run"
playbook site.yml "${common[@]}"
step "site.yml, second run: nothing may change"
playbook site.yml "${common[@]}"
expect_no_change "$T/last.log"

fig=(-e figure=sweep-small -e backend=sim -e "dmb_spec_dir=$HERE" -e "dmb_results=$T/results" -e dmb_jobs=1)
step "figure.yml backend=sim over 3 workers"
playbook figure.yml "${common[@]}" "${fig[@]}"

step "the same spec on this machine"
"$B/cli/dmbench" run "$HERE/sweep-small.yaml" --results "$T/local" --jobs 2 2>&1 | tail -1
same_results() {
  for f in sweep-small.csv compare.csv; do
    diff -u "$T/local/sweep-small/$f" "$T/results/sweep-small/$f" ||
      fail "the merged $f differs from the local run's (above)"
  done
  rows=$(($(wc -l <"$T/results/sweep-small/sweep-small.csv") - 1))
  [ "$rows" = 8 ] || fail "expected 8 rows in the merged CSV, found $rows"
  echo "merged sweep-small.csv and compare.csv equal the local run's ($rows rows)"
}
same_results
meta=$T/results/sweep-small/meta.json
grep -q '"backend": "sim"' "$meta" || fail "meta.json does not name backend sim: $(cat "$meta")"
for h in dmbh1 dmbh2 dmbh3; do
  grep -q "\"$h\"" "$meta" || fail "meta.json does not name worker $h"
  k=$(find "$T/$h/work/results/sweep-small/points" -name '*.json' | wc -l)
  [ "$k" -ge 2 ] || fail "worker $h has $k points of its own; every worker runs a shard of 8 points"
done
echo "meta.json names backend sim and the 3 workers; each worker holds its shard's points"

step "resume: a point lost on the controller and on its worker runs again, alone"
lost=alloc-fine_mr-threads_2-seed1.json
rm -f "$T/results/sweep-small/points/$lost" "$T"/dmbh*/work/results/sweep-small/points/"$lost"
playbook figure.yml "${common[@]}" "${fig[@]}"
ran=$(grep -o '([0-9]* to run' "$T/last.log" | awk '{s += substr($1, 2)} END {print s + 0}')
[ "$ran" = 1 ] || fail "the rerun ran $ran points; expected exactly the lost one"
same_results

step "a failing shard names its host and the task"
if playbook figure.yml "${common[@]}" "${fig[@]}" -e 'filter=no-such-point-*'; then
  fail "figure.yml with a filter matching nothing succeeded"
fi
grep -q 'fatal: \[dmbh1\]' "$T/last.log" || fail "the failure does not name host dmbh1"
grep -q "TASK \[Fail if the shard failed" "$T/last.log" || fail "the failure does not name the task"
grep -q "matches none of the 8 points" "$T/last.log" || fail "the failure does not carry dmbench's reason"
echo "the failure names host dmbh1, the task, and dmbench's reason"
echo "sweep tier: ok"
