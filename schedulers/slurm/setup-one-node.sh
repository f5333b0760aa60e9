#!/usr/bin/env bash
# Sets up a one-node Slurm cluster on this machine (Debian 12, as root, no systemd needed)
# for optgate's Slurm backend tests: installs slurm-wlm and munge if missing, writes
# slurm.conf from the recipe in SCHEDULERS.md, starts munged, slurmctld and slurmd, and waits
# until `sinfo` shows the node idle. Idempotent: running it again on a working cluster
# changes nothing; a changed configuration restarts the daemons it started.
#
# Usage: sudo schedulers/slurm/setup-one-node.sh
# Environment: OPTGATE_SLURM_DIR (state, spool, logs, pid files; default
# /var/lib/optgate-slurm), OPTGATE_SLURM_WAIT (seconds to wait for an idle node; default 120).
set -euo pipefail

say() { printf 'setup-one-node: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run me as root (I install packages and start daemons)"

DIR=${OPTGATE_SLURM_DIR:-/var/lib/optgate-slurm}
WAIT=${OPTGATE_SLURM_WAIT:-120}
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf

# 1. Packages. Debian's slurm-wlm pulls in slurmctld, slurmd and the client commands.
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    say "installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q slurm-wlm munge
fi

# slurmd finds its NodeName by the short host name, so the config must use the same one.
# Addresses are given as 127.0.0.1 so that a CI machine whose name does not resolve works.
HOST=$(hostname -s)
CPUS=$(nproc)
mkdir -p "$DIR/state" "$DIR/spool" "$CONF_DIR"
chmod 755 "$DIR"

# 2. slurm.conf: rewritten only when its contents would change, so a second run keeps the
# running daemons.
new_conf=$(mktemp)
trap 'rm -f "$new_conf"' EXIT
cat >"$new_conf" <<EOF
# One-node Slurm for optgate tests, written by schedulers/slurm/setup-one-node.sh.
ClusterName=local
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ReturnToService=2
MpiDefault=none
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
conf_changed=0
if ! cmp -s "$new_conf" "$CONF"; then
    if [ -e "$CONF" ] && ! grep -q 'setup-one-node.sh' "$CONF"; then
        cp -p "$CONF" "$CONF.before-optgate"
        say "kept the previous $CONF as $CONF.before-optgate"
    fi
    install -m 644 "$new_conf" "$CONF"
    conf_changed=1
    say "wrote $CONF (host $HOST, $CPUS CPUs)"
fi

alive() { # alive PIDFILE: the daemon named by the pid file is running
    [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}
stop() { # stop PIDFILE NAME: stops a daemon this script started, by its recorded pid
    if alive "$1"; then
        say "restarting $2 for the new configuration"
        kill "$(cat "$1")"
        for _ in $(seq 50); do alive "$1" || break; sleep 0.2; done
    fi
}

# 3. munge: the key comes with the package; create one if a minimal image lacks it.
if [ ! -s /etc/munge/munge.key ]; then
    say "creating /etc/munge/munge.key"
    if command -v mungekey >/dev/null; then
        mungekey --create --keyfile=/etc/munge/munge.key
    else
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
fi
# Without systemd nobody creates the runtime directories.
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
chmod 755 /run/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    say "starting munged"
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.2
    done
    munge -n | unmunge >/dev/null || die "munged does not answer"
fi

# 4. slurmctld, then slurmd (slurmd registers with the controller).
if [ "$conf_changed" -eq 1 ]; then
    stop "$DIR/slurmd.pid" slurmd
    stop "$DIR/slurmctld.pid" slurmctld
fi
if ! alive "$DIR/slurmctld.pid"; then
    say "starting slurmctld"
    slurmctld
fi
if ! alive "$DIR/slurmd.pid"; then
    say "starting slurmd"
    slurmd
fi

# 5. Wait for the node. A node left DOWN by an earlier unclean stop is resumed once.
resumed=0
for _ in $(seq "$WAIT"); do
    state=$(sinfo -h -n "$HOST" -o '%T' 2>/dev/null | head -n1 || true)
    case "$state" in
    idle | mixed | allocated | completing)
        say "node $HOST is $state; Slurm is ready (logs in $DIR)"
        sinfo
        exit 0
        ;;
    down* | drain* | fail*)
        if [ "$resumed" -eq 0 ]; then
            say "node $HOST is $state; resuming it"
            scontrol update NodeName="$HOST" State=RESUME || true
            resumed=1
        fi
        ;;
    esac
    sleep 1
done
say "the node did not become idle within ${WAIT}s; last state: ${state:-none}"
tail -n 20 "$DIR/slurmctld.log" "$DIR/slurmd.log" >&2 || true
exit 1
