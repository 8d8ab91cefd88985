#!/usr/bin/env bash
# RDB write and read speed for the seed dataset (200,000 sets of ~50
# twelve-digit members, from 10,000,000 random SADDs), side by side with the
# redis-server on this machine: its SAVE and its load of the same data.
#
#   bench/rdb.sh          # RUNS=3
#
# Note: Debian's redis-server is 7.0, which stores these sets as hashtables
# (7.2 would use listpacks, and its file would be smaller and faster to load).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
start() {
  redis-server --port "$port" --bind 127.0.0.1 --dir "$work" --save "" --appendonly no --daemonize no \
    --logfile "$work/redis.log" & pid=$!
  for _ in $(seq 1 600); do redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && return; sleep 0.05; done
  echo "redis did not start" >&2; exit 1
}
now() { date +%s.%N; }
start
redis-benchmark -p "$port" -c 50 -P 10 -n 10000000 -r 200000 --threads 2 -q sadd __rand_int__ __rand_int__ >/dev/null
echo "redis: $(redis-cli -p "$port" DBSIZE) keys"
saves=(); loads=()
for _ in $(seq 1 "$RUNS"); do
  t0=$(now); redis-cli -p "$port" SAVE >/dev/null; t1=$(now)
  saves+=("$(echo "$t1 - $t0" | bc -l)")
done
size=$(stat -c %s "$work/dump.rdb")
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
for _ in $(seq 1 "$RUNS"); do
  t0=$(now); start; t1=$(now)
  loads+=("$(echo "$t1 - $t0" | bc -l)")
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf 'redis-server %s: SAVE median %.3f s, load (start to first PONG) median %.3f s, file %.1f MB\n' \
  "$(redis-server --version | awk '{print $3}')" "$(median "${saves[@]}")" "$(median "${loads[@]}")" "$(echo "$size/1000000" | bc -l)"
echo "raftset (go test -bench 'WriteSeed|ReadSeed' ./snapshot/, -count $RUNS):"
go test -run '^$' -bench 'WriteSeed|ReadSeed' -benchtime 3x -count "$RUNS" ./snapshot/ | grep -E '^Benchmark'
