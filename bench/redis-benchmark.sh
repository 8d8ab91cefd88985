#!/usr/bin/env bash
# Side-by-side throughput of raftset and redis-server (appendfsync always: the
# durable single-node anchor) for the seed benchmark's commands, and memory
# after the seed's 10,000,000 SADDs. Prints medians and raftset/redis ratios.
#
#   bench/redis-benchmark.sh            # RUNS=3 N=1000000 by default
#   RUNS=5 N=2000000 bench/redis-benchmark.sh
#   MEMORY=0 bench/redis-benchmark.sh   # skip the 10M-SADD memory run
#   PIPELINES=10 ONLY=sismember bench/redis-benchmark.sh   # a subset
#   TLS=1 PIPELINES=10 bench/redis-benchmark.sh   # raftset over client TLS vs plain TCP
#
# TLS=1 measures one raftset node serving both port and tls-port (certificates
# from `raftset cert`, tls-auth-clients yes), plain then TLS on odd runs and
# TLS then plain on even ones, and prints the median of the per-run TLS/plain
# ratios; redis-server is not run.
# Needs redis-server and redis-benchmark (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-1000000}
MEMORY=${MEMORY:-1}
. bench/lib.sh
bench_init

# rps PORT PIPELINE COMMAND... → requests per second
rps() {
  local port=$1 p=$2; shift 2
  redis-benchmark -p "$port" -c 50 -P "$p" -n "$N" -r 200000 --threads 2 -q --csv "$@" 2>/dev/null |
    awk -F'","' 'NR>1 || !/^"test"/ {gsub(/"/,"",$2); print $2; exit}'
}

commands=("sadd __rand_int__ __rand_int__" "smembers __rand_int__" "sismember __rand_int__ __rand_int__" "spop __rand_int__")

if [ "${TLS:-0}" = 1 ]; then
  certs=$work/certs
  "$work/raftset" cert ca --dir "$certs" >/dev/null
  "$work/raftset" cert node node --ip 127.0.0.1 --dir "$certs" >/dev/null
  "$work/raftset" cert client bench --dir "$certs" >/dev/null
  tls_args=(--tls --cacert "$certs/ca.crt" --cert "$certs/bench.crt" --key "$certs/bench.key")
  printf '%-40s %-3s %12s %12s %7s
' command P tls plain ratio
  for p in ${PIPELINES:-1 10}; do
    for cmd in "${commands[@]}"; do
      case "$cmd" in *"${ONLY:-}"*) ;; *) continue ;; esac
      t_list=(); s_list=(); ratios=()
      for run in $(seq 1 "$RUNS"); do
        sp=$(free_port); tp=$(free_port); dir=$work/raftset-$run
        "$work/raftset" --port "$sp" --tls-port "$tp" --tls-cert-file "$certs/node.crt" --tls-key-file "$certs/node.key" \
          --tls-ca-cert-file "$certs/ca.crt" --raft-addr "127.0.0.1:$(free_port)" --dir "$dir" --loglevel warn \
          >"$dir.log" 2>&1 & pids+=($!)
        wait_ready "$sp"
        if [ "$cmd" != "sadd __rand_int__ __rand_int__" ]; then rps "$sp" 10 sadd __rand_int__ __rand_int__ >/dev/null; fi
        # shellcheck disable=SC2086
        if [ $((run % 2)) = 1 ]; then
          s=$(rps "$sp" "$p" $cmd); t=$(rps "$tp" "$p" "${tls_args[@]}" $cmd)
        else
          t=$(rps "$tp" "$p" "${tls_args[@]}" $cmd); s=$(rps "$sp" "$p" $cmd)
        fi
        t_list+=("$t"); s_list+=("$s"); ratios+=("$(echo "$t / $s" | bc -l)")
        stop_last; rm -rf "$dir"
      done
      t=$(printf '%s\n' "${t_list[@]}" | median); s=$(printf '%s\n' "${s_list[@]}" | median)
      printf '%-40s %-3s %12.0f %12.0f %7.2f\n' "$cmd" "$p" "$t" "$s" "$(printf '%s\n' "${ratios[@]}" | median)"
    done
  done
  exit 0
fi
printf '%-40s %-3s %12s %12s %7s\n' command P raftset redis ratio
for p in ${PIPELINES:-1 10}; do
  for cmd in "${commands[@]}"; do
    case "$cmd" in *"${ONLY:-}"*) ;; *) continue ;; esac
    r_list=(); s_list=()
    for run in $(seq 1 "$RUNS"); do
      rp=$(free_port); start_redis "$rp" "$work/redis-$run"
      sp=$(free_port); start_raftset "$sp" "$work/raftset-$run"
      # Populate both the same way first so reads hit existing sets.
      if [ "$cmd" != "sadd __rand_int__ __rand_int__" ]; then
        rps "$rp" 10 sadd __rand_int__ __rand_int__ >/dev/null
        rps "$sp" 10 sadd __rand_int__ __rand_int__ >/dev/null
      fi
      # shellcheck disable=SC2086
      r_list+=("$(rps "$rp" "$p" $cmd)")
      # shellcheck disable=SC2086
      s_list+=("$(rps "$sp" "$p" $cmd)")
      stop_last; stop_last
      rm -rf "$work/redis-$run" "$work/raftset-$run"
    done
    r=$(printf '%s\n' "${r_list[@]}" | median); s=$(printf '%s\n' "${s_list[@]}" | median)
    printf '%-40s %-3s %12.0f %12.0f %7.2f\n' "$cmd" "$p" "$s" "$r" "$(echo "$s / $r" | bc -l)"
  done
done

if [ "$MEMORY" = 1 ]; then
  echo
  echo "memory after 10,000,000 SADDs over 200,000 keys (-P 10 -c 50)"
  rp=$(free_port); start_redis "$rp" "$work/redis-mem"
  sp=$(free_port); start_raftset "$sp" "$work/raftset-mem"
  load() { redis-benchmark -p "$1" -c 50 -P 10 -n 10000000 -r 200000 --threads 2 -q sadd __rand_int__ __rand_int__ >/dev/null; }
  info() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: -v k="$2" '$1==k{print $2}'; }
  mem() { echo "used_memory=$(echo "$(info "$1" used_memory) / 1000000" | bc -l | xargs printf '%.1f')MB" \
    "used_memory_rss=$(echo "$(info "$1" used_memory_rss) / 1000000" | bc -l | xargs printf '%.1f')MB"; }
  load "$sp"
  echo "raftset right after the load: keys=$(redis-cli -p "$sp" DBSIZE) $(mem "$sp")"
  load "$rp" # about a minute, during which raftset is idle
  # raftset packs the sets into slabs once they stop changing (fsm/defrag.go):
  # a key must stay unchanged for three defragmenter cycles. Wait until a
  # cycle moves nothing more (bounded), then read again.
  start=$(info "$sp" active_defrag_cycles); moved=-1; waited=0
  while [ "$waited" -lt 120 ]; do
    sleep 2; waited=$((waited + 2))
    now=$(info "$sp" active_defrag_moved_bytes); cycles=$(info "$sp" active_defrag_cycles)
    if [ "$now" = "$moved" ] && [ $((cycles - start)) -ge 5 ]; then break; fi
    moved=$now
  done
  echo "raftset at rest (after redis's load +${waited}s, defragmented): keys=$(redis-cli -p "$sp" DBSIZE) $(mem "$sp")"
  echo "redis: keys=$(redis-cli -p "$rp" DBSIZE) $(mem "$rp")"
fi
