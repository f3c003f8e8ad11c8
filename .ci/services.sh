# Redis and PostgreSQL on loopback for the shared-store tests (tests/tests/it/stores/*.rs, tests/tests/store_processes.rs),
# each in a private temporary directory, on non-default ports, stopped by the
# caller's cleanup. Sourced by .ci/run; to run the store tests by hand:
#
#   bash -c 'source .ci/services.sh; trap stop_stores EXIT; start_redis; start_postgres;
#            cargo test -p tinyagents-tests --features stores --test it stores:: --test store_processes'
#
# Sets TINYAGENTS_REDIS_URL and TINYAGENTS_POSTGRES_URL (when one is already
# set and its server answers, that server is used). Works as root (the
# PostgreSQL server refuses root: its cluster is owned by the `postgres` user,
# or by a `tinyagents-pg` user created for it) and as any other user.

store_pids=()
store_stops=()
stop_stores() {
  local cmd pid
  for cmd in "${store_stops[@]}"; do eval "$cmd" >/dev/null 2>&1 || true; done
  for pid in "${store_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}

# Waits until `$@` succeeds (at most 20 s).
wait_for() {
  local _
  for _ in $(seq 1 200); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 1
}

start_redis() {
  local port=16379 dir
  # A server the caller already started (its URL exported and answering) is
  # used as it is: the docs' commands start the servers too, inside CI's run.
  if [ -n "${TINYAGENTS_REDIS_URL:-}" ] && redis-cli -u "$TINYAGENTS_REDIS_URL" ping >/dev/null 2>&1; then
    return 0
  fi
  if ! command -v redis-server >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    else
      sudo -n apt-get update -qq && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    fi
  fi
  dir=$(mktemp -d "${TMPDIR:-/tmp}/tinyagents-redis.XXXXXX")
  redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save '' --appendonly no \
    --daemonize no --logfile "$dir/redis.log" &
  store_pids+=("$!")
  if ! wait_for redis-cli -h 127.0.0.1 -p "$port" ping; then
    echo "redis-server did not start; its log:" >&2
    cat "$dir/redis.log" >&2
    return 1
  fi
  export TINYAGENTS_REDIS_URL="redis://127.0.0.1:$port/0"
}

start_postgres() {
  local port=15432 bin dir owner run=()
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$bin" ]; then
    echo "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin)" >&2
    return 1
  fi
  # As for Redis: a server already started and answering is used as it is.
  if [ -n "${TINYAGENTS_POSTGRES_URL:-}" ] && "$bin/pg_isready" -q -d "$TINYAGENTS_POSTGRES_URL"; then
    return 0
  fi
  dir=$(mktemp -d "${TMPDIR:-/tmp}/tinyagents-postgres.XXXXXX")
  if [ "$(id -u)" = 0 ]; then
    # The server refuses to run as root: run it as an unprivileged user.
    owner=postgres
    if ! id "$owner" >/dev/null 2>&1; then
      owner=tinyagents-pg
      id "$owner" >/dev/null 2>&1 || useradd --system --no-create-home "$owner"
    fi
    chown "$owner" "$dir"
    chmod 700 "$dir"
    run=(runuser -u "$owner" --)
  fi
  "${run[@]}" "$bin/initdb" -D "$dir/data" -U tinyagents --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    return 1
  }
  "${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=on" start >/dev/null || {
    echo "PostgreSQL did not start; its log:" >&2
    cat "$dir/postgres.log" >&2
    return 1
  }
  store_stops+=("${run[*]} $bin/pg_ctl -D $dir/data -m fast -w stop")
  "$bin/createdb" -h 127.0.0.1 -p "$port" -U tinyagents tinyagents_test
  export TINYAGENTS_POSTGRES_URL="postgres://tinyagents@127.0.0.1:$port/tinyagents_test"
}
