#!/usr/bin/env bash
# Active expiry next to Redis's: N keys (default 1,000,000) written with a
# TTL of TTL_MS (1000) through redis-cli --pipe, then the time from the end of
# the load until DBSIZE is 0, and used_memory / RSS at that point and once
# the node has settled (REST seconds later). Runs raftset (one node) and
# redis-server (appendfsync always) in turn, RUNS times (default 3), and
# prints medians and raftset/redis ratios.
#
#   bench/expiry.sh
#   RUNS=1 N=200000 bench/expiry.sh
#
# Needs redis-server and redis-cli (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-1000000}
TTL_MS=${TTL_MS:-1000}
REST=${REST:-10}
. bench/lib.sh
bench_init
info() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: -v k="$2" '$1==k{print $2}'; }
mb() { echo "$(info "$1" "$2") / 1000000" | bc -l | xargs printf '%.1f'; }
now() { date +%s.%N; }

# The load: SET key:i 16-byte-value PX TTL_MS, as RESP.
awk -v n="$N" -v ttl="$TTL_MS" 'BEGIN {
  for (i = 0; i < n; i++) { k = sprintf("key:%012d", i)
    printf "*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$16\r\nvvvvvvvvvvvvvvvv\r\n$2\r\nPX\r\n$%d\r\n%s\r\n", length(k), k, length(ttl ""), ttl }
}' >"$work/load.resp"

# measure PORT → "load_s drain_s used_mb rss_mb rest_used_mb rest_rss_mb"
measure() {
  local p=$1 t0 t1 t2
  t0=$(now)
  redis-cli -p "$p" --pipe <"$work/load.resp" >/dev/null
  t1=$(now)
  while [ "$(redis-cli -p "$p" DBSIZE)" != 0 ]; do sleep 0.05; done
  t2=$(now)
  local used rss
  used=$(mb "$p" used_memory); rss=$(mb "$p" used_memory_rss)
  sleep "$REST"
  echo "$(echo "$t1 - $t0" | bc -l) $(echo "$t2 - $t1" | bc -l) $used $rss $(mb "$p" used_memory) $(mb "$p" used_memory_rss)"
}

printf '%s keys, TTL %s ms, %s runs (load %s)\n' "$N" "$TTL_MS" "$RUNS" "$(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq 1 "$RUNS"); do
  rp=$(free_port); start_redis "$rp" "$work/redis-$run"
  echo "redis $(measure "$rp")" >>"$work/results"; stop_last
  sp=$(free_port); start_raftset "$sp" "$work/raftset-$run"
  echo "raftset $(measure "$sp")" >>"$work/results"; stop_last
  rm -rf "$work/redis-$run" "$work/raftset-$run"*
done
printf '%-8s %8s %9s %9s %9s %10s %10s\n' server load_s drain_s used_MB rss_MB rest_used rest_rss
col() { awk -v s="$1" -v c="$2" '$1==s{print $c}' "$work/results" | median; }
for s in raftset redis; do
  printf '%-8s %8.2f %9.2f %9.1f %9.1f %10.1f %10.1f\n' "$s" "$(col $s 2)" "$(col $s 3)" "$(col $s 4)" "$(col $s 5)" "$(col $s 6)" "$(col $s 7)"
done
printf 'ratio    %8.2f %9.2f\n' "$(echo "$(col raftset 2) / $(col redis 2)" | bc -l)" "$(echo "$(col raftset 3) / $(col redis 3)" | bc -l)"
printf 'per run: server load_s drain_s used rss rest_used rest_rss\n'; cat "$work/results"
