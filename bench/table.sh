#!/usr/bin/env bash
# Every row of the performance table (docs/benchmarks.md, "The table as the issue measures it") in one
# run: raftset against redis-server measured in the same run, as ratios, with
# the CPU each side spent (utime+stime from /proc/<pid>/stat of every server
# process, in CPU-seconds per million requests: steadier than throughput on a
# shared machine) and, for SADD -P1, latency percentiles at half of
# raftset's peak rate (bench/loadgen, open loop). Medians of RUNS runs, each
# on fresh servers.
#
#   bench/table.sh                        # RUNS=3, the issue's sizes
#   RUNS=3 N=300000 SEED=500000 MEM_N=2000000 bench/table.sh   # smaller
#   STORES="bolt wal" bench/table.sh      # the write rows once per raft-log-store
#   MEMORY=0 THREE=0 bench/table.sh       # skip the memory run / the three-node rows
#   ONE=0 MEMORY=0 bench/table.sh         # the three-node rows only
#   OUT=table.tsv bench/table.sh && python3 bench/plot.py table.tsv docs/benchmarks-table.svg
#   PIN=0 bench/table.sh                  # one-node rows unpinned
#
# As issue 14 measured it, a one-node server (raftset or redis-server) runs on
# CPU 0 and its load (redis-benchmark, bench/loadgen) on CPU 1, so that each
# server has one core, the client the other, and neither takes the other's
# (PIN=1, the default; the Go runtime then runs one P). The three-node rows
# run unpinned: three servers and the load share the machine's cores.
#
# Rows (the anchor is redis-server: no AOF for reads, appendfsync always for
# writes; for the follower row it is raftset's own leader):
#   sismember-P10    SISMEMBER -P10 after SEED SADDs over 200,000 sets
#   get-P50          GET -P50 on 100,000 keys with a TTL
#   smembers-P10     SMEMBERS -P10 on the seeded sets
#   spop-P10         SPOP -P10 on the seeded sets
#   sadd-P10         SADD -P10, one node        sadd-P1   SADD -P1 -c50, one node
#   3n-sadd-P10      SADD -P10 at the leader of three (CPU: all three nodes)
#   3n-sadd-P1       SADD -P1 -c50 at the leader of three
#   3n-follower-sismember-P10   linearizable SISMEMBER -P10 at a follower / at the leader
#   lat-sadd-P1, 3n-lat-sadd-P1   p50/p99/p99.9 of SADD -P1 at 50% of raftset's peak -P1 rate
#   rss-peak, rss-rest            VmHWM during MEM_N SADDs, and RSS at rest afterwards
#
# Output: a table on stdout and, in OUT (tab-separated, one line per row and
# store): row store raftset anchor ratio raftset_cpu anchor_cpu cpu_ratio,
# with p50/p99/p99.9 (µs) in place of the rates for latency rows.
# Needs redis-server, redis-cli and redis-benchmark (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-1000000}       # requests per pipelined measurement
N_P1=${N_P1:-200000}  # requests per -P1 measurement
SEED=${SEED:-2000000} # SADDs before the read rows
MEM_N=${MEM_N:-10000000}
LAT_SECS=${LAT_SECS:-10}
STORES=${STORES:-default}
MEMORY=${MEMORY:-1}
THREE=${THREE:-1}
ONE=${ONE:-1}
OUT=${OUT:-/dev/null}
PIN=${PIN:-1}
# srv and load prefix the one-node servers and their load; three() clears
# both for the three-node rows and their anchor.
srv=() load=()
if [ "$PIN" = 1 ]; then
  taskset -c 0,1 true 2>/dev/null || { echo "PIN=1 needs CPUs 0 and 1; PIN=0 runs unpinned" >&2; exit 2; }
  srv=(taskset -c 0) load=(taskset -c 1)
fi
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

if [ -n "${RAFTSET_BIN:-}" ]; then cp "$RAFTSET_BIN" "$work/raftset"; else go build -o "$work/raftset" ./cmd/raftset; fi
go build -o "$work/loadgen" ./bench/loadgen
hz=$(getconf CLK_TCK)

. bench/lib.sh
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) exit; if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
cli() { local port=$1; shift; timeout 2 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null || true; }
info_field() { cli "$1" INFO "$2" | tr -d '\r' | awk -F: -v k="$3" '$1==k {print $2}'; }
# ticks PID... → utime+stime of the processes, in clock ticks.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
kill_pids() { local p; for p in "$@"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }

