#!/usr/bin/env bash
# Sets up a real one-node Flux on this machine (or, with `--brokers N`, a second instance of
# N brokers on this one machine: fake nodes sharing its cores) (Debian 12, no systemd needed) for optgate's
# Flux backend tests: finds an installed flux-core, or builds one from a source tarball and
# installs it under a fixed prefix; starts one persistent test instance (`flux start
# --test-size=1 --test-rundir=DIR sleep inf`, its pids recorded) unless one already answers;
# waits until it answers; writes its FLUX_URI to a file and prints `export FLUX_URI=…` on
# stdout (everything else goes to stderr), so a caller can `eval` the output. Idempotent: a
# second run finds the install and the instance and changes nothing. See README.md here.
#
# Usage: schedulers/flux/setup-one-node.sh        (as root when it has to build or apt-install)
#        eval "$(schedulers/flux/setup-one-node.sh)"
#        schedulers/flux/setup-one-node.sh --stop   (stops its instance; keeps the build)
#        eval "$(schedulers/flux/setup-one-node.sh --brokers 4)"
#            a separate `flux start --test-size=4` instance (its own directory, DIR-brokers-4),
#            printed as `export OPTGATE_FLUX_URI_4=…` so FLUX_URI keeps naming the one-broker
#            instance; `--brokers 4 --stop` stops it. Its 4 brokers are 4 Flux "nodes"
#            (ranks 0-3) on this machine, each with all of its cores.
# Environment:
#   OPTGATE_FLUX          flux command to use (default: the prefix's, else `flux` on PATH,
#                         else build one)
#   OPTGATE_FLUX_PREFIX   install prefix of the build (default /opt/optgate-flux/VERSION)
#   FLUX_CORE_TARBALL     flux-core source tarball (default
#                         ../shared/vendor/flux-core/flux-core-0.88.0.tar.xz from the repo root)
#   FLUX_CORE_SHA256      its sha256 (known for 0.88.0; others are built with a warning)
#   OPTGATE_FLUX_DIR      instance directory: rundir, pid files, logs, uri file
#                         (default /var/lib/optgate-flux)
#   OPTGATE_FLUX_URI      use this running instance (a cluster's own) instead of starting one
#   OPTGATE_FLUX_LINK     symlink made to the built flux (default /usr/local/bin/flux; '' = none)
#   OPTGATE_FLUX_WAIT     seconds to wait for the instance to answer (default 60)
#   OPTGATE_FLUX_JOBS     make -j (default: nproc)
set -euo pipefail

say() { printf 'setup-one-node: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

BROKERS=1
STOP=0
while [ $# -gt 0 ]; do
    case "$1" in
    --stop) STOP=1 ;;
    --brokers)
        [ $# -ge 2 ] || die "--brokers needs a number"
        BROKERS=$2
        shift
        ;;
    *) die "unknown argument: $1 (usage: setup-one-node.sh [--brokers N] [--stop])" ;;
    esac
    shift
done
case "$BROKERS" in '' | *[!0-9]* | 0*) die "--brokers wants a whole number from 1: $BROKERS" ;; esac

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

DEFAULT_VERSION=0.88.0
DIR=${OPTGATE_FLUX_DIR:-/var/lib/optgate-flux}
# A multi-broker instance lives beside the one-broker one, never in its directory.
[ "$BROKERS" -eq 1 ] || DIR=$DIR-brokers-$BROKERS
WAIT=${OPTGATE_FLUX_WAIT:-60}
LINK=${OPTGATE_FLUX_LINK-/usr/local/bin/flux}
RUNDIR=$DIR/run
PIDFILE=$DIR/flux-start.pid
BROKER_PIDFILE=$DIR/broker.pid
INITIAL_PIDFILE=$DIR/initial.pid
LOG=$DIR/flux.log
URIFILE=$DIR/uri

# Source tarball: explicit, or the vendored one beside the checkout (../shared) or inside it
# (shared/, as on a machine that got a copy of the working tree).
TARBALL=${FLUX_CORE_TARBALL:-}
if [ -z "$TARBALL" ]; then
    for t in "$root/../shared/vendor/flux-core/flux-core-$DEFAULT_VERSION.tar.xz" \
        "$root/shared/vendor/flux-core/flux-core-$DEFAULT_VERSION.tar.xz"; do
        if [ -f "$t" ]; then TARBALL=$(readlink -f "$t"); break; fi
    done
