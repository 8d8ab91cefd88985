#!/usr/bin/env bash
# What cluster mode costs one node: the same single-node raftset with
# cluster-enabled no and yes (every keyed command then hashes its keys and
# asks where its slot is served), next to redis-server (appendfsync always,
# the durable single-node anchor), measured in the same run. Prints medians
# of RUNS runs and the median of the per-run cluster/standalone ratios.
#
#   bench/cluster-mode.sh                     # RUNS=3 N=300000, P=10
#   RUNS=5 N=1000000 PIPELINE=1 bench/cluster-mode.sh
# Needs redis-server and redis-benchmark (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-300000}
P=${PIPELINE:-10}
. bench/lib.sh
bench_init
rps() {
  local port=$1; shift
  redis-benchmark -p "$port" -c 50 -P "$P" -n "$N" -r 200000 --threads 2 -q --csv "$@" 2>/dev/null |
    awk -F'","' 'NR>1 || !/^"test"/ {gsub(/"/,"",$2); print $2; exit}'
}
start() { # start NAME PORT ARGS...
  local name=$1 port=$2; shift 2
  "$@" >"$work/$name.log" 2>&1 & pids+=($!)
  wait_ready "$port"
}
stop_all() { for p in "${pids[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done; pids=(); }

printf '%-38s %10s %10s %10s %9s %9s %9s\n' command standalone cluster redis st/redis cl/redis cl/st
for cmd in "sismember __rand_int__ __rand_int__" "sadd __rand_int__ __rand_int__"; do
  st=(); cl=(); rd=(); ratio=()
  for run in $(seq 1 "$RUNS"); do
    rp=$(free_port); sp=$(free_port); cp=$(free_port)
    start redis "$rp" redis-server --port "$rp" --bind 127.0.0.1 --dir "$work" --save "" --appendonly yes \
      --appendfilename "a$run.aof" --appendfsync always --daemonize no
    start st "$sp" "$work/raftset" --port "$sp" --raft-addr "127.0.0.1:$(free_port)" --dir "$work/st$run" --loglevel warn
    start cl "$cp" "$work/raftset" --port "$cp" --raft-addr "127.0.0.1:$(free_port)" --dir "$work/cl$run" --loglevel warn \
      --cluster-enabled yes
    if [ "${cmd%% *}" != sadd ]; then
      for port in "$rp" "$sp" "$cp"; do rps "$port" sadd __rand_int__ __rand_int__ >/dev/null; done
    fi
    # Alternate the order of the two raftset modes between runs.
    # shellcheck disable=SC2086
    if [ $((run % 2)) = 1 ]; then s=$(rps "$sp" $cmd); c=$(rps "$cp" $cmd); else c=$(rps "$cp" $cmd); s=$(rps "$sp" $cmd); fi
    # shellcheck disable=SC2086
    r=$(rps "$rp" $cmd)
    st+=("$s"); cl+=("$c"); rd+=("$r"); ratio+=("$(echo "$c / $s" | bc -l)")
    stop_all
  done
  s=$(printf '%s\n' "${st[@]}" | median); c=$(printf '%s\n' "${cl[@]}" | median); r=$(printf '%s\n' "${rd[@]}" | median)
  printf '%-38s %10.0f %10.0f %10.0f %9.2f %9.2f %9.2f\n' "$cmd" "$s" "$c" "$r" "$(echo "$s / $r" | bc -l)" \
    "$(echo "$c / $r" | bc -l)" "$(printf '%s\n' "${ratio[@]}" | median)"
done
