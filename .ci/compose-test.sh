#!/usr/bin/env bash
# The 3-node docker compose cluster, end to end: build the static binary and
# the FROM-scratch image, make the certificates (the one-shot certs service),
# start n1..n3 with a password, client TLS and tls-cluster yes (healthy means
# the healthcheck passed over TLS), check that nodes publish their TLS
# address to each other, write through one node and read through another
# (forwarded over mutual TLS), kill the leader, keep writing through a
# survivor, restart the old leader and wait until all three replicas have the
# same DEBUG DIGEST.
#
# Needs docker and docker compose (the v2 plugin or v1 docker-compose); fails
# when they are missing. Uses redis-cli on the host against the published
# ports when present (.ci/run installs redis-tools), else a bash /dev/tcp RESP
# client. Always removes its containers, network and volumes (down -v).
#
# Environment: RAFTSET_N1_PORT..RAFTSET_N3_PORT (default: free ports),
# RAFTSET_PASSWORD (the cluster's requirepass; default as docker-compose.yml),
# KEEP=1 leaves the cluster running on failure for a look, RESP_CLIENT=bash
# uses the /dev/tcp client even when redis-cli is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
. .ci/compose-lib.sh

step "check docker and docker compose"
find_compose
ok "$("${compose_cmd[@]}" version 2>/dev/null | head -n1)"

# A unique project: its own containers, network and volumes.
export COMPOSE_PROJECT_NAME="raftsetci$$$(date +%s)"
compose_file=docker-compose.yml

# Host ports: the RAFTSET_N<i>_PORT given, else free ones (pick_ports).
nodes=(n1 n2 n3)
declare -A port=() picked=()
for n in "${nodes[@]}"; do
  v=RAFTSET_${n^^}_PORT
  if [ -n "${!v:-}" ]; then
    port[$n]=${!v}
    taken[${!v}]=1
    export "${v?}"
  else
    picked[$n]=1
  fi
done
# pick_ports gives each node that was not given a port a free one, distinct
# from the other nodes' and from every port picked before (taken keeps
# them all: pick_port runs in a subshell and cannot record what it
# returns), so that a retry after a clash does not pick the taken port
# again.
pick_ports() {
  local n p
  for n in "${!picked[@]}"; do
    p=$(pick_port)
    taken[$p]=1
    port[$n]=$p
    export "RAFTSET_${n^^}_PORT=$p"
  done
}
pick_ports
ok "project $COMPOSE_PROJECT_NAME, client ports n1=${port[n1]} n2=${port[n2]} n3=${port[n3]}"
work=$(mktemp -d) # compose up's output, for the retry below
on_exit_clean_up


export RAFTSET_PASSWORD=${RAFTSET_PASSWORD:-raftset}

# cli PORT ARGS...: one command, its reply on stdout like redis-cli --raw
# (error replies as "ERR ..." / "-ERR ..." text, never a failed exit status).
if [ "${RESP_CLIENT:-}" != bash ] && command -v redis-cli >/dev/null; then
  cli() {
    local p=$1; shift
    REDISCLI_AUTH=$RAFTSET_PASSWORD timeout 10 redis-cli -h 127.0.0.1 -p "$p" --raw "$@" 2>&1 || true
  }
else
  # A tiny RESP client on bash's /dev/tcp: enough for +, -, :, $ and flat *.
  resp_read() {
    local line n i
    IFS= read -r -t 5 line <&3 || return 1
    line=${line%$'\r'}
    case $line in
      [+:]*) printf '%s\n' "${line:1}" ;;
      -*) printf '%s\n' "$line" ;;
      \$-1) printf '\n' ;;
      \$*) n=${line:1}; local data; IFS= read -r -t 5 -N $((n + 2)) data <&3 || return 1
           printf '%s\n' "${data%$'\r\n'}" ;;
      \*-1 | \*0) ;;
      \**) n=${line:1}; for ((i = 0; i < n; i++)); do resp_read || return 1; done ;;
      *) printf 'bad reply: %s\n' "$line"; return 1 ;;
    esac
  }
  cli() {
    local p=$1 a req auth; shift
    auth="*2"$'\r\n'"\$4"$'\r\n'"AUTH"$'\r\n'"\$${#RAFTSET_PASSWORD}"$'\r\n'"$RAFTSET_PASSWORD"$'\r\n'
    req="*$#"$'\r\n'
    for a in "$@"; do req+="\$${#a}"$'\r\n'"$a"$'\r\n'; done
    (
      exec 3<>"/dev/tcp/127.0.0.1/$p" || exit 0
      printf '%s%s' "$auth" "$req" >&3
      resp_read >/dev/null # AUTH's +OK
      resp_read
    ) 2>&1 || true
  }