fi
VERSION=$DEFAULT_VERSION
if [ -n "$TARBALL" ]; then
    case "$(basename "$TARBALL")" in
    flux-core-*.tar.*)
        VERSION=$(basename "$TARBALL")
        VERSION=${VERSION#flux-core-}
        VERSION=${VERSION%.tar.*}
        ;;
    esac
fi
PREFIX=${OPTGATE_FLUX_PREFIX:-/opt/optgate-flux/$VERSION}
STAMP=$PREFIX/.optgate-flux-installed

known_sha256() { # known_sha256 VERSION: the sha256 of the vendored tarball of that version
    case "$1" in
    0.88.0) echo 5c4bc895ad16ad4bbdce0d063619600f52e85924f2021c878094657b08d56d68 ;;
    esac
}

# Debian build dependencies (no docs, MPI or valgrind). liblua5.1-dev is virtual on Debian 12.
BUILD_DEPS=(autoconf automake libtool make pkg-config libc6-dev libzmq3-dev uuid-dev
    libjansson-dev liblz4-dev libarchive-dev libhwloc-dev libsqlite3-dev lua5.1
    liblua5.1-0-dev lua-posix python3-dev python3-cffi python3-ply python3-setuptools
    python3-yaml libncurses-dev jq time xz-utils)

works() { # works FLUX: FLUX is a real flux-core front end (a test double has no `version`)
    "$1" version >/dev/null 2>&1
}

# One run at a time (a second waits for the first's build and instance).
mkdir -p "$DIR"
chmod 755 "$DIR"
if command -v flock >/dev/null; then
    exec 9>"$DIR/lock"
    flock 9
fi

# Processes are signalled only by a pid recorded here, and only after /proc shows that pid
# is still the program this script started for this rundir (pids get reused).
is_ours() { # is_ours PIDFILE PROGRAM MARKER: PIDFILE's pid runs PROGRAM with MARKER in argv
    local pid exe
    [ -s "$1" ] || return 1
    pid=$(cat "$1")
    case "$pid" in '' | *[!0-9]*) return 1 ;; esac
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
    [ "$(basename "$exe")" = "$2" ] || return 1
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$3" || return 1
    # The initial program has no telling argv: it must also be inside our instance.
    [ "$2" != sleep ] || tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null \
        | grep -qxF -- "FLUX_URI=local://$RUNDIR/local-0"
}
broker_ours() { is_ours "$BROKER_PIDFILE" flux-broker "--setattr=rundir=$RUNDIR"; }
start_ours() { is_ours "$PIDFILE" flux-start "--test-rundir=$RUNDIR"; }
initial_ours() { is_ours "$INITIAL_PIDFILE" sleep inf; }
stop_one() { # stop_one CHECK PIDFILE NAME: SIGTERM (the broker shuts down cleanly), then KILL
    local pid
    "$1" || return 0
    pid=$(cat "$2")
    say "stopping $3 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 75); do "$1" || return 0; sleep 0.2; done
    "$1" && kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 25); do "$1" || return 0; sleep 0.2; done
    die "$3 (pid $pid) does not stop"
}
stop_instance() { # the broker first: killing only `flux start` leaves the broker running,
    # and a broker killed (not shut down) leaves its initial program running
    stop_one broker_ours "$BROKER_PIDFILE" "the Flux broker"
    stop_one start_ours "$PIDFILE" "flux start"
    stop_one initial_ours "$INITIAL_PIDFILE" "the instance's initial program"
    # The other brokers of a multi-broker instance end with rank 0; any left are stopped.
    local f
    for f in "$DIR"/broker-rank-*.pid; do
        [ -e "$f" ] || continue
        # shellcheck disable=SC2329
        rank_ours() { is_ours "$f" flux-broker "--setattr=rundir=$RUNDIR"; }
        stop_one rank_ours "$f" "the Flux broker of $(basename "$f" .pid)"
        rm -f "$f"
    done
    rm -f "$BROKER_PIDFILE" "$PIDFILE" "$INITIAL_PIDFILE"
}

if [ "$STOP" -eq 1 ]; then
    stop_instance
    rm -f "$URIFILE"
    say "no optgate Flux instance is running (from $DIR)"
    exit 0
