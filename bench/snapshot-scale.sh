#!/usr/bin/env bash
# Writes into a node that already holds a large dataset: how often it
# snapshots for its log's size (snapshot-log-size, snapshot-log-percentage)
# and what that costs per write. redis-server makes a dump.rdb of KEYS
# strings of VALUE random bytes (incompressible, so the snapshot's size is
# the data's), a single node of BIN starts from it (--import), and
# redis-benchmark sends N SADDs -P10 to it, as in bench/leader-sadd.sh.
# Prints req/s, the node's CPU-seconds per million SADDs (utime+stime from
# /proc), the snapshots it took for the log's size (INFO raft's
# raft_log_size_snapshots) and its snapshot's size. ARGS are passed on to
# the node, to compare settings of one build:
#
#   bench/snapshot-scale.sh BIN
#   ARGS="--snapshot-log-percentage 0" bench/snapshot-scale.sh BIN   # the fixed 32 MiB bound alone
#   KEYS=500000 VALUE=100 N=2000000 bench/snapshot-scale.sh BIN     # smaller
#
# The server runs on CPU 0 and redis-benchmark on CPU 1 (PIN=0: unpinned).
# Needs redis-server, redis-benchmark, redis-cli and python3
# (apt-get install -y redis-server redis-tools).
set -euo pipefail
bin=$(realpath "${1:?usage: bench/snapshot-scale.sh BIN}")
cd "$(dirname "$0")/.."
KEYS=${KEYS:-1500000}
VALUE=${VALUE:-150}
N=${N:-4000000}
PIN=${PIN:-1}
ARGS=${ARGS:-}
srv=() load=()
if [ "$PIN" = 1 ]; then srv=(taskset -c 0) load=(taskset -c 1); fi
. bench/lib.sh
bench_scratch

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --dir "$work" --save '' --appendonly no >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do redis-cli -p "$rport" PING 2>/dev/null | grep -q PONG && break; sleep 0.05; done
# The SETs as RESP, through redis-cli --pipe.
python3 - "$KEYS" "$VALUE" <<'EOF' | redis-cli -p "$rport" --pipe >/dev/null
import os, sys
keys, size = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout.buffer
for i in range(keys):
    k = b"big:%d" % i
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, size, os.urandom(size)))
EOF
[ "$(redis-cli -p "$rport" DBSIZE)" = "$KEYS" ] || { echo "redis-server holds $(redis-cli -p "$rport" DBSIZE) keys, not $KEYS" >&2; exit 1; }
redis-cli -p "$rport" SAVE >/dev/null
{ kill -9 "${pids[0]}"; wait "${pids[0]}"; } 2>/dev/null || true

port=$(free_port)
# shellcheck disable=SC2086
"${srv[@]}" "$bin" --port "$port" --bind 127.0.0.1 --dir "$work/node" --import "$work/dump.rdb" \
  --loglevel warn $ARGS >"$work/node.log" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 1 1200); do
  [ "$(redis-cli -p "$port" SET __bench_ready 1 2>/dev/null)" = OK ] && break
  sleep 0.05
done
info() { redis-cli -p "$port" INFO "$2" | tr -d '\r' | awk -F: -v k="$1" '$1==k {print $2}'; }
s0=$(info raft_log_size_snapshots raft)
t0=$(cpu_ticks "$pid")
"${load[@]}" redis-benchmark -p "$port" -c 50 -P 10 -n "$N" -r 200000 --threads 2 -q --csv \
  sadd __rand_int__ __rand_int__ >"$work/bench.out" 2>&1
t1=$(cpu_ticks "$pid")
snaps=$(($(info raft_log_size_snapshots raft) - s0))
size=$(du -sb "$work/node/snapshots" | cut -f1)
hz=$(getconf CLK_TCK)
printf '%s %s: sadd req/s %s cpu_s_per_M %.2f log_size_snapshots %s snapshots_dir_MB %.0f load %s\n' \
  "$(basename "$bin")" "${ARGS:-defaults}" "$(tail -1 "$work/bench.out" | cut -d, -f2 | tr -d '"')" \
  "$(echo "($t1 - $t0) / $hz / ($N / 1000000)" | bc -l)" "$snaps" "$(echo "$size / 1000000" | bc -l)" \
  "$(cut -d' ' -f1 /proc/loadavg)"
