# scripts/lib/pg.sh -- which PostgreSQL major version rlock is built and
# tested against on this machine.  Sourced by scripts/install-deps,
# scripts/build-install, scripts/demo, test/run and bench/run.
#
#   pg_major            print the major version (13, 15, 17...)
#   pg_default_config   print /usr/lib/postgresql/<major>/bin/pg_config
#
# The major version is, first found:
#   1. $RLOCK_PG_MAJOR;
#   2. the one in $PG_CONFIG's path (/usr/lib/postgresql/<major>/...), or
#      what $PG_CONFIG --version says;
#   3. the one this Debian release ships (/etc/os-release):
#      bullseye 13, bookworm 15, trixie 17;
#   4. the newest PostgreSQL server installed (/usr/lib/postgresql/*);
#   5. the version the release's "postgresql" package depends on (apt).

pg_major() {
    local m="" codename="" d
    if [ -n "${RLOCK_PG_MAJOR:-}" ]; then
        echo "$RLOCK_PG_MAJOR"
        return 0
    fi
    if [ -n "${PG_CONFIG:-}" ]; then
        if [[ "$PG_CONFIG" =~ /postgresql/([0-9]+)/ ]]; then
            m=${BASH_REMATCH[1]}
        elif [ -x "$PG_CONFIG" ] || command -v "$PG_CONFIG" >/dev/null 2>&1; then
            m=$("$PG_CONFIG" --version 2>/dev/null | sed -n 's/^PostgreSQL \([0-9][0-9]*\).*/\1/p')
        fi
        [ -n "$m" ] && { echo "$m"; return 0; }
    fi
    if [ -r /etc/os-release ]; then
        codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    fi
    case $codename in
        bullseye) echo 13; return 0 ;;
        bookworm) echo 15; return 0 ;;
        trixie) echo 17; return 0 ;;
    esac
    for d in /usr/lib/postgresql/*/bin/postgres; do
        [ -x "$d" ] || continue
        d=${d#/usr/lib/postgresql/}
        d=${d%%/*}
        if [ -z "$m" ] || [ "$d" -gt "$m" ]; then m=$d; fi
    done
    if [ -z "$m" ] && command -v apt-cache >/dev/null 2>&1; then
        m=$(apt-cache depends postgresql 2>/dev/null |
            sed -n 's/^ *Depends: postgresql-\([0-9][0-9]*\)$/\1/p' | head -n 1)
    fi
    if [ -z "$m" ]; then
        echo "cannot tell which PostgreSQL version to use on this machine (release '${codename:-unknown}'); set RLOCK_PG_MAJOR" >&2
        return 1
    fi
    echo "$m"
}

pg_default_config() {
    local m
    m=$(pg_major) || return 1
    echo "/usr/lib/postgresql/$m/bin/pg_config"
}
