# bench/sync.sh -- the sync section of bench/run: semaphores and count-down
# latches (SPEC.md sections 5.5 and 9), sourced by it after bench/nodes.sh;
# uses their helpers (bench/run's pg, sql, sql_value, log, die, run_pgbench,
# bench_contended; bench/nodes.sh's catch_calls, replay, stats_delta,
# attempts) on the bench's Redis.
#
#   semaphore, 1 client
#             pgbench -f bench/pgbench/semaphore.sql: a permit taken and
#             given back in one statement, SELECT
#             rlock_semaphore_try_acquire(n), rlock_semaphore_release(n),
#             as bench/pgbench/rlock.sql does for a lock; beside its floor:
#             SELECT 1 plus one round trip each of the acquire and the
#             release script, the very commands rlock sends (caught with
#             MONITOR), replayed one after the other by a bare client
#             (bench/replay.c; redis-benchmark repeats one command, and a
#             semaphore's acquire repeated without its release is not the
#             same work: it finds its earlier permit and gives it back
#             first).  The lock's try+release beside the same kind of
#             floor, for comparison.  On a machine shared with other work
#             the load changes from one second to the next, so SELECT 1,
#             the semaphore's and the lock's statements run in one pgbench
#             run (each transaction one of the three, at random; pgbench
#             gives each one's latency), the replays right after it; in
#             rounds (RLOCK_BENCH_SYNC_ROUNDS, default 5, of
#             RLOCK_BENCH_SYNC_SECONDS, default 5), the round with the
#             median ratio counts.  And the Redis round trips of one
#             acquire and of one release apart (rlock_stats).
#   latch     one session awaits a latch (rlock_latch_await), the other
#             counts it down to zero (bench_latch in bench/setup.sql): the
#             start of the last count-down -> the await returns, over
#             RLOCK_BENCH_LATCHES rounds (300); p50/p90/p99/max.  Floor:
#             the count-down script's round trip (replayed).
#   contended 8 pgbench clients on one semaphore of 3 permits
#             (bench/pgbench/semaphore_contended.sql: a blocking
#             rlock_semaphore_acquire, then the release): acquisitions per
#             second, how evenly the clients got them (pgbench's
#             per-transaction log), Redis round trips (rlock_stats) and
#             script calls (Redis's INFO commandstats) per acquisition;
#             beside the rate of the same 8 clients each on a semaphore of
#             its own (bench/pgbench/semaphore.sql).

# shellcheck shell=bash

SROUNDS=${RLOCK_BENCH_SYNC_ROUNDS:-5}
SSECS=${RLOCK_BENCH_SYNC_SECONDS:-5}
LATCHES=${RLOCK_BENCH_LATCHES:-300}
SEM_PERMITS=3                   # the contended semaphore's permits

# script_calls_now: the script calls the bench's Redis has run (EVALSHA and
# EVAL, from INFO commandstats).
script_calls_now() {
    "$REDIS_CLI_BIN" -h 127.0.0.1 -p "$REDIS_PORT" info commandstats | tr -d '\r' |
        awk -F'[:=,]' '$1 == "cmdstat_evalsha" || $1 == "cmdstat_eval" { n += $3 } END { print n + 0 }'
}

