#!/usr/bin/env bash
# maxmemory under a write flood (issue 11, docs/cache.md): one raftset node
# and redis-server (appendfsync always, the durable anchor), both with
# maxmemory 64mb and allkeys-lru, each sent 300 MB of 1000-byte values over a
# keyspace of 1,000,000 keys (about 15x the bound):
#
#   redis-benchmark -t set -P 20 -c 20 -d 1000 -r 1000000 -n 300000 -e
#
# (`-t set` is `SET key:__rand_int__ <-d bytes>`; redis-benchmark 7.0 puts no
# -d sized value into a custom command line, so `set __rand_int__
# __rand_int__` would send 12-byte values.) Prints, per run and as medians:
# lines of error replies (redis-benchmark -e prints an error at most once a
# second: 0 means none), throughput, used_memory (Go heap), used_memory_dataset (what
# maxmemory bounds), RSS and evicted_keys right after the run and 5 s later,
# with raftset/redis ratios.
#
#   bench/maxmemory.sh             # RUNS=3
#   RUNS=5 N=600000 bench/maxmemory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-300000}
MAXMEM=${MAXMEM:-64mb}
. bench/lib.sh
bench_init
info() { redis-cli -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v f="$3" '$1==f {print $2}'; }

# run NAME PORT: one flood; appends "name errors rps used dataset rss evicted used5 dataset5 rss5" to $work/results
run() {
  local name=$1 port=$2 out
  out=$(redis-benchmark -p "$port" -t set -P 20 -c 20 -d 1000 -r 1000000 -n "$N" -e --csv 2>&1)
  local errors rps
  errors=$(grep -c -E '^(ERR|OOM|-)|Error from server' <<<"$out" || true)
  rps=$(grep '"SET"' <<<"$out" | cut -d, -f2 | tr -d '"')
  local used dataset rss evicted
  used=$(info "$port" memory used_memory); dataset=$(info "$port" memory used_memory_dataset)
  rss=$(info "$port" memory used_memory_rss); evicted=$(info "$port" stats evicted_keys)
  sleep 5
  local used5 dataset5 rss5
  used5=$(info "$port" memory used_memory); dataset5=$(info "$port" memory used_memory_dataset)
  rss5=$(info "$port" memory used_memory_rss)
  echo "$name $errors $rps $used $dataset $rss $evicted $used5 $dataset5 $rss5" | tee -a "$work/results"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "name errors rps used_memory used_memory_dataset rss evicted_keys | 5 s later: used_memory used_memory_dataset rss"
for r in $(seq 1 "$RUNS"); do
  port=$(free_port); dir="$work/redis$r"; mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly yes --appendfsync always \
    --maxmemory "$MAXMEM" --maxmemory-policy allkeys-lru --logfile "$dir/redis.log" --daemonize no & pids+=($!)
  wait_ready "$port"; run redis "$port"; stop_last

  port=$(free_port); dir="$work/raftset$r"
  "$work/raftset" --port "$port" --raft-addr "127.0.0.1:$(free_port)" --dir "$dir" --loglevel warn \
    --maxmemory "$MAXMEM" --maxmemory-policy allkeys-lru >"$dir.log" 2>&1 & pids+=($!)
  wait_ready "$port"; run raftset "$port"; stop_last
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

col() { awk -v n="$1" -v c="$2" '$1==n {print $c}' "$work/results" | median; }
printf '\nmedians of %d runs (bound %s):\n' "$RUNS" "$MAXMEM"
printf '%-22s %14s %14s %8s\n' field raftset redis ratio
i=2
for f in errors rps used_memory used_memory_dataset rss evicted_keys used_memory_5s dataset_5s rss_5s; do
  a=$(col raftset $i); b=$(col redis $i)
  ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.2f", a/b; else print "-" }')
  printf '%-22s %14s %14s %8s\n' "$f" "$a" "$b" "$ratio"
  i=$((i+1))
done
