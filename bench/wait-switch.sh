#!/usr/bin/env bash
# Three-node raftset cluster on loopback (default timeouts):
#  (a) the cost of WAIT: redis-benchmark "WAIT 2 0" (before any write on
#      its connections: one raftset.applied round trip to each follower)
#      against the leader and a follower;
#  (b) +switch-master: TRIALS times, a subscriber on a follower (after
#      SENTINEL get-master-addr-by-name raftset, as clients do), RAFT.TRANSFER
#      on the leader; time until the transfer's reply and until the message.
#
#   bench/wait-switch.sh             # N=20000 TRIALS=5
#
# Needs redis-cli and redis-benchmark, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
TRIALS=${TRIALS:-5}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/raftset" ./cmd/raftset
. bench/lib.sh
declare -a cport=() rport=()
peers=""
for i in 1 2 3; do
  cport[i]=$(free_port); rport[i]=$(free_port)
  peers+="${peers:+,}n$i=127.0.0.1:${rport[i]}"
done
for i in 1 2 3; do
  "$work/raftset" --node-id "n$i" --port "${cport[i]}" --raft-addr "127.0.0.1:${rport[i]}" --dir "$work/n$i" \
    --peers "$peers" --loglevel warn >"$work/n$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 1 150); do
  ok=1
  for i in 1 2 3; do [ "$(timeout 1 redis-cli -p "${cport[i]}" SET ready 1 2>/dev/null)" = OK ] || ok=0; done
  [ $ok = 1 ] && break
  sleep 0.2
done
leader() { redis-cli -p "${cport[1]}" SENTINEL get-master-addr-by-name raftset | tail -1; }
L=$(leader)
F=$([ "$L" = "${cport[1]}" ] && echo "${cport[2]}" || echo "${cport[1]}")
# Every node must have published its client address before WAIT can ask it.
for _ in $(seq 1 100); do [ "$(redis-cli -p "$L" WAIT 2 1000)" = 2 ] && break; done
echo "WAIT 2 0, $N requests, 10 clients:"
echo "  leader   $(redis-benchmark -p "$L" -n "$N" -c 10 -q WAIT 2 0 | tr '\r' '\n' | tail -1)"
echo "  follower $(redis-benchmark -p "$F" -n "$N" -c 10 -q WAIT 2 0 | tr '\r' '\n' | tail -1)"
echo "+switch-master after RAFT.TRANSFER:"
for _ in $(seq 1 "$TRIALS"); do
  L=$(leader)
  F=$([ "$L" = "${cport[1]}" ] && echo "${cport[2]}" || echo "${cport[1]}")
  python3 - "$L" "$F" <<'PY'
import socket, subprocess, sys, time
leader, follower = sys.argv[1], sys.argv[2]
s = socket.create_connection(("127.0.0.1", int(follower)))
s.settimeout(10)
# As Sentinel clients do: ask for the master by name, then subscribe.
s.sendall(b"*3\r\n$8\r\nSENTINEL\r\n$23\r\nget-master-addr-by-name\r\n$7\r\nraftset\r\n")
s.recv(4096)
s.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$14\r\n+switch-master\r\n")
s.recv(4096)
t0 = time.time()
out = subprocess.run(["redis-cli", "-p", leader, "RAFT.TRANSFER"], capture_output=True, text=True).stdout.strip()
t1 = time.time()
msg = s.recv(4096)
t2 = time.time()
payload = msg.split(b"\r\n")[-2].decode()
print(f"  transfer {out} after {1000*(t1-t0):.1f} ms; message on {follower} after {1000*(t2-t0):.1f} ms: {payload}")
PY
done
