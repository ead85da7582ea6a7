#!/usr/bin/env bash
# Throwaway PostgreSQL + Redis servers for the test suite and the benchmarks.
#
#   scripts/services.sh start DIR   start both on free 127.0.0.1 ports, state in DIR,
#                                   and write DIR/env (export lines, see below)
#   scripts/services.sh stop DIR    stop both and remove DIR (safe to call twice)
#   scripts/services.sh env DIR     print DIR/env
#   scripts/services.sh start DIR postgres|redis   start only that one (a test's own server)
#   scripts/services.sh down DIR postgres|redis    stop one (PostgreSQL: fast shutdown), keep
#                                   its port and data, for fault tests; "up" starts it again
#   scripts/services.sh up DIR postgres|redis      on the same port (Redis comes back empty)
#
# DIR/env exports PAI_TEST_POSTGRES_URL (database "pai", with pg_stat_statements),
# PAI_TEST_REDIS_URL, PAI_SERVICES_DIR, and the two server logs (of the servers started).
#
# Missing servers are installed with apt-get (Debian: postgresql, redis-server). As root,
# initdb/postgres run as the "postgres" system user; the cluster lives under /tmp because
# DIR may sit somewhere that user cannot reach. It never touches a system cluster on 5432.
# Environment knobs: PAI_SERVICES_TIMEOUT (seconds to wait for readiness, default 60),
# PAI_PG_BINDIR (PostgreSQL bin directory, default: newest /usr/lib/postgresql/*/bin).
set -euo pipefail

readonly MARKER=".pai-services"
TIMEOUT="${PAI_SERVICES_TIMEOUT:-60}"

