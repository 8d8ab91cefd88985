#!/usr/bin/env bash
# Three-node raftset cluster on loopback, default Raft timeouts:
#  (a) failover time: TRIALS times, kill -9 the leader and time until
#      `SET failover-probe x` through a surviving node returns OK; restart
#      the killed node and wait until all three are healthy; median and max.
#  (b) write throughput: redis-benchmark SADD -P 10 against the leader and
#      against a follower, with redis-server (appendonly yes, appendfsync
#      always) measured in the same run as the anchor.
#  (c) linearizable read throughput: SISMEMBER -P 10 on the leader and on a
#      follower after (b) populated the sets, redis-server as the anchor.
#  (d) with (b) and (c): CPU seconds per million requests of each raftset
#      process (utime+stime from /proc/PID/stat around each redis-benchmark
#      run), printed as "cpu_s_per_M" lines: steadier than req/s on a busy
#      machine, where other work steals the wall clock but not our CPU time.
# Medians of RUNS runs (a fresh cluster and redis-server per run).
#
#   bench/cluster.sh                      # RUNS=3 N=1000000 TRIALS=10
#   RUNS=5 N=500000 bench/cluster.sh
#   FAILOVER=0 bench/cluster.sh           # throughput only
#   THROUGHPUT=0 bench/cluster.sh         # failover only
#   TLS_CLUSTER=1 bench/cluster.sh        # tls-cluster yes vs no (below)
#
# TLS_CLUSTER=1 measures the cost of tls-cluster yes (mutual TLS on the Raft
# port and for forwarded calls to the leader's TLS port; certificates from
# `raftset cert init`): each run starts a plain cluster and a tls-cluster one
# (plain first on odd runs, TLS first on even ones) and measures SADD and
# SISMEMBER -P 10 at the leader and at a follower of each; the clients use
# the plain port in both, so only the links between nodes differ. It prints
# the median of the per-run ratios TLS / plain. No failover, no redis-server.
#
# Needs redis-server, redis-cli and redis-benchmark (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-1000000}
TRIALS=${TRIALS:-10}
FAILOVER=${FAILOVER:-1}
THROUGHPUT=${THROUGHPUT:-1}
TLS_CLUSTER=${TLS_CLUSTER:-0}
if [ "$TLS_CLUSTER" = 1 ]; then FAILOVER=0 THROUGHPUT=0; fi
cluster_tls=0 # the cluster new_cluster starts runs with tls-cluster yes
work=$(mktemp -d)
declare -A npid=() # node index -> pid of its running process
rpid=""            # redis-server
cleanup() {
  for p in "${npid[@]}" $rpid; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# RAFTSET_BIN: measure a prebuilt binary (bench/ab.sh compares two builds).
if [ -n "${RAFTSET_BIN:-}" ]; then cp "$RAFTSET_BIN" "$work/raftset"; else go build -o "$work/raftset" ./cmd/raftset; fi

. bench/lib.sh
now() { echo "$EPOCHREALTIME"; }
max() { sort -n | tail -1; }

# cli PORT ARGS... with a short timeout: a node that forwards to a dead
# leader must not stall the probe.
cli() { local port=$1; shift; timeout 0.5 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null || true; }
info_field() { cli "$1" INFO raft | tr -d '\r' | awk -F: -v k="$2" '$1==k {print $2}'; }

declare -a cport=() rport=() tport=()
peers=""
cluster_dir=""
new_cluster() {
  cluster_dir=$work/cluster-$1
  peers=""
  for i in 1 2 3; do
    cport[i]=$(free_port); rport[i]=$(free_port); tport[i]=$(free_port)
    peers+="${peers:+,}n$i=127.0.0.1:${rport[i]}"
  done
  for i in 1 2 3; do start_node "$i"; done
  wait_healthy
}
start_node() {
  local i=$1 adv="127.0.0.1:${cport[$1]}" tls=()
  if [ "$cluster_tls" = 1 ]; then
    # Nodes publish, and call each other on, the TLS port.
    adv="127.0.0.1:${tport[i]}"
    tls=(--tls-port "${tport[i]}" --tls-cluster yes --tls-cert-file "$work/certs/n$i.crt"
      --tls-key-file "$work/certs/n$i.key" --tls-ca-cert-file "$work/certs/ca.crt")
  fi
  mkdir -p "$cluster_dir"
  "$work/raftset" --node-id "n$i" --bind 127.0.0.1 --port "${cport[i]}" --raft-addr "127.0.0.1:${rport[i]}" \
    --advertise-addr "$adv" --raft-advertise-addr "127.0.0.1:${rport[i]}" "${tls[@]}" \
    --dir "$cluster_dir/n$i" --peers "$peers" --loglevel warn >>"$cluster_dir/n$i.log" 2>&1 &
  npid[$i]=$!
}
kill_node() { kill -9 "${npid[$1]}"; wait "${npid[$1]}" 2>/dev/null || true; unset "npid[$1]"; }
stop_cluster() { for i in "${!npid[@]}"; do kill_node "$i"; done; rm -rf "$cluster_dir"; }
# wait_healthy: every node accepts a write (followers forward) and all three
# name the same leader.
wait_healthy() {
  for _ in $(seq 1 600); do
    local ok=1 lead="" l
    for i in 1 2 3; do
      [ "$(cli "${cport[i]}" SET __bench_ready 1)" = OK ] || { ok=0; break; }
      l=$(info_field "${cport[i]}" raft_leader_id)
      [ -n "$l" ] && { [ -z "$lead" ] || [ "$l" = "$lead" ]; } || { ok=0; break; }
      lead=$l
    done
    [ $ok = 1 ] && return 0
    sleep 0.05
  done
  echo "cluster did not become healthy" >&2; return 1
}
# leader_idx: index of the node that is leader (asked of node 1..3 in turn).
leader_idx() {
  local id
  for i in 1 2 3; do
    [ -n "${npid[$i]:-}" ] || continue
    id=$(info_field "${cport[i]}" raft_leader_id)
    [ -n "$id" ] && { echo "${id#n}"; return; }
  done
}

start_redis() {
  local port=$1 dir=$2
  mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly yes \
    --appendfsync always --logfile "$dir/redis.log" --daemonize no &
  rpid=$!
  for _ in $(seq 1 400); do [ "$(cli "$port" PING)" = PONG ] && return 0; sleep 0.05; done
  echo "redis-server did not start" >&2; return 1
}
stop_redis() { kill "$rpid"; wait "$rpid" 2>/dev/null || true; rpid=""; }

# cpu_ticks PID → utime+stime of the process in clock ticks (fields 14 and
# 15 of /proc/PID/stat; the text after the ")" closing the name starts at
# field 3).
clk_tck=$(getconf CLK_TCK)

# measure KEY PORT COMMAND... runs rps and appends its req/s to res[KEY] and
# the CPU seconds per million requests of the leader, the benchmarked
# follower, the other follower and their sum to cpu[KEY_leader] etc.
# Needs l and f (leader and follower index) set.
declare -A cpu=()
measure() {
  local key=$1 port=$2 i v d r total=0; shift 2
  declare -A t0=()
  for i in 1 2 3; do t0[$i]=$(cpu_ticks "${npid[$i]}"); done
  v=$(rps "$port" "$@")
  res[$key]+="$v "
  for i in 1 2 3; do
    d=$(($(cpu_ticks "${npid[$i]}") - t0[$i]))
    total=$((total + d))
    case $i in $l) r=leader ;; $f) r=follower ;; *) r=other ;; esac
    cpu[${key}_$r]+="$(echo "$d / $clk_tck / ($N / 1000000)" | bc -l) "
  done
  cpu[${key}_total]+="$(echo "$total / $clk_tck / ($N / 1000000)" | bc -l) "
}

