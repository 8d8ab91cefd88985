#!/usr/bin/env bash
# Two slot moves out of one shard, one after the other against both at once
# (docs/benchmarks.md, Several moves at once). Three processes hold three
# shards (shard 0 owns slots 0-8191, shard 1 8192-16383, shard 2 none); N
# two-member sets are written over slots 0-8191 (the anchor: that write);
# then slots 0-2047 go to shard 1 and 2048-4095 to shard 2 one after the
# other (two move-slots commands), back to shard 0, and the same two moves
# at once (one move-slots command with both ranges). Prints one line of
# seconds and CPU-seconds (the three processes' user + system time) per run.
#   N=20000 B=/tmp/multimove-raftset bench/multimove.sh
set -euo pipefail
N=${N:-20000}
B=${B:-/tmp/multimove-raftset}
BASE=${BASE:-272}
D=$(mktemp -d)
P=n1=127.0.0.1:${BASE}11,n2=127.0.0.1:${BASE}12,n3=127.0.0.1:${BASE}13
M="0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3 2::n1,n2,n3"
pids=()
for i in 1 2 3; do
	$B --port ${BASE}0$i --raft-addr 127.0.0.1:${BASE}1$i --node-id n$i --peers $P --dir $D/n$i \
		--cluster-enabled yes --shard-map "$M" --loglevel warn 2>$D/n$i.log &
	pids+=($!)
done
trap 'kill ${pids[@]}; wait; rm -rf $D' EXIT
# Every shard with a leader, through each process (-c follows -MOVED).
for p in ${BASE}01 ${BASE}02 ${BASE}03; do for i in $(seq 150); do [ "$(redis-cli -c -p $p SET probe:{a} x 2>/dev/null)" = OK ] &&
	[ "$(redis-cli -c -p $p SET probe:{b} x 2>/dev/null)" = OK ] && break; sleep 0.2; done; done
for i in $(seq 150); do [ "$(redis-cli -p ${BASE}01 RAFT.SHARD 2 RAFT.INFO 2>/dev/null | grep -c '^raft_leader_id:n')" = 1 ] && break; sleep 0.2; done
for i in $(seq 100); do redis-cli -p ${BASE}01 RAFT.SHARD MAP | grep -q "epoch 1" && break; sleep 0.2; done
cpu() {
	local t=0
	for p in ${pids[@]}; do
		set -- $(cut -d' ' -f14,15 /proc/$p/stat)
		t=$((t + $1 + $2))
	done
	echo $t
}
python3 - $N >$D/load.txt <<'PY' # SADD k:<i>{tag} a b, one tag per slot of 0-8191
import sys
def crc16(b):
    c=0
    for x in b:
        c^=x<<8
        for _ in range(8): c=((c<<1)^0x1021)&0xffff if c&0x8000 else (c<<1)&0xffff
    return c
tags=[]; i=0
while len(tags)<8192:
    t=str(i).encode(); i+=1
    if crc16(t)%16384<8192: tags.append(t.decode())
for k in range(int(sys.argv[1])):
    key="k:%d{%s}"%(k,tags[k%8192])
    sys.stdout.write("*4\r\n$4\r\nSADD\r\n$%d\r\n%s\r\n$1\r\na\r\n$1\r\nb\r\n"%(len(key),key))
PY
L=$(redis-cli -p ${BASE}01 CLUSTER SLOTS | sed -n 4p) # shard 0's master port
A=127.0.0.1:${BASE}02
hz=$(getconf CLK_TCK)
now() { date +%s.%N; }
c0=$(cpu); t0=$(now)
redis-cli -p $L --pipe <$D/load.txt | tail -1
c1=$(cpu); t1=$(now)
$B cluster move-slots --addr $A 0 2047 1 >/dev/null
$B cluster move-slots --addr $A 2048 4095 2 >/dev/null
c2=$(cpu); t2=$(now)
$B cluster move-slots --addr $A 0 2047 0 2048 4095 0 >/dev/null
c3=$(cpu); t3=$(now)
$B cluster move-slots --addr $A 0 2047 1 2048 4095 2 >/dev/null
c4=$(cpu); t4=$(now)
s() { echo "$1 - $2" | bc; }
c() { echo "($1 - $2) / $hz" | bc -l | xargs printf %.2f; }
echo "keys=$N write_s=$(s $t1 $t0) write_cpu_s=$(c $c1 $c0) one_after_other_s=$(s $t2 $t1) one_after_other_cpu_s=$(c $c2 $c1) back_at_once_s=$(s $t3 $t2) at_once_s=$(s $t4 $t3) at_once_cpu_s=$(c $c4 $c3)"
