# Shared by the fake scheduler commands in this directory (sourced, not run). They stand
# in for Slurm (`sbatch`, `squeue`, `sacct`, `scancel`, `srun`) and Flux (`flux batch`,
# `flux jobs`, `flux cancel`, `flux run`) in the fast test tier, HyperQueue-style: a job's
# script runs here at once, in its own process group, and state queries are answered from
# files under $OPTGATE_FAKE_SCHED_DIR/jobs/<id>/ (name, pid, state, rc). What they cannot
# stand in for (queueing, allocations, nodes, time limits) the cluster tier tests on the
# real schedulers. Every call is appended to $OPTGATE_FAKE_SCHED_DIR/calls.log.
#
# Scenarios a test sets up, as files in $OPTGATE_FAKE_SCHED_DIR:
#   sbatch-times-out  the next submission is made, then reported as a timeout (exit 1),
#                     as a slurmctld that answers too late does; the file is removed.
#   lose-job-SUFFIX   the first job whose name ends with SUFFIX dies as on a lost node at
#                     its first launch (Slurm NODE_FAIL, Flux exception node-failure); the
#                     file is removed.

state_dir() {
    if [ -z "${OPTGATE_FAKE_SCHED_DIR:-}" ]; then
        echo "$(basename "$0"): OPTGATE_FAKE_SCHED_DIR is not set (a fake scheduler for tests)" >&2
        exit 2
    fi
    mkdir -p "$OPTGATE_FAKE_SCHED_DIR/jobs"
    printf '%s\n' "$OPTGATE_FAKE_SCHED_DIR"
}

STATE=$(state_dir)
FAKE_LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/fake-sched-lib.sh"

log_call() {
    printf '%s\n' "$*" >> "$STATE/calls.log"
}

# Prints a new job id (101, 102, …), unique across concurrent calls.
new_id() {
    (
        flock 9
        n=$(cat "$STATE/next-id" 2>/dev/null || echo 101)
        echo $((n + 1)) > "$STATE/next-id"
        echo "$n"
    ) 9> "$STATE/lock"
}

# Sets job ID's state to $2 if it is still RUNNING; prints whether it did (yes/no).
end_job() {
    (
        flock 9
        if [ "$(cat "$STATE/jobs/$1/state")" = RUNNING ]; then
            echo "$2" > "$STATE/jobs/$1/state"
            echo yes
        else
            echo no
        fi
    ) 9> "$STATE/lock"
}

# start_job NAME SCRIPT ID-VARIABLE: runs SCRIPT in the background in its own session
# (so cancelling ends everything it started), output to fake-ID.out/.err in the current
# directory, ID-VARIABLE set to the id as the scheduler would; prints the new id. The
# job records its own end (COMPLETED, FAILED) unless it was cancelled or lost first.
start_job() {
    local id dir
    id=$(new_id)
    dir="$STATE/jobs/$id"
    mkdir -p "$dir"
    printf '%s\n' "$1" > "$dir/name"
    echo RUNNING > "$dir/state"
    OPTGATE_FAKE_JOB_ID=$id OPTGATE_FAKE_JOB_NAME=$1 FAKE_LIB="$FAKE_LIB" env "$3=$id" \
        setsid bash -c '
            . "$FAKE_LIB"
            bash "$1" > "fake-$OPTGATE_FAKE_JOB_ID.out" 2> "fake-$OPTGATE_FAKE_JOB_ID.err"
            rc=$?
            echo "$rc" > "$STATE/jobs/$OPTGATE_FAKE_JOB_ID/rc"
            if [ "$rc" = 0 ]; then end=COMPLETED; else end=FAILED; fi
            end_job "$OPTGATE_FAKE_JOB_ID" "$end" > /dev/null
            ' fake-job "$2" < /dev/null > /dev/null 2>&1 &
    echo $! > "$dir/pid"
    echo "$id"
}

# Kills job ID's whole session, recording STATE first (CANCELLED, NODE_FAIL).
kill_job() {
    if [ "$(end_job "$1" "$2")" = yes ]; then
        # The whole session the job's runner leads (the step wrapper gives each app its
        # own process group inside it). The runner is alive until it records the end
        # itself, which it cannot now: the session is still this job's.
        pkill -TERM -s "$(cat "$STATE/jobs/$1/pid")" 2> /dev/null || true
    fi
}

# Every job id, oldest first.
all_ids() {
    ls "$STATE/jobs" | sort -n
}

# At a launch (srun, flux run) inside job ID named NAME: the lost-node scenario, for the
# first job whose name ends with the suffix a `lose-job-SUFFIX` file gives.
maybe_lose_node() {
    local f
    [ -n "${2:-}" ] || return 0
    for f in "$STATE"/lose-job-*; do
        [ -e "$f" ] || continue
        case "$2" in
            *"${f##*/lose-job-}")
                rm "$f" 2> /dev/null || continue
                kill_job "$1" NODE_FAIL
                sleep 60 # ended with its process group
                ;;
        esac
    done
}

# The submission timeout scenario: true once, when set up.
submission_times_out() {
    rm "$STATE/sbatch-times-out" 2> /dev/null
}
