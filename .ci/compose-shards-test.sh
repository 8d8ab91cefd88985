#!/usr/bin/env bash
# The 6-node, 2-shard docker compose cluster (docker-compose.shards.yml), end
# to end from the host, as a Redis Cluster client sees it: start n1..n6 from
# the FROM-scratch image, wait until every node reports both shards with a
# master, write one key in each of the 16384 slots with `redis-cli -c`
# (following -MOVED to the addresses the nodes announce), check that each
# shard's nodes hold exactly their half, run `redis-cli --cluster check`,
# kill shard 0's leader's container, and write every slot again: both shards
# must take the writes (shard 0 after electing a new leader from its two
# survivors). Always removes its containers and volumes (down -v).
#
# Needs docker, docker compose (v2 plugin or v1 docker-compose), redis-cli
# (redis-tools) and python3 (to name a key per slot); fails when one is
# missing. Environment: KEEP=1 leaves the cluster up on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
. .ci/compose-lib.sh

step "check docker, docker compose, redis-cli, python3"
find_compose
command -v redis-cli >/dev/null || fail "redis-cli is not installed (apt-get install redis-tools)"
command -v python3 >/dev/null || fail "python3 is not installed"

export COMPOSE_PROJECT_NAME="raftsetshards$$$(date +%s)"
compose_file=docker-compose.shards.yml

# The nodes share the host's network: twelve free loopback ports.
nodes=(n1 n2 n3 n4 n5 n6)
declare -A port=()
for i in 1 2 3 4 5 6; do
  p=$(pick_port); port[n$i]=$p; export "RAFTSET_S${i}_PORT=$p"
  taken[$p]=1
  r=$(pick_port); export "RAFTSET_S${i}_RAFT=$r"
  taken[$r]=1
done
export RAFTSET_PASSWORD=${RAFTSET_PASSWORD:-raftset}
export REDISCLI_AUTH=$RAFTSET_PASSWORD
ok "project $COMPOSE_PROJECT_NAME, client ports: $(for n in "${nodes[@]}"; do printf '%s=%s ' "$n" "${port[$n]}"; done)"
work=$(mktemp -d)
on_exit_clean_up


cli() { local p=$1; shift; timeout 10 redis-cli -h 127.0.0.1 -p "$p" --raw "$@" 2>&1 || true; }


all_healthy() {
  local n state
  for n in "$@"; do
    state=$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$(container "$n")" 2>/dev/null || echo "gone - -")
    case $state in exited* | dead* | gone*) fail "$n is not running (state, exit code: $state)" ;; esac
    [ "${state##* }" = healthy ] || return 1
  done
}

# masters NODES...: every given node's CLUSTER SLOTS has both ranges, each
# with a master at an announced 127.0.0.1 address, and all agree; sets
# master0 and master1 (the node names).
master0="" master1=""
masters() {
  local n s first="" m0 m1
  for n in "$@"; do
    s=$(cli "${port[$n]}" CLUSTER SLOTS | tr '\n' ' ')
    # --raw prints each range as: first last ip port id [ip port id]...
    [[ $s =~ ^0\ 8191\ 127\.0\.0\.1\ ([0-9]+)\ [0-9a-f]{40}\ .*8192\ 16383\ 127\.0\.0\.1\ ([0-9]+)\ [0-9a-f]{40} ]] || return 1
    m0=${BASH_REMATCH[1]} m1=${BASH_REMATCH[2]}
    [ -z "$first" ] || [ "$first" = "$m0 $m1" ] || return 1
    first="$m0 $m1"
  done
  master0="" master1=""
  for n in "${nodes[@]}"; do
    [ "${port[$n]}" = "$m0" ] && master0=$n
    [ "${port[$n]}" = "$m1" ] && master1=$n
  done
  [ -n "$master0" ] && [ -n "$master1" ]
}

step "build the static binary and the image (make image)"
make image >/dev/null
ok "image raftset:local"

