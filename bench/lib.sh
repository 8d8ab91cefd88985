# Helpers the bench scripts share; each script sources it after cd-ing to
# the repository root: . bench/lib.sh

# free_port prints a TCP port on 127.0.0.1 that was free a moment ago.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# wait_ready waits until the server on port $1 accepts a write (a node
# answers before it has a leader; a write needs one).
wait_ready() {
  for _ in $(seq 1 400); do
    [ "$(redis-cli -p "$1" SET __bench_ready 1 2>/dev/null)" = OK ] && { redis-cli -p "$1" DEL __bench_ready >/dev/null; return 0; }
    sleep 0.05
  done
  echo "server on $1 did not become writable" >&2; return 1
}

# cpu_ticks prints the user+system clock ticks process $1 has used (0 once
# it is gone), from /proc/<pid>/stat past the command name.
cpu_ticks() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  s=${s##*) }
  # shellcheck disable=SC2086
  set -- $s
  echo $((${12} + ${13}))
}

# bench_scratch makes the scratch directory $work, removed on exit together
# with every process whose pid the script appends to pids.
bench_scratch() {
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
}

# bench_init is bench_scratch that also puts the raftset under test at
# $work/raftset: $RAFTSET_BIN when set (bench/ab.sh compares two builds),
# else a build of this tree.
bench_init() {
  bench_scratch
  if [ -n "${RAFTSET_BIN:-}" ]; then cp "$RAFTSET_BIN" "$work/raftset"; else go build -o "$work/raftset" ./cmd/raftset; fi
}
bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}

# start_redis PORT DIR [ARGS...]: redis-server with appendfsync always, the
# durable single-node anchor every comparison uses unless it says otherwise.
start_redis() {
  local port=$1 dir=$2; shift 2
  mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly yes \
    --appendfsync always --logfile "$dir/redis.log" --daemonize no "$@" & pids+=($!)
  wait_ready "$port"
}

# start_raftset PORT DIR [ARGS...]: one raftset node of $work/raftset.
start_raftset() {
  local port=$1 dir=$2; shift 2
  "$work/raftset" --port "$port" --raft-addr "127.0.0.1:$(free_port)" --dir "$dir" --loglevel warn "$@" \
    >"$dir.log" 2>&1 & pids+=($!)
  wait_ready "$port"
}

# stop_last stops the process started last.
stop_last() { local p=${pids[-1]}; kill "$p"; wait "$p" 2>/dev/null || true; unset 'pids[-1]'; }

# median reads numbers, one a line, and prints their median (nothing for none).
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) exit; if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
