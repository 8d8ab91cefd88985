#!/usr/bin/env bash
# The seed's memory peak under GC settings (issue 14): in each of RUNS rounds,
# MEM_N `sadd __rand_int__ __rand_int__` (-P 10 -c 50 -r 200000) into a fresh
# redis-server (the anchor: appendfsync always, or no AOF with REDIS_AOF=no;
# its memory is the same either way, and without AOF its load does not wait
# on a disk other work is syncing to), then into a fresh raftset
# once per setting in SETTINGS. Per load: peak RSS (VmHWM) at the end of
# the load, peak RSS once settled (VmHWM again: the defragmenter's packing
# after the last write included), RSS at rest
# (raftset: once its defragmenter stopped moving bytes; Redis: right after),
# CPU-seconds per million SADDs (utime+stime of the server from /proc over
# the load: the steadiest figure on a shared machine) and the SADD rate; each
# as a ratio against the round's Redis, then medians over the rounds.
#
#   RUNS=3 MEM_N=10000000 SETTINGS="default gogc=100 gogc=50" bench/gc.sh
#   REDIS_AOF=no RUNS=3 SETTINGS="gogc=100 gogc=50 gogc=30" bench/gc.sh
#   RAFTSET_BIN=/tmp/old SETTINGS=gogc=100 bench/gc.sh    # another build
#   RUNS=3 SETTINGS="/tmp/before /tmp/after" bench/gc.sh   # two builds, A/B
#
# A setting is `default` (the binary's own policy), `gogc=N` (the GOGC
# environment variable, which takes precedence over the node's own choice)
# or `--directive=value` (passed on the command line), or an absolute path:
# that build of raftset with its defaults (several builds against the same
# round's Redis). The settings' order is reversed every other round, so
# that two settings alternate A B, B A, ...
# Output: one line per load on stderr while it runs, then a table; OUT gets
# the per-load lines (tab-separated). LOGS=DIR keeps each raftset's log there
# as run<N>-<setting>.log: with GODEBUG=gctrace=1 in the environment, the
# collector's trace of every load, from which its own CPU is summed
# (docs/benchmarks.md, "The memory peak: gc-percent").
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
MEM_N=${MEM_N:-10000000}
SETTINGS=${SETTINGS:-default gogc=100}
REDIS_AOF=${REDIS_AOF:-always}
OUT=${OUT:-/dev/null}
LOGS=${LOGS:-}
. bench/lib.sh
bench_init
hz=$(getconf CLK_TCK)

field() { awk -v k="$2" '$1==k":" {print $2 * 1024}' "/proc/$1/status"; }
info_field() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: -v k="$2" '$1==k {print $2}'; }

# load PORT PID → "rate cpu_s_per_million" for MEM_N SADDs.
load() {
  local t0 t1 rate
  t0=$(cpu_ticks "$2")
  rate=$(redis-benchmark -p "$1" -c 50 -P 10 -n "$MEM_N" -r 200000 --threads 2 -q --csv sadd __rand_int__ __rand_int__ |
    awk -F'","' '!/^"test"/ {gsub(/"/,"",$2); print $2; exit}')
  t1=$(cpu_ticks "$2")
  echo "$rate $(echo "($t1 - $t0) / $hz / ($MEM_N / 1000000)" | bc -l)"
}

# settle PORT waits (at most 120 s) until raftset's defragmenter ran five
# cycles and its last cycle moved nothing, as bench/table.sh does.
settle() {
  local start moved=-1 now cycles waited=0
  start=$(info_field "$1" active_defrag_cycles)
  while [ "$waited" -lt 120 ]; do
    sleep 2; waited=$((waited + 2))
    now=$(info_field "$1" active_defrag_moved_bytes); cycles=$(info_field "$1" active_defrag_cycles)
    if [ "$now" = "$moved" ] && [ $((cycles - start)) -ge 5 ]; then return; fi
    moved=$now
  done
}

: >"$OUT"
declare -A res=()
for run in $(seq 1 "$RUNS"); do
  port=$(free_port)
  if [ "$REDIS_AOF" = no ]; then start_redis "$port" "$work/redis" --appendonly no; else start_redis "$port" "$work/redis"; fi
  rpid=${pids[-1]}
  read -r rrate rcpu < <(load "$port" "$rpid")
  rpeak=$(field "$rpid" VmHWM); rrest=$(field "$rpid" VmRSS)
  stop_last; rm -rf "$work/redis"
  echo "run $run redis: peak $rpeak rest $rrest cpu/M $rcpu rate $rrate (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  order=$SETTINGS
  [ $((run % 2)) = 0 ] && order=$(tr ' ' '\n' <<<"$SETTINGS" | tac | tr '\n' ' ')
  for s in $order; do
    port=$(free_port)
    args=(); envs=(); bin=$work/raftset
    case "$s" in
      /*) bin=$s ;;
      default) ;;
      gogc=*) envs=("GOGC=${s#gogc=}") ;;
      --*) args=("${s%%=*}" "${s#*=}") ;;
      *) echo "unknown setting $s" >&2; exit 2 ;;
    esac
    mkdir -p "$work/data"
    env "${envs[@]}" "$bin" --port "$port" --raft-addr "127.0.0.1:$(free_port)" --dir "$work/data" \
      --loglevel warn "${args[@]}" >"$work/data.log" 2>&1 &
    pids+=($!); spid=$!
    wait_ready "$port"
    read -r srate scpu < <(load "$port" "$spid")
    speak=$(field "$spid" VmHWM)
    settle "$port"
    sall=$(field "$spid" VmHWM); srest=$(field "$spid" VmRSS)
    stop_last; rm -rf "$work/data"
    [ -n "$LOGS" ] && mkdir -p "$LOGS" && cp "$work/data.log" "$LOGS/run$run-$(tr -c 'A-Za-z0-9=.-' _ <<<"$s").log"
    line=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$s" "$speak" "$rpeak" "$srest" "$rrest" "$scpu" "$rcpu" "$srate" "$rrate" "$sall")
    echo "$line" >>"$OUT"
    echo "run $run $s: peak $speak settled-peak $sall rest $srest cpu/M $scpu rate $srate (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    res[$s]+="$(echo "$speak $rpeak $srest $rrest $scpu $rcpu $srate $rrate $sall" |
      awk '{printf "%.1f %.3f %.1f %.3f %.2f %.3f %.0f %.3f %.1f %.3f;", $1/1e6, $1/$2, $3/1e6, $3/$4, $5, $5/$6, $7, $7/$8, $9/1e6, $9/$2}')"
  done
done

col() { tr ';' '\n' | awk -v c="$1" 'NF {print $c}' | median; }
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); medians of $RUNS rounds, ratios against the round's redis-server"
printf '%-22s %9s %7s %9s %7s %9s %7s %8s %7s %9s %7s\n' setting peak_MB ratio settled ratio rest_MB ratio cpu-s/M ratio sadd/s ratio
for s in $SETTINGS; do
  v=${res[$s]}
  printf '%-22s %9s %7s %9s %7s %9s %7s %8s %7s %9s %7s\n' "$s" "$(col 1 <<<"$v")" "$(col 2 <<<"$v")" "$(col 9 <<<"$v")" "$(col 10 <<<"$v")" "$(col 3 <<<"$v")" \
    "$(col 4 <<<"$v")" "$(col 5 <<<"$v")" "$(col 6 <<<"$v")" "$(col 7 <<<"$v")" "$(col 8 <<<"$v")"
done