fi

info_field() { cli "$1" INFO raft | tr -d '\r' | sed -n "s/^$2://p"; }
health() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$(container "$1")" 2>/dev/null || echo gone; }


# all_healthy NODES...: every node's container healthy; fails the test at
# once when one has exited (a bad flag exits 2 and never becomes healthy).
all_healthy() {
  local n state
  for n in "$@"; do
    state=$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$(container "$n")" 2>/dev/null || echo "gone -")
    case $state in exited* | dead* | gone*) fail "$n is not running (state, exit code: $state)" ;; esac
    [ "$(health "$n")" = healthy ] || return 1
  done
}

# leader_of NODES...: the one node id every given node agrees is the leader,
# with that node saying it is the leader.
leader=""
agree_on_leader() {
  local n id first=""
  for n in "$@"; do
    id=$(info_field "${port[$n]}" raft_leader_id)
    [ -n "$id" ] || return 1
    [ -z "$first" ] || [ "$id" = "$first" ] || return 1
    first=$id
  done
  [ -n "${port[$first]:-}" ] || return 1
  [ "$(info_field "${port[$first]}" raft_state)" = leader ] || return 1
  leader=$first
}

members_are() { # PORT KEY EXPECTED (sorted, space separated)
  local got; got=$(cli "$1" SMEMBERS "$2" | sort | xargs)
  [ "$got" = "$3" ]
}

step "build the static binary and the image (make image)"
make image
ok "image raftset:local: $(docker image inspect -f '{{.Size}}' raftset:local) bytes"

step "start n1, n2, n3 (compose up -d)"
started=1
# A host port can still be taken between picking it and docker's bind: then
# start over on new ports (only those we picked).
for attempt in 1 2 3; do
  if compose up -d --no-build 2>&1 | tee "$work/up"; [ "${PIPESTATUS[0]}" = 0 ]; then
    break
  fi
  if [ "$attempt" = 3 ] || [ "${#picked[@]}" = 0 ] || ! grep -q "address already in use" "$work/up"; then
    fail "compose up failed"
  fi
  compose down -v --remove-orphans --timeout 5 || true
  pick_ports
  ok "a port was taken; retrying on n1=${port[n1]} n2=${port[n2]} n3=${port[n3]}"
done
compose ps

step "wait for all three containers to be healthy (image HEALTHCHECK: raftset healthcheck)"
wait_for "n1, n2, n3 healthy" 90 all_healthy "${nodes[@]}"
for n in "${nodes[@]}"; do
  r=$(cli "${port[$n]}" PING)
  [ "$r" = PONG ] || fail "$n (127.0.0.1:${port[$n]}) answered PING with: $r"
done
ok "PING on 127.0.0.1:${port[n1]}, ${port[n2]}, ${port[n3]}"

step "wait for a leader that all three agree on (INFO raft)"
wait_for "one leader" 60 agree_on_leader "${nodes[@]}"
ok "leader is $leader"

