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

# compose runs the compose tool on the script's compose_file.
compose() { "${compose_cmd[@]}" -f "$compose_file" "$@"; }
container() { compose ps -q "$1"; }

# on_exit_clean_up installs the exit trap: once started=1, the project is
# taken down (kept with KEEP=1 after a failure, whose container state and
# logs are printed); work (a scratch directory, when set) is removed
# whatever the outcome, KEEP=1 or not: the containers do not use it.
started=0
work=
on_exit_clean_up() {
  trap clean_up EXIT
  trap 'exit 130' INT TERM
}
clean_up() {
  local rc=$?
  if [ "$started" = 1 ]; then
    if [ "$rc" != 0 ]; then
      step "failed (exit $rc): container state and logs"
      compose ps || true
      compose logs --no-color --tail=40 || true
    fi
    if [ "$rc" != 0 ] && [ "${KEEP:-0}" = 1 ]; then
      echo "KEEP=1: leaving project $COMPOSE_PROJECT_NAME up; remove it with:"
      echo "  COMPOSE_PROJECT_NAME=$COMPOSE_PROJECT_NAME ${compose_cmd[*]} -f $compose_file down -v"
    else
      step "clean up: down -v"
      compose down -v --remove-orphans --timeout 5 || true
    fi
  fi
  [ -z "$work" ] || rm -rf "$work"
  exit "$rc"
}

# wait_for WHAT SECONDS COMMAND...: poll every half second.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${secs}s waiting for $what"
    sleep 0.5
  done
  ok "$what"
}
