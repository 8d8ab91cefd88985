#!/usr/bin/env bash
# The performance table's read-side rows alone (bench/table.sh runs them all),
# for A/B work on them: builds alternate within each round, and every figure
# comes with the CPU-seconds per million requests of the server processes
# (utime+stime from /proc), the steadiest measure on a shared machine.
#
#   bench/rows.sh BIN...                         # every row, ROUNDS=3
#   ROWS="sismember-P10 spop-P10" bench/rows.sh /tmp/base /tmp/head
#   PROFILE=/tmp/prof ROWS=3n-follower-sismember-P10 bench/rows.sh /tmp/head
#
# Rows:
#   sismember-P10  SISMEMBER -P10 -c50, one node, after SEED SADDs over 200,000 sets
#   get-P50        GET -P50 -c50 on 100,000 keys with a TTL (300,000 SET EX 3600)
#   smembers-P10   SMEMBERS -P10 -c50 on those sets
#   spop-P10       SPOP -P10 -c50 on those sets (after the reads when they run)
#   spop-empty-P10 SPOP -P10 -c50 of keys that do not exist (consumers polling empty queues)
#   3n-follower-sismember-P10   linearizable SISMEMBER -P10 at a follower, then at the leader
# One-node rows run redis-server (no AOF, seeded alike) in the same round; its
# figures are printed as "redis". With PROFILE=DIR a 10 s CPU profile of the
# server (of the follower and the leader for the three-node row) is taken in
# the middle of each raftset measurement, as DIR/<row>-<bin>-<round>[-node].pprof.
#
# Output lines: "round R ROW WHO req/s cpu_s_per_M [cpu_s_per_M of each node]",
# then medians per row and build: "median ROW WHO req/s cpu_s_per_M ratio
# cpu_ratio", the ratios (throughput, CPU per request) against redis-server
# (one node) or the leader (follower row) of the same round, medians of the
# per-round ratios. Needs redis-server, redis-benchmark, redis-cli, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/rows.sh BIN..." >&2; exit 2; }
ROUNDS=${ROUNDS:-3}
N=${N:-1000000}
SEED=${SEED:-1000000}
ROWS=${ROWS:-sismember-P10 get-P50 smembers-P10 spop-P10 spop-empty-P10 3n-follower-sismember-P10}
PROFILE=${PROFILE:-}
# Longer Raft timeouts than the defaults keep one leader on a machine
# loaded far past its cores; RAFT_TIMEOUTS= runs the defaults.
RAFT_TIMEOUTS=${RAFT_TIMEOUTS---raft-heartbeat-timeout 2s --raft-election-timeout 2s --raft-leader-lease-timeout 1s}
bins=()
for b in "$@"; do bins+=("$(realpath "$b")"); done
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
hz=$(getconf CLK_TCK)
[ -z "$PROFILE" ] || mkdir -p "$PROFILE"

. bench/lib.sh
cli() { local port=$1; shift; timeout 2 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null || true; }
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
stop() { local p; for p in "$@"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
# result LINE prints a measurement and keeps it for the medians. (The rounds
# run in this shell, not in a pipeline's subshell, so that the exit trap
# sees every server started and stops them whatever fails.)
result() { echo "$*" | tee -a "$work/all"; }
has_row() { case " $ROWS " in *" $1 "*) return 0 ;; esac; return 1; }
wait_writable() {
  for _ in $(seq 1 600); do
    [ "$(cli "$1" SET __bench_ready 1)" = OK ] && { cli "$1" DEL __bench_ready >/dev/null; return 0; }
    sleep 0.05
  done
  echo "server on $1 did not become writable" >&2; return 1
}
seed() { redis-benchmark -h 127.0.0.1 -p "$1" -c 50 -P 10 -n "$SEED" -r 200000 --threads 2 -q sadd __rand_int__ __rand_int__ >/dev/null; }
seed_ttl() {
  redis-benchmark -h 127.0.0.1 -p "$1" -c 50 -P 10 -n 300000 -r 100000 --threads 2 -q \
    set key:__rand_int__ __rand_int__ ex 3600 >/dev/null
}

