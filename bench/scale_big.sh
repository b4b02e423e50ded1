# bench/scale_big.sh -- two axes of bench/run's scale section (SPEC.md
# section 9, "Cost as work grows") that need PostgreSQL servers of their
# own: many sessions waiting on one name across two servers, and the
# watchdog renewing up to a million held locks.  Sourced by bench/run after
# bench/scale_lib.sh; bench/scale.sh's driver calls scale_handoff and
# scale_watchdog (RLOCK_BENCH_SCALE_AXES).  Uses bench/run's helpers (log,
# die, as_pg, sql, sql_value, $BIN, $W, $REDIS_URL, $REDIS_PORT,
# $REDIS_PIDFILE, $WATCHDOG_MS), bench/nodes.sh's catch_calls and replay,
# and bench/setup.sql's "scale section" block.
#
#   handoff   W sessions (W = 8 32 125 250 500; ci: 8 16) wait on one name,
#             half on each of two PostgreSQL servers started here (the same
#             settings as bench/run's, max_connections to fit) sharing the
#             bench's Redis.  A gate session holds the name until all W
#             wait (pg_stat_activity on both servers); then each session
#             loops acquire -> note the time -> hold 0.2 ms -> note the
#             time -> release (bench_scale_handoff, one pgbench client per
#             session, pgbench -t 1, so that the driver is one process per
#             server, not W).  A hand-off is one session's release start ->
#             the next holder's acquire return (the times of one host
#             clock); only those while at least 90 % of the W sessions are
#             still in the game count (the last rounds drain the queue).
#             p50 and p99 per W; floor: the release + acquire script round
#             trip (the very calls rlock sends, replayed by bench/replay.c
#             right after each point); targets 1 ms (p50) and 3 ms (p99).
#             Logged beside them: hand-offs that crossed servers, the
#             release's return -> the acquisition (p50, p99), and per
#             acquisition from the gate's opening on: script calls and
#             SUBSCRIBEs (INFO commandstats), Redis round trips
#             (rlock_stats of both servers), the machine's context switches.
#   watchdog  one session holds N locks (N = 10 000, 100 000, 1 000 000;
#             ci: 1 000, 10 000; taken 1 000 names per multi-lock call,
#             without a lease, on a server of rlock.max_locks = 1 000 000)
#             and sits idle while the worker renews them for a few cycles.
#             Per N: cycle time, the worker's Redis round trips and renew
#             script calls per cycle (rlock_stats' deltas), Redis CPU per
#             cycle (the Redis process's utime+stime from /proc, and INFO
#             commandstats' usec of EVALSHA), locks renewed per cycle;
#             targets: linear from the smallest N (dashed), one round trip
#             per 100 000 locks (a standalone Redis is one node).  Shared
#             memory per held lock: all of pg_shmem_allocations (the
#             registry's entries are elements of a shared hash table, shown
#             as <anonymous>) less the same on the bench's own server
#             (rlock.max_locks = 120 000, otherwise the same settings), over
#             the difference of rlock.max_locks.
#
# Environment:
#   RLOCK_BENCH_SCALE_WAITERS   the hand-off axis's W (default above)
#   RLOCK_BENCH_SCALE_HANDOFFS  hand-offs wanted per point, about (240;
#                               ci 40)
#   RLOCK_BENCH_SCALE_LOCKS     the watchdog axis's N (default above)
#   RLOCK_BENCH_SCALE_CYCLES    renewal cycles watched per N (4; ci 2)
#   RLOCK_BENCH_SCALE_WATCHDOG_MS
#                               the watchdog axis's rlock.watchdog_timeout
#                               (30000, the default, Redisson's: at the
#                               bench's 3000 a cycle of 1 000 000 locks,
#                               ~5 s on 2 CPUs, outlasts the lease and every
#                               lock is lost; ci: bench/run's 3000)
#   RLOCK_BENCH_SCALE_PGCONF    more postgresql.conf lines for the servers
#                               started here (e.g. "rlock.deadlock_timeout
#                               = 0", to see what deadlock checks cost)

# shellcheck shell=bash

SB_DIR=""                       # $W/scale_big: the servers' files
SB_PORTS=()                     # ports of the servers started here (running)
SB_NAME="bench:scale:handoff"   # the name the hand-off sessions share
SB_HOLDER=""                    # the watchdog axis's holder session (psql)

# ----------------------------------------------------------------- servers --

