#!/usr/bin/env bash
# Sets up an N-node Slurm cluster on this one machine (Debian 12, as root, no systemd needed)
# for optgate's Slurm backend tests: installs slurm-wlm and munge if missing, writes
# slurm.conf from the recipe in docs/SCHEDULERS.md, starts munged, slurmctld and the slurmd(s),
# and waits until `sinfo` shows every node idle.
#
# --nodes 1 (the default): one slurmd on the host, named by `hostname -s`, at 127.0.0.1.
# --nodes N (2..MAX_NODES): N fake nodes `<prefix>1..<prefix>N`, each slurmd in its own
#   network and UTS namespace (netns `og-<prefix><i>`, a veth pair `og-<prefix><i>` on the
#   host side at NET.<i>.1/24, the node side at NET.<i>.2, a default route via the host side,
#   net.ipv4.ip_forward=1 so that nodes reach each other), started with `slurmd -N <name>`;
#   slurmctld runs on the host and is reached at NET.1.1. The nodes share this machine's cores:
#   timings on them are functional, not performance.
#
# Idempotent: running it again on a working cluster changes nothing; a changed configuration
# restarts the daemons this script started (by their recorded pid files, never by name).
# `--stop` stops this configuration's daemons (by pid file) and removes its namespaces.
# `--print-conf` prints the slurm.conf it would write and changes nothing.
#
# Usage: sudo schedulers/slurm/setup.sh [--nodes N] [--stop | --print-conf]
# Environment (all optional; set them to run a second cluster beside the first):
#   OPTGATE_SLURM_CONF        slurm.conf to write (default /etc/slurm/slurm.conf)
#   OPTGATE_SLURM_DIR         state, spool, logs, pid files (default /var/lib/optgate-slurm)
#   OPTGATE_SLURM_CLUSTER     ClusterName (default local)
#   OPTGATE_SLURMCTLD_PORT    SlurmctldPort (default 6817)
#   OPTGATE_SLURMD_PORT       SlurmdPort (default 6818)
#   OPTGATE_SLURM_NODE_PREFIX node names for N > 1: 1-8 lower-case letters (default n)
#   OPTGATE_SLURM_NET         first two octets of the node addresses for N > 1 (default 10.211)
#   OPTGATE_SLURM_WAIT        seconds to wait for idle nodes (default 120)
set -euo pipefail

say() { printf 'setup.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

MAX_NODES=32 # the most fake nodes: one /24 per node under NET, one namespace and veth each
NODES=1
STOP=0
PRINT=0
while [ $# -gt 0 ]; do
    case "$1" in
    --nodes) NODES=${2:-}; shift 2 || die "--nodes needs a number" ;;
    --nodes=*) NODES=${1#--nodes=}; shift ;;
    --stop) STOP=1; shift ;;
    --print-conf) PRINT=1; shift ;;
    -h | --help) sed -n '2,29p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (usage: setup.sh [--nodes N] [--stop | --print-conf])" ;;
    esac
done
case "$NODES" in '' | *[!0-9]*) die "--nodes takes a whole number, not '$NODES'" ;; esac
[ "$NODES" -ge 1 ] && [ "$NODES" -le "$MAX_NODES" ] || die "--nodes must be 1..$MAX_NODES"

