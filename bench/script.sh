#!/usr/bin/env bash
# Script throughput: EVALSHA of a three-command script (SADD, SISMEMBER,
# SCARD on one key) at -P 10 against one raftset node and redis-server with
# appendfsync always (the durable single-node anchor), alternating; prints
# medians and the raftset/redis ratio.
#
#   bench/script.sh                 # RUNS=3 N=300000 by default
#   RUNS=5 N=1000000 bench/script.sh
#
# Needs redis-server and redis-benchmark (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-300000}
P=${P:-10}
. bench/lib.sh
bench_init

body="redis.call('sadd', KEYS[1], ARGV[1]) redis.call('sismember', KEYS[1], ARGV[1]) return redis.call('scard', KEYS[1])"
# rps PORT → EVALSHA requests per second (the script loaded first)
rps() {
  local sha
  sha=$(redis-cli -p "$1" SCRIPT LOAD "$body")
  redis-benchmark -p "$1" -c 50 -P "$P" -n "$N" -r 200000 --threads 2 -q --csv \
    evalsha "$sha" 1 __rand_int__ __rand_int__ 2>/dev/null |
    awk -F'","' 'NR>1 || !/^"test"/ {gsub(/"/,"",$2); print $2; exit}'
}

r_list=(); s_list=()
for run in $(seq 1 "$RUNS"); do
  rp=$(free_port); start_redis "$rp" "$work/redis-$run"
  sp=$(free_port); start_raftset "$sp" "$work/raftset-$run"
  r_list+=("$(rps "$rp")")
  s_list+=("$(rps "$sp")")
  stop_last; stop_last
  rm -rf "$work/redis-$run" "$work/raftset-$run"
  echo "run $run: raftset ${s_list[-1]} redis ${r_list[-1]}" >&2
done
r=$(printf '%s\n' "${r_list[@]}" | median); s=$(printf '%s\n' "${s_list[@]}" | median)
printf '%-44s %-3s %12s %12s %7s\n' command P raftset redis ratio
printf '%-44s %-3s %12s %12s %7.2f\n' "evalsha (sadd, sismember, scard)" "$P" "$s" "$r" "$(echo "$s / $r" | bc -l)"