# sb_pg PORT PROGRAM ARGS...: a PostgreSQL client program on a server of
# this file; sb_sql PORT ARGS...: psql on its database bench.
sb_pg() { as_pg "$BIN/$2" -h "$W" -p "$1" "${@:3}"; }
sb_sql() { sb_pg "$1" psql -X -q -v ON_ERROR_STOP=1 -d bench "${@:2}"; }
sb_value() { sb_sql "$1" -At -c "$2"; }

# sb_start NAME MAX_CONNECTIONS MAX_LOCKS [WATCHDOG_MS]: start a PostgreSQL with rlock in
# $SB_DIR/NAME (a copy of a data directory initdb made once), as bench/run's
# start_servers does, its database bench made with bench/setup.sql; sets
# SB_PORT.
sb_start() {
    local name=$1 conns=$2 locks=$3 wd=${4:-$WATCHDOG_MS} data
    SB_DIR="$W/scale_big"
    mkdir -p "$SB_DIR"
    chown postgres: "$SB_DIR"
    if [ ! -d "$SB_DIR/template" ]; then
        as_pg "$BIN/initdb" -D "$SB_DIR/template" -U postgres -A trust --no-sync >/dev/null \
            || die "scale: initdb failed"
    fi
    data="$SB_DIR/$name"
    rm -rf "$data"
    as_pg cp -a "$SB_DIR/template" "$data"
    SB_PORT=$(pick_free_port) || die "no free port"
    cat >>"$data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$W'
port = $SB_PORT
max_connections = $conns
fsync = off
synchronous_commit = off
shared_preload_libraries = 'rlock'
rlock.redis_url = '$REDIS_URL'
rlock.watchdog_timeout = $wd
rlock.max_locks = $locks
${RLOCK_BENCH_SCALE_PGCONF:-}
CONF
    as_pg "$BIN/pg_ctl" -D "$data" -l "$SB_DIR/$name.log" -w start >/dev/null \
        || { tail -n 20 "$SB_DIR/$name.log" >&2; die "scale: PostgreSQL $name did not start"; }
    SB_PORTS+=("$SB_PORT")
    sb_pg "$SB_PORT" createdb bench
    sb_sql "$SB_PORT" -f "$W/bench/setup.sql" >/dev/null
}

