# scripts/lib/redis.sh -- start and stop a throw-away Redis on a free
# loopback port.  Sourced by test/run and bench/run, which define log().
#
#   start_redis DIR     start one (no persistence) with its files in DIR;
#                       sets REDIS_PORT and REDIS_PIDFILE
#   stop_redis          stop it (idempotent)
#   pick_free_port      print a loopback TCP port nothing listens on

#
# RLOCK_SERVER=valkey runs valkey-server and valkey-cli (from valkey-tools,
# which valkey-server depends on) instead of redis-server and redis-cli; the
# default is redis.  REDIS_SERVER_BIN and REDIS_CLI_BIN name the programs.

REDIS_PORT=${REDIS_PORT:-}
REDIS_PIDFILE=${REDIS_PIDFILE:-}
case ${RLOCK_SERVER:-redis} in
    valkey)
        REDIS_SERVER_BIN=valkey-server
        REDIS_CLI_BIN=valkey-cli ;;
    *)
        REDIS_SERVER_BIN=redis-server
        REDIS_CLI_BIN=redis-cli ;;
esac

# Print a loopback TCP port nothing listens on (random in 20000-40000).
pick_free_port() {
    local p
    for _ in $(seq 100); do
        p=$((20000 + RANDOM % 20001))
        if ss -Hltn "( sport = :$p )" 2>/dev/null | grep -q .; then continue; fi
        if timeout 2 "$REDIS_CLI_BIN" -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1; then continue; fi
        echo "$p"
        return 0
    done
    return 1
}

# Start a throw-away Redis (no persistence) on a free port; sets REDIS_PORT.
start_redis() {
    local dir=$1 p
    mkdir -p "$dir"
    for attempt in 1 2 3 4 5; do
        p=$(pick_free_port) || { log "no free port found"; return 1; }
        REDIS_PIDFILE="$dir/redis-$p.pid"
        if ! "$REDIS_SERVER_BIN" --bind 127.0.0.1 --port "$p" --save '' --appendonly no \
                --daemonize yes --dir "$dir" --pidfile "$REDIS_PIDFILE" \
                --logfile "$dir/redis-$p.log"; then
            log "$REDIS_SERVER_BIN failed to start on port $p (attempt $attempt)"
            continue
        fi
        REDIS_PORT=$p
        for _ in $(seq 50); do
            if timeout 2 "$REDIS_CLI_BIN" -h 127.0.0.1 -p "$p" ping 2>/dev/null | grep -q PONG; then
                log "$REDIS_SERVER_BIN $("$REDIS_SERVER_BIN" --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') listening on 127.0.0.1:$p"
                return 0
            fi
            sleep 0.1
        done
        log "Redis on port $p did not answer (attempt $attempt); its log:"
        tail -n 20 "$dir/redis-$p.log" 2>/dev/null || true
        stop_redis
    done
    return 1
}

stop_redis() {
    [ -n "$REDIS_PORT" ] || return 0
    local pid=""
    [ -n "$REDIS_PIDFILE" ] && pid=$(cat "$REDIS_PIDFILE" 2>/dev/null || true)
    timeout 5 "$REDIS_CLI_BIN" -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    if [[ "$pid" =~ ^[0-9]+$ ]]; then
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    REDIS_PORT=""
}
