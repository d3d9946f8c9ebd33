#!/bin/bash
# mn-daemon-death.sh BUILD_DIR - inside the rxe guest: a CN process whose
# spawned `dmbench mn` daemon dies mid-run fails at once, naming how it died
# (harness/testbed.cc WatchMnDaemon), instead of waiting for replies until the
# stall limit (60 s). The run READs over rxe1 from the daemon on rxe0; the
# daemon is killed with SIGKILL once the READs flow. Passes when the CN exits
# non-zero within 20 s of the kill and its error says "killed by signal 9".
set -u
B=${1:?usage: mn-daemon-death.sh BUILD_DIR}
D=$B/cli/dmbench
dir=$(mktemp -d)
fail() { echo "mn-daemon-death: FAILED: $*" >&2; cat "$dir/cn.err" >&2; kill "$cn" 2>/dev/null; exit 1; }

# Far more READs than run before the kill: the run cannot end on its own.
DMB_IBV_STALL_MS=120000 timeout 300 "$D" micro access --backend ibv --devices rxe1 --mn spawn \
  --mn-device rxe0 --system rpc_mw --pool 64MB --op read --size 64 --ops 100000000 \
  >"$dir/cn.out" 2>"$dir/cn.err" &
cn=$!
# Our daemon is the CN process's child, timeout's grandchild: never another
# test's daemon (the tier runs tests side by side, with daemons of their own).
daemon=""
for _ in $(seq 600); do
  micro=$(pgrep -P "$cn" | head -1)
  [ -n "$micro" ] && daemon=$(pgrep -P "$micro" -f "dmbench mn" | head -1)
  [ -n "$daemon" ] && break
  sleep 0.1
done
[ -n "$daemon" ] || fail "no spawned daemon appeared"
# READs flow once the daemon has served the CN's allocation: ask its stats
# (a fixed wait killed a slow, sanitized daemon before it listened).
port=""
served=0
for _ in $(seq 1200); do
  [ -z "$port" ] && port=$(grep -o 'bootstrap on TCP port [0-9]*' "$dir/cn.err" | awk '{print $5}')
  if [ -n "$port" ] && exec 3<>"/dev/tcp/127.0.0.1/$port" 2>/dev/null; then
    echo stats >&3
    read -r -t 10 _ok _pool _total _in_use served _rejected <&3
    exec 3<&-
    [ "${served:-0}" -gt 0 ] 2>/dev/null && break
  fi
  sleep 0.1
done
[ "${served:-0}" -gt 0 ] 2>/dev/null || fail "the daemon served no allocation"
sleep 1   # READs flowing
kill -0 "$cn" 2>/dev/null || fail "the CN process ended before the daemon was killed"
kill -9 "$daemon"
t0=$(date +%s)
wait "$cn"
rc=$?
dt=$(($(date +%s) - t0))
echo "the CN process exited $rc, $dt s after the daemon was killed"
[ "$rc" != 0 ] || fail "the CN process exited 0 although its MN died"
[ "$rc" != 124 ] || fail "the CN process hung until timeout"
[ "$dt" -le 20 ] || fail "the CN process took $dt s to notice its MN died"
grep -q "killed by signal 9" "$dir/cn.err" || fail "its error does not say how the MN died"
echo "mn-daemon-death: ok"
