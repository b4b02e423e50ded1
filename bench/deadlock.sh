# bench/deadlock.sh -- the deadlock section of bench/run: what deadlock
# detection (SPEC.md sections 5.6 and 9; rlock.deadlock_timeout) costs
# when no one is deadlocked, and how soon it finds a deadlock.  Sourced by
# bench/run after bench/sync.sh; uses its helpers (sql, sql_value, log,
# die, pgbench_measure, sessions_gone) on the bench's Redis.
#
#   cost      the same pgbench runs with detection on (the bench database
#             with rlock.deadlock_timeout at its default, -1: PostgreSQL's
#             deadlock_timeout) and off (ALTER DATABASE ... SET
#             rlock.deadlock_timeout = 0; new sessions read it): the
#             uncontended try+release (bench/pgbench/rlock.sql, 1 client)
#             and the contended acquire+release of RLOCK_BENCH_CLIENTS (8,
#             64) sessions on one name (bench/pgbench/rlock_contended.sql:
#             their waiters register their waits and check);
#             RLOCK_BENCH_DEADLOCK_ROUNDS rounds (default 3) of
#             RLOCK_BENCH_DEADLOCK_SECONDS each (default 5), on and off
#             alternating first; the best round of each counts (what else
#             runs only ever takes from a run).  Target: on >= 0.95 x off,
#             and no more Redis round trips per uncontended pair.
#   found     two sessions close a 2-cycle RLOCK_BENCH_DEADLOCK_CYCLES
#             times (default 20; bench_deadlock in bench/deadlock_setup.sql):
#             the second wait starts -> the victim's 40P01; p50/p99/max,
#             against deadlock_timeout + 2 Redis round trips (rlock_ping's
#             median).

# shellcheck shell=bash

DROUNDS=${RLOCK_BENCH_DEADLOCK_ROUNDS:-3}
DSECS=${RLOCK_BENCH_DEADLOCK_SECONDS:-5}
DCYCLES=${RLOCK_BENCH_DEADLOCK_CYCLES:-20}

# deadlock_mode on|off: new sessions of the bench database check for
# deadlocks (the default) or never.
deadlock_mode() {
    if [ "$1" = on ]; then
        sql -c "ALTER DATABASE bench RESET rlock.deadlock_timeout" >/dev/null
    else
        sql -c "ALTER DATABASE bench SET rlock.deadlock_timeout = 0" >/dev/null
    fi
}

# deadlock_run ROUND MODE SCRIPT CLIENTS: one pgbench run, its rate and
# the Redis round trips per transaction (rlock_stats, once its sessions
# have ended).
deadlock_run() {
    local round=$1 mode=$2 script=$3 c=$4 secs=$SECS
    sql -c "CALL bench_mark()"
    SECS=$DSECS pgbench_measure "$script" "$c"
    SECS=$secs
    sessions_gone
    sql -c "INSERT INTO deadlock_run
            SELECT $round, '$mode', '$script', $c, $TPS, $LAT, $NXACT,
                   s.redis_round_trips - m.redis_round_trips
            FROM rlock_stats s, stats_mark m"
    log "$(printf 'deadlock, round %d, detection %-3s: %-16s %2d client(s): %10.1f tps, %.3f ms' \
        "$round" "$mode" "$script" "$c" "$TPS" "$LAT")"
}

bench_deadlock_cost() {
    local round mode c order=(on off)
    for round in $(seq 1 "$DROUNDS"); do
        for mode in "${order[@]}"; do
            deadlock_mode "$mode"
            deadlock_run "$round" "$mode" rlock 1
            for c in $CLIENTS; do
                deadlock_run "$round" "$mode" rlock_contended "$c"
            done
        done
        order=("${order[1]}" "${order[0]}")
    done
    deadlock_mode on
}

bench_deadlock_found() {
    local a b
    deadlock_mode on
    sql -c "INSERT INTO deadlock_basis
            SELECT (SELECT setting::float8 FROM pg_settings WHERE name = 'deadlock_timeout'),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM p) * 1000)
            FROM (SELECT rlock_ping() AS p FROM generate_series(1, 200)) x"
    sql -c "CALL bench_deadlock('bench_dl_a', 'bench_dl_b', false, $DCYCLES)" &
    a=$!
    sql -c "CALL bench_deadlock('bench_dl_b', 'bench_dl_a', true, $DCYCLES)" &
    b=$!
    wait "$a" || die "deadlock session a failed"
    wait "$b" || die "deadlock session b failed"
    log "deadlock found: $(sql_value "SELECT format('%s cycles, p50 %s ms, p99 %s ms, max %s ms after the cycle closed (deadlock_timeout %s ms, a round trip %s ms); victims: %s',
        count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1),
        round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1),
        round(max(ms)::numeric, 1), max(b.deadlock_timeout_ms), round(max(b.round_trip_ms)::numeric, 3),
        string_agg(DISTINCT victim, ', '))
        FROM deadlock_ms, deadlock_basis b")"
}

bench_deadlock() {
    bench_deadlock_cost
    bench_deadlock_found
}
