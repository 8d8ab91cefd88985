#!/usr/bin/env bash
# A/B throughput of two builds of raftset on a shared, noisy machine: the
# bench scripts run alternately with the binary of BASE (a git revision) and
# of the work tree, ROUNDS times each (one run per round, the order swapped
# every round), and every figure is a ratio against redis-server measured in
# the same run. Prints the per-round ratios and their medians.
#
#   bench/ab.sh BASE                       # both scripts, ROUNDS=3
#   ROUNDS=5 SCRIPTS=redis-benchmark bench/ab.sh HEAD~3
#   N=500000 PIPELINES=10 bench/ab.sh main  # variables pass through to the scripts
#   LOG=/tmp/ab.log bench/ab.sh main        # also keep each run's full output
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: bench/ab.sh BASE-REVISION}
ROUNDS=${ROUNDS:-3}
SCRIPTS=${SCRIPTS:-redis-benchmark cluster}
work=$(mktemp -d)
cleanup() { git worktree remove --force "$work/src" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

git worktree add --detach -q "$work/src" "$base"
(cd "$work/src" && go build -o "$work/base" ./cmd/raftset)
go build -o "$work/head" ./cmd/raftset
echo "base $(git rev-parse --short "$base"), head $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty')"

# ratios SCRIPT OUTPUT → "name<TAB>ratio" lines: redis-benchmark.sh prints
# "command P raftset redis ratio", cluster.sh "raftset leader: cmd req/s ratio"
# and "cpu_s_per_M leader_sadd: leader X follower Y other Z total T" (CPU
# seconds per million requests, not a ratio: the leader's and the sum of the
# three processes are kept).
ratios() {
  case $1 in
    redis-benchmark) awk 'NF>=5 && $NF ~ /^[0-9.]+$/ && $(NF-3) ~ /^[0-9]+$/ {
        n=""; for (i=1;i<=NF-4;i++) n=n (i>1?" ":"") $i; print "1 node " n " -P" $(NF-3) "\t" $NF }' ;;
    cluster) awk '/^raftset (leader|follower):/ { n=$2" "$3; print "3 nodes " n "\t" $NF }
        /^cpu_s_per_M [a-z_]+:/ { k=$2; sub(/:$/,"",k)
          for (i=3;i<NF;i+=2) if ($i=="leader" || $i=="total") print "3 nodes cpu_s_per_M " k " " $i "\t" $(i+1) }' ;;
  esac
}

for round in $(seq 1 "$ROUNDS"); do
  order="base head"; [ $((round % 2)) = 0 ] && order="head base"
  for who in $order; do
    for s in $SCRIPTS; do
      case $s in
        redis-benchmark) env RUNS=1 MEMORY=0 RAFTSET_BIN="$work/$who" bench/redis-benchmark.sh ;;
        cluster) env RUNS=1 FAILOVER=0 RAFTSET_BIN="$work/$who" bench/cluster.sh ;;
      esac > "$work/out" 2>&1 || { cat "$work/out"; exit 1; }
      ratios "$s" < "$work/out" | sed "s/^/$who\t/" >> "$work/ratios"
      # LOG=FILE keeps every run's full output (raw req/s, CPU per node).
      [ -z "${LOG:-}" ] || sed "s/^/round $round $who $s: /" "$work/out" >> "$LOG"
      echo "round $round $who $s: load $(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done

echo
printf '%-48s %-24s %-24s %s\n' "ratio to redis-server (same run) or cpu_s_per_M" "base runs" "head runs" "median head/base"
cut -f2 "$work/ratios" | awk '!seen[$0]++' | while read -r name; do
  b=$(awk -F'\t' -v n="$name" '$1=="base" && $2==n {print $3}' "$work/ratios")
  h=$(awk -F'\t' -v n="$name" '$1=="head" && $2==n {print $3}' "$work/ratios")
  bm=$(echo "$b" | sort -n | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}')
  hm=$(echo "$h" | sort -n | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}')
  printf '%-48s %-24s %-24s %s / %s = %.2f\n' "$name" "$(echo $b)" "$(echo $h)" "$hm" "$bm" "$(echo "$hm / $bm" | bc -l)"
done
