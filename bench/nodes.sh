# bench/nodes.sh -- the multi-lock and Redlock sections of bench/run (SPEC.md
# sections 5.3 and 9), sourced by it; uses its helpers (sql, log, die,
# pgbench_measure) and scripts/lib/redis.sh.
#
#   multi     try+release of a multi-lock of 10, then of 100 names (pgbench,
#             1 client, a script made here: rlock_multi_try_acquire, then
#             rlock_multi_release, two statements), on the bench's Redis;
#             and the Redis round trips of each acquire and each release
#             apart, from rlock_stats (bench_attempts in bench/setup.sql).
#   redlock   the same for a Redlock (bench/pgbench/redlock.sql) with
#             rlock.redlock_urls naming 5 masters started here, then naming
#             1 of them, in rounds of alternating order (5 1, 1 5, ...); the
#             better of the rounds; what the 4 extra masters add to rlock's
#             try+release and to the floor's acquire + release.
#
# Beside each, its floor: two SELECT 1 (pgbench, 1 client) plus rlock's
# acquire and release commands, caught with MONITOR, replayed by a bare
# client (bench/replay.c): each as one pipeline, to every master at once.

# shellcheck shell=bash

RROUNDS=${RLOCK_BENCH_REDLOCK_ROUNDS:-5}
MULTI_SIZES="10 100"
NODE_CALLS=1000                 # calls of bench_attempts per case
REPLAYS=5000                    # bench/replay.c's pairs per case
REDLOCK_NAME="bench_redlock"    # bench/pgbench/redlock.sql's

# the redlock section's masters: their ports and files
RL_PORTS=()
RL_DIR=""

# ------------------------------------------------------------------ common --

# stats_delta: rlock_stats since the last CALL bench_mark(), as
# "round_trips acquisitions releases failed".
stats_delta() {
    sql_value "SELECT concat_ws(' ', s.redis_round_trips - m.redis_round_trips,
                                s.acquisitions - m.acquisitions,
                                s.releases - m.releases,
                                s.failed_acquisitions - m.failed_acquisitions)
               FROM rlock_stats s, stats_mark m"
}

# attempts WHAT NODES ACQUIRE RELEASE: bench_attempts (ACQUIRE and RELEASE:
# SQL statements), then log what one acquire and one release cost.
attempts() {
    sql -c "CALL bench_attempts('$1', $2, \$q\$$3\$q\$, \$q\$$4\$q\$, $NODE_CALLS)"
    log "$(sql_value "SELECT format('%s: %s Redis round trip(s) per acquire, %s per release (%s node(s), %s calls; %s acquisitions, %s releases, %s failed)',
        what, round(acquire_round_trips::numeric / calls, 3),
        round(release_round_trips::numeric / calls, 3), nodes, calls,
        acquisitions, releases, failed)
        FROM node_attempt WHERE what = '$1'")"
}

# catch_calls PORT DIR ACQUIRE RELEASE: while MONITOR watches the Redis on
# PORT (polled until its output holds an ECHO sent before ACQUIRE, and
# then one sent after RELEASE: no fixed sleep to outlast a loaded
# machine), run the statement ACQUIRE, then RELEASE (a session that already
# ran both, so that no connection nor script load shows); write the script
# calls (EVALSHA) of each, one command a paragraph, one argument a line, to
# DIR/acquire.txt and DIR/release.txt.  Sets NCALLS to "acquire release"
# counts.
catch_calls() {
    local port=$1 dir=$2 mon="$2/monitor.txt" pid out
    mkdir -p "$dir"
    chown postgres: "$dir"          # (psql's \! runs as postgres)
    out=$(sql -At 2>&1 <<SQL
$3;
$4;
\! $REDIS_CLI_BIN -h 127.0.0.1 -p $port monitor </dev/null >$mon 2>&1 & echo \$! >$mon.pid; for i in \$(seq 600); do $REDIS_CLI_BIN -h 127.0.0.1 -p $port echo bench:start >/dev/null; grep -q bench:start $mon && break; sleep 0.05; done
SELECT 'acquire', ($3) IS TRUE;
\! $REDIS_CLI_BIN -h 127.0.0.1 -p $port echo bench:between >/dev/null
SELECT 'release', ($4) IS TRUE;
\! $REDIS_CLI_BIN -h 127.0.0.1 -p $port echo bench:end >/dev/null; for i in \$(seq 600); do grep -q bench:end $mon && break; sleep 0.05; done
SQL
) || { echo "$out" >&2; die "catch_calls: the statements failed"; }
    pid=$(cat "$mon.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    grep -qx 'acquire|t' <<<"$out" && grep -qx 'release|t' <<<"$out" \
        || { echo "$out" >&2; die "catch_calls: $3 / $4 did not return true"; }
    # "EVALSHA" "sha" ...: before the ECHO, the acquire's; after it, the
    # release's
    DIR=$dir perl -ne '
        BEGIN { open $f, ">", "$ENV{DIR}/acquire.txt" or die }
        if (/"echo" "bench:between"/i) { open $f, ">", "$ENV{DIR}/release.txt" or die; next }
        next unless /^[0-9.]+ \[\d+ [^\]]*\] "EVALSHA"/;
        my @a = /"((?:[^"\\]|\\.)*)"/g;
        print $f join("\n", @a), "\n\n";' "$mon"
    NCALLS="$(grep -c '^EVALSHA$' "$dir/acquire.txt" || true) $(grep -c '^EVALSHA$' "$dir/release.txt" 2>/dev/null || true)"
}

