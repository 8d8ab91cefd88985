#!/usr/bin/env bash
# The cost of metrics: redis-benchmark SADD -P 10 against a single-node raftset
# with metrics-addr off and on, RUNS times each in one run (the order
# alternating from run to run; a
# fresh node each time). With metrics on, /metrics is scraped every second
# during the run (Prometheus' usual interval is 15 s), so the scrape's cost is
# counted too. Prints each run and the medians of the on/off ratios of req/s
# and of the server's CPU seconds per million requests (utime+stime from
# /proc/PID/stat around the redis-benchmark run, scrapes included): on a
# shared machine the CPU per request is the steadier measure, as req/s moves
# with whatever else runs.
#
#   bench/metrics.sh                 # RUNS=3 N=1000000
#   RUNS=5 N=500000 bench/metrics.sh
#   PROFILE=/tmp/on.pprof bench/metrics.sh   # then a CPU profile, metrics on
#
# With PROFILE set, a last node with metrics on (scraped every second) is
# profiled for 40 s under the same load through pprof-addr, and the share of
# its CPU spent in metrics code is printed: go-metrics' calls from Raft and
# the sink they reach (internal/metrics), and the scrapes (client_golang,
# promhttp, expfmt, procfs). go-metrics is called with metrics off too, into
# its default blackhole sink.
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

. bench/lib.sh
# cpu_ticks PID → utime+stime of the process in clock ticks (fields 14 and
# 15 of /proc/PID/stat; the text after the ")" closing the name starts at
# field 3).
clk_tck=$(getconf CLK_TCK)

# run on|off → "rps cpu_s_per_M" of SADD
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
  local t0 t1
  t0=$(cpu_ticks "$pid")
  out=$(redis-benchmark -p "$port" -c 50 -P 10 -n "$N" -r 200000 --threads 2 -q --csv sadd myset __rand_int__ 2>&1 |
    awk -F'","' '{gsub(/"/,"",$2); if ($2 ~ /^[0-9]/) {print $2; exit}}')
  t1=$(cpu_ticks "$pid")
  if [ -n "$scraper" ]; then kill "$scraper"; wait "$scraper" 2>/dev/null || true; scraper=""; fi
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  rm -rf "$dir"
  echo "$out $(echo "($t1 - $t0) / $clk_tck / ($N / 1000000)" | bc -l)"
}

ratios=()
cratios=()
for r in $(seq 1 "$RUNS"); do
  # Alternate which goes first, so that a drift of the machine's load does
  # not favour one side.
  if [ $((r % 2)) = 1 ]; then off=$(run off); on=$(run on); else on=$(run on); off=$(run off); fi
  read -r off_rps off_cpu <<<"$off"
  read -r on_rps on_cpu <<<"$on"
  ratio=$(awk -v a="$on_rps" -v b="$off_rps" 'BEGIN {printf "%.3f", a/b}')
  cratio=$(awk -v a="$on_cpu" -v b="$off_cpu" 'BEGIN {printf "%.3f", a/b}')
  ratios+=("$ratio")
  cratios+=("$cratio")
  printf 'run %s: SADD -P10 metrics off %s rps %.2f cpu-s/M, on %s rps %.2f cpu-s/M, on/off rps %s cpu %s (load %s)\n' \
    "$r" "$off_rps" "$off_cpu" "$on_rps" "$on_cpu" "$ratio" "$cratio" "$(cut -d' ' -f1 /proc/loadavg)" |
    tee -a "$work/runs.txt"
