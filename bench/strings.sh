#!/usr/bin/env bash
# Strings next to Redis (redis-server with appendfsync always, the durable
# single-node anchor), one raftset node, in the same run:
#   set200k  3,000,000 SETs of 32-byte values over 200,000 keys (the issue's reproduction)
#   ttl      SETEX then GET, -P 50 -c 50, over 100,000 keys with a TTL
#   plain    SET then GET, the same keys without a TTL (after FLUSHALL)
# For each phase: requests/s of each command, and used_memory / RSS REST
# seconds after the phase's last write ("at rest"). Prints medians of RUNS
# runs and raftset/redis ratios.
#
#   bench/strings.sh                  # RUNS=3 N=1000000 REST=25
#   RUNS=1 N=300000 REST=10 bench/strings.sh
#
# Needs redis-server and redis-benchmark (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-1000000}
REST=${REST:-25}
. bench/lib.sh
bench_init
info() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: -v k="$2" '$1==k{print $2}'; }
mb() { echo "$(info "$1" "$2") / 1000000" | bc -l | xargs printf '%.2f'; }
V=$(printf 'v%.0s' $(seq 32))
# rps PORT N RANGE COMMAND... → requests per second
rps() {
  local port=$1 n=$2 r=$3; shift 3
  redis-benchmark -p "$port" -c 50 -P 50 -n "$n" -r "$r" --threads 2 -q --csv "$@" 2>/dev/null |
    awk -F'","' 'NR>1 || !/^"test"/ {gsub(/"/,"",$2); print $2; exit}'
}
# phase NAME PORT → appends "NAME server metric value" lines
phase() {
  local name=$1 server=$2 port=$3
  case "$name" in
  set200k)
    echo "$name $server set $(rps "$port" 3000000 200000 set k:__rand_int__ "$V")" ;;
  ttl)
    echo "$name $server setex $(rps "$port" "$N" 100000 setex k:__rand_int__ 100000 "$V")"
    echo "$name $server get $(rps "$port" "$N" 100000 get k:__rand_int__)" ;;
  plain)
    redis-cli -p "$port" FLUSHALL >/dev/null
    echo "$name $server set $(rps "$port" "$N" 100000 set k:__rand_int__ "$V")"
    echo "$name $server get $(rps "$port" "$N" 100000 get k:__rand_int__)" ;;
  esac
}

echo "machine load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq 1 "$RUNS"); do
  rp=$(free_port); start_redis "$rp" "$work/redis-$run"
  sp=$(free_port); start_raftset "$sp" "$work/raftset-$run"
  for name in set200k ttl plain; do
    [ "$name" = set200k ] || { redis-cli -p "$rp" FLUSHALL >/dev/null; redis-cli -p "$sp" FLUSHALL >/dev/null; }
    phase "$name" raftset "$sp" >>"$work/results"
    phase "$name" redis "$rp" >>"$work/results"
    sleep "$REST"
    for s in raftset:$sp redis:$rp; do
      echo "$name ${s%%:*} used_mb $(mb "${s##*:}" used_memory)" >>"$work/results"
      echo "$name ${s%%:*} rss_mb $(mb "${s##*:}" used_memory_rss)" >>"$work/results"
      echo "$name ${s%%:*} keys $(redis-cli -p "${s##*:}" DBSIZE)" >>"$work/results"
    done
  done
  for p in "${pids[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done; pids=()
  rm -rf "$work/redis-$run" "$work/raftset-$run"*
done
echo "machine load after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-8s %14s %14s %7s\n' phase metric raftset redis ratio
col() { awk -v p="$1" -v s="$2" -v m="$3" '$1==p && $2==s && $3==m {print $4}' "$work/results" | median; }
while read -r name metric; do
  a=$(col "$name" raftset "$metric"); b=$(col "$name" redis "$metric")
  [ -n "$a" ] && [ -n "$b" ] || continue
  printf '%-8s %-8s %14s %14s %7.2f\n' "$name" "$metric" "$a" "$b" "$(echo "$a / $b" | bc -l)"
done < <(awk '{print $1, $3}' "$work/results" | awk '!seen[$0]++')
echo "per run:"; cat "$work/results"
