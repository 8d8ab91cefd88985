#!/usr/bin/env bash
# The cost of metrics: redis-benchmark SADD -P 10 against a single-node raftset
# with metrics-addr off and on, RUNS times each in one run (the order
# alternating from run to run; a
# fresh node each time). With metrics on, /metrics is scraped every second
# during the run (Prometheus' usual interval is 15 s), so the scrape's cost is
# counted too. Prints each run and the median of the on/off ratios.
#
#   bench/metrics.sh                 # RUNS=3 N=1000000
#   RUNS=5 N=500000 bench/metrics.sh
#
# Needs redis-benchmark and redis-cli (apt-get install -y redis-tools), curl.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-1000000}
work=$(mktemp -d)
pid=""
scraper=""
cleanup() {
  for p in $pid $scraper; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/raftset" ./cmd/raftset

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# run on|off → SADD requests per second
run() {
  local mode=$1 port rport mport dir out
  port=$(free_port); rport=$(free_port); mport=$(free_port); dir=$work/$mode-$RANDOM
  local extra=()
  [ "$mode" = on ] && extra=(--metrics-addr "127.0.0.1:$mport")
  "$work/raftset" --port "$port" --raft-addr "127.0.0.1:$rport" --dir "$dir" --loglevel warn "${extra[@]}" \
    >"$dir.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 400); do
    [ "$(timeout 1 redis-cli -p "$port" SET __ready 1 2>/dev/null)" = OK ] && break
    sleep 0.05
  done
  if [ "$mode" = on ]; then
    (while :; do curl -s -o /dev/null "http://127.0.0.1:$mport/metrics"; sleep 1; done) &
    scraper=$!
  fi
  out=$(redis-benchmark -p "$port" -c 50 -P 10 -n "$N" -r 200000 --threads 2 -q --csv sadd myset __rand_int__ 2>&1 |
    awk -F'","' '{gsub(/"/,"",$2); if ($2 ~ /^[0-9]/) {print $2; exit}}')
  if [ -n "$scraper" ]; then kill "$scraper"; wait "$scraper" 2>/dev/null || true; scraper=""; fi
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  rm -rf "$dir"
  echo "$out"
}

ratios=()
for r in $(seq 1 "$RUNS"); do
  # Alternate which goes first, so that a drift of the machine's load does
  # not favour one side.
  if [ $((r % 2)) = 1 ]; then off=$(run off); on=$(run on); else on=$(run on); off=$(run off); fi
  ratio=$(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.3f", a/b}')
  ratios+=("$ratio")
  echo "run $r: SADD -P10 metrics off $off rps, on $on rps, on/off $ratio"
done
echo "median on/off: $(printf '%s\n' "${ratios[@]}" | median)"