# scale_big_stop: stop every server of this file (bench/run's cleanup calls
# it too).
scale_big_stop() {
    local d
    # ($W's, not SB_DIR: an axis runs in a subshell of bench/scale.sh's
    # driver, and one that died there set SB_DIR in it only)
    [ -n "$W" ] || return 0
    for d in "$W"/scale_big/*/postmaster.pid; do
        [ -f "$d" ] || continue
        as_pg "$BIN/pg_ctl" -D "$(dirname "$d")" -m immediate -w stop >/dev/null 2>&1 || true
    done
    SB_PORTS=()
}

# ---------------------------------------------------------------- hand-off --

# sb_check WHAT COMMAND...: a structural fact of an axis (every session
# got the name, every lock was renewed...), logged as "ok" or "FAILED".
# bench/scale.sh's driver runs each axis in a subshell and checks that it
# ran, that its figures are numbers and that its plot was drawn (TAP
# lines, test/run's bench suite); sb_checks_done AXIS makes the axis fail
# (exit 1: "scale AXIS ran" is then "not ok") when a fact of it did not
# hold, the log naming it.
SB_FAILED=0
sb_check() {
    if "${@:2}" >/dev/null 2>&1; then
        log "scale: ok - $1"
    else
        log "scale: FAILED - $1"
        SB_FAILED=$((SB_FAILED + 1))
    fi
}

sb_checks_done() {
    [ "$SB_FAILED" = 0 ] || die "scale $1: $SB_FAILED of its checks failed (the FAILED lines above)"
}

# sb_waiting PORT: the sessions of that server blocked in
# bench_scale_handoff (a wait shows as 'Extension' before PostgreSQL 17).
sb_waiting() {
    sb_value "$1" "SELECT count(*) FROM pg_stat_activity
        WHERE application_name = 'scale_handoff' AND state = 'active'
          AND wait_event IN ('RlockLock', 'RlockRedis', 'Extension')"
}

# sb_pgbench_ok PID LOG CLIENTS: the pgbench run of PID ended well (its
# status, or when bash lost it, its log: every client's transaction done).
sb_pgbench_ok() {
    wait "$1" && return 0
    grep -q "^number of transactions actually processed: $3/$3\$" "$2" &&
        grep -q "^number of failed transactions: 0 " "$2"
}

# redis_cmdstat NAME...: the calls Redis counted of these commands so far
# (INFO commandstats).
redis_cmdstat() {
    "$REDIS_CLI_BIN" -h 127.0.0.1 -p "$REDIS_PORT" info commandstats | tr -d '\r' |
        awk -F'[:=,]' -v names=" $* " 'index(names, " " substr($1, 9) " ") && $1 ~ /^cmdstat_/ { n += $3 } END { print n + 0 }'
}

# sb_handoff_point W ROUNDS PORT_A PORT_B: one point of the axis; appends
# the events of its sessions to the bench database's scale_handoff_event.
sb_handoff_point() {
    local w=$1 rounds=$2 pa=$3 pb=$4 half=$(($1 / 2)) gate pga pgb n na nb i
    local calls0 subs0 c0 t0 calls1 subs1 c1 rt0 rt1 p
    for p in "$pa" "$pb"; do
        sb_sql "$p" -c "TRUNCATE scale_handoff_event, scale_gate"
    done
    t0=$SECONDS
    # the gate: holds the name until every session waits
    sb_sql "$pa" -c "SET statement_timeout = '20min'" -c "CALL bench_scale_gate($w)" &
    gate=$!
    for ((i = 0; i < 3000; i++)); do
        [ "$(sb_value "$pa" "SELECT rlock_is_locked('$SB_NAME')")" = t ] && break
        kill -0 "$gate" 2>/dev/null || die "scale handoff: the gate session ended before taking $SB_NAME"
        sleep 0.01
    done
    [ "$(sb_value "$pa" "SELECT rlock_is_locked('$SB_NAME')")" = t ] \
        || die "scale handoff: the gate session did not take $SB_NAME"
    printf '%s\n' "SET statement_timeout = '20min';" \
        "CALL bench_scale_handoff(:w, :client_id + 1, :rounds);" >"$SB_DIR/handoff.sql"
    chown postgres: "$SB_DIR/handoff.sql"
    (cd "$W" && sb_pg "$pa" pgbench -n -c "$half" -j 1 -t 1 -D w="$w" -D rounds="$rounds" \
        -f "$SB_DIR/handoff.sql" bench >"$SB_DIR/pgbench-a.log" 2>&1) &
    pga=$!
    (cd "$W" && sb_pg "$pb" pgbench -n -c $((w - half)) -j 1 -t 1 -D w="$w" -D rounds="$rounds" \
        -f "$SB_DIR/handoff.sql" bench >"$SB_DIR/pgbench-b.log" 2>&1) &
    pgb=$!
    # (poll, up to 20 min: 500 backends start on 2 CPUs)
    for ((i = 0; i < 12000; i++)); do
        na=$(sb_waiting "$pa") nb=$(sb_waiting "$pb")
        [ "$na" = "$half" ] && [ "$nb" = $((w - half)) ] && break
        kill -0 "$pga" 2>/dev/null && kill -0 "$pgb" 2>/dev/null \
            || { cat "$SB_DIR"/pgbench-*.log >&2; die "scale handoff: a pgbench run ended before its sessions waited"; }
        sleep 0.1
    done
    [ "$na" = "$half" ] && [ "$nb" = $((w - half)) ] \
        || die "scale handoff: $na + $nb sessions waiting after 20 min, not $half + $((w - half))"
    log "scale handoff, $w sessions: all waiting ($na + $nb) after $((SECONDS - t0)) s; the gate opens"
    # what the hand-offs cost, from the gate's opening on
    rt0=$(( $(sb_value "$pa" "SELECT redis_round_trips FROM rlock_stats") + $(sb_value "$pb" "SELECT redis_round_trips FROM rlock_stats") ))
    calls0=$(redis_cmdstat evalsha eval) subs0=$(redis_cmdstat subscribe) c0=$(ctxt)
    sb_sql "$pa" -c "INSERT INTO scale_gate VALUES ($w)"
    wait "$gate" || die "scale handoff: the gate session failed"
    sb_pgbench_ok "$pga" "$SB_DIR/pgbench-a.log" "$half" \
        || { cat "$SB_DIR/pgbench-a.log" >&2; die "scale handoff: the sessions of server a failed"; }
    sb_pgbench_ok "$pgb" "$SB_DIR/pgbench-b.log" $((w - half)) \
        || { cat "$SB_DIR/pgbench-b.log" >&2; die "scale handoff: the sessions of server b failed"; }
    c1=$(ctxt) calls1=$(redis_cmdstat evalsha eval) subs1=$(redis_cmdstat subscribe)
    rt1=$(( $(sb_value "$pa" "SELECT redis_round_trips FROM rlock_stats") + $(sb_value "$pb" "SELECT redis_round_trips FROM rlock_stats") ))
    for p in "$pa" "$pb"; do
        sb_sql "$p" -c "COPY scale_handoff_event TO STDOUT" | sql -c "COPY scale_handoff_event FROM STDIN"
    done
    n=$(sql_value "SELECT count(*) FROM scale_handoff_event WHERE waiters = $w AND event = 'acquired'")
    sql -c "INSERT INTO scale_handoff_cost VALUES ($w, $n, $((calls1 - calls0)), $((subs1 - subs0)),
            $((rt1 - rt0)), $((c1 - c0)))"
}

# scale_handoff: the axis (see the head comment).
scale_handoff() {
    local list want rounds w maxw pa pb pairs row p50 p99 floor
    if [ "$SCALE" = ci ]; then
        list=${RLOCK_BENCH_SCALE_WAITERS:-"8 16"} want=${RLOCK_BENCH_SCALE_HANDOFFS:-40} pairs=300
    else
        list=${RLOCK_BENCH_SCALE_WAITERS:-"8 32 125 250 500"} want=${RLOCK_BENCH_SCALE_HANDOFFS:-240} pairs=3000
    fi
    maxw=$(tr ' ' '\n' <<<"$list" | sort -n | tail -n 1)
    sb_start handoff_a $((maxw / 2 + 20)) 10000
    pa=$SB_PORT
    sb_start handoff_b $((maxw - maxw / 2 + 20)) 10000
    pb=$SB_PORT
    catch_calls "$REDIS_PORT" "$W/scale_floor" "SELECT rlock_acquire('bench:scale:floor') IS NOT NULL" \
        "SELECT rlock_release('bench:scale:floor')"
    [ "$NCALLS" = "1 1" ] \
        || log "WARNING: an uncontended rlock_acquire and its release sent $NCALLS script calls, not 1 1"
    scale_header handoff waiters "rlock p50" "rlock p99" "floor (release + acquire script)" "target p50" "target p99"
    for w in $list; do
        # enough rounds that ~$want hand-offs come while >= 90 % still wait
        rounds=$(( (want + w - 1) / w + 1 ))
        sql -c "INSERT INTO scale_handoff_rounds VALUES ($w, $rounds)"
        sb_handoff_point "$w" "$rounds" "$pa" "$pb"
        replay "$pairs" "$W/scale_floor" "$REDIS_PORT"
        floor=$(awk -v a="$RACQ" -v r="$RREL" 'BEGIN { printf "%.4f", a + r }')
        sql -c "INSERT INTO scale_handoff_floor VALUES ($w, $RACQ, $RREL)"
        row=$(sql_value "SELECT concat_ws(' ', count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 4),
                round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 4))
            FROM scale_handoff_ms WHERE waiters = $w")
        read -r _ p50 p99 <<<"$row"
        scale_row handoff "$w" "${p50:-NaN}" "${p99:-NaN}" "$floor" 1 3
        log "$(sql_value "SELECT format('scale handoff, %s sessions (%s rounds each): %s hand-offs counted, p50 %s ms, p99 %s ms, max %s ms; floor %s ms; %s crossed servers; the release''s return -> the acquisition: p50 %s ms, p99 %s ms',
                $w, $rounds, count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 3),
                round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 3), round(max(ms)::numeric, 3),
                $floor, count(*) FILTER (WHERE crossed),
                round(percentile_cont(0.5) WITHIN GROUP (ORDER BY after_ms)::numeric, 3),
                round(percentile_cont(0.99) WITHIN GROUP (ORDER BY after_ms)::numeric, 3))
            FROM scale_handoff_ms WHERE waiters = $w")"
        log "$(sql_value "SELECT format('scale handoff, %s sessions: %s acquisitions in %s s; per acquisition %s script calls, %s SUBSCRIBEs, %s Redis round trips (both servers), %s context switches (machine)',
                waiters, acquisitions, (SELECT round(extract(epoch FROM max(at) - min(at))::numeric, 2)
                                        FROM scale_handoff_event e WHERE e.waiters = c.waiters),
                round(script_calls::numeric / acquisitions, 2), round(subscribes::numeric / acquisitions, 2),
                round(round_trips::numeric / acquisitions, 2), round(switches::numeric / acquisitions, 1))
            FROM scale_handoff_cost c WHERE waiters = $w")"
    done
    scale_big_stop
    scale_plot handoff "Hand-off with W sessions waiting on one name, two servers" \
        "sessions waiting (W)" "release start -> next acquire returns (ms)" 1
    SB_FAILED=0
    sb_check "handoff: a row per point" \
        test "$(($(wc -l <"$SCALE_DIR/handoff.tsv") - 1))" = "$(wc -w <<<"$list")"
    sb_check "handoff: every session of every point got the name (all its rounds)" \
        test "$(sql_value "SELECT count(*) FROM (SELECT waiters, server, who, count(*) AS n
                FROM scale_handoff_event WHERE event = 'acquired' AND who > 0
                GROUP BY 1, 2, 3) s JOIN scale_handoff_rounds r USING (waiters)
                WHERE s.n = r.rounds")" = "$(awk '{ for (i = 1; i <= NF; i++) s += $i } END { print s }' <<<"$list")"
    sb_check "handoff: at every point the name went from one server's sessions to the other's" \
        test "$(sql_value "SELECT count(*) FILTER (WHERE crossed) FROM (SELECT waiters, bool_or(crossed) AS crossed
                FROM scale_handoff_all GROUP BY waiters) s")" = "$(wc -w <<<"$list")"
    sb_checks_done handoff
}

# --------------------------------------------------------------- watchdog --

# redis_cpu_ticks: the Redis server's utime + stime so far (clock ticks).
redis_cpu_ticks() {
    awk '{ print $14 + $15 }' "/proc/$(cat "$REDIS_PIDFILE")/stat"
}

# redis_script_usec: INFO commandstats' usec of EVALSHA and EVAL so far.
redis_script_usec() {
    "$REDIS_CLI_BIN" -h 127.0.0.1 -p "$REDIS_PORT" info commandstats | tr -d '\r' |
        awk -F'[:=,]' '$1 == "cmdstat_evalsha" || $1 == "cmdstat_eval" { n += $5 } END { print n + 0 }'
}

# sb_cycles_after PORT N: wait (poll, at most SB_CYCLE_WAIT seconds) until
# the worker has ended N more renewal cycles; print rlock_stats' worker
# counters then.
sb_cycles_after() {
    sb_sql "$1" -At -c "SET statement_timeout = '20min'" -c "CALL bench_scale_cycles($2, $SB_CYCLE_WAIT)" \
        -c "SELECT concat_ws(' ', renewal_cycles, renewals, renewal_batches, renewal_round_trips,
                              renewal_time, renewal_failures, locks_lost) FROM rlock_stats"
}

scale_watchdog() {
    local list cycles port n held t0 took s0 s1 cpu0 cpu1 us0 us1 hz first=""
    local c0 r0 b0 rt0 ms0 f0 l0 c1 r1 b1 rt1 ms1 f1 l1 dc wd cyc_ms cpu_ms scr_ms rt_cyc base_cyc base_cpu
    local shm shm_main maxl_main named marginal
    if [ "$SCALE" = ci ]; then
        list=${RLOCK_BENCH_SCALE_LOCKS:-"1000 10000"} cycles=${RLOCK_BENCH_SCALE_CYCLES:-2}
        wd=${RLOCK_BENCH_SCALE_WATCHDOG_MS:-$WATCHDOG_MS}
    else
        list=${RLOCK_BENCH_SCALE_LOCKS:-"10000 100000 1000000"} cycles=${RLOCK_BENCH_SCALE_CYCLES:-4}
        wd=${RLOCK_BENCH_SCALE_WATCHDOG_MS:-30000}
    fi
    # (a cycle every third of the lease: give each wait three times what
    # its cycles should take, and 2 min)
    SB_CYCLE_WAIT=$(( (cycles + 1) * wd / 1000 + 120 ))
    hz=$(getconf CLK_TCK)
    sb_start watchdog "$(sql_value "SHOW max_connections")" 1000000 "$wd"
    port=$SB_PORT
    log "scale watchdog: rlock.watchdog_timeout = $wd ms (a renewal cycle every $((wd / 3)) ms)"
    # The registry's entries are the elements of a shared hash table, which
    # pg_shmem_allocations shows as <anonymous>, not under rlock's names:
    # per lock is the difference of all shared memory allocated between
    # this server and the bench's (the same settings but rlock.max_locks)
    # over the difference of rlock.max_locks.
    shm=$(sb_value "$port" "SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name IS NOT NULL")
    shm_main=$(sql_value "SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name IS NOT NULL")
    named=$(sb_value "$port" "SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name LIKE 'rlock%'")
    maxl_main=$(sql_value "SHOW rlock.max_locks")
    marginal=$(awk -v s="$shm" -v m="$shm_main" -v l="$maxl_main" 'BEGIN { printf "%.0f", (s - m) / (1000000 - l) }')
    log "scale watchdog: shared memory per lock of rlock.max_locks: $marginal bytes (all shared memory allocated:" \
        "$shm bytes at max_locks = 1000000, $shm_main at $maxl_main, otherwise the same settings);" \
        "rlock's named allocations: $named bytes (the registry's entries are <anonymous>)"
    sql -c "INSERT INTO scale_shmem VALUES (1000000, $shm, $maxl_main, $shm_main, $named, $marginal)"
    scale_header watchdog locks "renewal cycle" "Redis CPU (/proc)" "Redis in scripts (INFO commandstats)" \
        "target cycle (linear)" "target Redis CPU (linear)"
    scale_header watchdog_rt locks "Redis round trips" "target (1 per 100 000 locks)"
    # the holder: one psql session fed through a FIFO, kept open over the
    # axis (its locks are its session's)
    rm -f "$SB_DIR/holder.in"
    mkfifo "$SB_DIR/holder.in"
    chown postgres: "$SB_DIR/holder.in"
    sb_sql "$port" -At -f "$SB_DIR/holder.in" >"$SB_DIR/holder.out" 2>&1 &
    SB_HOLDER=$!
    exec {SB_HOLDER_FD}>"$SB_DIR/holder.in"
    echo "SET statement_timeout = '30min';" >&"$SB_HOLDER_FD"
    for n in $list; do
        t0=$(date +%s.%N)
        echo "CALL bench_scale_hold($n); SELECT 'held', $n;" >&"$SB_HOLDER_FD"
        sb_wait_holder "held|$n"
        took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        held=$(sb_value "$port" "SELECT count(*) FROM rlock_locks")
        log "scale watchdog: $held locks held ($n wanted); taking the ones past the previous point took $took s (1000 names per multi-lock call)"
        # from the end of a cycle to the end of the cycles-th after it
        s0=$(sb_cycles_after "$port" 1)
        cpu0=$(redis_cpu_ticks) us0=$(redis_script_usec)
        read -r c0 r0 b0 rt0 ms0 f0 l0 <<<"$s0"
        s1=$(sb_cycles_after "$port" "$cycles")
        cpu1=$(redis_cpu_ticks) us1=$(redis_script_usec)
        read -r c1 r1 b1 rt1 ms1 f1 l1 <<<"$s1"
        dc=$((c1 - c0))
        if [ "$dc" -lt "$cycles" ]; then
            log "WARNING: scale watchdog, $n locks: $dc renewal cycle(s) ended within $SB_CYCLE_WAIT s, not $cycles;" \
                "$((l1 - l0)) locks lost, $((f1 - f0)) renewal failures meanwhile"
            [ "$dc" -gt 0 ] || dc=1
        fi
        cyc_ms=$(awk -v a="$ms0" -v b="$ms1" -v c="$dc" 'BEGIN { printf "%.3f", (b - a) / c }')
        cpu_ms=$(awk -v a="$cpu0" -v b="$cpu1" -v c="$dc" -v hz="$hz" 'BEGIN { printf "%.3f", (b - a) * 1000 / hz / c }')
        scr_ms=$(awk -v a="$us0" -v b="$us1" -v c="$dc" 'BEGIN { printf "%.3f", (b - a) / 1000 / c }')
        rt_cyc=$(awk -v a="$rt0" -v b="$rt1" -v c="$dc" 'BEGIN { printf "%.2f", (b - a) / c }')
        if [ -z "$first" ]; then
            first=$n base_cyc=$cyc_ms base_cpu=$cpu_ms
        fi
        scale_row watchdog "$n" "$cyc_ms" "$cpu_ms" "$scr_ms" \
            "$(awk -v v="$base_cyc" -v n="$n" -v f="$first" 'BEGIN { printf "%.3f", v * n / f }')" \
            "$(awk -v v="$base_cpu" -v n="$n" -v f="$first" 'BEGIN { printf "%.3f", v * n / f }')"
        scale_row watchdog_rt "$n" "$rt_cyc" \
            "$(awk -v n="$n" 'BEGIN { printf "%d", int((n + 99999) / 100000) }')"
        sql -c "INSERT INTO scale_watchdog_run VALUES ($n, $held, $dc, $((r1 - r0)), $((b1 - b0)), $((rt1 - rt0)),
                $ms1 - $ms0, $(((cpu1 - cpu0) * 1000 / hz)), $(((us1 - us0) / 1000)), $((f1 - f0)), $((l1 - l0)), $took)"
        log "$(printf 'scale watchdog, %d locks: %s ms per cycle, Redis CPU %s ms per cycle (scripts %s ms, INFO commandstats), %s round trip(s) and %s renew script calls per cycle, %s renewals per cycle (%d cycles), %d locks lost; Redis busy %s ms per renew script call' \
            "$n" "$cyc_ms" "$cpu_ms" "$scr_ms" "$rt_cyc" \
            "$(awk -v a="$b0" -v b="$b1" -v c="$dc" 'BEGIN { printf "%.1f", (b - a) / c }')" \
            "$(awk -v a="$r0" -v b="$r1" -v c="$dc" 'BEGIN { printf "%.1f", (b - a) / c }')" "$dc" "$((l1 - l0))" \
            "$(awk -v a="$us0" -v b="$us1" -v c="$b0" -v d="$b1" 'BEGIN { printf "%.2f", (b - a) / 1000 / ((d - c) > 0 ? d - c : 1) }')")"
    done
    t0=$(date +%s.%N)
    echo "SELECT 'released', rlock_release_all();" >&"$SB_HOLDER_FD"
    sb_wait_holder "released|"
    log "scale watchdog: rlock_release_all() of $held locks took $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
    exec {SB_HOLDER_FD}>&-
    wait "$SB_HOLDER" || true
    SB_HOLDER=""
    scale_big_stop
    scale_plot watchdog "Watchdog: renewing N held locks (one session, idle)" \
        "locks held (N)" "per renewal cycle (ms)" 1 1
    scale_plot watchdog_rt "Watchdog: Redis round trips per renewal cycle" \
        "locks held (N)" "per renewal cycle (n)" 1
    SB_FAILED=0
    sb_check "watchdog: a row per point" \
        test "$(($(wc -l <"$SCALE_DIR/watchdog.tsv") - 1))" = "$(wc -w <<<"$list")"
    sb_check "watchdog: its round trips are numbers" scale_numbers watchdog_rt
    sb_check "watchdog: its round trips' plot was drawn" scale_svg watchdog_rt
    sb_check "watchdog: every held lock renewed in every cycle, none lost nor failed" \
        test "$(sql_value "SELECT count(*) FROM scale_watchdog_run
                WHERE held = locks AND renewals = locks * cycles AND failures = 0 AND lost = 0")" \
        = "$(wc -w <<<"$list")"
    sb_check "watchdog: at most one round trip per 100 000 locks per cycle" \
        test "$(sql_value "SELECT count(*) FROM scale_watchdog_run
                WHERE round_trips <= cycles * ceil(locks / 100000.0)")" = "$(wc -w <<<"$list")"
    sb_checks_done watchdog
}

# sb_wait_holder LINE: wait (poll, up to 30 min) until the holder session
# printed LINE (or a line starting with it when it ends with "|").
sb_wait_holder() {
    local i
    for ((i = 0; i < 18000; i++)); do
        if [[ "$1" == *"|" ]]; then
            awk -v p="$1" 'index($0, p) == 1 { f = 1 } END { exit !f }' "$SB_DIR/holder.out" && return 0
        else
            grep -qxF "$1" "$SB_DIR/holder.out" && return 0
        fi
        kill -0 "$SB_HOLDER" 2>/dev/null || { cat "$SB_DIR/holder.out" >&2; die "scale watchdog: the holder session ended"; }
        sleep 0.1
    done
    cat "$SB_DIR/holder.out" >&2
    die "scale watchdog: the holder session did not print $1 within 30 min"
}