step "check the cluster's links are TLS (tls-cluster yes, TLS client address published)"
cert_state=$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$(container certs)" 2>/dev/null || echo gone)
[ "$cert_state" = "exited 0" ] || fail "the certs service did not complete (state, exit code: $cert_state)"
ok "certs service exited 0"
for n in "${nodes[@]}"; do
  r=$(cli "${port[$n]}" CONFIG GET tls-cluster | xargs)
  [ "$r" = "tls-cluster yes" ] || fail "$n: CONFIG GET tls-cluster = $r"
  r=$(info_field "${port[$n]}" raft_leader_client_addr)
  [ "$r" = "$leader:6380" ] || fail "$n: raft_leader_client_addr = $r, want the leader's TLS port $leader:6380"
done
ok "tls-cluster yes on n1, n2, n3; the leader is reached on $leader:6380"
followers=()
for n in "${nodes[@]}"; do [ "$n" = "$leader" ] || followers+=("$n"); done

step "write through follower ${followers[0]}, read through ${followers[1]} and $leader"
# sadd PORT KEY MEMBERS...: an integer reply. A follower answers TRYAGAIN
# until it learns the new leader's client address, so callers retry (a
# retried SADD is idempotent; the set's contents are checked afterwards).
last_reply=""
sadd() {
  local p=$1; shift
  last_reply=$(cli "$p" SADD "$@")
  [[ $last_reply =~ ^[0-9]+$ ]]
}
wait_for "SADD through ${followers[0]} (reply: integer)" 20 sadd "${port[${followers[0]}]}" ci:fruits apple banana cherry
wait_for "${followers[1]} reads the set" 20 members_are "${port[${followers[1]}]}" ci:fruits "apple banana cherry"
wait_for "$leader reads the set" 20 members_are "${port[$leader]}" ci:fruits "apple banana cherry"
r=$(cli "${port[$leader]}" SADD ci:fruits date)
[ "$r" = 1 ] || fail "SADD through the leader $leader answered: $r"
ok "SADD through the leader $leader: 1"
wait_for "${followers[0]} reads the leader's write" 20 members_are "${port[${followers[0]}]}" ci:fruits "apple banana cherry date"

step "kill the leader $leader (docker kill)"
old_leader=$leader
docker kill "$(container "$old_leader")" >/dev/null
ok "killed $old_leader"

survivor=${followers[0]}
step "write through survivor $survivor until a new leader takes the write"
write_after_kill() { sadd "${port[$survivor]}" ci:after-kill "$1"; } # 0 is fine: an earlier try committed
wait_for "SADD ci:after-kill v1 through $survivor" 60 write_after_kill v1
for i in $(seq 2 20); do
  wait_for "SADD ci:after-kill v$i" 20 write_after_kill "v$i" >/dev/null
done
ok "20 writes through $survivor after the kill"
wait_for "a new leader among ${followers[*]}" 30 agree_on_leader "${followers[@]}"
ok "new leader is $leader"
[ "$leader" != "$old_leader" ] || fail "the killed node $old_leader is still reported as leader"
expected=$(for i in $(seq 1 20); do echo "v$i"; done | sort | xargs)
wait_for "${followers[1]} reads all 20" 20 members_are "${port[${followers[1]}]}" ci:after-kill "$expected"

step "restart $old_leader (compose start)"
compose start "$old_leader"
wait_for "$old_leader healthy again" 90 all_healthy "$old_leader"
wait_for "all three agree on leader again" 60 agree_on_leader "${nodes[@]}"
ok "leader is $leader"

step "wait until all three DEBUG DIGESTs agree"
digests_agree() {
  local n d first=""
  for n in "${nodes[@]}"; do
    d=$(cli "${port[$n]}" DEBUG DIGEST)
    [[ $d =~ ^[0-9a-f]{40}$ ]] || return 1
    [ "$d" != 0000000000000000000000000000000000000000 ] || return 1
    [ -z "$first" ] || [ "$d" = "$first" ] || return 1
    first=$d
  done
  digest=$first
}
wait_for "equal digests on n1, n2, n3" 60 digests_agree
ok "digest $digest"
wait_for "$old_leader reads the writes made while it was down" 20 \
  members_are "${port[$old_leader]}" ci:after-kill "$expected"

echo
echo "compose test passed"