# replay N DIR PORT...: bench/replay.c (1 client, N pairs) of the calls
# catch_calls wrote to DIR, on the Redis of PORT... at once; sets RACQ and
# RREL (ms).
replay() {
    local out
    out=$("$REPLAY" -n "$1" "$2/acquire.txt" "$2/release.txt" "${@:3}") \
        || die "bench/replay.c of $2 on ${*:3} failed"
    read -r _ RACQ RREL _ _ <<<"$out"
}

# -------------------------------------------------------------- multi-lock --

# multi_names N: the array literal of the N names mN_1 .. mN_N.
multi_names() {
    local n=$1 i names=""
    for i in $(seq 1 "$n"); do names+="${names:+,}m${n}_$i"; done
    echo "'{$names}'"
}

bench_multi() {
    local n names acq_sql rel_sql rt acq rel failed s1
    pgbench_measure select1 1
    s1=$LAT
    log "$(printf 'multi: select1 %.3f ms' "$s1")"
    for n in $MULTI_SIZES; do
        names=$(multi_names "$n")
        acq_sql="SELECT rlock_multi_try_acquire($names, '30s')"
        rel_sql="SELECT rlock_multi_release($names)"
        printf '%s\n' \
            "-- rlock, a multi-lock of $n names (made by bench/nodes.sh): try, then release." \
            "$acq_sql;" "$rel_sql;" >"$W/bench/pgbench/multi_$n.sql"
        chown postgres: "$W/bench/pgbench/multi_$n.sql"
        catch_calls "$REDIS_PORT" "$W/multi_$n" "$acq_sql" "$rel_sql"
        [ "$NCALLS" = "$n $n" ] \
            || log "WARNING: a multi-lock of $n names sent $NCALLS script calls (acquire, release), not $n $n"
        sql -c "CALL bench_mark()"
        pgbench_measure "multi_$n" 1
        read -r rt acq rel failed <<<"$(stats_delta)"
        replay "$REPLAYS" "$W/multi_$n" "$REDIS_PORT"
        sql -c "INSERT INTO multi_run VALUES ($n, $LAT, $TPS, $NXACT, $rt, $acq, $rel, $failed, $s1, $RACQ, $RREL)"
        log "$(sql_value "SELECT format('multi-lock of %s names, 1 client: try+release %s ms, floor %s ms (2 x select1 + acquire %s + release %s ms, replayed); %s transactions, %s round trips, %s acquisitions, %s releases, %s failed',
            names, round(latency_ms::numeric, 3),
            round((2 * select1_ms + acquire_ms + release_ms)::numeric, 3),
            round(acquire_ms::numeric, 3), round(release_ms::numeric, 3),
            xacts, round_trips, acquisitions, releases, failed)
            FROM multi_run WHERE names = $n")"
        [ "$failed" = 0 ] || log "WARNING: $failed multi-lock attempts of $n names failed (uncontended: none should)"
        attempts "multi_$n" 1 "$acq_sql" "$rel_sql"
    done
}

# ----------------------------------------------------------------- Redlock --

# 5 standalone masters (no persistence), each with its own port and
# directory under $RL_DIR.  Sets RL_PORTS (each master is in it from its
# start, so that stop_redlock_masters stops it whatever comes next).
start_redlock_masters() {
    local p ok
    RL_DIR="$W/redlock"
    while [ "${#RL_PORTS[@]}" -lt 5 ]; do
        ok=0
        # (another process may take the port between the pick and the start)
        for _ in 1 2 3; do
            p=$(pick_free_port) || die "no free port"
            mkdir -p "$RL_DIR/$p"
            if "$REDIS_SERVER_BIN" --bind 127.0.0.1 --port "$p" --save '' \
                    --appendonly no --daemonize yes --dir "$RL_DIR/$p" \
                    --pidfile "$RL_DIR/$p/redis.pid" --logfile "$RL_DIR/$p/redis.log"; then
                RL_PORTS+=("$p")
                ok=1
                break
            fi
        done
        [ "$ok" = 1 ] || die "could not start a Redlock master"
        for _ in $(seq 50); do
            timeout 2 "$REDIS_CLI_BIN" -h 127.0.0.1 -p "$p" ping 2>/dev/null | grep -q PONG && continue 2
            sleep 0.1
        done
        tail -n 20 "$RL_DIR/$p/redis.log" >&2 2>/dev/null || true
        die "the Redlock master on 127.0.0.1:$p did not answer"
    done
    log "Redlock masters: $(printf '127.0.0.1:%s ' "${RL_PORTS[@]}")"
}

