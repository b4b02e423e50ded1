# bench/scale_lib.sh -- what every axis of bench/run's scale section shares:
# where its data and plots go, the plot itself (gnuplot, SVG) and the
# checks the CI-sized run reports.  Sourced by bench/run before the axes'
# files (bench/scale*.sh).
#
# An axis "NAME" (a function scale_NAME) writes $SCALE_DIR/NAME.tsv: a
# first line of tab-separated column names, then one row per point of the
# axis, column 1 the axis (x), every other column one series (y), a cell
# "NaN" where a series has no point.  Then it calls
#
#   scale_plot NAME "title" "x label" "y label" LOGX [LOGY]
#
# which draws every series of NAME.tsv against column 1 into
# $SCALE_DIR/NAME.svg: a series whose name starts with "floor" or "target"
# dashed (the floor and the target on the same axes as what they bound),
# LOGX/LOGY 1 for a logarithmic axis.  Column 1 may instead hold text
# labels (every cell of it not a number: e.g. the kinds of lock): the rows
# are then drawn at x = 0, 1, 2, ... with the labels as the x axis' ticks,
# and LOGX is ignored.  And, for what the CI-sized run must
# show (the axis ran, its figures are numbers, its plot was drawn):
#
#   scale_check "what was checked" COMMAND...
#
# prints "ok N - what" when COMMAND succeeds, else "not ok N - what" (TAP's
# words: test/run's bench suite counts them) and remembers the failure;
# scale_checks_done prints the plan and fails when any check failed.
#
# Environment (bench/run's):
#   RLOCK_BENCH_SCALE       "full" (default: bench/run's own axes) or "ci"
#                           (small axes, seconds; what test/run runs)
#   RLOCK_BENCH_SCALE_DIR   where NAME.tsv and NAME.svg go (default
#                           doc/bench for a full run, the bench's temp dir
#                           for a CI-sized one, so that CI never writes
#                           into the tree)
#   RLOCK_BENCH_SCALE_AXES  the axes to walk (default all of them)

# shellcheck shell=bash

SCALE=${RLOCK_BENCH_SCALE:-full}
SCALE_DIR=${RLOCK_BENCH_SCALE_DIR:-}
SCALE_CHECKS=0
SCALE_FAILED=0

# scale_init: settle SCALE_DIR (needs bench/run's $W) and make it.
scale_init() {
    case "$SCALE" in
        full | ci) ;;
        *) die "RLOCK_BENCH_SCALE is full or ci, not $SCALE" ;;
    esac
    if [ -z "$SCALE_DIR" ]; then
        if [ "$SCALE" = full ]; then
            SCALE_DIR="$ROOT/doc/bench"
        else
            SCALE_DIR="$W/scale"
        fi
    fi
    mkdir -p "$SCALE_DIR"
    command -v gnuplot >/dev/null || die "gnuplot is missing (scripts/install-deps installs gnuplot-nox)"
}

# scale_row NAME VALUE...: append one row to $SCALE_DIR/NAME.tsv.
scale_row() {
    local name=$1
    shift
    (IFS=$'\t'; echo "$*") >>"$SCALE_DIR/$name.tsv"
}

# scale_header NAME COLUMN...: start $SCALE_DIR/NAME.tsv afresh.
scale_header() {
    local name=$1
    : >"$SCALE_DIR/$name.tsv"
    shift
    scale_row "$name" "$@"
}

scale_plot() {
    local name=$1 title=$2 xlabel=$3 ylabel=$4 logx=${5:-0} logy=${6:-0}
    local tsv="$SCALE_DIR/$name.tsv" svg="$SCALE_DIR/$name.svg" ncol i col plots="" dt xusing xtic
    [ -s "$tsv" ] || die "scale_plot $name: no data in $tsv"
    ncol=$(head -n 1 "$tsv" | awk -F'\t' '{ print NF }')
    if scale_labels "$tsv"; then
        xusing="0" xtic=":xtic(1)" logx=0
    else
        xusing="1" xtic=""
    fi
    for ((i = 2; i <= ncol; i++)); do
        col=$(head -n 1 "$tsv" | awk -F'\t' -v i="$i" '{ print $i }')
        dt=1
        case "$col" in floor* | target*) dt=2 ;; esac
        if [ -n "$xtic" ] && [ "$dt" = 1 ]; then
            # a kind per cluster of bars: one bar per measured series
            plots+="${plots:+, }'$tsv' using $i$xtic with histograms title '${col//\'/}'"
        elif [ -n "$xtic" ]; then
            # a floor or target: a dashed mark across its cluster
            plots+="${plots:+, }'$tsv' using 0:$i:(0.45) with xerrorbars pt 0 lw 2 dt 2 lc rgb '#000000' title '${col//\'/}'"
        else
            plots+="${plots:+, }'$tsv' using $xusing:$i with linespoints dt $dt lw 2 pt 7 ps 0.6 title '${col//\'/}'"
        fi
    done
    gnuplot <<GP || die "gnuplot failed on $tsv"
set terminal svg size 720,420 dynamic noenhanced font 'sans,12' background '#ffffff'
set output '$svg'
set datafile separator '\t'
set datafile missing 'NaN'
set key autotitle columnheader
set key below
set grid
$([ -n "$xtic" ] && printf '%s\n' 'set style histogram clustered gap 1' 'set style fill solid 0.7 border -1' 'set boxwidth 0.9' 'set xrange [-0.6:*]')
set title '${title//\'/}'
set xlabel '${xlabel//\'/}'
set ylabel '${ylabel//\'/}'
$([ "$logx" = 1 ] && echo 'set logscale x')
$([ "$logy" = 1 ] && echo 'set logscale y')
set yrange [0:*]
$([ "$logy" = 1 ] && echo 'set yrange [*:*]')
plot $plots
GP
    log "scale: $name plotted: $svg"
}

scale_check() {
    local what=$1
    shift
    SCALE_CHECKS=$((SCALE_CHECKS + 1))
    if "$@" >/dev/null 2>&1; then
        echo "ok $SCALE_CHECKS - $what"
    else
        echo "not ok $SCALE_CHECKS - $what"
        SCALE_FAILED=$((SCALE_FAILED + 1))
    fi
}

# scale_labels TSV: is column 1 of TSV's rows text labels (no cell of it a
# number, none empty)?
scale_labels() {
    awk -F'\t' 'NR == 1 { next }
        { rows++; if ($1 == "" || $1 ~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/) num++ }
        END { exit !(rows > 0 && num == 0) }' "$1"
}

# scale_numbers NAME: every cell of NAME.tsv past the header is a number
# (or NaN; column 1 may be text labels instead, see scale_plot), and it has
# at least one row.
scale_numbers() {
    local first=1
    scale_labels "$SCALE_DIR/$1.tsv" && first=2
    awk -F'\t' -v first="$first" 'NR == 1 { next }
        { rows++; for (i = first; i <= NF; i++) if ($i != "NaN" && $i !~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/) bad++ }
        END { exit !(rows > 0 && bad == 0) }' "$SCALE_DIR/$1.tsv"
}

# scale_svg NAME: NAME.svg was drawn (an SVG document with a path in it).
scale_svg() {
    grep -q '<svg' "$SCALE_DIR/$1.svg" && grep -q '<path' "$SCALE_DIR/$1.svg"
}

scale_checks_done() {
    echo "1..$SCALE_CHECKS"
    [ "$SCALE_FAILED" = 0 ] || die "scale: $SCALE_FAILED of $SCALE_CHECKS checks failed"
}
