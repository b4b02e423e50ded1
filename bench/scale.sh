# bench/scale.sh -- the scale section of bench/run (SPEC.md section 9, "Cost
# as work grows"): its driver, bench_scale, and three of its axes.  Sourced
# by bench/run after bench/scale_lib.sh (the TSV, the plot, the checks) and
# before bench/scale_big.sh (the hand-off and watchdog axes); uses bench/run's
# helpers (sql, sql_value, log, die, pgbench_measure) and bench/nodes.sh's
# (catch_calls, replay), bench/sync.sh's pgbench_mixed and bench/deadlock.sh's
# deadlock_mode, on the bench's Redis.  Each axis walks one dimension of the
# work, writes $SCALE_DIR/<axis>.tsv and .svg (the floor dashed on the same
# axes) and logs each point in a line:
#
#   semaphore  SELECT rlock_semaphore_try_acquire(n),
#              rlock_semaphore_release(n) (pgbench, 1 client, in one run
#              with SELECT 1, as bench/sync.sh does) with P permits out of
#              the same semaphore, P = 10, 100, 1 000, 10 000 (ci: 10,
#              1 000), put there as Java clients would (Redisson's permit
#              ids, 16 raw bytes, scored an hour ahead; one pipelined
#              redis-cli), the semaphore sized so that 10 more stay
#              available.  Beside it its floor at the same P: SELECT 1 plus
#              the acquire and the release commands rlock sends (caught with
#              MONITOR), replayed one after the other by bench/replay.c, so
#              the floor grows with P when the scripts do; and Redis's own
#              time per pair (INFO commandstats: the script calls' usec over
#              the run / its pairs).  Target: 1.2 x the latency at P = 10.
#   kinds      Redis's time (µs) per acquire+release for each kind, rlock's
#              against Redisson's own scripts for the same kind
#              (test/perl/RlockTest/Redisson.pm, bench/redisson_pairs.pl):
#              CONFIG RESETSTAT, K pairs, then INFO commandstats: the usec
#              of the top-level commands (the script calls, whose usec holds
#              their inner calls', and any other command a pair sends at the
#              top level, from a MONITOR of one pair) over the pairs (script
#              calls / 2).  rlock's pairs by pgbench (1 client, -t K);
#              Redisson's by bench/replay.c (1 client, one call after the
#              other, as a Java client with one thread; a fresh unlock-latch
#              id per release); and rlock's own calls (caught with MONITOR)
#              replayed the same way, rlock_replayed_us: the scripts' cost
#              under the same delivery as Redisson's (pgbench's pairs reach
#              a Redis whose caches the backend's work between them cooled).
#              Kinds: exclusive lock (RLock, its unlock latch), fenced lock
#              (RFencedLock: its token counter INCRed), fair lock,
#              read and write of a read/write lock, semaphore
#              (RPermitExpirableSemaphore tryAcquire + release), count-down
#              latch (trySetCount 1 + countDown).  Target: 1.2 x Redisson's.
#   contended  S sessions on one name (bench/pgbench/rlock_contended.sql),
#              S = 2, 4, 8, 16, 32, 64 (ci: 2, 8), acquisitions per second
#              with deadlock detection on (the default) and off
#              (rlock.deadlock_timeout = 0), in rounds of alternating order,
#              the best round of each; beside the floor "one release +
#              acquire script round trip per acquisition" (bench/replay.c, 1
#              client, right after the runs).  The log gives on / off
#              (SPEC: checks at 64 waiters cost < 5 %).
#
# Environment (bench/run's, besides bench/scale_lib.sh's RLOCK_BENCH_SCALE,
# RLOCK_BENCH_SCALE_DIR and RLOCK_BENCH_SCALE_AXES):
#   RLOCK_BENCH_SCALE_SECONDS   length of each pgbench run (full 5, ci 1)
#   RLOCK_BENCH_SCALE_PAIRS     pairs per kind of the kinds axis (full
#                               10000, ci 300)