# measure PORT PPORT PROFNAME PID... -- CMD... → "rps cpu_s_per_M", with
# PIPELINE commands in flight per connection (10 unless set).
measure() {
  local port=$1 pport=$2 prof=$3; shift 3
  local mp=() t0 t1 out bp
  while [ "$1" != -- ]; do mp+=("$1"); shift; done
  shift
  t0=$(ticks "${mp[@]}")
  redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -P "${PIPELINE:-10}" -n "$N" -r 200000 --threads 2 -q --csv "$@" >"$work/b.out" 2>&1 &
  bp=$!
  if [ -n "$PROFILE" ] && [ -n "$pport" ]; then
    sleep 1
    curl -sf -o "$PROFILE/$prof.pprof" "http://127.0.0.1:$pport/debug/pprof/profile?seconds=10" || true
  fi
  wait "$bp"
  t1=$(ticks "${mp[@]}")
  out=$(awk -F'","' 'NR>1 || !/^"test"/ {gsub(/"/,"",$2); print $2; exit}' "$work/b.out")
  case "$out" in [0-9]*) ;; *) echo "redis-benchmark $* on $port failed: $(cat "$work/b.out")" >&2; return 1 ;; esac
  echo "$out $(echo "($t1 - $t0) / $hz / ($N / 1000000)" | bc -l | xargs printf '%.3f')"
}

one_node() {
  local round=$1 bin=$2 who=$3 p pp pid rp rpid r
  if ! has_row sismember-P10 && ! has_row get-P50 && ! has_row smembers-P10 && ! has_row spop-P10 &&
    ! has_row spop-empty-P10; then return 0; fi
  p=$(free_port); pp=$(free_port)
  "$bin" --port "$p" --raft-addr "127.0.0.1:$(free_port)" --dir "$work/one" --loglevel warn \
    --pprof-addr "127.0.0.1:$pp" >"$work/one.log" 2>&1 &
  pid=$!; pids+=("$pid")
  wait_writable "$p"; seed "$p"
  rp=$(free_port)
  redis-server --port "$rp" --bind 127.0.0.1 --dir "$work" --save "" --appendonly no --logfile "$work/redis.log" \
    --daemonize no &
  rpid=$!; pids+=("$rpid")
  wait_writable "$rp"; seed "$rp"
  if has_row get-P50; then seed_ttl "$p"; seed_ttl "$rp"; fi
  for spec in "sismember-P10 10 sismember __rand_int__ __rand_int__" "get-P50 50 get key:__rand_int__" \
    "smembers-P10 10 smembers __rand_int__" "spop-P10 10 spop __rand_int__" "spop-empty-P10 10 spop empty:__rand_int__"; do
    # shellcheck disable=SC2086
    set -- $spec
    local row=$1 pl=$2; shift 2
    has_row "$row" || continue
    r=$(PIPELINE=$pl measure "$p" "$pp" "$row-$who-$round" "$pid" -- "$@"); result "round $round $row $who $r"
    r=$(PIPELINE=$pl measure "$rp" "" "" "$rpid" -- "$@"); result "round $round $row redis.$who $r"
  done
  stop "$pid" "$rpid"; rm -rf "$work/one"
}