done
if [ -n "${PROFILE:-}" ]; then
  port=$(free_port); rport=$(free_port); mport=$(free_port); pport=$(free_port); dir=$work/profile
  "$work/raftset" --port "$port" --raft-addr "127.0.0.1:$rport" --dir "$dir" --loglevel warn \
    --metrics-addr "127.0.0.1:$mport" --pprof-addr "127.0.0.1:$pport" >"$dir.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 400); do
    [ "$(timeout 1 redis-cli -p "$port" SET __ready 1 2>/dev/null)" = OK ] && break
    sleep 0.05
  done
  (while :; do curl -s -o /dev/null "http://127.0.0.1:$mport/metrics"; sleep 1; done) &
  scraper=$!
  redis-benchmark -p "$port" -c 50 -P 10 -n 1000000000 -r 200000 --threads 2 -q sadd myset __rand_int__ >/dev/null 2>&1 &
  loadgen=$!
  sleep 2
  curl -sf -o "$PROFILE" "http://127.0.0.1:$pport/debug/pprof/profile?seconds=40"
  kill "$loadgen" "$scraper"; wait "$loadgen" "$scraper" 2>/dev/null || true; scraper=""
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  share() { go tool pprof -top -nodefraction=0 -focus "$1" "$work/raftset" "$PROFILE" 2>/dev/null |
    awk '/^Showing nodes/ {print $6}' | tr -d ','; }
  echo "profile $PROFILE: metrics code $(share 'go-metrics|client_golang|internal/metrics|promhttp|prometheus/common|prometheus/procfs') of the server's CPU" \
    "(Raft's calls into go-metrics $(share 'go-metrics'), of which the sink $(share 'RaftSink');" \
    "scrapes $(share 'promhttp|prometheus.\(\*Registry\).Gather'))"
fi
echo "median on/off req/s: $(printf '%s\n' "${ratios[@]}" | median)"
echo "median on/off CPU seconds per million requests: $(printf '%s\n' "${cratios[@]}" | median) (above 1: metrics cost CPU)"
# CPU per request falls as req/s rises (group commit packs more writes per
# entry), and on a busy machine req/s swings with the other work, so one
# side's slow run looks like a metrics cost. A least-squares fit of
# log(CPU per request) on log(req/s) and on/off over every measurement
# compares the two at equal req/s.
if [ "$RUNS" -ge 3 ]; then
python3 - "$work/runs.txt" <<'PY'
import math, re, sys
rows = []
for l in open(sys.argv[1]):
    m = re.match(r'run \d+: SADD -P10 metrics off ([\d.]+) rps ([\d.]+) cpu-s/M, on ([\d.]+) rps ([\d.]+) cpu-s/M', l)
    if m:
        a, b, c, d = map(float, m.groups())
        rows += [(a, b, 0), (c, d, 1)]
X = [[1, math.log(r), o] for r, _, o in rows]
y = [math.log(c) for _, c, _ in rows]
A = [[sum(x[i] * x[j] for x in X) for j in range(3)] for i in range(3)]
def inv3(m):
    (a, b, c), (d, e, f), (g, h, i) = m
    det = a*(e*i-f*h) - b*(d*i-f*g) + c*(d*h-e*g)
    return [[(e*i-f*h)/det, (c*h-b*i)/det, (b*f-c*e)/det],
            [(f*g-d*i)/det, (a*i-c*g)/det, (c*d-a*f)/det],
            [(d*h-e*g)/det, (b*g-a*h)/det, (a*e-b*d)/det]]
Ai = inv3(A)
Xty = [sum(x[i] * yy for x, yy in zip(X, y)) for i in range(3)]
beta = [sum(Ai[i][j] * Xty[j] for j in range(3)) for i in range(3)]
resid = [yy - sum(b * xx for b, xx in zip(beta, x)) for x, yy in zip(X, y)]
n = len(y)
s2 = sum(r * r for r in resid) / (n - 3)
se = math.sqrt(s2 * Ai[2][2])
print(f"fit over {n} measurements: CPU per request ~ (req/s)^{beta[1]:.2f}; metrics on/off at equal req/s "
      f"{math.exp(beta[2]):.3f} (±2 s.e. {math.exp(beta[2]-2*se):.3f}..{math.exp(beta[2]+2*se):.3f})")
PY
fi
