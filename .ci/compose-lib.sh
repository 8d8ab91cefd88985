# Helpers the compose tests share; each sources it after cd-ing to the
# repository root: . .ci/compose-lib.sh

step() { printf '\n=== %s\n' "$*"; }
ok() { printf '    ok: %s\n' "$*"; }
fail() { printf '\nFAIL: %s\n' "$*" >&2; exit 1; }

# find_compose fails unless docker's daemon answers, and sets compose_cmd to
# the compose that works: the v2 plugin, else v1 docker-compose.
find_compose() {
  command -v docker >/dev/null || fail "docker is not installed"
  docker info >/dev/null 2>&1 || fail "the docker daemon is not reachable (docker info failed)"
  if docker compose version >/dev/null 2>&1; then
    compose_cmd=(docker compose)
  elif command -v docker-compose >/dev/null && docker-compose version >/dev/null 2>&1; then
    compose_cmd=(docker-compose)
  else
    fail "neither 'docker compose' nor 'docker-compose' works"
  fi
}

# pick_port prints a free loopback port that is not in taken (the caller
# adds what it keeps: pick_port runs in a subshell). Below Linux's
# ephemeral range (32768-60999), where an outgoing connection could take
# the port between this check and docker's bind.
declare -A taken=()
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((10000 + RANDOM % 20000))
    [ -z "${taken[$p]:-}" ] && ! port_busy "$p" && { echo "$p"; return 0; }
  done
  fail "no free port found"
}
