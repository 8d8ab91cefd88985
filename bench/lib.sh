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
