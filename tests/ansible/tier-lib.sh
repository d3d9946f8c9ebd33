# tier-lib.sh - sourced by the Ansible tiers (sweep-tier.sh, cluster-tier.sh):
# the test hosts, the inventory's connection settings, running a playbook with
# its output kept in $T/last.log, and the checks on that output.

skip() {
  echo "SKIPPED: $*"
  exit 77
}
fail() {
  echo "FAILED: $*" >&2
  exit 1
}
step() { echo "=== $(date +%T) $*"; }

# Root, network namespaces, sshd and ansible-playbook, or skip/fail saying which.
need_netns_hosts() {
  [ "$(id -u)" = 0 ] || skip "needs root to make network namespaces (test hosts)"
  local probe=dmbprobe$$
  ip netns add "$probe" 2>/dev/null || skip "cannot create network namespaces here (ip netns add)"
  ip netns del "$probe"
  [ -x /usr/sbin/sshd ] || fail "sshd missing: apt-get install openssh-server (make deps)"
  command -v ansible-playbook >/dev/null || fail "ansible-playbook missing: apt-get install ansible (make deps)"
}

# start_hosts DIR N: N hosts (one set at a time on this machine: a lock).
start_hosts() {
  exec 9>/run/lock/dmbench-netns-hosts.lock
  flock -w 900 9 || fail "another tier holds the test hosts (/run/lock/dmbench-netns-hosts.lock) for 15 minutes"
  "$HERE/netns-hosts.sh" down "$1/net" "$2" # leftovers of a killed run
  "$HERE/netns-hosts.sh" up "$1/net" "$2"
  HOSTS_N=$2
}
stop_hosts() {
  "$HERE/netns-hosts.sh" down "$1/net" "${HOSTS_N:-3}" || true
  rm -rf "$1"
}

# connection_vars GROUP DIR: the [GROUP:vars] every test host needs.
connection_vars() {
  echo "[$1:vars]"
  echo "ansible_user=root"
  echo "ansible_ssh_private_key_file=$2/net/id_ed25519"
  echo "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR'"
}

# playbook FILE ARGS...: ansible-playbook from ansible/ (its ansible.cfg),
# output shown and kept in $T/last.log (and, as it comes, in $LIVE_LOG when
# set: the guest tier's window on a slow run); its exit status.
playbook() {
  local pb=$1
  shift
  local rc=0
  (cd "$ROOT/ansible" && ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1 \
    ansible-playbook "$pb" "$@") 2>&1 | tee "${LIVE_LOG:-/dev/null}" >"$T/last.log" || rc=$?
  grep -E '^(PLAY|TASK|fatal|failed|changed|ok: \[localhost\]|.*(to run|collected))|: ok=' "$T/last.log" |
    grep -v '^ok: ' || true
  if [ $rc != 0 ]; then
    echo "--- ansible-playbook $pb exited $rc; its failures:"
    grep -A6 -E '^(fatal|failed):' "$T/last.log" | head -40 || true
  fi
  return $rc
}

# expect_no_change LOG: every host's recap says changed=0.
expect_no_change() {
  local bad
  bad=$(grep -E ': ok=.* changed=[1-9]' "$1" || true)
  [ -z "$bad" ] || fail "the second run changed something: $bad (tasks: $(grep -B3 '^changed:' "$1" | grep TASK | tr '\n' ' '))"
  echo "second run: changed=0 on every host"
}