# shellcheck shell=bash

SCALE_AXES=${RLOCK_BENCH_SCALE_AXES:-"semaphore kinds contended handoff watchdog"}
if [ "$SCALE" = ci ]; then
    SCALE_SECS=${RLOCK_BENCH_SCALE_SECONDS:-1}
    SCALE_PAIRS=${RLOCK_BENCH_SCALE_PAIRS:-300}
    SCALE_PERMITS="10 1000"
    SCALE_SESSIONS="2 8"
    SCALE_ROUNDS=1
    SCALE_REPLAYS=500
else
    SCALE_SECS=${RLOCK_BENCH_SCALE_SECONDS:-5}
    SCALE_PAIRS=${RLOCK_BENCH_SCALE_PAIRS:-10000}
    SCALE_PERMITS="10 100 1000 10000"
    SCALE_SESSIONS="2 4 8 16 32 64"
    SCALE_ROUNDS=2
    SCALE_REPLAYS=5000
fi
SCALE_KINDS="lock fenced fair read write semaphore latch"

# scale_max_sessions: the most sessions an axis opens at once on the
# bench's PostgreSQL (bench/run sizes max_connections to fit): the
# contended axis's, and SCALE_MORE_SESSIONS, which bench/scale_big.sh may
# set to its axes' counts.
scale_max_sessions() {
    # shellcheck disable=SC2086
    printf '%s\n' $SCALE_SESSIONS ${SCALE_MORE_SESSIONS:-} | sort -n | tail -n 1
}