# rps PORT COMMAND... → requests per second at -P 10
rps() {
  local port=$1 out; shift
  out=$(redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -P 10 -n "$N" -r 200000 --threads 2 -q --csv "$@" 2>&1 |
    awk -F'","' 'NR>1 || !/^"test"/ {gsub(/"/,"",$2); print $2; exit}') || true
  case "$out" in
    [0-9]*) echo "$out" ;;
    *) echo "redis-benchmark $* on port $port failed: $out" >&2; return 1 ;;
  esac
}

if [ "$FAILOVER" = 1 ]; then
  new_cluster failover
  times=()
  for t in $(seq 1 "$TRIALS"); do
    l=$(leader_idx)
    s=$((l % 3 + 1)) # a surviving node
    t0=$(now)
    kill_node "$l"
    while [ "$(cli "${cport[s]}" SET failover-probe x)" != OK ]; do sleep 0.005; done
    t1=$(now)
    d=$(echo "$t1 - $t0" | bc -l)
    times+=("$d")
    printf 'trial %2d: killed n%d, first OK through n%d after %.3f s; new leader n%s\n' "$t" "$l" "$s" "$d" "$(leader_idx)"
    start_node "$l"
    wait_healthy
  done
  stop_cluster
  printf 'failover (kill -9 leader -> first OK), %d trials: median %.3f s, max %.3f s\n' "$TRIALS" \
    "$(printf '%s\n' "${times[@]}" | median)" "$(printf '%s\n' "${times[@]}" | max)"
  echo
fi