wait_writable() {
  for _ in $(seq 1 600); do
    [ "$(cli "$1" SET __bench_ready 1)" = OK ] && { cli "$1" DEL __bench_ready >/dev/null; return 0; }
    sleep 0.05
  done
  echo "server on $1 did not become writable" >&2; return 1
}
# start_redis PORT DIR always|no → pid in $started
start_redis() {
  mkdir -p "$2"
  local aof=(--appendonly no)
  [ "$3" = always ] && aof=(--appendonly yes --appendfsync always)
  "${srv[@]}" redis-server --port "$1" --bind 127.0.0.1 --dir "$2" --save "" "${aof[@]}" --logfile "$2/redis.log" --daemonize no &
  started=$!; pids+=("$started")
  wait_writable "$1"
}
store_args() { [ "$1" = default ] || echo "--raft-log-store $1"; }
# start_raftset PORT DIR STORE → pid in $started
start_raftset() {
  # shellcheck disable=SC2046
  "${srv[@]}" "$work/raftset" --port "$1" --raft-addr "127.0.0.1:$(free_port)" --dir "$2" --loglevel warn $(store_args "$3") \
    >"$2.log" 2>&1 &
  started=$!; pids+=("$started")
  wait_writable "$1"
}
# start_three STORE → cport[1..3], cpid[1..3], leader index in $leader
declare -a cport=() cpid=()
start_three() {
  local peers="" rport=() i
  for i in 1 2 3; do cport[i]=$(free_port); rport[i]=$(free_port); peers+="${peers:+,}n$i=127.0.0.1:${rport[i]}"; done
  for i in 1 2 3; do
    # shellcheck disable=SC2046
    "$work/raftset" --node-id "n$i" --bind 127.0.0.1 --port "${cport[i]}" --raft-addr "127.0.0.1:${rport[i]}" \
      --dir "$work/three/n$i" --peers "$peers" --loglevel warn $(store_args "$1") >"$work/three-n$i.log" 2>&1 &
    cpid[i]=$!; pids+=("${cpid[i]}")
  done
  leader=""
  for _ in $(seq 1 600); do
    local id
    id=$(info_field "${cport[1]}" raft raft_leader_id)
    if [ -n "$id" ] && [ "$(cli "${cport[${id#n}]}" SET __bench_ready 1)" = OK ]; then
      leader=${id#n}
      # Followers serve linearizable reads once they know the leader.
      for i in 1 2 3; do wait_writable "${cport[i]}"; done
      return 0
    fi
    sleep 0.05
  done
  echo "three nodes did not elect a leader" >&2; return 1
}

# bench PORT P N PID... -- COMMAND... → "rps cpu_s_per_million"
bench() {
  local port=$1 p=$2 n=$3; shift 3
  local bpids=()
  while [ "$1" != -- ]; do bpids+=("$1"); shift; done
  shift
  local t0 t1 out
  t0=$(ticks "${bpids[@]}")
  out=$("${load[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -P "$p" -n "$n" -r 200000 --threads 2 -q --csv "$@" 2>&1 |
    awk -F'","' 'NR>1 || !/^"test"/ {gsub(/"/,"",$2); print $2; exit}') || true
  t1=$(ticks "${bpids[@]}")
  case "$out" in
    [0-9]*) ;;
    *) echo "redis-benchmark $* on port $port failed: $out" >&2; return 1 ;;
  esac
  echo "$out $(echo "($t1 - $t0) / $hz / ($n / 1000000)" | bc -l)"
}
# latency PORT RATE → "p50 p99 p999" in µs (SADD -P1, 50 connections)
latency() {
  local out
  out=$("${load[@]}" "$work/loadgen" -p "$1" -rate "$2" -c 50 -d "${LAT_SECS}s" -r 200000 sadd __rand_int__ __rand_int__)
  echo "$out" | tr ' ' '\n' | awk -F= '$1=="p50_us"{a=$2} $1=="p99_us"{b=$2} $1=="p999_us"{c=$2} END{print a, b, c}'
}
seed() { "${load[@]}" redis-benchmark -h 127.0.0.1 -p "$1" -c 50 -P 10 -n "$2" -r 200000 --threads 2 -q sadd __rand_int__ __rand_int__ >/dev/null; }
seed_ttl() {
  "${load[@]}" redis-benchmark -h 127.0.0.1 -p "$1" -c 50 -P 10 -n 300000 -r 100000 --threads 2 -q \
    set key:__rand_int__ __rand_int__ ex 3600 >/dev/null
}

# Results: res[row|store] holds one "raftset raftset_cpu anchor anchor_cpu"
# quadruple per run (latency rows: raftset's p50 p99 p999, then the
# anchor's), runs separated by ';'.
declare -A res=()
note() { res["$1|$2"]+="${*:3};"; }
order=()
row() { case " ${order[*]} " in *" $1 "*) ;; *) order+=("$1") ;; esac; }

reads() {
  local run=$1 rp sp rpid spid a b
  rp=$(free_port); start_redis "$rp" "$work/redis-r$run" no; rpid=$started
  sp=$(free_port); start_raftset "$sp" "$work/raftset-r$run" "${STORES%% *}"; spid=$started
  seed "$rp" "$SEED"; seed "$sp" "$SEED"; seed_ttl "$rp"; seed_ttl "$sp"
  for spec in "sismember-P10 10 sismember __rand_int__ __rand_int__" "get-P50 50 get key:__rand_int__" \
    "smembers-P10 10 smembers __rand_int__" "spop-P10 10 spop __rand_int__"; do
    # shellcheck disable=SC2086
    set -- $spec
    local name=$1 p=$2; shift 2
    a=$(bench "$sp" "$p" "$N" "$spid" -- "$@"); b=$(bench "$rp" "$p" "$N" "$rpid" -- "$@")
    row "$name"; note "$name" - $a $b
    echo "run $run $name: raftset $a | redis $b" >&2
  done
  kill_pids "$spid" "$rpid"; rm -rf "$work/redis-r$run" "$work/raftset-r$run"
}

writes() {
  local run=$1 store=$2 rp sp rpid spid a b peak l1 l2
  rp=$(free_port); start_redis "$rp" "$work/redis-w$run" always; rpid=$started
  sp=$(free_port); start_raftset "$sp" "$work/raftset-w$run" "$store"; spid=$started
  a=$(bench "$sp" 10 "$N" "$spid" -- sadd __rand_int__ __rand_int__); b=$(bench "$rp" 10 "$N" "$rpid" -- sadd __rand_int__ __rand_int__)
  row sadd-P10; note sadd-P10 "$store" $a $b
  a=$(bench "$sp" 1 "$N_P1" "$spid" -- sadd __rand_int__ __rand_int__); b=$(bench "$rp" 1 "$N_P1" "$rpid" -- sadd __rand_int__ __rand_int__)
  row sadd-P1; note sadd-P1 "$store" $a $b
  echo "run $run sadd ($store): -P1 raftset $a | redis $b" >&2
  peak=${a%% *}
  l1=$(latency "$sp" "$(echo "$peak / 2" | bc)"); l2=$(latency "$rp" "$(echo "$peak / 2" | bc)")
  row lat-sadd-P1; note lat-sadd-P1 "$store" "$l1" "$l2"
  echo "run $run latency at $(echo "$peak / 2" | bc)/s ($store): raftset $l1 | redis $l2" >&2
  kill_pids "$spid" "$rpid"; rm -rf "$work/redis-w$run" "$work/raftset-w$run"
}

three() {
  local run=$1 store=$2 rp rpid a b l f peak l1 l2
  local srv=() load=() # unpinned (bash's locals reach the functions called from here)
  rp=$(free_port); start_redis "$rp" "$work/redis-3$run" always; rpid=$started
  start_three "$store"; l=$leader; f=$((l % 3 + 1))
  a=$(bench "${cport[l]}" 10 "$N" "${cpid[@]}" -- sadd __rand_int__ __rand_int__)
  b=$(bench "$rp" 10 "$N" "$rpid" -- sadd __rand_int__ __rand_int__)
  row 3n-sadd-P10; note 3n-sadd-P10 "$store" $a $b
  a=$(bench "${cport[l]}" 1 "$N_P1" "${cpid[@]}" -- sadd __rand_int__ __rand_int__)
  b=$(bench "$rp" 1 "$N_P1" "$rpid" -- sadd __rand_int__ __rand_int__)
  row 3n-sadd-P1; note 3n-sadd-P1 "$store" $a $b
  echo "run $run three nodes ($store): -P1 leader $a | redis $b" >&2
  peak=${a%% *}
  l1=$(latency "${cport[l]}" "$(echo "$peak / 2" | bc)"); l2=$(latency "$rp" "$(echo "$peak / 2" | bc)")
  row 3n-lat-sadd-P1; note 3n-lat-sadd-P1 "$store" "$l1" "$l2"
  a=$(bench "${cport[f]}" 10 "$N" "${cpid[@]}" -- sismember __rand_int__ __rand_int__)
  b=$(bench "${cport[l]}" 10 "$N" "${cpid[@]}" -- sismember __rand_int__ __rand_int__)
  row 3n-follower-sismember-P10; note 3n-follower-sismember-P10 "$store" $a $b
  [ "$(info_field "${cport[1]}" raft raft_leader_id)" = "n$l" ] || echo "warning: leadership moved during run $run" >&2
  kill_pids "${cpid[@]}" "$rpid"; rm -rf "$work/three" "$work/redis-3$run"
}

memory() {
  local rp sp rpid spid moved now cycles start waited
  rp=$(free_port); start_redis "$rp" "$work/redis-mem" always; rpid=$started
  sp=$(free_port); start_raftset "$sp" "$work/raftset-mem" "${STORES%% *}"; spid=$started
  seed "$sp" "$MEM_N"; seed "$rp" "$MEM_N"
  hwm() { awk '/^VmHWM/ {print $2 * 1024}' "/proc/$1/status"; }
  rss() { awk '/^VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
  local sp_hwm rp_hwm
  sp_hwm=$(hwm "$spid"); rp_hwm=$(hwm "$rpid")
  # raftset packs unchanged sets into slabs over a few defragmenter cycles.
  start=$(info_field "$sp" memory active_defrag_cycles); moved=-1; waited=0
  while [ "$waited" -lt 120 ]; do
    sleep 2; waited=$((waited + 2))
    now=$(info_field "$sp" memory active_defrag_moved_bytes); cycles=$(info_field "$sp" memory active_defrag_cycles)
    if [ "$now" = "$moved" ] && [ $((cycles - start)) -ge 5 ]; then break; fi
    moved=$now
  done
  row rss-peak; note rss-peak - "$sp_hwm" 0 "$rp_hwm" 0
  row rss-rest; note rss-rest - "$(rss "$spid")" 0 "$(rss "$rpid")" 0
  kill_pids "$spid" "$rpid"; rm -rf "$work/redis-mem" "$work/raftset-mem"
}

for run in $(seq 1 "$RUNS"); do
  if [ "$ONE" = 1 ]; then reads "$run"; fi
  for store in $STORES; do
    if [ "$ONE" = 1 ]; then writes "$run" "$store"; fi
    if [ "$THREE" = 1 ]; then three "$run" "$store"; fi
  done
done
if [ "$MEMORY" = 1 ]; then memory; fi

# Medians, per column, of the runs' figures; ratios are medians of the
# per-run ratios (each taken within one run).
: >"$OUT"
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT"
printf '%-26s %-7s %12s %12s %7s %10s %10s %7s\n' row store raftset anchor ratio cpu-s/M anchor-cpu cpu-r
for name in "${order[@]}"; do
  for store in - $STORES; do
    key="$name|$store"
    [ -n "${res[$key]:-}" ] || continue
    IFS=';' read -ra runs <<<"${res[$key]}"
    col() { for r in "${runs[@]}"; do [ -n "$r" ] && echo "$r" | awk -v c="$1" '{print $c}'; done | median; }
    ratio() { for r in "${runs[@]}"; do [ -n "$r" ] && echo "$r" | awk -v a="$1" -v b="$2" '$b>0 {print $a/$b}'; done | median; }
    case $name in
      *lat-*) # p50 p99 p999 of raftset, then of redis: ratios of p99
        line=$(printf '%s\t%s\t%s/%s/%s\t%s/%s/%s\t%s\t\t\t' "$name" "$store" "$(col 1)" "$(col 2)" "$(col 3)" \
          "$(col 4)" "$(col 5)" "$(col 6)" "$(ratio 2 5)") ;;
      *)
        line=$(printf '%s\t%s\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%s' "$name" "$store" "$(col 1)" "$(col 3)" "$(ratio 1 3)" \
          "$(col 2)" "$(col 4)" "$(ratio 2 4 | xargs -r printf '%.2f')") ;;
    esac
    echo "$line" >>"$OUT"
    echo "$line" | awk -F'\t' '{printf "%-26s %-7s %12s %12s %7s %10s %10s %7s\n", $1, $2, $3, $4, $5, $6, $7, $8}'
  done
done
