#!/usr/bin/env bash
# Runs bench/looproto in both connection models and redis-server with
# appendfsync always, alternating, under redis-benchmark SADD at -P1 and
# -P10 (50 connections), and prints req/s and the server's CPU-seconds per
# million requests (utime+stime from /proc/<pid>/stat). ROUNDS rounds. With
# RAFTSET_BIN, a one-node raftset of that binary runs in each round too: the
# gap between it and looproto's goroutines is what Raft, the state machine
# and their hand-offs add to the connection model.
#
#   ROUNDS=3 N=200000 RAFTSET_BIN=/tmp/head bench/looproto.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
N=${N:-200000}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
. bench/lib.sh
go build -o "$work/looproto" ./bench/looproto
hz=$(getconf CLK_TCK)
# up PORT: the server answers (looproto answers every command with :1).
up() { for _ in $(seq 1 200); do [ -n "$(redis-cli -p "$1" PING 2>/dev/null)" ] && return 0; sleep 0.05; done; return 1; }
run() { # NAME PORT PID P
  local t0 t1 out
  t0=$(cpu_ticks "$3")
  out=$(redis-benchmark -h 127.0.0.1 -p "$2" -c 50 -P "$4" -n "$N" -r 200000 --threads 2 -q --csv sadd __rand_int__ __rand_int__ |
    tail -1 | cut -d, -f2 | tr -d '"')
  t1=$(cpu_ticks "$3")
  printf '%s\tP%s\t%s\t%.2f\n' "$1" "$4" "$out" "$(echo "($t1 - $t0) / $hz / ($N / 1000000)" | bc -l)"
}
printf 'server\tpipeline\treq/s\tcpu_s_per_M\n'
for r in $(seq 1 "$ROUNDS"); do
  for m in goroutines epoll redis ${RAFTSET_BIN:+raftset}; do
    port=$(free_port)
    if [ "$m" = redis ]; then
      redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly yes --appendfsync always \
        --dir "$work" --daemonize no >"$work/redis.log" 2>&1 &
    elif [ "$m" = raftset ]; then
      "$RAFTSET_BIN" --port "$port" --raft-addr "127.0.0.1:$(free_port)" --dir "$work/raftset" --loglevel warn \
        >"$work/raftset.log" 2>&1 &
    else
      "$work/looproto" -addr "127.0.0.1:$port" -mode "$m" -dir "$work" &
    fi
    pid=$!; pids+=("$pid")
    if [ "$m" = raftset ]; then wait_ready "$port"; else up "$port"; fi
    run "$m" "$port" "$pid" 1
    run "$m" "$port" "$pid" 10
    kill "$pid"; wait "$pid" 2>/dev/null || true; rm -rf "$work"/appendonly* "$work/raftset"
  done
done