scale_redis() { "$REDIS_CLI_BIN" -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# scale_pgbench_file NAME SQL: $W/bench/pgbench/NAME.sql, one statement.
scale_pgbench_file() {
    printf -- '-- made by bench/scale.sh\n%s;\n' "$2" >"$W/bench/pgbench/$1.sql"
    chown postgres: "$W/bench/pgbench/$1.sql"
}

# scale_toplevel MONITOR: the commands a caught pair sent at the top level
# (not from a script: MONITOR marks those "lua"), other than the
# EVAL/EVALSHA calls, one name a line, lower case: those of the connection
# that sent the script calls (not the background worker's nor catch_calls'
# ECHO), and not those a connection sends now and then rather than per
# pair (ROLE, PING, CLIENT, HELLO, INFO, SCRIPT: a connection's checks).
scale_toplevel() {
    perl -ne 'next unless /^[0-9.]+ \[\d+ ([^\]]*)\] "([^"]+)"/;
              my ($from, $c) = ($1, lc $2);
              next if $from =~ /lua/;
              next if $c =~ /^(role|ping|client|hello|info|script|select|auth|readonly)$/;
              push @l, [$from, $c];
              $script{$from} = 1 if $c =~ /^(eval|evalsha|eval_ro|evalsha_ro)$/;
              END { for (@l) { print "$_->[1]\n" if $script{$_->[0]} && $_->[1] !~ /^(eval|evalsha|eval_ro|evalsha_ro)$/ } }' \
        "$1" 2>/dev/null
}

# scale_usec CALLS [NAME:PER_PAIR...]: Redis's time per pair (µs) since the
# last CONFIG RESETSTAT, a pair being CALLS script calls (EVAL, EVALSHA; so
# that the pairs are counted where they ran, warm-ups included): the usec of
# every script call (their inner calls' included), plus, for each other
# command NAME a pair sends PER_PAIR times at the top level, PER_PAIR x
# pairs x its usec per call, over the pairs.
scale_usec() {
    local calls=$1
    shift
    scale_redis info commandstats | tr -d '\r' | awk -F'[:=,]' -v calls="$calls" -v extra="$*" '
        BEGIN { n = split(extra, e, " "); for (i = 1; i <= n; i++) { split(e[i], p, ":"); per[p[1]] = p[2] } }
        $1 ~ /^cmdstat_/ {
            c = substr($1, 9)
            for (i = 2; i < NF; i += 2) v[$i] = $(i + 1)
            if (c ~ /^(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro)$/) { us += v["usec"]; n_calls += v["calls"] }
            else if (c in per) { us_per[c] = v["usec_per_call"] }
        }
        END {
            pairs = n_calls / calls
            for (c in us_per) us += per[c] * pairs * us_per[c]
            if (pairs > 0) printf "%.3f\n", us / pairs; else print "NaN"
        }'
}

# scale_extra MONITOR: "NAME:PER_PAIR ..." of scale_toplevel's commands.
scale_extra() {
    scale_toplevel "$1" | sort | uniq -c | awk '{ printf "%s%s:%s", (NR > 1 ? " " : ""), $2, $1 }'
}

# ---------------------------------------------------------------- semaphore --

# scale_fill NAME P: P permits of semaphore NAME out, as Java clients
# (Redisson) hold them: members of 16 random raw bytes in "{NAME}:timeout",
# scored an hour ahead, and the available count lowered by P; one pipelined
# redis-cli (RESP, binary-safe).
scale_fill() {
    local name=$1 p=$2 out
    out=$(perl -e '
        my ($name, $p, $score) = @ARGV;
        sub cmd { my $s = "*" . scalar(@_) . "\r\n"; $s .= "\$" . length($_) . "\r\n$_\r\n" for @_; print $s }
        my @batch;
        for my $i (1 .. $p) {
            push @batch, $score, pack("N4", map { int(rand(4294967296)) } 1 .. 4);
            if (@batch >= 2000 || $i == $p) { cmd("ZADD", "{$name}:timeout", @batch); @batch = () }
        }
        cmd("DECRBY", $name, $p);' "$name" "$p" "$(( $(date +%s) * 1000 + 3600000 ))" |
        scale_redis --pipe 2>&1) || { echo "$out" >&2; die "scale: could not put $p permits out of $name"; }
    grep -q 'errors: 0' <<<"$out" || { echo "$out" >&2; die "scale: putting $p permits out of $name failed"; }
}

scale_semaphore() {
    local p name avail zc base="" lat s1 usec floor sem_n
    scale_header semaphore permits_out rlock_us floor_us redis_us_per_pair target_us
    for p in $SCALE_PERMITS; do
        name="bench-scale-sem-$p"
        sql -c "SELECT rlock_semaphore_set_permits('$name', $((p + 10)))" >/dev/null
        scale_fill "$name" "$p"
        avail=$(scale_redis get "$name" | tr -d '\r')
        zc=$(scale_redis zcard "{$name}:timeout" | tr -d '\r')
        [ "$avail" = 10 ] && [ "$zc" = "$p" ] \
            || die "scale: semaphore $name has $avail available and $zc out, not 10 and $p"
        scale_pgbench_file scale_sem "SELECT rlock_semaphore_try_acquire('$name'), rlock_semaphore_release('$name')"
        catch_calls "$REDIS_PORT" "$W/scale_sem_$p" \
            "SELECT rlock_semaphore_try_acquire('$name')" "SELECT rlock_semaphore_release('$name')"
        [ "$NCALLS" = "1 1" ] \
            || log "WARNING: a semaphore's acquire and release with $p permits out sent $NCALLS script calls, not 1 1"
        scale_redis config resetstat >/dev/null
        pgbench_mixed "$SCALE_SECS" select1 scale_sem
        sem_n=${MIXED_N[scale_sem]}
        usec=$(scale_usec 2 $(scale_extra "$W/scale_sem_$p/monitor.txt"))
        lat=${MIXED_LAT[scale_sem]} s1=${MIXED_LAT[select1]}
        # (for SCALE_SECS, whatever P: with P permits out a pair may take
        # milliseconds)
        read -r _ RACQ RREL _ _ < <("$REPLAY" -T "$SCALE_SECS" "$W/scale_sem_$p/acquire.txt" \
            "$W/scale_sem_$p/release.txt" "$REDIS_PORT") \
            || die "scale: bench/replay.c of the semaphore's calls with $p permits out failed"
        [[ "$RACQ" =~ ^[0-9.]+$ && "$RREL" =~ ^[0-9.]+$ ]] \
            || die "scale: bench/replay.c of the semaphore's calls with $p permits out said '$RACQ $RREL'"
        floor=$(awk -v s="$s1" -v a="$RACQ" -v r="$RREL" 'BEGIN { printf "%.1f", (s + a + r) * 1000 }')
        lat=$(awk -v l="$lat" 'BEGIN { printf "%.1f", l * 1000 }')
        [ -n "$base" ] || base=$lat
        scale_row semaphore "$p" "$lat" "$floor" "$usec" "$(awk -v b="$base" 'BEGIN { printf "%.1f", 1.2 * b }')"
        log "$(printf 'scale, semaphore, %5d permits out: acquire+release %s µs (%s of P = %s), floor %s µs (select1 %.3f + acquire %.3f + release %.3f ms, replayed), Redis %s µs per pair; %s pairs' \
            "$p" "$lat" "$(awk -v l="$lat" -v b="$base" 'BEGIN { printf "%.2fx", l / b }')" \
            "$(set -- $SCALE_PERMITS; echo "$1")" "$floor" "$s1" "$RACQ" "$RREL" "$usec" "$sem_n")"
        # its permits back: the next point starts from an empty Redis
        scale_redis del "$name" "{$name}:timeout" >/dev/null
    done
    scale_plot semaphore "Semaphore acquire+release, 1 client, with P permits out" \
        "permits out (P)" "µs per acquire+release" 1 1
}

# -------------------------------------------------------------------- kinds --

# scale_kind_sql KIND NAME: "ACQUIRE|RELEASE", rlock's statements for KIND
# on NAME (each returns true when it did its work).
scale_kind_sql() {
    local n=$2
    case $1 in
        lock) echo "SELECT rlock_try_acquire('$n')|SELECT rlock_release('$n')" ;;
        fenced) echo "SELECT rlock_fenced_try_acquire('$n') IS NOT NULL|SELECT rlock_release('$n')" ;;
        fair) echo "SELECT rlock_fair_try_acquire('$n')|SELECT rlock_fair_release('$n')" ;;
        read) echo "SELECT rlock_read_try_acquire('$n')|SELECT rlock_read_release('$n')" ;;
        write) echo "SELECT rlock_write_try_acquire('$n')|SELECT rlock_write_release('$n')" ;;
        semaphore) echo "SELECT rlock_semaphore_try_acquire('$n')|SELECT rlock_semaphore_release('$n')" ;;
        latch) echo "SELECT rlock_latch_set_count('$n', 1)|SELECT rlock_latch_count_down('$n') = 0" ;;
        *) die "scale: no kind $1" ;;
    esac
}

