#!/bin/bash
# ibv-point-failures.sh BUILD_DIR - figure.yml backend=ibv's handling of a
# point whose MN daemon or CN fails (ansible/tasks/ibv-point.yml), without
# RDMA devices or ssh (ctest ansible.ibv_point_failures): the mn and cn hosts
# are this machine (ansible_connection=local), each with a stand-in `dmbench`
# in its prefix that plays the daemon (`mn`: dies at start, or listens and then
# dies, or listens until stopped) and a CN that fails (`run`: exit 5). The
# controller's dmbench is BUILD_DIR's (points, --collect).
# Checks, case by case: figure.yml fails naming the point; the reason carries
# the CN's exit status, whether the daemon was alive, and the start's stderr
# (a daemon that died before listening, with its last words); the daemon's log
# comes back as logs/<point>.mn.log; no stand-in daemon is left running.
# (The cluster tier runs the same playbook on real Soft-RoCE hosts, where
# points succeed.)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
B=$(cd "${1:?usage: ibv-point-failures.sh BUILD_DIR}" && pwd)
source "$HERE/tier-lib.sh"
command -v ansible-playbook >/dev/null || fail "ansible-playbook missing: apt-get install ansible (make deps)"

T=$(mktemp -d /tmp/dmb-ibv-point.XXXXXX)
marker="dmb-stand-in-$$"
trap 'pkill -f "$marker" 2>/dev/null || true; rm -rf "$T"' EXIT

# The stand-in: its behaviour is read from $T/mode at each call.
for h in h1 h2; do
  mkdir -p "$T/$h/bin"
  cat >"$T/$h/bin/dmbench" <<STANDIN
#!/bin/bash
# $marker
mode=\$(cat "$T/mode")
case \$1 in
  devices) echo "fake0: port 1 ACTIVE (stand-in)" ;;
  mn)
    while [ \$# -gt 0 ]; do [ "\$1" = --port-file ] && pf=\$2; shift; done
    if [ "\$mode" = die-at-start ]; then echo "stand-in daemon: cannot open device fake0" >&2; exit 3; fi
    echo 40000 >"\$pf"
    if [ "\$mode" = die-after-listen ]; then sleep 0.5; exit 4; fi
    exec -a "$marker-daemon" sleep 600 ;;
  run)  # outlives a daemon that dies after listening
    if [ "\$mode" = die-after-listen ]; then sleep 2; fi
    echo "stand-in CN: no RDMA here" >&2; exit 5 ;;
  *) echo "stand-in dmbench: \$*" >&2; exit 2 ;;
esac
STANDIN
  chmod +x "$T/$h/bin/dmbench"
done

inv=$T/inventory.ini
host() { echo "$1 ansible_connection=local dmb_prefix=$T/$1 dmb_work_dir=$T/$1/work dmb_rdma_device=fake0 dmb_mn_cpus=''"; }
{
  echo "[mn]"
  host h1
  echo "[cn]"
  host h2
} >"$inv"
id=alloc-static_mr-threads_1-seed1
args=(-i "$inv" -e figure=sweep-small -e backend=ibv -e "filter=$id" -e "dmb_spec_dir=$HERE"
  -e "dmb_controller_build=$B" -e dmb_mn_address=127.0.0.1 -e "ansible_python_interpreter=/usr/bin/python3")

# case MODE EXPECTED_DAEMON_STATE: one run with the stand-in in MODE.
case_run() {
  local mode=$1 state=$2
  step "daemon: $mode"
  echo "$mode" >"$T/mode"
  rm -rf "$T/results"
  if playbook figure.yml "${args[@]}" -e "dmb_results=$T/results"; then
    fail "$mode: figure.yml succeeded with a failing CN"
  fi
  local log=$T/last.log
  grep -q "1 point(s) failed: $id: CN on h2 exited 5" "$log" ||
    fail "$mode: the failure does not name the point and the CN's exit status (see above)"
  grep -q "stand-in CN: no RDMA here" "$log" || fail "$mode: the CN's stderr is not in the reason"
  grep -q "MN daemon on h1: $state" "$log" || fail "$mode: the reason does not say the daemon was $state"
  [ -f "$T/results/sweep-small/logs/$id.mn.log" ] || fail "$mode: the daemon's log did not come back"
  if pgrep -f "$marker-daemon" >/dev/null; then fail "$mode: a stand-in daemon is left running"; fi
  echo "$mode: named the point, CN exit 5, daemon $state; daemon log back; nothing left running"
}

case_run die-at-start dead
grep -q "the MN daemon exited before listening: stand-in daemon: cannot open device fake0" "$T/last.log" ||
  fail "die-at-start: the reason does not carry the daemon's last words"
grep -q "cannot open device fake0" "$T/results/sweep-small/logs/$id.mn.log" ||
  fail "die-at-start: logs/$id.mn.log does not hold the daemon's output"
case_run die-after-listen dead
case_run listen alive
echo "ibv point failures: ok"