step "start n1..n6 (compose up -d): shard 0 on n1-n3, shard 1 on n4-n6"
started=1
compose up -d --no-build
wait_for "n1..n6 healthy" 90 all_healthy "${nodes[@]}"
wait_for "every node reports both shards' masters at 127.0.0.1 addresses" 60 masters "${nodes[@]}"
ok "shard 0 led by $master0 (127.0.0.1:${port[$master0]}), shard 1 by $master1 (127.0.0.1:${port[$master1]})"

# One key per slot (no hash tags), in slot order: redis-cli -c follows the
# one -MOVED at the shard boundary and stays on the node it was sent to.
python3 -c '
import binascii
seen = {}
i = 0
while len(seen) < 16384:
    k = "slot:%d" % i
    seen.setdefault(binascii.crc_hqx(k.encode(), 0) % 16384, k)
    i += 1
for s in sorted(seen):
    print(seen[s])
' >"$work/keys"

# write_all MEMBER ENTRY_NODE: SADD every slot's key through redis-cli -c,
# entering at a node that holds shard 0 (so slot 8192 on is a redirect);
# every reply must be an integer.
write_all() {
  local member=$1 entry=$2 out
  out=$(sed "s/^/SADD /; s/\$/ $member/" "$work/keys" | timeout 60 redis-cli -c -h 127.0.0.1 -p "${port[$entry]}" 2>&1) || true
  # Piped, redis-cli prints replies raw (1 or 0: a retry finds the member).
  local n; n=$(printf '%s\n' "$out" | grep -cx '[01]' || true)
  if [ "$n" != 16384 ]; then
    printf '%s\n' "$out" | grep -vx '[01]' | sort | uniq -c | head -5 >&2
    return 1
  fi
}

step "write one set in each of the 16384 slots with redis-cli -c through n1"
wait_for "16384 SADDs answered with integers" 30 write_all before n1
for n in "${nodes[@]}"; do
  want=8192
  r=$(cli "${port[$n]}" DBSIZE)
  [ "$r" = "$want" ] || fail "$n: DBSIZE = $r, want $want (its shard's half of the slots)"
done
ok "each of n1..n6 holds its shard's 8192 keys"
r=$(cli "${port[n1]}" -c SMEMBERS "$(sed -n 16384p "$work/keys")")
[ "$r" = before ] || fail "n1 -c: SMEMBERS of slot 16383's key = $r"

step "redis-cli --cluster check from the host"
redis-cli --cluster check "127.0.0.1:${port[n1]}" >"$work/check.raw" 2>&1 || { cat "$work/check.raw"; fail "redis-cli --cluster check exited non-zero"; }
sed "s/\x1b\[[0-9;]*m//g" "$work/check.raw" >"$work/check" # its colours
grep -q '^\[OK\] All 16384 slots covered' "$work/check" || { cat "$work/check"; fail "not all slots covered"; }
grep -q '^\[OK\] All nodes agree about slots configuration' "$work/check" || { cat "$work/check"; fail "nodes disagree"; }
grep -q "127.0.0.1:${port[n6]}" "$work/check" || { cat "$work/check"; fail "n6 not listed at its announced address"; }
ok "all 16384 slots covered, all nodes agree"

victim=$master0
survivors=()
for n in "${nodes[@]}"; do [ "$n" = "$victim" ] || survivors+=("$n"); done
step "kill shard 0's leader $victim (docker kill)"
docker kill "$(container "$victim")" >/dev/null
ok "killed $victim"
moved_on() { masters "${survivors[@]}" && [ "$master0" != "$victim" ]; }
wait_for "a new shard 0 leader that the five survivors report" 60 moved_on
ok "shard 0 led by $master0, shard 1 by $master1"
entry=n1; [ "$victim" != n1 ] || entry=n2
wait_for "16384 SADDs after the kill, through $entry" 60 write_all after "$entry"
for k in "$(sed -n 1p "$work/keys")" "$(sed -n 16384p "$work/keys")"; do
  r=$(cli "${port[$entry]}" -c SMEMBERS "$k" | sort | xargs)
  [ "$r" = "after before" ] || fail "SMEMBERS $k = $r"
done
ok "both shards took every write with $victim down"

echo
echo "compose shards test passed"