# scale_redisson KIND NAME PAIRS: Redisson's scripts for KIND loaded, then
# CONFIG RESETSTAT and PAIRS acquire+release pairs, one after the other
# (bench/replay.c, 1 client: as a Java client with one thread); prints
# Redis's µs per pair: the scripts' time and that of the DEL of the unlock
# latch that Redisson sends after each unlock of its lock kinds
# (bench/redisson_pairs.pl extra; replay.c sends it).
scale_redisson() {
    local kind=$1 name=$2 pairs=$3 out dir="$W/scale_kind_$1/redisson"
    local gen=(perl -I "$ROOT/test/perl" "$ROOT/bench/redisson_pairs.pl")
    mkdir -p "$dir"
    "${gen[@]}" files "$kind" "$name" "$dir" || die "scale: could not write Redisson's $kind commands"
    out=$("${gen[@]}" load "$kind" "$name" | scale_redis --pipe 2>&1) \
        || { echo "$out" >&2; die "scale: could not load Redisson's $kind scripts"; }
    grep -q 'errors: 0' <<<"$out" || { echo "$out" >&2; die "scale: loading Redisson's $kind scripts failed"; }
    scale_redis config resetstat >/dev/null
    replay "$pairs" "$dir" "$REDIS_PORT"
    scale_usec 2 $("${gen[@]}" extra "$kind" "$name")
}