fi

# 1. flux-core: ours at the prefix, else one on PATH, else build ours.
FLUX=${OPTGATE_FLUX:-}
built_here=0
if [ -n "$FLUX" ]; then
    works "$FLUX" || die "OPTGATE_FLUX=$FLUX does not run \`flux version\`"
elif [ -f "$STAMP" ] && works "$PREFIX/bin/flux"; then
    FLUX=$PREFIX/bin/flux
    built_here=1
elif command -v flux >/dev/null && works "$(command -v flux)"; then
    FLUX=$(command -v flux)
else
    [ -n "$TARBALL" ] || die "no working flux on PATH or at $PREFIX, and no flux-core source:" \
        "set FLUX_CORE_TARBALL (looked for vendor/flux-core/flux-core-$DEFAULT_VERSION.tar.xz" \
        "under $(dirname "$root")/shared and $root/shared), or put flux on PATH / set OPTGATE_FLUX"
    [ -f "$TARBALL" ] || die "FLUX_CORE_TARBALL=$TARBALL: no such file"
    [ "$(id -u)" -eq 0 ] || die "building flux-core needs root (packages, $PREFIX); or set OPTGATE_FLUX"

    sha=${FLUX_CORE_SHA256:-$(known_sha256 "$VERSION")}
    if [ -n "$sha" ]; then
        echo "$sha  $TARBALL" | sha256sum -c --quiet - >/dev/null 2>&1 \
            || die "$TARBALL: sha256 is $(sha256sum "$TARBALL" | cut -d' ' -f1), expected $sha"
    else
        say "warning: no known sha256 for flux-core $VERSION; building it unverified"
    fi

    missing=()
    for p in "${BUILD_DEPS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing build dependencies: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q >&2
        apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
    fi
    # configure must see a Python with cffi, yaml and ply: Debian's, not a pyenv one on PATH.
    /usr/bin/python3 -c 'import cffi, yaml, ply' \
        || die "/usr/bin/python3 lacks cffi, yaml or ply (python3-cffi python3-yaml python3-ply)"

    build=$(mktemp -d "${TMPDIR:-/tmp}/optgate-flux-build.XXXXXX")
    trap 'rm -rf "$build"' EXIT
    blog=$DIR/build-$VERSION.log
    say "building flux-core $VERSION from $TARBALL into $PREFIX (a few minutes; log $blog)"
    start=$(date +%s)
    if ! (
        set -e
        tar -xJf "$TARBALL" -C "$build"
        cd "$build"/flux-core-*
        FLUX_VERSION=$VERSION ./autogen.sh
        PYTHON=/usr/bin/python3 ./configure --prefix="$PREFIX" --disable-docs
        make -j"${OPTGATE_FLUX_JOBS:-$(nproc)}"
        make install
    ) >"$blog" 2>&1; then
        tail -n 30 "$blog" >&2
        die "building flux-core failed (full log $blog)"
    fi
    rm -rf "$build"
    trap - EXIT
    works "$PREFIX/bin/flux" || die "the built $PREFIX/bin/flux does not run \`flux version\`"
    printf 'flux-core %s\ntarball %s\nsha256 %s\nbuilt %s\n' "$VERSION" "$TARBALL" \
        "$(sha256sum "$TARBALL" | cut -d' ' -f1)" "$(date -u +%FT%TZ)" >"$STAMP"
    say "built and installed flux-core $VERSION in $(($(date +%s) - start))s"
    FLUX=$PREFIX/bin/flux
    built_here=1
fi
say "using $FLUX ($("$FLUX" version 2>/dev/null | awk '/^commands:/ {print $2}'))"

