#!/usr/bin/env bash
# One run of redis-benchmark SADD -P 10 (PIPE=…) against the leader of a fresh
# three-node cluster of BIN (NODES=1: a single node; loopback, default Raft
# timeouts), after SEED SADDs (default none), printing the req/s, the CPU
# seconds per million SADDs (utime+stime from /proc) of the leader and of all
# the processes, the ops per Raft entry, the leader's garbage collections
# since it started (INFO memory's go_num_gc), how many of its log fsyncs
# held the CPU (cluster/walsync.go), and its read and write system calls per
# SADD (syscr, syscw of /proc/<pid>/io: sockets and files alike). With
# PROFILE set, a 15 s CPU profile of the leader is taken 3 s into the run
# (--pprof-addr) and written there, for `go tool pprof -top BIN PROFILE`;
# with TRACE set, a 1 s execution trace instead (bench/experiments/cycletrace).
# Alternate two builds by hand to compare them (docs/benchmarks.md):
#
#   for b in base head head base base head; do N=2000000 bench/leader-sadd.sh /tmp/$b; done
#   PROFILE=/tmp/head.pprof N=4000000 bench/leader-sadd.sh /tmp/head
#   PROFILE=/tmp/f.pprof PROFILE_NODE=follower PIPE=1 N=400000 bench/leader-sadd.sh /tmp/head
#   TRACE=/tmp/l.trace PIPE=1 N=300000 bench/leader-sadd.sh /tmp/head
#   NODES=1 SEED=1000000 N=3000000 bench/leader-sadd.sh /tmp/head
#   NODES=1 PIN=1 PIPE=1 N=400000 bench/leader-sadd.sh /tmp/head
#
# PIN=1 (one node) runs the server on CPU 0 and redis-benchmark on CPU 1, as
# bench/table.sh's one-node rows do.
#
# Needs redis-benchmark and redis-cli (apt-get install -y redis-tools), curl.
set -euo pipefail
bin=$(realpath "${1:?usage: bench/leader-sadd.sh BIN}")
N=${N:-2000000}
PROFILE=${PROFILE:-}
TRACE=${TRACE:-}
PIPE=${PIPE:-10} # redis-benchmark -P
NODES=${NODES:-3}
SEED=${SEED:-0}
PIN=${PIN:-0}
srv=() load=()
if [ "$PIN" = 1 ]; then
  [ "$NODES" = 1 ] || { echo "PIN=1 is for NODES=1 (it would put every node on CPU 0)" >&2; exit 2; }
  srv=(taskset -c 0) load=(taskset -c 1)
fi
. "$(dirname "$0")/lib.sh"
bench_scratch
all_ticks() { local t=0 p; for p in "${pids[@]}"; do t=$((t + $(cpu_ticks "$p"))); done; echo "$t"; }
info_field() { timeout 1 redis-cli -p "$1" INFO "${3:-raft}" 2>/dev/null | tr -d '\r' | awk -F: -v k="$2" '$1==k {print $2}'; }

declare -a cp=() rp=() pp=()
peers=""
for i in $(seq 1 "$NODES"); do
  cp[i]=$(free_port); rp[i]=$(free_port); pp[i]=$(free_port)
  peers+="${peers:+,}n$i=127.0.0.1:${rp[i]}"
done
for i in $(seq 1 "$NODES"); do
  "${srv[@]}" "$bin" --node-id "n$i" --bind 127.0.0.1 --port "${cp[i]}" --raft-addr "127.0.0.1:${rp[i]}" \
    --advertise-addr "127.0.0.1:${cp[i]}" --raft-advertise-addr "127.0.0.1:${rp[i]}" --dir "$work/n$i" \
    --peers "$peers" --loglevel warn --pprof-addr "127.0.0.1:${pp[i]}" >"$work/n$i.log" 2>&1 &
  pids+=($!)
done
l=""
for _ in $(seq 1 400); do
  id=$(info_field "${cp[1]}" raft_leader_id) || true
  if [ -n "$id" ] && [ "$(timeout 1 redis-cli -p "${cp[1]}" SET __bench_ready 1 2>/dev/null)" = OK ]; then l=${id#n}; break; fi
  sleep 0.05
done
[ -n "$l" ] || { echo "cluster did not become healthy" >&2; exit 1; }
lp=${pids[l - 1]}
if [ "$SEED" -gt 0 ]; then
  "${load[@]}" redis-benchmark -h 127.0.0.1 -p "${cp[l]}" -c 50 -P 10 -n "$SEED" -r 200000 --threads 2 -q \
    sadd __rand_int__ __rand_int__ >/dev/null 2>&1
fi

io_field() { awk -v k="$2:" '$1==k {print $2}' "/proc/$1/io" 2>/dev/null || echo 0; }
t0=$(cpu_ticks "$lp"); a0=$(all_ticks); r0=$(io_field "$lp" syscr); w0=$(io_field "$lp" syscw)
"${load[@]}" redis-benchmark -h 127.0.0.1 -p "${cp[l]}" -c 50 -P "$PIPE" -n "$N" -r 200000 --threads 2 -q --csv \
  sadd __rand_int__ __rand_int__ >"$work/bench.out" 2>&1 &
bp=$!
if [ -n "$PROFILE$TRACE" ]; then
  sleep 3
  # PROFILE_NODE=follower profiles a follower instead of the leader.
  pn=$l; [ "${PROFILE_NODE:-leader}" = follower ] && pn=$((l % NODES + 1))
  if [ -n "$TRACE" ]; then
    curl -sf -o "$TRACE" "http://127.0.0.1:${pp[pn]}/debug/pprof/trace?seconds=1"
  else
    curl -sf -o "$PROFILE" "http://127.0.0.1:${pp[pn]}/debug/pprof/profile?seconds=15"
  fi
fi
wait "$bp"
t1=$(cpu_ticks "$lp"); a1=$(all_ticks); r1=$(io_field "$lp" syscr); w1=$(io_field "$lp" syscw)
[ "$(info_field "${cp[l]}" raft_leader_id)" = "n$l" ] || echo "warning: leadership moved during the run" >&2

hz=$(getconf CLK_TCK)
m=$(echo "$N / 1000000" | bc -l)
e=$(info_field "${cp[l]}" raft_entries_proposed); o=$(info_field "${cp[l]}" raft_ops_proposed)
printf '%s: sadd req/s %s leader_cpu_s_per_M %.2f total_cpu_s_per_M %.2f ops_per_entry %.0f leader_gc_cycles %s leader_syncs_holding_cpu %s/%s leader_reads_per_op %.3f leader_writes_per_op %.3f load %s\n' \
  "$(basename "$bin")" "$(tail -1 "$work/bench.out" | cut -d, -f2 | tr -d '"')" \
  "$(echo "($t1 - $t0) / $hz / $m" | bc -l)" "$(echo "($a1 - $a0) / $hz / $m" | bc -l)" \
  "$(echo "$o / $e" | bc -l)" "$(info_field "${cp[l]}" go_num_gc memory)" \
  "$(info_field "${cp[l]}" raft_log_syncs_holding_cpu)" "$(info_field "${cp[l]}" raft_log_syncs)" \
  "$(echo "($r1 - $r0) / $N" | bc -l)" "$(echo "($w1 - $w0) / $N" | bc -l)" "$(cut -d' ' -f1 /proc/loadavg)"
