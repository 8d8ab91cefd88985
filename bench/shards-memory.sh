#!/usr/bin/env bash
# The issue's capacity figure: the seed dataset (N=10,000,000 SADDs of a
# random key and member below 200,000, 12-digit zero-padded) loaded through a
# cluster client (bench/clusterload: go-redis ClusterClient, tag-free keys
# over all 16384 slots, -c 50 -P 10) into
#   - 3 processes holding one shard (cluster-enabled yes, every slot), and
#   - 6 processes holding one of two shards (shard-map: 0-8191 on n1-n3,
#     8192-16383 on n4-n6),
# then, once each node's used_memory has settled (the defragmenter needs
# about 10 s after the last write; polled until it moves < 1% in 5 s),
# INFO memory's used_memory (Go heap) and used_memory_rss per node, and
# DBSIZE. One layout at a time, processes on loopback. Up to 10,000 failed
# SADDs (0.1%: -CLUSTERDOWN around a leader change on a loaded machine) are
# tolerated and reported.
#
#   bench/shards-memory.sh              # N=10000000
# Needs redis-cli (apt-get install -y redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000000}
. bench/lib.sh
bench_init
go build -o "$work/clusterload" ./bench/clusterload

field() { redis-cli -p "$1" INFO "$2" | tr -d '\r' | sed -n "s/^$3://p"; }

# layout NAME COUNT SHARDMAP: COUNT processes; sets ports and procs.
layout() {
  local name=$1 count=$2 smap=$3 peers="" raft=() i
  ports=(); procs=()
  for i in $(seq 1 "$count"); do ports+=("$(free_port)"); raft+=("127.0.0.1:$(free_port)"); peers+="n$i=${raft[$((i-1))]},"; done
  smap=$(for i in $(seq 1 "$count"); do smap=${smap//"<n$i>"/"n$i@127.0.0.1:${ports[$((i-1))]}"}; done; echo "$smap")
  for i in $(seq 1 "$count"); do
    args=(--port "${ports[$((i-1))]}" --raft-addr "${raft[$((i-1))]}" --node-id "n$i" --peers "${peers%,}"
      --dir "$work/$name-n$i" --cluster-enabled yes --loglevel warn)
    [ -n "$smap" ] && args+=(--shard-map "$smap")
    "$work/raftset" "${args[@]}" >"$work/$name-n$i.log" 2>&1 & pids+=($!); procs+=($!)
  done
  # Writable in every shard: keys a (slot 15495) and b (3300) are in
  # different halves.
  for _ in $(seq 1 600); do
    [ "$(redis-cli -c -p "${ports[0]}" SET a 1 2>/dev/null)" = OK ] &&
      [ "$(redis-cli -c -p "${ports[0]}" SET b 1 2>/dev/null)" = OK ] && break
    sleep 0.1
  done
  redis-cli -c -p "${ports[0]}" DEL a >/dev/null; redis-cli -c -p "${ports[0]}" DEL b >/dev/null
}

settle() { # until every node's used_memory moves < 1% (or < 2 MB) in 5 s, at most 120 s
  local p before after stable
  for _ in $(seq 1 24); do
    stable=1
    for p in "${ports[@]}"; do
      before=$(field "$p" memory used_memory)
      eval "last_$p=$before"
    done
    sleep 5
    for p in "${ports[@]}"; do
      after=$(field "$p" memory used_memory)
      eval "before=\$last_$p"
      awk -v a="$after" -v b="$before" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d > 0.01 * b && d > 2000000)}' && stable=0
    done
    if [ "$stable" = 1 ]; then return 0; fi
  done
  echo "used_memory still moving after 120 s; reporting it anyway" >&2
}

report() { # report NAME COUNT
  local name=$1 count=$2 i p used rss keys sum_used=0 sum_rss=0
  for i in $(seq 1 "$count"); do
    p=${ports[$((i-1))]}
    used=$(field "$p" memory used_memory); rss=$(field "$p" memory used_memory_rss); keys=$(redis-cli -p "$p" DBSIZE)
    printf '%-6s n%-3s %12.1f MB %12.1f MB %10s keys\n' "$name" "$i" "$(echo "$used / 1000000" | bc -l)" "$(echo "$rss / 1000000" | bc -l)" "$keys"
    sum_used=$((sum_used + used)); sum_rss=$((sum_rss + rss))
  done
  printf '%-6s mean %12.1f MB %12.1f MB\n' "$name" "$(echo "$sum_used / $count / 1000000" | bc -l)" "$(echo "$sum_rss / $count / 1000000" | bc -l)"
}

printf '%-6s %-4s %15s %15s\n' layout node used_memory used_memory_rss
for l in "3x1 3" "6x2 6 0:0-8191:<n1>,<n2>,<n3> 1:8192-16383:<n4>,<n5>,<n6>"; do
  read -r name count smap <<<"$l" || true
  layout "$name" "$count" "$smap"
  addrs=$(printf '127.0.0.1:%s,' "${ports[@]}")
  "$work/clusterload" -addrs "${addrs%,}" -n "$N" -c 50 -P 10 -r 200000 -max-errors 10000 >&2 || { tail -n 5 "$work/$name"-n*.log >&2; exit 1; }
  settle
  report "$name" "$count"
  for p in "${procs[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
  pids=()
done