if [ "$THROUGHPUT" = 1 ]; then
  declare -A res=()
  for run in $(seq 1 "$RUNS"); do
    rp=$(free_port); start_redis "$rp" "$work/redis-$run"
    res[redis_sadd]+="$(rps "$rp" sadd __rand_int__ __rand_int__) "
    res[redis_sismember]+="$(rps "$rp" sismember __rand_int__ __rand_int__) "
    stop_redis; rm -rf "$work/redis-$run"

    new_cluster "$run"
    l=$(leader_idx); f=$((l % 3 + 1))
    measure leader_sadd "${cport[l]}" sadd __rand_int__ __rand_int__
    measure follower_sadd "${cport[f]}" sadd __rand_int__ __rand_int__
    measure leader_sismember "${cport[l]}" sismember __rand_int__ __rand_int__
    measure follower_sismember "${cport[f]}" sismember __rand_int__ __rand_int__
    [ "$(leader_idx)" = "$l" ] || echo "warning: leadership moved during run $run" >&2
    stop_cluster
    echo "run $run: $(for k in redis_sadd leader_sadd follower_sadd redis_sismember leader_sismember follower_sismember; do
      printf '%s=%s ' "$k" "$(echo "${res[$k]}" | awk '{print $NF}')"; done)"
    for k in leader_sadd follower_sadd leader_sismember follower_sismember; do
      printf 'run %s: cpu_s_per_M %s: %s\n' "$run" "$k" "$(for r in leader follower other total; do
        printf '%s=%.2f ' "$r" "$(echo "${cpu[${k}_$r]}" | awk '{print $NF}')"; done)"
    done
  done
  med() { echo "${res[$1]}" | tr ' ' '\n' | grep . | median; }
  printf '\n%-44s %12s %7s\n' "3 nodes, -c 50 -P 10 -n $N -r 200000 --threads 2" "req/s" "ratio"
  for cmd in sadd sismember; do
    r=$(med "redis_$cmd")
    printf '%-44s %12.0f %7s\n' "redis-server appendfsync always: $cmd" "$r" "1.00"
    for who in leader follower; do
      v=$(med "${who}_$cmd")
      printf '%-44s %12.0f %7.2f\n' "raftset $who: $cmd" "$v" "$(echo "$v / $r" | bc -l)"
    done
  done
  # The benchmarked node is the leader or "follower"; "other" is the third
  # node, "total" the sum of the three processes.
  printf '\nCPU seconds per million requests (utime+stime), median of %d runs\n' "$RUNS"
  for k in leader_sadd follower_sadd leader_sismember follower_sismember; do
    printf 'cpu_s_per_M %s:' "$k"
    for r in leader follower other total; do
      printf ' %s %.2f' "$r" "$(echo "${cpu[${k}_$r]}" | tr ' ' '\n' | grep . | median)"
    done
    echo
  done
fi

if [ "$TLS_CLUSTER" = 1 ]; then
  "$work/raftset" cert init --dir "$work/certs" n1 n2 n3 >/dev/null
  keys="leader_sadd follower_sadd leader_sismember follower_sismember"
  declare -A raw=() ratio=()
  for run in $(seq 1 "$RUNS"); do
    order="0 1"; [ $((run % 2)) = 0 ] && order="1 0"
    declare -A this=()
    for mode in $order; do
      cluster_tls=$mode
      new_cluster "$run-$mode"
      l=$(leader_idx); f=$((l % 3 + 1))
      for cmd in sadd sismember; do
        this[${mode}_leader_$cmd]=$(rps "${cport[l]}" "$cmd" __rand_int__ __rand_int__)
        this[${mode}_follower_$cmd]=$(rps "${cport[f]}" "$cmd" __rand_int__ __rand_int__)
      done
      [ "$(leader_idx)" = "$l" ] || echo "warning: leadership moved during run $run (tls-cluster=$mode)" >&2
      stop_cluster
    done
    line="run $run:"
    for k in $keys; do
      raw[plain_$k]+="${this[0_$k]} "; raw[tls_$k]+="${this[1_$k]} "
      r=$(echo "${this[1_$k]} / ${this[0_$k]}" | bc -l)
      ratio[$k]+="$r "
      line+=$(printf ' %s=%.0f/%.0f(%.2f)' "$k" "${this[1_$k]}" "${this[0_$k]}" "$r")
    done
    echo "$line"
    unset this
  done
  med() { echo "$1" | tr ' ' '\n' | grep . | median; }
  printf '\n%-44s %12s %12s %7s\n' "3 nodes, -c 50 -P 10 -n $N -r 200000 --threads 2" "plain req/s" "tls req/s" "ratio"
  for k in $keys; do
    printf '%-44s %12.0f %12.0f %7.2f\n' "raftset ${k/_/: }" "$(med "${raw[plain_$k]}")" "$(med "${raw[tls_$k]}")" "$(med "${ratio[$k]}")"
  done
  echo "(ratio: median of the per-run tls-cluster yes / no ratios)"
fi
