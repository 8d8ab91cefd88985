#!/usr/bin/env bash
# Three raftset processes on this machine with one, two and three shards
# (cluster-enabled; two and three from a shard-map with every shard on all
# three processes, shard s's leadership moved to n(s+1) with RAFT.SHARD s
# RAFT.TRANSFER), at the same client load of SADDs, next to redis-server
# (appendfsync always) in the same run: requests per second, CPU-seconds
# per million SADDs summed over the three processes and per process
# (/proc), and the ratio to redis-server. Prints medians of RUNS runs.
#
#   bench/shards.sh                 # RUNS=3 N=300000, 50 clients, pipelines of 10
#
# One client for every layout and for the anchor: bench/clusterload (go-redis
# ClusterClient; a plain client for redis-server), tag-free keys over all
# slots, random key and member below 200,000. With two shards n3 leads none,
# so its CPU is what following two shards' writes costs.
# Needs redis-server and redis-cli (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-300000}
. bench/lib.sh
bench_init
go build -o "$work/clusterload" ./bench/clusterload

load() { # load ADDRS [-cluster=false]: prints req/s
  "$work/clusterload" -addrs "$1" "${@:2}" -n "$N" -c 50 -P 10 -r 200000 | sed -n 's/.*rate=//p'
}
stop_all() { for p in "${pids[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done; pids=(); }
hz=$(getconf CLK_TCK)
per_million() { echo "$1 / $hz * 1000000 / $N" | bc -l; }

# cluster NAME SHARDS: three processes; sets ports and procs.
cluster() {
  local name=$1 shards=$2 peers="" raft=() i s smap=""
  ports=(); procs=()
  for i in 1 2 3; do ports+=("$(free_port)"); raft+=("127.0.0.1:$(free_port)"); peers+="n$i=${raft[$((i-1))]},"; done
  if [ "$shards" -gt 1 ]; then
    for s in $(seq 0 $((shards - 1))); do
      smap+="$s:$((s * 16384 / shards))-$(((s + 1) * 16384 / shards - 1)):n1,n2,n3 "
    done
  fi
  for i in 1 2 3; do
    args=(--port "${ports[$((i-1))]}" --raft-addr "${raft[$((i-1))]}" --node-id "n$i" --peers "${peers%,}"
      --dir "$work/$name-n$i" --cluster-enabled yes --loglevel warn)
    [ -n "$smap" ] && args+=(--shard-map "${smap% }")
    "$work/raftset" "${args[@]}" >"$work/$name-n$i.log" 2>&1 & pids+=($!); procs+=($!)
  done
  # Writable in every shard (keys a, b, c: slots 15495, 3300, 7365).
  for _ in $(seq 1 600); do
    ok=1
    for k in a b c; do [ "$(redis-cli -c -p "${ports[0]}" SET "$k" 1 2>/dev/null)" = OK ] || ok=0; done
    [ "$ok" = 1 ] && break
    sleep 0.1
  done
  # Shard s led by n(s+1), so the per-process columns mean the same in
  # every run (one shard: n1 leads).
  for s in $(seq 0 $((shards - 1))); do
    pre=(); [ "$shards" -gt 1 ] && pre=(RAFT.SHARD "$s")
    for _ in $(seq 1 50); do
      [ "$(redis-cli -p "${ports[$s]}" "${pre[@]}" RAFT.INFO | tr -d '\r' | grep '^role:')" = role:leader ] && break
      redis-cli -p "${ports[$s]}" "${pre[@]}" RAFT.TRANSFER "n$((s+1))" >/dev/null || true
      sleep 0.2
    done
  done
  # Every node reports the same slot map (the moved leaders) before the load.
  for _ in $(seq 1 50); do
    [ "$(for p in "${ports[@]}"; do redis-cli -p "$p" CLUSTER SLOTS | md5sum; done | sort -u | wc -l)" = 1 ] && break
    sleep 0.2
  done
}

declare -A rate cpu share1 share2 share3 ratio
for run in $(seq 1 "$RUNS"); do
  for shards in 1 2 3; do
    rp=$(free_port)
    start_redis "$rp" "$work/redis-$run-$shards"
    r=$(load "127.0.0.1:$rp" -cluster=false)
    stop_all
    cluster "s$shards-$run" "$shards"
    t0=(); for p in "${procs[@]}"; do t0+=("$(cpu_ticks "$p")"); done
    o=$(load "$(printf '127.0.0.1:%s,' "${ports[@]}" | sed 's/,$//')")
    t1=(); for p in "${procs[@]}"; do t1+=("$(cpu_ticks "$p")"); done
    total=0
    for i in 0 1 2; do
      d=$((t1[i] - t0[i])); total=$((total + d))
      eval "share$((i+1))[$shards]+=\" $(per_million "$d")\""
    done
    rate[$shards]+=" $o"; cpu[$shards]+=" $(per_million "$total")"; ratio[$shards]+=" $(echo "$o / $r" | bc -l)"
    stop_all
  done
done
med() { printf '%s\n' $1 | median; }
printf '%-7s %9s %14s %9s %9s %9s %9s\n' shards 'req/s' 'cpu-s/1M (all)' n1 n2 n3 '/redis'
for shards in 1 2 3; do
  printf '%-7s %9.0f %14.1f %9.1f %9.1f %9.1f %9.2f\n' "$shards" "$(med "${rate[$shards]}")" "$(med "${cpu[$shards]}")" \
    "$(med "${share1[$shards]}")" "$(med "${share2[$shards]}")" "$(med "${share3[$shards]}")" "$(med "${ratio[$shards]}")"
done
for shards in 1 2 3; do echo "shards=$shards req/s per run:${rate[$shards]}; /redis:${ratio[$shards]}"; done