# scale_redisson_check KIND NAME: after Redisson's pairs, nothing of NAME is
# left held (each pair released what it took).
scale_redisson_check() {
    perl -I "$ROOT/test/perl" "$ROOT/bench/redisson_pairs.pl" check "$1" "$2" |
        xargs -r "$REDIS_CLI_BIN" -h 127.0.0.1 -p "$REDIS_PORT" exists | tr -d '\r'
}

scale_kinds() {
    local kind i=0 name stmts acq rel r_us x_us j_us left n
    scale_header kinds kind rlock_us rlock_replayed_us redisson_us target_us
    for kind in $SCALE_KINDS; do
        i=$((i + 1))
        name="bench-scale-$kind"
        stmts=$(scale_kind_sql "$kind" "$name")
        acq=${stmts%%|*} rel=${stmts#*|}
        [ "$kind" = semaphore ] && sql -c "SELECT rlock_semaphore_set_permits('$name', 1)" >/dev/null
        scale_pgbench_file "scale_kind_$kind" "$acq, ($rel) IS TRUE"
        catch_calls "$REDIS_PORT" "$W/scale_kind_$kind" "$acq" "$rel"
        [ "$NCALLS" = "1 1" ] \
            || log "WARNING: rlock's $kind acquire and release sent $NCALLS script calls, not 1 1"
        # rlock: a warm-up (the session's scripts loaded), then K pairs
        for n in 20 "$SCALE_PAIRS"; do
            [ "$n" = 20 ] || scale_redis config resetstat >/dev/null
            pg pgbench -n -M prepared -c 1 -j 1 -t "$n" -f "$W/bench/pgbench/scale_kind_$kind.sql" bench \
                >"$W/scale_kind_$kind.pgbench" 2>&1 \
                || { cat "$W/scale_kind_$kind.pgbench" >&2; die "scale: pgbench of rlock's $kind pairs failed"; }
        done
        r_us=$(scale_usec "$(( ${NCALLS% *} + ${NCALLS#* } ))" $(scale_extra "$W/scale_kind_$kind/monitor.txt"))
        scale_redis info commandstats >"$W/scale_kind_$kind/rlock.commandstats"
        # rlock's caught calls replayed as Redisson's are (bench/replay.c):
        # the scripts' own cost, apart from how pgbench's pairs reach Redis
        scale_redis config resetstat >/dev/null
        replay "$SCALE_PAIRS" "$W/scale_kind_$kind" "$REDIS_PORT"
        x_us=$(scale_usec "$(( ${NCALLS% *} + ${NCALLS#* } ))" $(scale_extra "$W/scale_kind_$kind/monitor.txt"))
        # Redisson's scripts, on a name of their own
        [ "$kind" = semaphore ] && scale_redis set "$name-java" 1 >/dev/null
        j_us=$(scale_redisson "$kind" "$name-java" "$SCALE_PAIRS")
        scale_redis info commandstats >"$W/scale_kind_$kind/redisson.commandstats"
        left=$(scale_redisson_check "$kind" "$name-java")
        [ "${left:-0}" = 0 ] || log "WARNING: Redisson's $kind pairs left $left key(s) held"
        scale_row kinds "$kind" "$r_us" "$x_us" "$j_us" "$(awk -v j="$j_us" 'BEGIN { printf "%.3f", 1.2 * j }')"
        log "$(printf 'scale, kinds, %-9s: Redis %s µs per acquire+release for rlock (%s), %s for its calls replayed (%s), %s for Redisson; %s pairs each%s' \
            "$kind" "$r_us" "$(awk -v r="$r_us" -v j="$j_us" 'BEGIN { printf "%.2fx", r / j }')" \
            "$x_us" "$(awk -v r="$x_us" -v j="$j_us" 'BEGIN { printf "%.2fx", r / j }')" "$j_us" "$SCALE_PAIRS" \
            "$(x=$(scale_extra "$W/scale_kind_$kind/monitor.txt"); [ -z "$x" ] || echo "; rlock's top-level commands besides its scripts: $x")")"
    done
    scale_plot kinds "Redis time per acquire+release, rlock against the scripts of Redisson" \
        "kind" "Redis µs per acquire+release (INFO commandstats)" 0 0
}

# ---------------------------------------------------------------- contended --

# scale_contended_floor: one release + acquire script round trip of
# bench-hot (as rlock_acquire and rlock_release send them, caught once),
# replayed one after the other (bench/replay.c, 1 client); prints the
# hand-overs per second it allows.
scale_contended_floor() {
    if [ ! -f "$W/scale_hot/release.txt" ]; then
        catch_calls "$REDIS_PORT" "$W/scale_hot" "SELECT rlock_acquire('bench-hot') IS NOT NULL" \
            "SELECT rlock_release('bench-hot')"
        [ "$NCALLS" = "1 1" ] \
            || log "WARNING: an uncontended rlock_acquire and its release sent $NCALLS script calls, not 1 1"
    fi
    replay "$SCALE_REPLAYS" "$W/scale_hot" "$REDIS_PORT"
    awk -v a="$RACQ" -v r="$RREL" 'BEGIN { printf "%.1f\n", 1000 / (a + r) }'
}

scale_contended() {
    local s round mode order=(on off) floor
    local -A best
    scale_header contended sessions detection_on detection_off floor
    for s in $SCALE_SESSIONS; do
        best=([on]=0 [off]=0)
        for round in $(seq 1 "$SCALE_ROUNDS"); do
            for mode in "${order[@]}"; do
                deadlock_mode "$mode"
                SECS=$SCALE_SECS pgbench_measure rlock_contended "$s"
                sessions_gone
                best[$mode]=$(awk -v a="${best[$mode]}" -v b="$TPS" 'BEGIN { printf "%.1f", (b > a ? b : a) }')
            done
            order=("${order[1]}" "${order[0]}")
        done
        deadlock_mode on
        floor=$(scale_contended_floor)
        scale_row contended "$s" "${best[on]}" "${best[off]}" "$floor"
        log "$(printf 'scale, contended, %2d sessions: %s acquisitions/s with deadlock detection, %s without (on/off %s), floor %s' \
            "$s" "${best[on]}" "${best[off]}" \
            "$(awk -v a="${best[on]}" -v b="${best[off]}" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')" "$floor")"
    done
    scale_plot contended "Contended acquire+release, S sessions on one name" \
        "sessions (S)" "acquisitions per second" 1 0
}

# ------------------------------------------------------------------- driver --

# bench_scale: walk each axis of SCALE_AXES (one whose function is not
# defined is skipped, with a log line), then check each that ran: it ran,
# its figures are numbers, its plot was drawn.
bench_scale() {
    local axis rc ran=()
    scale_init
    log "scale ($SCALE: axes $SCALE_AXES; into $SCALE_DIR)"
    for axis in $SCALE_AXES; do
        if ! declare -F "scale_$axis" >/dev/null; then
            log "scale: no axis $axis here (no function scale_$axis) -- skipped"
            continue
        fi
        rm -f "$SCALE_DIR/$axis.tsv" "$SCALE_DIR/$axis.svg"
        # in a subshell, so that an axis that dies leaves the others and
        # the checks (set -e kept inside: "|| rc=$?" would turn it off)
        set +e
        ( set -e; "scale_$axis" )
        rc=$?
        set -e
        scale_check "scale $axis ran" test "$rc" = 0
        scale_check "scale $axis: its figures are numbers" scale_numbers "$axis"
        scale_check "scale $axis: its plot was drawn" scale_svg "$axis"
        ran+=("$axis")
    done
    scale_check "scale: at least one axis ran" test "${#ran[@]}" -gt 0
    scale_checks_done
}