# pgbench_mixed SECONDS SCRIPT...: one pgbench run (1 client) of the
# SCRIPTs together, each transaction one of them picked at random, so that
# each script's latency is measured under the same load as the others';
# sets MIXED_LAT[script] (mean latency, ms) and MIXED_N[script]
# (transactions).
declare -A MIXED_LAT MIXED_N
pgbench_mixed() {
    local secs=$1 out s files=() script lat n
    shift
    for s in "$@"; do files+=(-f "$W/bench/pgbench/$s.sql"); done
    out=$(cd "$W" && pg pgbench -n -M prepared -c 1 -j 1 -T "$secs" "${files[@]}" bench 2>&1) \
        || { echo "$out" >&2; die "pgbench $* failed"; }
    MIXED_LAT=() MIXED_N=()
    # per script: "SQL script N: <file>", " - <n> transactions (...)",
    # " - latency average = <ms> ms"
    while read -r script n lat; do
        MIXED_N[$script]=$n MIXED_LAT[$script]=$lat
    done < <(awk '/^SQL script [0-9]+:/ { f = $4; sub(/.*\//, "", f); sub(/\.sql$/, "", f) }
                  /^ - [0-9]+ transactions/ { n[f] = $2 }
                  /^ - latency average = / { l[f] = $5 }
                  END { for (f in l) print f, n[f], l[f] }' <<<"$out")
    for s in "$@"; do
        [[ "${MIXED_LAT[$s]:-}" =~ ^[0-9.]+$ && "${MIXED_N[$s]:-}" =~ ^[0-9]+$ ]] \
            || { echo "$out" >&2; die "could not read pgbench's figures of $s"; }
    done
}

# The semaphore's acquire+release and the lock's try+release (1 client),
# each beside its floor: in each round one pgbench run of SELECT 1, the
# semaphore's and the lock's statements together, then the replay of each
# one's script calls (in alternating order).
sync_uncontended() {
    local order=(semaphore lock) round what script rt acq rel failed n
    catch_calls "$REDIS_PORT" "$W/sync_semaphore" \
        "SELECT rlock_semaphore_try_acquire('bench-s0')" \
        "SELECT rlock_semaphore_release('bench-s0')"
    [ "$NCALLS" = "1 1" ] \
        || log "WARNING: a semaphore's acquire and release sent $NCALLS script calls, not 1 1"
    catch_calls "$REDIS_PORT" "$W/sync_lock" \
        "SELECT rlock_try_acquire('bench-u0')" "SELECT rlock_release('bench-u0')"
    [ "$NCALLS" = "1 1" ] \
        || log "WARNING: a lock's try and release sent $NCALLS script calls, not 1 1"
    for round in $(seq 1 "$SROUNDS"); do
        sql -c "CALL bench_mark()"
        pgbench_mixed "$SSECS" select1 semaphore rlock
        read -r rt acq rel failed <<<"$(stats_delta)"
        n=$((MIXED_N[semaphore] + MIXED_N[rlock]))
        sql -c "INSERT INTO sync_stats VALUES ($round, $n, $rt, $acq, $rel, $failed)"
        [ "$failed" = 0 ] || log "WARNING: $failed semaphore or lock attempts failed in round $round (uncontended: none should)"
        for what in "${order[@]}"; do
            script=$([ "$what" = semaphore ] && echo semaphore || echo rlock)
            replay "$REPLAYS" "$W/sync_$what" "$REDIS_PORT"
            sql -c "INSERT INTO sync_run VALUES ($round, '$what', ${MIXED_LAT[$script]}, ${MIXED_N[$script]}, ${MIXED_LAT[select1]}, $RACQ, $RREL)"
            log "$(sql_value "SELECT format('sync, round %s, %-9s: %s %s ms, floor %s ms (select1 %s + acquire %s + release %s ms, replayed), ratio %s',
                round, what,
                CASE what WHEN 'lock' THEN 'try+release' ELSE 'acquire+release' END,
                round(latency_ms::numeric, 3),
                round((select1_ms + acquire_ms + release_ms)::numeric, 3),
                round(select1_ms::numeric, 3),
                round(acquire_ms::numeric, 3), round(release_ms::numeric, 3),
                round((latency_ms / (select1_ms + acquire_ms + release_ms))::numeric, 3))
                FROM sync_run WHERE round = $round AND what = '$what'")"
        done
        order=("${order[1]}" "${order[0]}")
    done
    # the round trips of one acquire and of one release apart
    attempts semaphore 1 "SELECT rlock_semaphore_try_acquire('bench-s0')" \
        "SELECT rlock_semaphore_release('bench-s0')"
}

# A session awaits the latch while another counts it down, LATCHES times;
# and the floor: the latch's set-count and count-down replayed.
sync_latch() {
    local a b
    catch_calls "$REDIS_PORT" "$W/sync_latch" \
        "SELECT rlock_latch_set_count('bench-latch-floor', 1)" \
        "SELECT rlock_latch_count_down('bench-latch-floor') = 0"
    [ "$NCALLS" = "1 1" ] \
        || log "WARNING: a latch's set-count and count-down sent $NCALLS script calls, not 1 1"
    replay "$REPLAYS" "$W/sync_latch" "$REDIS_PORT"
    sql -c "INSERT INTO latch_floor VALUES ($RACQ, $RREL)"
    sql -c "CALL bench_latch('awaiter', $LATCHES)" &
    a=$!
    sleep 0.5
    sql -c "CALL bench_latch('counter', $LATCHES)" &
    b=$!
    wait "$a" || die "latch: the awaiting session failed"
    wait "$b" || die "latch: the counting session failed"
    log "latch: $(sql_value "SELECT format('%s wake-ups, p50 %s ms, p99 %s ms, max %s ms (floor: the count-down round trip, %s ms)', count(*),
        round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 3),
        round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 3),
        round(max(ms)::numeric, 3),
        (SELECT round(count_down_ms::numeric, 3) FROM latch_floor))
        FROM latch_ms")"
}

# 8 clients on one semaphore of SEM_PERMITS permits; then the same clients
# each on a semaphore of its own.
sync_contended() {
    local c0 c1
    c0=$(script_calls_now)
    bench_contended semaphore_contended
    c1=$(script_calls_now)
    sql -c "INSERT INTO script_calls VALUES ('semaphore_contended', $c1 - $c0)"
    log "$(sql_value "SELECT format('semaphore, 8 clients on %s permits: %s acquisitions, %s contended, %s Redis round trips and %s script calls per acquisition',
        $SEM_PERMITS, s.acquisitions, s.contended,
        round(s.round_trips::numeric / nullif(s.acquisitions, 0), 3),
        round(c.calls::numeric / nullif(s.acquisitions, 0), 3))
        FROM contended_stats s JOIN script_calls c USING (script)
        WHERE script = 'semaphore_contended'")"
    run_pgbench semaphore 8
}

bench_sync() {
    # a semaphore of 1 permit per pgbench client (bench/pgbench/semaphore.sql),
    # and the contended one
    sql -c "SELECT rlock_semaphore_set_permits('bench-s' || i, 1) FROM generate_series(0, 7) i" >/dev/null
    sql -c "SELECT rlock_semaphore_set_permits('bench-sem-hot', $SEM_PERMITS)" >/dev/null
    sync_uncontended
    sync_latch
    sync_contended
}