CONF=${OPTGATE_SLURM_CONF:-/etc/slurm/slurm.conf}
DIR=${OPTGATE_SLURM_DIR:-/var/lib/optgate-slurm}
CLUSTER=${OPTGATE_SLURM_CLUSTER:-local}
CTLD_PORT=${OPTGATE_SLURMCTLD_PORT:-6817}
SLURMD_PORT=${OPTGATE_SLURMD_PORT:-6818}
PREFIX=${OPTGATE_SLURM_NODE_PREFIX:-n}
NET=${OPTGATE_SLURM_NET:-10.211}
WAIT=${OPTGATE_SLURM_WAIT:-120}
[[ "$PREFIX" =~ ^[a-z]{1,8}$ ]] || die "OPTGATE_SLURM_NODE_PREFIX must be 1-8 lower-case letters"
[[ "$NET" =~ ^[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "OPTGATE_SLURM_NET must look like 10.211"
export SLURM_CONF=$CONF # every client command below talks to this cluster
HOST=$(hostname -s)
CPUS=$(nproc)

node_name() { printf '%s%s' "$PREFIX" "$1"; }     # node_name I
netns_name() { printf 'og-%s%s' "$PREFIX" "$1"; } # namespace and host-side veth of node I
node_names() { # the NodeName of every node, one a line
    if [ "$NODES" -eq 1 ]; then echo "$HOST"; else for i in $(seq "$NODES"); do node_name "$i"; echo; done; fi
}

alive() { # alive PIDFILE: the daemon named by the pid file is running
    [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}
stop() { # stop PIDFILE NAME: stops a daemon this script started, by its recorded pid
    if alive "$1"; then
        say "stopping $2"
        kill "$(cat "$1")"
        for _ in $(seq 50); do alive "$1" || break; sleep 0.2; done
    fi
}
slurmd_pidfiles() { # the pid files of every slurmd of this configuration (any node count)
    [ ! -e "$DIR/slurmd.pid" ] || echo "$DIR/slurmd.pid"
    for f in "$DIR"/slurmd-*.pid; do [ ! -e "$f" ] || echo "$f"; done
}
stop_daemons() {
    for f in $(slurmd_pidfiles); do stop "$f" "slurmd ($(basename "$f"))"; done
    stop "$DIR/slurmctld.pid" slurmctld
}
remove_namespaces() { # the namespaces this configuration recorded as made
    [ -s "$DIR/netns.list" ] || return 0
    while read -r ns; do
        ip link del "$ns" 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done <"$DIR/netns.list"
    rm -f "$DIR/netns.list"
}

install_packages() { # Debian's slurm-wlm pulls in slurmctld, slurmd and the client commands.
    if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
        || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null \
        || ! command -v nsenter >/dev/null || ! command -v ip >/dev/null; then
        say "installing slurm-wlm, munge, iproute2, util-linux"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q slurm-wlm munge iproute2 util-linux
    fi
}

node_lines() { # the NodeName and PartitionName lines
    if [ "$NODES" -eq 1 ]; then
        echo "NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN"
        echo "PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP"
        return
    fi
    for i in $(seq "$NODES"); do
        local n; n=$(node_name "$i")
        echo "NodeName=$n NodeAddr=$NET.$i.2 NodeHostname=$n CPUs=$CPUS State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=$PREFIX[1-$NODES] Default=YES MaxTime=INFINITE State=UP"
}

conf_text() { # the slurm.conf for these settings
    local ctld_addr=127.0.0.1 suffix='' header ports='' mpi=none
    # One node on the default ports: the very text setup-one-node.sh always wrote, so that a
    # cluster started by it is kept running, not restarted for a changed comment.
    header="One-node Slurm for optgate tests, written by schedulers/slurm/setup-one-node.sh."
    if [ "$NODES" -gt 1 ]; then
        # An MPI program's ranks find each other across nodes with no `--mpi` on its srun
        # line (optgate's launch lines have none), as on sites that set a default.
        ctld_addr=$NET.1.1 suffix='-%n' mpi=pmi2
        header="$NODES-node Slurm for optgate tests, written by schedulers/slurm/setup.sh."
    fi
    if [ "$CTLD_PORT" != 6817 ] || [ "$SLURMD_PORT" != 6818 ]; then
        ports="SlurmctldPort=$CTLD_PORT"$'\n'"SlurmdPort=$SLURMD_PORT"$'\n'
    fi
    cat <<EOF
# $header
ClusterName=$CLUSTER
SlurmctldHost=$HOST($ctld_addr)
${ports}SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool$suffix
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd$suffix.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd$suffix.log
ReturnToService=2
MpiDefault=$mpi
$(node_lines)
EOF
}

write_conf() { # prints 1 when slurm.conf changed (rewritten only when its contents would)
    local new; new=$(mktemp)
    conf_text >"$new"
    if cmp -s "$new" "$CONF"; then rm -f "$new"; echo 0; return; fi
    if [ -e "$CONF" ] && ! grep -q 'schedulers/slurm/setup' "$CONF"; then
        cp -p "$CONF" "$CONF.before-optgate"
        say "kept the previous $CONF as $CONF.before-optgate"
    fi
    mkdir -p "$(dirname "$CONF")"
    install -m 644 "$new" "$CONF"
    rm -f "$new"
    say "wrote $CONF ($NODES node(s), $CPUS CPUs each)"
    echo 1
}

start_munge() { # the key comes with the package; create one if a minimal image lacks it.
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
}

add_namespace() { # add_namespace I: node I's netns and veth pair (kept when already there)
    local ns; ns=$(netns_name "$1")
    if [ ! -e "/run/netns/$ns" ]; then
        ip netns add "$ns"
        grep -qx "$ns" "$DIR/netns.list" 2>/dev/null || echo "$ns" >>"$DIR/netns.list"
    fi
    if ! ip link show "$ns" >/dev/null 2>&1; then
        ip link add "$ns" type veth peer name "$ns-n"
        ip link set "$ns-n" netns "$ns"
        ip netns exec "$ns" ip link set "$ns-n" name eth0
    fi
    ip addr replace "$NET.$1.1/24" dev "$ns"
    ip link set "$ns" up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip addr replace "$NET.$1.2/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip route replace default via "$NET.$1.1"
}

start_slurmd() { # start_slurmd I: node I's slurmd (N > 1: inside its namespaces)
    local n ns
    if [ "$NODES" -eq 1 ]; then
        alive "$DIR/slurmd.pid" && return 0
        say "starting slurmd"
        slurmd -f "$CONF"
        return
    fi
    n=$(node_name "$1")
    ns=$(netns_name "$1")
    alive "$DIR/slurmd-$n.pid" && return 0
    mkdir -p "$DIR/spool-$n"
    say "starting slurmd $n in namespace $ns ($NET.$1.2)"
    # Not `ip netns exec`: it remounts /sys, hiding the cgroup mounts slurmd 22.05 needs.
    nsenter --net="/run/netns/$ns" unshare --uts \
        sh -c 'hostname "$1" && exec slurmd -f "$2" -N "$1"' sh "$n" "$CONF"
}

wait_idle() { # every node idle; a node left DOWN by an earlier unclean stop is resumed once
    local resumed=' ' states=''
    for _ in $(seq "$WAIT"); do
        local ready=1 n state
        states=''
        for n in $(node_names); do
            state=$(sinfo -h -N -n "$n" -o '%T' 2>/dev/null | head -n1 || true)
            states="$states $n=${state:-none}"
            case "$state" in
            idle | mixed | allocated | completing) ;;
            down* | drain* | fail*)
                ready=0
                case "$resumed" in *" $n "*) ;; *)
                    say "node $n is $state; resuming it"
                    scontrol update NodeName="$n" State=RESUME || true
                    resumed="$resumed$n "
                    ;;
                esac
                ;;
            *) ready=0 ;;
            esac
        done
        if [ "$ready" -eq 1 ]; then
            say "nodes:$states; Slurm is ready (SLURM_CONF=$CONF, logs in $DIR)"
            sinfo -N
            return 0
        fi
        sleep 1
    done
    say "not every node became idle within ${WAIT}s:$states"
    tail -n 20 "$DIR"/slurmctld.log "$DIR"/slurmd*.log >&2 || true
    return 1
}

main() {
    if [ "$PRINT" -eq 1 ]; then conf_text; return 0; fi
    [ "$(id -u)" -eq 0 ] || die "run me as root (I install packages, start daemons, add namespaces)"
    mkdir -p "$DIR/state" "$DIR/spool"
    chmod 755 "$DIR"
    if [ "$STOP" -eq 1 ]; then
        stop_daemons
        remove_namespaces
        say "stopped the cluster of $CONF"
        return 0
    fi
    install_packages
    local changed; changed=$(write_conf)
    start_munge
    if [ "$changed" -eq 1 ]; then stop_daemons; fi
    if [ "$NODES" -gt 1 ]; then
        sysctl -q -w net.ipv4.ip_forward=1
        for i in $(seq "$NODES"); do add_namespace "$i"; done
    fi
    if ! alive "$DIR/slurmctld.pid"; then
        say "starting slurmctld"
        slurmctld -f "$CONF"
    fi
    if [ "$NODES" -eq 1 ]; then start_slurmd 1; else for i in $(seq "$NODES"); do start_slurmd "$i"; done; fi
    wait_idle
}
main
