#!/bin/bash
# two-cn-processes.sh BUILD_DIR - inside the rxe guest: the multi-process
# deployment as a user runs it. One `dmbench mn` daemon on rxe0, two
# `dmbench cn` processes on rxe1 allocating, freeing and reading concurrently.
# Passes when both CNs finish without a failed operation, the daemon handed
# them disjoint CN indexes (no NOT_OWNER), holds no chunk afterwards, and exits
# cleanly on `shutdown`, after a process that sent a 2 MB line and one that
# never read its replies lost only their own connections. Left idle, the daemon sleeps (IbvRuntime's idle
# waiter and its bootstrap look backing off to every 2 ms): it uses under 30%
# of a core over 2 s, where a spinning loop uses all of one, and still
# answers at once.
set -u
B=${1:?usage: two-cn-processes.sh BUILD_DIR}
D=$B/cli/dmbench
SYS=(--system rpc_mw --set mw_type=2)
dir=$(mktemp -d)
fail() { echo "two-cn-processes: FAILED: $*" >&2; kill "$mn" 2>/dev/null; exit 1; }

timeout 300 "$D" mn "${SYS[@]}" --device rxe0 --port 0 --port-file "$dir/port" --pool 64MB \
  2>"$dir/mn.err" &
mn=$!
for _ in $(seq 300); do [ -s "$dir/port" ] && break; sleep 0.1; done
[ -s "$dir/port" ] || fail "the MN daemon did not start listening"
port=$(cat "$dir/port")

# Two misbehaving processes first: one sends 2 MB with no newline, one sends
# requests whose 100 KB replies it never reads. Each loses its connection
# (the daemon says why on stderr); the daemon goes on serving the CNs below.
(head -c 2000000 /dev/zero | tr '\0' a >"/dev/tcp/127.0.0.1/$port") 2>/dev/null
word=$(head -c 100000 /dev/zero | tr '\0' x)   # echoed in the 'unknown request' reply
(exec 4<>"/dev/tcp/127.0.0.1/$port" && for _ in $(seq 400); do echo "$word" >&4; done) 2>/dev/null
for why in "line longer than 1 MB" "has not read its replies"; do
  grep -q "closing a bootstrap connection: bootstrap: .*$why" "$dir/mn.err" ||
    { cat "$dir/mn.err" >&2; fail "the daemon did not close the connection that $why"; }
done

for i in 1 2; do
  timeout 240 "$D" cn --mn "127.0.0.1:$port" "${SYS[@]}" --devices rxe1 --threads 2 --ops 40 \
    --json >"$dir/cn$i.json" 2>"$dir/cn$i.err" &
  eval "c$i=$!"
done
wait "$c1"; r1=$?
wait "$c2"; r2=$?
for i in 1 2; do
  echo "--- cn$i"; cat "$dir/cn$i.json"
done
[ $r1 = 0 ] && [ $r2 = 0 ] || { cat "$dir"/cn*.err >&2; fail "cn exit codes $r1 and $r2"; }
if grep -q '"failures": [1-9]' "$dir"/cn*.json; then fail "a CN saw failed operations"; fi

# CPU ticks (user + system) of the daemon, the child of `timeout`.
ticks() { awk '{ print $14 + $15 }' "/proc/$(pgrep -P "$mn" | head -1)/stat"; }
sleep 1   # past the loop's spin (4096 turns without a completion)
t0=$(ticks)
sleep 2
t1=$(ticks)
hz=$(getconf CLK_TCK)
echo "idle daemon: $((t1 - t0)) CPU ticks in 2 s ($hz a second)"
[ $((t1 - t0)) -lt $((2 * hz * 30 / 100)) ] || fail "the idle daemon used $((t1 - t0)) of $((2 * hz)) ticks: it does not sleep"

exec 3<>"/dev/tcp/127.0.0.1/$port" || fail "cannot reach the daemon for stats"
echo stats >&3
read -r -t 30 stats <&3
echo "daemon stats: $stats (ok pool total in_use served rejected)"
read -r ok _pool _total in_use served rejected <<<"$stats"
[ "$ok" = ok ] || fail "stats: $stats"
[ "$in_use" = 0 ] || fail "$in_use chunks still held after both CNs freed everything"
[ "$rejected" = 0 ] || fail "the daemon rejected $rejected requests (CN indexes collided?)"
[ "$served" -gt 0 ] || fail "the daemon served no RPC"
echo "shutdown $(cat "$dir/port.token")" >&3
read -r -t 30 bye <&3
wait "$mn"; rm=$?
[ "$bye" = ok ] && [ $rm = 0 ] || fail "daemon shutdown: reply '$bye', exit $rm"
echo "two-cn-processes: ok"
