#!/usr/bin/env bash
# A plot of the key series scraped during a failover: a three-node cluster
# with metrics-addr on every node, SADD load through a follower that stays up
# (it forwards to whichever node leads), the leader killed with -9 at
# KILL_AT seconds and restarted at RESTART_AT; /metrics of every node scraped
# every 200 ms until END seconds, and rendered as docs/failover-metrics.png
# (Debian's python3-matplotlib).
#
#   bench/failover-plot.sh                       # KILL_AT=5 RESTART_AT=10 END=18
#
# Needs redis-benchmark and redis-cli (redis-tools), curl, /usr/bin/python3
# with matplotlib (apt-get install -y python3-matplotlib).
set -euo pipefail
cd "$(dirname "$0")/.."
KILL_AT=${KILL_AT:-5}
RESTART_AT=${RESTART_AT:-10}
END=${END:-18}
OUT=${OUT:-docs/failover-metrics}
work=$(mktemp -d)
declare -A npid=()
load=""
cleanup() {
  for p in "${npid[@]}" $load; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/raftset" ./cmd/raftset

. bench/lib.sh
cli() { local port=$1; shift; timeout 0.5 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null || true; }

declare -a cport=() rport=() mport=()
peers=""
for i in 1 2 3; do
  cport[i]=$(free_port); rport[i]=$(free_port); mport[i]=$(free_port)
  peers+="${peers:+,}n$i=127.0.0.1:${rport[i]}"
done
start_node() {
  local i=$1
  "$work/raftset" --node-id "n$i" --port "${cport[i]}" --raft-addr "127.0.0.1:${rport[i]}" \
    --dir "$work/n$i" --peers "$peers" --loglevel warn --metrics-addr "127.0.0.1:${mport[i]}" >>"$work/n$i.log" 2>&1 &
  npid[$i]=$!
}
for i in 1 2 3; do start_node "$i"; done
for _ in $(seq 1 400); do
  ok=1
  for i in 1 2 3; do [ "$(cli "${cport[i]}" SET __ready 1)" = OK ] || ok=0; done
  [ $ok = 1 ] && break
  sleep 0.05
done
leader=""
for i in 1 2 3; do
  id=$(cli "${cport[i]}" INFO raft | tr -d '\r' | awk -F: '$1=="raft_leader_id" {print $2}')
  [ -n "$id" ] && { leader=${id#n}; break; }
done
via=$(( leader % 3 + 1 )) # a follower: it stays up and forwards
echo "leader n$leader, load through n$via"

# redis-benchmark stops at the first error reply (-TRYAGAIN while there is no
# leader): start it again until the end.
(while [ ! -e "$work/stop" ]; do
  redis-benchmark -p "${cport[via]}" -c 20 -P 10 -n 100000000 -r 100000 -q sadd s __rand_int__ >/dev/null 2>&1 || true
  sleep 0.05
done) &
load=$!

csv=$work/scrape.csv
echo "t,node,metric,labels,value" >"$csv"
t0=$EPOCHREALTIME
killed=0 restarted=0
while :; do
  t=$(awk -v a="$EPOCHREALTIME" -v b="$t0" 'BEGIN {printf "%.3f", a-b}')
  awk -v t="$t" -v e="$END" 'BEGIN {exit !(t >= e)}' && break
  if [ $killed = 0 ] && awk -v t="$t" -v k="$KILL_AT" 'BEGIN {exit !(t >= k)}'; then
    kill -9 "${npid[$leader]}"; wait "${npid[$leader]}" 2>/dev/null || true; unset "npid[$leader]"; killed=1
    echo "$t,n$leader,event,kill,1" >>"$csv"
  fi
  if [ $restarted = 0 ] && awk -v t="$t" -v k="$RESTART_AT" 'BEGIN {exit !(t >= k)}'; then
    start_node "$leader"; restarted=1
    echo "$t,n$leader,event,restart,1" >>"$csv"
  fi
  for i in 1 2 3; do
    curl -s -m 0.5 "http://127.0.0.1:${mport[i]}/metrics" 2>/dev/null |
      awk -v t="$t" -v n="n$i" '
        /^#/ {next}
        /^(raftset_raft_term|raftset_raft_is_leader|raftset_raft_applied_index|raftset_raft_commit_index|raftset_raft_follower_lag_entries|raftset_raft_follower_lag_seconds|raftset_commands_total\{cmd="sadd"\}|raftset_forwarded_write_ops_total|raftset_raft_leader_changes_total)[ {]/ {
          name=$1; labels=""; i=index(name, "{")
          if (i) { labels=substr(name, i+1, length(name)-i-1); name=substr(name, 1, i-1) }
          gsub(/"/, "", labels); gsub(/,/, ";", labels)
          # One group: its shard label (always 0) says nothing here.
          sub(/;shard=0$/, "", labels); sub(/^shard=0;?/, "", labels)
          print t "," n "," name "," labels "," $2
        }' >>"$csv" || true
  done
  sleep 0.2
done
touch "$work/stop"
pkill -P "$load" 2>/dev/null || true
wait "$load" 2>/dev/null || true
load=""
/usr/bin/python3 bench/failover-plot.py "$csv" "$OUT.png" "$KILL_AT" "$RESTART_AT"
echo "wrote $OUT.png"