stop_redlock_masters() {
    local p pid
    for p in "${RL_PORTS[@]}"; do
        pid=$(cat "$RL_DIR/$p/redis.pid" 2>/dev/null || true)
        timeout 5 "$REDIS_CLI_BIN" -h 127.0.0.1 -p "$p" shutdown nosave >/dev/null 2>&1 || true
        if [[ "$pid" =~ ^[0-9]+$ ]]; then
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    RL_PORTS=()
}

# point_redlock N: rlock.redlock_urls names the first N masters; reload,
# wait until new sessions see it, and check that a session's try takes the
# lock's key on each of them and its release removes it.
point_redlock() {
    local n=$1 urls="" p ports=("${RL_PORTS[@]:0:$1}") key shown out script
    for p in "${ports[@]}"; do urls+="${urls:+,}redis://127.0.0.1:$p"; done
    sql -c "ALTER SYSTEM SET rlock.redlock_urls = '$urls'"
    sql -c "SELECT pg_reload_conf()" >/dev/null
    for _ in $(seq 100); do
        shown=$(sql_value "SHOW rlock.redlock_urls")
        [ "$shown" = "$urls" ] && break
        sleep 0.05
    done
    [ "$shown" = "$urls" ] || die "rlock.redlock_urls is still '$shown' after a reload, not '$urls'"
    key="$(sql_value "SHOW rlock.key_prefix")$REDLOCK_NAME"
    script="SELECT 'acquired', rlock_redlock_try_acquire('$REDLOCK_NAME', '30s');"$'\n'
    for p in "${ports[@]}"; do script+="\\! $REDIS_CLI_BIN -h 127.0.0.1 -p $p exists '$key' | sed 's/^/held $p /'"$'\n'; done
    script+="SELECT 'released', rlock_redlock_release('$REDLOCK_NAME');"$'\n'
    for p in "${ports[@]}"; do script+="\\! $REDIS_CLI_BIN -h 127.0.0.1 -p $p exists '$key' | sed 's/^/after $p /'"$'\n'; done
    out=$(sql -At 2>&1 <<<"$script") || { echo "$out" >&2; die "Redlock try+release on $n master(s) failed"; }
    if ! grep -qx 'acquired|t' <<<"$out" || ! grep -qx 'released|t' <<<"$out" ||
            [ "$(grep -c '^held [0-9]* 1$' <<<"$out")" != "$n" ] ||
            [ "$(grep -c '^after [0-9]* 0$' <<<"$out")" != "$n" ]; then
        echo "$out" >&2
        die "Redlock try+release on $n master(s): not true, true, or the key $key not set then removed on every master"
    fi
}

# try+release of a Redlock on 5 masters and on 1, each beside its floor, in
# rounds of alternating order (SELECT 1 once per round); the round trips of
# each acquire and release apart once for each.
bench_redlock() {
    local order=(5 1) round n rt acq rel failed s1
    local acq_sql="SELECT rlock_redlock_try_acquire('$REDLOCK_NAME', '30s')"
    local rel_sql="SELECT rlock_redlock_release('$REDLOCK_NAME')"
    start_redlock_masters
    point_redlock 1
    catch_calls "${RL_PORTS[0]}" "$RL_DIR/calls" "$acq_sql" "$rel_sql"
    [ "$NCALLS" = "1 1" ] \
        || log "WARNING: a Redlock on 1 master sent $NCALLS script calls (acquire, release), not 1 1"
    for round in $(seq 1 "$RROUNDS"); do
        pgbench_measure select1 1
        s1=$LAT
        log "$(printf 'redlock, round %d: select1 %.3f ms' "$round" "$s1")"
        for n in "${order[@]}"; do
            point_redlock "$n"
            sql -c "CALL bench_mark()"
            pgbench_measure redlock 1
            read -r rt acq rel failed <<<"$(stats_delta)"
            replay "$REPLAYS" "$RL_DIR/calls" "${RL_PORTS[@]:0:$n}"
            sql -c "INSERT INTO redlock_run VALUES ($round, $n, $LAT, $TPS, $NXACT, $rt, $acq, $rel, $failed, $s1, $RACQ, $RREL)"
            log "$(sql_value "SELECT format('redlock, round %s, %s master(s), 1 client: try+release %s ms, floor %s ms (2 x select1 + acquire %s + release %s ms, replayed on every master at once); %s transactions, %s round trips, %s acquisitions, %s releases, %s failed',
                round, masters, round(latency_ms::numeric, 3),
                round((2 * select1_ms + acquire_ms + release_ms)::numeric, 3),
                round(acquire_ms::numeric, 3), round(release_ms::numeric, 3),
                xacts, round_trips, acquisitions, releases, failed)
                FROM redlock_run WHERE round = $round AND masters = $n")"
            [ "$failed" = 0 ] || log "WARNING: $failed Redlock attempts on $n master(s) failed (uncontended: none should)"
            if [ "$round" = 1 ]; then
                attempts "redlock_$n" "$n" "$acq_sql" "$rel_sql"
            fi
        done
        order=("${order[1]}" "${order[0]}")
    done
    sql -c "ALTER SYSTEM RESET rlock.redlock_urls"
    sql -c "SELECT pg_reload_conf()" >/dev/null
    stop_redlock_masters
}