# 2. Make our build the `flux` of every test: a symlink, only where nothing else stands.
if [ "$built_here" -eq 1 ] && [ -n "$LINK" ]; then
    if [ -L "$LINK" ] && [ "$(readlink "$LINK")" = "$FLUX" ]; then
        :
    elif [ -e "$LINK" ] || [ -L "$LINK" ]; then
        case "$(readlink "$LINK" || true)" in
        /opt/optgate-flux/*/bin/flux) ln -sfn "$FLUX" "$LINK"; say "relinked $LINK -> $FLUX" ;;
        *) say "warning: $LINK exists and is not ours; left alone" ;;
        esac
    elif [ -w "$(dirname "$LINK")" ]; then
        ln -s "$FLUX" "$LINK"
        say "linked $LINK -> $FLUX"
    fi
fi

answers() { # answers URI: a Flux instance answers at URI
    FLUX_URI=$1 timeout 10 "$FLUX" getattr size >/dev/null 2>&1
}
# 3. The instance: a cluster's own, or our persistent one-broker (or N-broker) test instance.
if [ "$BROKERS" -eq 1 ] && [ -n "${OPTGATE_FLUX_URI:-}" ]; then
    URI=$OPTGATE_FLUX_URI
    answers "$URI" || die "no Flux instance answers at OPTGATE_FLUX_URI=$URI"
    say "using the running instance at $URI"
else
    URI=local://$RUNDIR/local-0
    if answers "$URI"; then
        say "instance at $URI already answers"
    else
        # Ours but not answering (hung, or half dead): stop what we started, start afresh.
        stop_instance
        # A fresh rundir: no stale sockets or content store from an earlier instance.
        rm -rf "$RUNDIR"
        mkdir -m 700 "$RUNDIR"
        say "starting a $BROKERS-broker Flux instance (rundir $RUNDIR, log $LOG)"
        # Own session, no terminal, cwd /, no enclosing instance; the pid written from inside
        # is the one `flux start` keeps (exec). fd 9 (the lock) is not passed on.
        (
            cd /
            unset FLUX_URI
            exec setsid sh -c 'echo $$ >"$1"; shift; exec "$@"' sh "$PIDFILE" \
                "$FLUX" start --test-size="$BROKERS" --test-rundir="$RUNDIR" \
                sh -c 'echo $$ >"$1"; exec sleep inf' sh "$INITIAL_PIDFILE" \
                </dev/null >>"$LOG" 2>&1 9>&-
        ) &
        ok=0
        for _ in $(seq $((WAIT * 2))); do
            # Ready once rc1 is done: that is when the initial program starts (its pid file).
            if answers "$URI" && initial_ours; then ok=1; break; fi
            # Gone already (kill -0 only asks; the pid is the same before and after exec).
            if [ -s "$PIDFILE" ] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then break; fi
            sleep 0.5
        done
        if [ "$ok" -eq 0 ]; then
            tail -n 20 "$LOG" >&2 || true
            die "the Flux instance did not answer at $URI within ${WAIT}s (log $LOG)"
        fi
        say "instance answers at $URI (flux start pid $(cat "$PIDFILE"))"
    fi
    # The broker's own pid, for a later stop (it outlives a killed `flux start`).
    FLUX_URI=$URI timeout 10 "$FLUX" getattr broker.pid >"$BROKER_PIDFILE.tmp" 2>/dev/null \
        && mv -f "$BROKER_PIDFILE.tmp" "$BROKER_PIDFILE" || rm -f "$BROKER_PIDFILE.tmp"
    # And those of the other brokers (each rank answers for itself through `flux exec`).
    for rank in $(seq 1 $((BROKERS - 1))); do
        FLUX_URI=$URI timeout 10 "$FLUX" exec -r "$rank" flux getattr broker.pid \
            >"$DIR/broker-rank-$rank.pid.tmp" 2>/dev/null \
            && mv -f "$DIR/broker-rank-$rank.pid.tmp" "$DIR/broker-rank-$rank.pid" \
            || rm -f "$DIR/broker-rank-$rank.pid.tmp"
    done
fi

# 4. Tell the tests: a file, and `export` lines on stdout.
printf '%s\n' "$URI" >"$URIFILE.tmp"
mv -f "$URIFILE.tmp" "$URIFILE"
say "FLUX_URI written to $URIFILE"
on_path=$(command -v flux 2>/dev/null || true)
if [ -z "$on_path" ] || [ "$(readlink -f "$on_path")" != "$(readlink -f "$FLUX")" ]; then
    printf 'export PATH=%q:"$PATH"\n' "$(dirname "$FLUX")"
fi
if [ "$BROKERS" -eq 1 ]; then
    printf 'export FLUX_URI=%q\n' "$URI"
else
    printf 'export OPTGATE_FLUX_URI_%s=%q\n' "$BROKERS" "$URI"
fi