three() {
  local round=$1 bin=$2 who=$3 i peers="" l f id r a
  has_row 3n-follower-sismember-P10 || return 0
  local cp=() rp=() pp=() cpid=()
  for i in 1 2 3; do cp[i]=$(free_port); rp[i]=$(free_port); pp[i]=$(free_port); peers+="${peers:+,}n$i=127.0.0.1:${rp[i]}"; done
  for i in 1 2 3; do
    "$bin" --node-id "n$i" --bind 127.0.0.1 --port "${cp[i]}" --raft-addr "127.0.0.1:${rp[i]}" \
      --dir "$work/three/n$i" --peers "$peers" --loglevel warn --pprof-addr "127.0.0.1:${pp[i]}" $RAFT_TIMEOUTS \
      >"$work/three-n$i.log" 2>&1 &
    cpid[i]=$!; pids+=("${cpid[i]}")
  done
  find_leader() {
    l=""
    for _ in $(seq 1 600); do
      id=$(cli "${cp[1]}" INFO raft | tr -d '\r' | awk -F: '$1=="raft_leader_id" {print $2}')
      if [ -n "$id" ] && [ "$(cli "${cp[${id#n}]}" SET __bench_ready 1)" = OK ]; then l=${id#n}; break; fi
      sleep 0.05
    done
    [ -n "$l" ] || { echo "three nodes did not elect a leader" >&2; return 1; }
    for i in 1 2 3; do wait_writable "${cp[i]}"; done
  }
  find_leader
  # On a loaded machine leadership may move during the seed (a write then
  # fails with CLUSTERDOWN): seed what it can and measure at the leader
  # as it is afterwards.
  seed "${cp[l]}" || echo "round $round: seeding the three nodes met an error" >&2
  find_leader
  f=$((l % 3 + 1))
  # A failed measurement (leadership lost under load) drops the round's
  # pair rather than the whole run.
  if r=$(measure "${cp[f]}" "${pp[f]}" "3n-follower-$who-$round-follower" "${cpid[@]}" -- sismember __rand_int__ __rand_int__) &&
    a=$(measure "${cp[l]}" "" "" "${cpid[@]}" -- sismember __rand_int__ __rand_int__); then
    result "round $round 3n-follower-sismember-P10 $who $r"
    result "round $round 3n-follower-sismember-P10 leader.$who $a"
  else
    echo "round $round: the three-node measurement failed" >&2
  fi
  [ "$(cli "${cp[1]}" INFO raft | tr -d '\r' | awk -F: '$1=="raft_leader_id" {print $2}')" = "n$l" ] ||
    echo "round $round: leadership moved during the measurement" >&2
  stop "${cpid[@]}"; rm -rf "$work/three"
}

for round in $(seq 1 "$ROUNDS"); do
  order=("${bins[@]}")
  # Alternate the order of the builds from round to round.
  if [ $((round % 2)) = 0 ]; then order=(); for ((i = ${#bins[@]} - 1; i >= 0; i--)); do order+=("${bins[i]}"); done; fi
  for bin in "${order[@]}"; do
    who=$(basename "$bin")
    echo "# round $round $who: load $(cut -d' ' -f1 /proc/loadavg)" >&2
    one_node "$round" "$bin" "$who"
    three "$round" "$bin" "$who"
  done
done

echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
for row in $ROWS; do
  for b in "${bins[@]}"; do
    who=$(basename "$b")
    anchor=redis.$who; [ "$row" = 3n-follower-sismember-P10 ] && anchor=leader.$who
    rps=$(awk -v r="$row" -v w="$who" '$3==r && $4==w {print $5}' "$work/all" | median)
    cpu=$(awk -v r="$row" -v w="$who" '$3==r && $4==w {print $6}' "$work/all" | median)
    acpu=$(awk -v r="$row" -v w="$anchor" '$3==r && $4==w {print $6}' "$work/all" | median)
    ratio=$(awk -v r="$row" -v w="$who" -v a="$anchor" '$3==r && $4==w {x[$2]=$5} $3==r && $4==a {y[$2]=$5}
      END {for (k in x) if (y[k] > 0) print x[k] / y[k]}' "$work/all" | median)
    cratio=$(awk -v r="$row" -v w="$who" -v a="$anchor" '$3==r && $4==w {x[$2]=$6} $3==r && $4==a {y[$2]=$6}
      END {for (k in x) if (y[k] > 0) print x[k] / y[k]}' "$work/all" | median)
    printf 'median %s %s %s/s cpu_s_per_M %s (anchor %s) ratio %.2f cpu_ratio %.2f\n' "$row" "$who" "$rps" "$cpu" "$acpu" \
      "$ratio" "$cratio"
  done
done
