#!/usr/bin/env bash
# What the per-slot key index (fsm/slotindex.go) costs a node in memory:
# INFO used_memory of a single-node raftset (cluster-enabled yes) holding N
# keys "key:<i>" = "value:<i>" (what DEBUG POPULATE writes), at rest 2*REST
# seconds after the load, on a node that never built the index and on one
# whose first CLUSTER COUNTKEYSINSLOT built it REST seconds after the load
# (two nodes, so that both had the same time to collect and defragment);
# next to redis-server 7.0 populated with DEBUG POPULATE with
# cluster-enabled no and yes, whose difference is Redis's own slot-to-keys
# index. Prints bytes per key for each run.
#
#   bench/slot-index.sh                 # RUNS=3 N=1000000 REST=25
# Needs redis-server and redis-cli (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-1000000}
REST=${REST:-25}
. bench/lib.sh
bench_init
used() { redis-cli -p "$1" INFO memory | awk -F: '/^used_memory:/ {print $2+0}'; }
wait_ping() {
  for _ in $(seq 1 400); do
    [ "$(redis-cli -p "$1" PING 2>/dev/null)" = PONG ] && return 0
    sleep 0.05
  done
  echo "server on $1 did not answer" >&2; return 1
}
stop_all() { for p in "${pids[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done; pids=(); }
awk -v n="$N" 'BEGIN { for (i = 0; i < n; i++) { k = "key:" i; v = "value:" i
  printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length(v), v } }' >"$work/keys.resp"

printf '%-4s %14s %14s %14s %14s %14s\n' run redis-plain redis-cluster raftset raftset+index index
for run in $(seq 1 "$RUNS"); do
  perkey=()
  for mode in no yes; do
    p=$(free_port); mkdir -p "$work/redis-$run-$mode"
    redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --enable-debug-command local --dir "$work/redis-$run-$mode" \
      --cluster-enabled "$mode" --cluster-config-file "$work/redis-$run-$mode/nodes.conf" >"$work/redis.log" 2>&1 &
    pids+=($!)
    wait_ping "$p" || { cat "$work/redis.log" >&2; exit 1; }
    u0=$(used "$p")
    redis-cli -p "$p" DEBUG POPULATE "$N" >/dev/null
    u1=$(used "$p")
    perkey+=("$(awk -v a="$u0" -v b="$u1" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }')")
    stop_all
  done
  for index in no yes; do
    p=$(free_port); q=$(free_port)
    "$work/raftset" --port "$p" --raft-addr "127.0.0.1:$q" --dir "$work/raftset-$run-$index" --cluster-enabled yes \
      >"$work/raftset.log" 2>&1 &
    pids+=($!)
    wait_ready "$p"
    u0=$(used "$p")
    redis-cli -p "$p" --pipe <"$work/keys.resp" >/dev/null
    [ "$(redis-cli -p "$p" DBSIZE)" = "$N" ] || { echo "raftset holds $(redis-cli -p "$p" DBSIZE) keys, want $N" >&2; exit 1; }
    sleep "$REST"
    [ "$index" = yes ] && redis-cli -p "$p" CLUSTER COUNTKEYSINSLOT 0 >/dev/null
    sleep "$REST"
    u1=$(used "$p")
    perkey+=("$(awk -v a="$u0" -v b="$u1" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }')")
    stop_all
  done
  printf '%-4s %14s %14s %14s %14s %14s\n' "$run" "${perkey[@]}" \
    "$(awk -v a="${perkey[2]}" -v b="${perkey[3]}" 'BEGIN { printf "%.1f", b - a }')"
done
