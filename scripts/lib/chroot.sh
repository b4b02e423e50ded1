# scripts/lib/chroot.sh -- fresh Debian machines as chroots: a debootstrap
# base image per release, unpacked into a new root for each run, the command
# run in it as root, everything it left killed, unmounted and removed.
# Sourced by scripts/matrix and scripts/package, which define log().
#
#   chroot_setup                   check root, install debootstrap, pick the mirror
#   base_image REL                 $CHROOT_DIR/REL/base.tar (debootstrap once, then reused)
#   make_root REL                  a new root from it in $CHROOT_DIR/REL/root.XXXX: sets ROOT,
#                                  mounts proc, /dev, a tmpfs on /tmp and the release's apt
#                                  cache; CHROOT_NO_SERVICES=1 also forbids packages'
#                                  maintainer scripts to start services (policy-rc.d)
#   clone_into DEST                a clone of $CHROOT_SRC at $CHROOT_HEAD in $ROOT/DEST
#   run_in_root LOG LIMIT CMD      run CMD (bash -c) in $ROOT as root, with a clean
#                                  environment (plus CHROOT_ENV), output appended to LOG,
#                                  for at most LIMIT seconds; returns its exit status
#   cleanup_root                   kill what runs in $ROOT, unmount, remove it (idempotent)
#
# Settings (read by chroot_setup):
#   CHROOT_DIR      cache and logs, one folder per release
#   CHROOT_MIRROR   Debian mirror (default: the first URIs: line of
#                   /etc/apt/sources.list.d/debian.sources, else deb.debian.org)
#   CHROOT_KEEP=1   keep each root (unmounted) for inspection
# Downloaded packages are kept per release in $CHROOT_DIR/REL/apt-archives
# and bind-mounted into each new root's apt cache (every package is still
# installed afresh).  The roots share the host's network: whatever runs in
# them must pick free ports.

ROOT=""              # the root in use
RUN_PID=""           # the timeout(1) running a command in it
CHROOT_ENV=()        # NAME=VALUE words added to run_in_root's environment

chroot_setup() {
    if [ "$(id -u)" -ne 0 ]; then
        log "must run as root (debootstrap, chroot, mount)"
        return 2
    fi
    : "${CHROOT_DIR:?CHROOT_DIR not set}"
    CHROOT_MIRROR=${CHROOT_MIRROR:-}
    if [ -z "$CHROOT_MIRROR" ]; then
        CHROOT_MIRROR=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
        CHROOT_MIRROR=${CHROOT_MIRROR:-http://deb.debian.org/debian}
    fi
    if ! command -v debootstrap >/dev/null; then
        log "installing debootstrap"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
            { log "cannot install debootstrap"; return 2; }
    fi
    mkdir -p "$CHROOT_DIR"
}

# Is anything mounted at or below $1?
mounted_below() {
    awk -v r="$1" '$2 == r || index($2, r "/") == 1 { found = 1 } END { exit !found }' /proc/mounts
}

# Kill every process whose root is $ROOT (servers a run left behind),
# unmount and remove the root.  Idempotent.
cleanup_root() {
    [ -n "$ROOT" ] || return 0
    local p pids=() i m
    if [ -n "$RUN_PID" ]; then
        kill "$RUN_PID" 2>/dev/null
        RUN_PID=""
    fi
    for i in 1 2 3; do
        pids=()
        for p in /proc/[0-9]*; do
            [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] && pids+=("${p#/proc/}")
        done
        [ "${#pids[@]}" -gt 0 ] || break
        [ "$i" = 1 ] && log "killing ${#pids[@]} process(es) left in $ROOT"
        kill -9 "${pids[@]}" 2>/dev/null
        sleep 0.5
    done
    for m in var/cache/apt/archives tmp proc dev; do
        mounted_below "$ROOT/$m" && umount -l "$ROOT/$m" 2>/dev/null
    done
    if mounted_below "$ROOT"; then
        log "WARNING: $ROOT still has mounts; not removing it"
    elif [ "${CHROOT_KEEP:-0}" = 1 ]; then
        log "kept $ROOT"
    else
        rm -rf --one-file-system "$ROOT"
    fi
    ROOT=""
}

# The base image of release $1: debootstrap once, then reuse the tarball.
base_image() {
    local rel=$1 f=$CHROOT_DIR/$1 tmp
    mkdir -p "$f"
    [ -s "$f/base.tar" ] && return 0
    log "$rel: debootstrap --variant=minbase $rel from $CHROOT_MIRROR (log: $f/debootstrap.log)"
    tmp=$(mktemp -d "$f/base.XXXX")
    chmod 755 "$tmp"             # the root directory of the machine
    if ! debootstrap --variant=minbase "$rel" "$tmp" "$CHROOT_MIRROR" >"$f/debootstrap.log" 2>&1; then
        log "$rel: debootstrap failed; tail of $f/debootstrap.log:"
        tail -n 15 "$f/debootstrap.log"
        rm -rf --one-file-system "$tmp"
        return 1
    fi
    tar -C "$tmp" -cf "$f/base.tar.part" . && mv "$f/base.tar.part" "$f/base.tar"
    rm -rf --one-file-system "$tmp"
    [ -s "$f/base.tar" ]
}

# A new root of release $1 from its base image; sets ROOT.
make_root() {
    local rel=$1 f=$CHROOT_DIR/$1
    base_image "$rel" || return 1
    mkdir -p "$f/apt-archives/partial"
    ROOT=$(mktemp -d "$f/root.XXXX")
    # (chmod after tar, which restores the mode "." had: 0700 from mktemp
    # would keep user postgres out of "/")
    if ! tar -C "$ROOT" -xf "$f/base.tar" ||
       ! chmod 755 "$ROOT" ||
       ! mount -t proc proc "$ROOT/proc" ||
       ! mount --rbind /dev "$ROOT/dev" ||
       ! mount -t tmpfs tmpfs "$ROOT/tmp" ||
       ! mount --bind "$f/apt-archives" "$ROOT/var/cache/apt/archives"; then
        log "$rel: could not prepare the root $ROOT"
        cleanup_root
        return 1
    fi
    # apt downloads into partial/ as its sandbox user
    chroot "$ROOT" chown _apt /var/cache/apt/archives/partial 2>/dev/null
    if [ "${CHROOT_NO_SERVICES:-0}" = 1 ]; then
        printf '#!/bin/sh\n# no service starts in this chroot (scripts/lib/chroot.sh)\nexit 101\n' \
            >"$ROOT/usr/sbin/policy-rc.d"
        chmod 755 "$ROOT/usr/sbin/policy-rc.d"
    fi
}

# A clone of the committed $CHROOT_HEAD of $CHROOT_SRC at $ROOT/$1.
clone_into() {
    git clone -q --no-checkout "$CHROOT_SRC" "$ROOT/$1" &&
        git -C "$ROOT/$1" checkout -q --detach "$CHROOT_HEAD"
}

# Run $3 with bash -c in $ROOT as root, with a clean environment (plus the
# NAME=VALUE words in the array CHROOT_ENV), output appended to $1, for at
# most $2 seconds (exit status 124 then).  It runs in the background so
# that a signal to the caller runs the caller's traps at once.
run_in_root() {
    local logf=$1 limit=$2 cmd=$3 code=0
    timeout -k 60 "$limit" chroot "$ROOT" /usr/bin/env -i \
        PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root CI=true LANG=C.UTF-8 \
        "${CHROOT_ENV[@]}" bash -c "$cmd" </dev/null >>"$logf" 2>&1 &
    RUN_PID=$!
    wait "$RUN_PID" || code=$?
    RUN_PID=""
    return "$code"
}