log() { printf 'services: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

is_root() { [[ "$(id -u)" -eq 0 ]]; }

# ---------------------------------------------------------------------------- install

find_pg_bindir() {
    if [[ -n "${PAI_PG_BINDIR:-}" ]]; then
        printf '%s\n' "$PAI_PG_BINDIR"
        return 0
    fi
    local dirs=() d best=""
    shopt -s nullglob
    dirs=(/usr/lib/postgresql/*/bin)
    shopt -u nullglob
    if ((${#dirs[@]})); then
        best="$(printf '%s\n' "${dirs[@]}" | sort -V | tail -n 1)"
        if [[ -x "$best/initdb" && -x "$best/postgres" ]]; then
            printf '%s\n' "$best"
            return 0
        fi
    fi
    if command -v pg_config >/dev/null 2>&1; then
        d="$(pg_config --bindir 2>/dev/null || true)"
        if [[ -n "$d" && -x "$d/initdb" && -x "$d/postgres" ]]; then
            printf '%s\n' "$d"
            return 0
        fi
    fi
    if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
        d="$(dirname "$(readlink -f "$(command -v initdb)")")"
        if [[ -x "$d/pg_ctl" ]]; then
            printf '%s\n' "$d"
            return 0
        fi
    fi
    return 1
}

pg_has_stat_statements() {
    local bindir="$1" libdir
    libdir="$("$bindir/pg_config" --pkglibdir 2>/dev/null || true)"
    [[ -z "$libdir" ]] && libdir="$(dirname "$bindir")/lib"
    [[ -e "$libdir/pg_stat_statements.so" ]]
}

apt_install() {
    local sudo=()
    if ! is_root; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            die "missing packages: $*; install them (e.g. apt-get install $*) or run as root"
        fi
    fi
    command -v apt-get >/dev/null 2>&1 || die "missing: $*; no apt-get here, install them by hand"
    log "installing $* with apt-get (one-time)"
    local out
    out="$(mktemp)"
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$out" 2>&1 ||
        ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends -o Dpkg::Use-Pty=0 "$@" >>"$out" 2>&1; then
        cat "$out" >&2
        rm -f "$out"
        die "apt-get install $* failed (output above)"
    fi
    rm -f "$out"
}

ensure_installed() {
    local need=() bindir=""
    bindir="$(find_pg_bindir || true)"
    if [[ -z "$bindir" ]]; then
        need+=(postgresql)
    elif ! pg_has_stat_statements "$bindir"; then
        need+=(postgresql-contrib)
    fi
    command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
    command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
    # Not a server, but installed the same way: the e2e tests drive Debian's Chromium
    # (Playwright never downloads a browser here), with a font for legible screenshots.
    [[ -x /usr/bin/chromium ]] || need+=(chromium fonts-dejavu-core)
    if ((${#need[@]})); then
        apt_install "${need[@]}"
    fi
    PG_BINDIR="$(find_pg_bindir)" || die "PostgreSQL binaries not found even after installing"
    pg_has_stat_statements "$PG_BINDIR" ||
        die "pg_stat_statements is missing for $PG_BINDIR (install postgresql-contrib)"
    command -v redis-server >/dev/null 2>&1 || die "redis-server not found even after installing"
    if is_root && ! id -u postgres >/dev/null 2>&1; then
        log "creating the postgres system user"
        useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/sh postgres
    fi
}

# ---------------------------------------------------------------------------- helpers

# Run a command as the PostgreSQL owner: the postgres user when we are root, else ourselves.
# cd first: postgres tools complain when the current directory is unreadable to them.
as_pg() {
    if is_root; then
        (cd / && runuser -u postgres -- "$@")
    else
        (cd / && "$@")
    fi
}

# Is PID alive and is it NAME (guards against a recycled pid from a stale pid file)?
is_process() {
    local pid="$1" name="$2" comm
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
    [[ "$comm" == *"$name"* ]] || return 1
    # a zombie is as good as gone (its parent, maybe init, just has not reaped it yet)
    ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}

# Wait up to SECONDS (tenths resolution) for PID/NAME to exit; fail if it is still there.
wait_gone() {
    local pid="$1" name="$2" tenths=$(($3 * 10)) i
    for ((i = 0; i < tenths; i++)); do
        is_process "$pid" "$name" || return 0
        sleep 0.1
    done
    ! is_process "$pid" "$name"
}

port_is_listening() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A port in 20000-32767: below Linux's ephemeral range, so outgoing connections never take it.
free_port() {
    local port i
    for ((i = 0; i < 100; i++)); do
        port=$((20000 + (RANDOM % 12768)))
        if ! port_is_listening "$port"; then
            printf '%s\n' "$port"
            return 0
        fi
    done
    die "could not find a free port on 127.0.0.1"
}

show_log() {
    local title="$1" file="$2"
    if [[ -f "$file" ]]; then
        printf -- '----- %s (%s, last 60 lines) -----\n' "$title" "$file" >&2
        tail -n 60 "$file" >&2
        printf -- '----- end of %s -----\n' "$title" >&2
    else
        log "($title: no log at $file)"
    fi
}

# Append one shell-quoted assignment to DIR/state (read back by "stop").
save_state() {
    printf '%s=%q\n' "$1" "$2" >>"$DIR/state"
}

abs_dir() {
    local d="$1"
    [[ "$d" == /* ]] || d="$PWD/$d"
    printf '%s\n' "${d%/}"
}

check_dir_arg() {
    [[ -n "${1:-}" ]] || usage
    DIR="$(abs_dir "$1")"
    case "$DIR" in
    "" | / | /tmp | /root | /home | /var | /usr | "${HOME:-/root}") die "refusing to use $DIR as the services dir" ;;
    esac
}

# ---------------------------------------------------------------------------- postgres

start_postgres() {
    PG_ROOT="$(mktemp -d /tmp/pai-pg.XXXXXX)"
    save_state PG_ROOT "$PG_ROOT"
    save_state PG_BINDIR "$PG_BINDIR"
    mkdir -p "$PG_ROOT/sock"
    if is_root; then
        chown -R postgres: "$PG_ROOT"
    fi
    chmod 700 "$PG_ROOT"
    ln -sfn "$PG_ROOT/postgres.log" "$DIR/postgres.log"

    if ! as_pg "$PG_BINDIR/initdb" -D "$PG_ROOT/data" -U postgres -A trust -E UTF8 --no-locale \
        -N >"$DIR/initdb.log" 2>&1; then
        show_log "initdb output" "$DIR/initdb.log"
        die "initdb failed"
    fi
    cat >>"$PG_ROOT/data/postgresql.conf" <<EOF

# --- throwaway test cluster (scripts/services.sh) ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$PG_ROOT/sock'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_preload_libraries = 'pg_stat_statements'
timezone = 'UTC'
EOF
    if is_root; then
        chown postgres: "$PG_ROOT/data/postgresql.conf"
    fi

    local attempt
    for attempt in 1 2 3 4 5; do
        PG_PORT="$(free_port)"
        if [[ -f "$PG_ROOT/postgres.log" ]]; then
            : >"$PG_ROOT/postgres.log" # keeps its owner; only this attempt's lines matter
        fi
        if as_pg "$PG_BINDIR/pg_ctl" -D "$PG_ROOT/data" -l "$PG_ROOT/postgres.log" \
            -o "-p $PG_PORT" -w -t "$TIMEOUT" start >"$DIR/pg_ctl.log" 2>&1; then
            break
        fi
        if grep -qiE 'already in use|could not (bind|create listen)' "$PG_ROOT/postgres.log" 2>/dev/null &&
            ((attempt < 5)); then
            log "port $PG_PORT was taken, retrying PostgreSQL on another port"
            as_pg "$PG_BINDIR/pg_ctl" -D "$PG_ROOT/data" -m immediate stop >/dev/null 2>&1 || true
            continue
        fi
        show_log "pg_ctl output" "$DIR/pg_ctl.log"
        show_log "PostgreSQL log" "$PG_ROOT/postgres.log"
        die "PostgreSQL did not start"
    done
    save_state PG_PORT "$PG_PORT"

    local waited=0
    until "$PG_BINDIR/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 1; do
        if ((waited >= TIMEOUT)); then
            show_log "PostgreSQL log" "$PG_ROOT/postgres.log"
            die "PostgreSQL on 127.0.0.1:$PG_PORT not ready after ${TIMEOUT}s"
        fi
        sleep 1
        waited=$((waited + 1))
    done

    # The extension goes into template1 first so that every database created afterwards
    # (pai, and pytest-django's test_pai) has it too.
    local psql=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres)
    if ! {
        "${psql[@]}" -d template1 -c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' &&
            "${psql[@]}" -d postgres -c 'CREATE DATABASE pai' &&
            "${psql[@]}" -d pai -c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements'
    } >"$DIR/psql.log" 2>&1; then
        show_log "psql output" "$DIR/psql.log"
        show_log "PostgreSQL log" "$PG_ROOT/postgres.log"
        die "could not create the pai database / pg_stat_statements extension"
    fi
}

stop_postgres() {
    local root="${PG_ROOT:-}" bindir="${PG_BINDIR:-}" pid=""
    [[ -n "$root" && "$root" == /tmp/pai-pg.* ]] || return 0
    if [[ -f "$root/data/postmaster.pid" ]]; then
        pid="$(head -n 1 "$root/data/postmaster.pid" 2>/dev/null || true)"
        if [[ -n "$bindir" && -x "$bindir/pg_ctl" ]]; then
            as_pg "$bindir/pg_ctl" -D "$root/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
        fi
        if ! wait_gone "$pid" postgres 10; then
            log "PostgreSQL (pid $pid) did not stop cleanly, killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -rf "$root"
}

# ---------------------------------------------------------------------------- redis

# Start redis-server on REDIS_PORT (no persistence: a restarted server is empty).
launch_redis() {
    # daemonize: redis forks and calls setsid, so Ctrl-C in the calling terminal does not
    # reach it; the pidfile lets "stop" find it.
    if ! redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes \
        --pidfile "$DIR/redis/redis.pid" --logfile "$DIR/redis/redis.log" \
        --dir "$DIR/redis" --save "" --appendonly no >"$DIR/redis/stdout.log" 2>&1; then
        show_log "redis-server output" "$DIR/redis/stdout.log"
        die "redis-server failed to start"
    fi
}

start_redis() {
    mkdir -p "$DIR/redis"
    local attempt waited
    for attempt in 1 2 3 4 5; do
        REDIS_PORT="$(free_port)"
        : >"$DIR/redis/redis.log"
        launch_redis
        save_state REDIS_PID_FILE "$DIR/redis/redis.pid"
        waited=0
        while [[ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null || true)" != "PONG" ]]; do
            if grep -qiE 'already in use|could not create server' "$DIR/redis/redis.log"; then
                break
            fi
            if ((waited >= TIMEOUT * 5)); then
                show_log "Redis log" "$DIR/redis/redis.log"
                die "Redis on 127.0.0.1:$REDIS_PORT not ready after ${TIMEOUT}s"
            fi
            sleep 0.2
            waited=$((waited + 1))
        done
        if [[ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null || true)" == "PONG" ]]; then
            save_state REDIS_PORT "$REDIS_PORT"
            return 0
        fi
        if ((attempt < 5)); then
            log "port $REDIS_PORT was taken, retrying Redis on another port"
        fi
    done
    show_log "Redis log" "$DIR/redis/redis.log"
    die "Redis did not start"
}

stop_redis() {
    local pidfile="${REDIS_PID_FILE:-}" pid=""
    [[ -n "$pidfile" && -f "$pidfile" ]] || return 0
    pid="$(cat "$pidfile" 2>/dev/null || true)"
    is_process "$pid" redis || return 0
    if [[ -n "${REDIS_PORT:-}" ]]; then
        redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    fi
    wait_gone "$pid" redis 2 && return 0
    kill -TERM "$pid" 2>/dev/null || true
    wait_gone "$pid" redis 10 && return 0
    log "Redis (pid $pid) did not stop, killing it"
    kill -KILL "$pid" 2>/dev/null || true
}

# ---------------------------------------------------------------------------- commands

services_alive() {
    [[ -f "$DIR/env" && -f "$DIR/state" ]] || return 1
    (
        # shellcheck disable=SC1091
        source "$DIR/state"
        [[ "${SERVICES:-postgres redis}" == "$1" ]] || exit 1
        if [[ "$1" == *postgres* ]]; then
            [[ -n "${PG_PORT:-}" ]] || exit 1
            "$PG_BINDIR/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 2 || exit 1
        fi
        if [[ "$1" == *redis* ]]; then
            [[ -n "${REDIS_PORT:-}" ]] || exit 1
            [[ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null || true)" == "PONG" ]]
        fi
    )
}

do_stop() {
    [[ -d "$DIR" ]] || return 0
    if [[ ! -f "$DIR/$MARKER" ]]; then
        log "$DIR was not made by scripts/services.sh; leaving it alone"
        return 1
    fi
    if [[ -f "$DIR/state" ]]; then
        # shellcheck disable=SC1091
        source "$DIR/state"
    fi
    stop_redis
    stop_postgres
    rm -rf "$DIR"
}

cmd_start() {
    check_dir_arg "${1:-}"
    local services="postgres redis"
    case "${2:-}" in
    "") ;;
    postgres | redis) services="$2" ;;
    *) usage ;;
    esac
    if [[ -d "$DIR" && ! -f "$DIR/$MARKER" ]] && [[ -n "$(ls -A "$DIR")" ]]; then
        die "$DIR exists and is not empty; pick a new or empty directory"
    fi
    if services_alive "$services"; then
        log "already running (state in $DIR)"
        cat "$DIR/env"
        return 0
    fi
    if [[ -f "$DIR/$MARKER" ]]; then
        log "cleaning up stale state in $DIR"
        do_stop || true
    fi
    ensure_installed

    mkdir -p "$DIR"
    : >"$DIR/$MARKER"
    : >"$DIR/state"
    # A failed start must not leave half of the servers running.
    trap 'rc=$?; if ((rc != 0)); then log "start failed, cleaning up"; do_stop || true; fi' EXIT

    local t0=$SECONDS
    save_state SERVICES "$services"
    [[ "$services" == *postgres* ]] && start_postgres
    [[ "$services" == *redis* ]] && start_redis

    local pg_url="" redis_url=""
    {
        if [[ "$services" == *postgres* ]]; then
            pg_url="postgres://postgres@127.0.0.1:$PG_PORT/pai"
            printf 'export PAI_TEST_POSTGRES_URL=%q\n' "$pg_url"
        fi
        if [[ "$services" == *redis* ]]; then
            redis_url="redis://127.0.0.1:$REDIS_PORT/0"
            printf 'export PAI_TEST_REDIS_URL=%q\n' "$redis_url"
        fi
        printf 'export PAI_SERVICES_DIR=%q\n' "$DIR"
        if [[ "$services" == *postgres* ]]; then
            printf 'export PAI_TEST_POSTGRES_LOG=%q\n' "$PG_ROOT/postgres.log"
        fi
        if [[ "$services" == *redis* ]]; then
            printf 'export PAI_TEST_REDIS_LOG=%q\n' "$DIR/redis/redis.log"
        fi
    } >"$DIR/env.tmp"
    mv "$DIR/env.tmp" "$DIR/env"
    trap - EXIT
    local started="${pg_url:+PostgreSQL $pg_url}"
    if [[ -n "$redis_url" ]]; then
        started="${started:+$started, }Redis $redis_url"
    fi
    log "$started (ready in $((SECONDS - t0))s; env in $DIR/env)"
}

# "down"/"up": one service of a running DIR, for tests that restart it.
load_service_state() {
    check_dir_arg "${1:-}"
    [[ -f "$DIR/$MARKER" && -f "$DIR/state" ]] || die "no services running in $DIR"
    case "${2:-}" in
    postgres | redis) ;;
    *) usage ;;
    esac
    # shellcheck disable=SC1091
    source "$DIR/state"
    [[ "${SERVICES:-postgres redis}" == *"$2"* ]] || die "$DIR runs no $2"
}

cmd_down() {
    load_service_state "$@"
    if [[ "$2" == redis ]]; then
        stop_redis
        return 0
    fi
    local pid=""
    pid="$(head -n 1 "$PG_ROOT/data/postmaster.pid" 2>/dev/null || true)"
    as_pg "$PG_BINDIR/pg_ctl" -D "$PG_ROOT/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
    if [[ -n "$pid" ]] && ! wait_gone "$pid" postgres 10; then
        log "PostgreSQL (pid $pid) did not stop cleanly, killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
}

cmd_up() {
    load_service_state "$@"
    local waited=0
    if [[ "$2" == redis ]]; then
        launch_redis
        while [[ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null || true)" != "PONG" ]]; do
            if ((waited >= TIMEOUT * 5)); then
                show_log "Redis log" "$DIR/redis/redis.log"
                die "Redis on 127.0.0.1:$REDIS_PORT not ready after ${TIMEOUT}s"
            fi
            sleep 0.2
            waited=$((waited + 1))
        done
        return 0
    fi
    if ! as_pg "$PG_BINDIR/pg_ctl" -D "$PG_ROOT/data" -l "$PG_ROOT/postgres.log" \
        -o "-p $PG_PORT" -w -t "$TIMEOUT" start >"$DIR/pg_ctl.log" 2>&1; then
        show_log "pg_ctl output" "$DIR/pg_ctl.log"
        show_log "PostgreSQL log" "$PG_ROOT/postgres.log"
        die "PostgreSQL did not start again on port $PG_PORT"
    fi
}

cmd_stop() {
    check_dir_arg "${1:-}"
    do_stop
}

cmd_env() {
    check_dir_arg "${1:-}"
    [[ -f "$DIR/env" ]] || die "no services running in $DIR (run: $0 start $DIR)"
    cat "$DIR/env"
}

main() {
    local cmd="${1:-}"
    shift || true
    case "$cmd" in
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    env) cmd_env "$@" ;;
    down) cmd_down "$@" ;;
    up) cmd_up "$@" ;;
    *) usage ;;
    esac
}

main "$@"
