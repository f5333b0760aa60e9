#!/usr/bin/env bash
# Benchmark: how many scheduler commands one poll runs with 1, 100 and 1000 tracked jobs.
# Logging stand-ins for squeue/sacct/flux (fake-bin/) go first on PATH; the real backends
# poll through them; each command run is one log line. The count must not grow with the
# number of jobs (one batched query per poll, plus one sacct for jobs squeue forgot).
# Writes the table to RESULTS.md beside this script.
# Usage: benches/scheduler-calls/run.sh   (CARGO_TARGET_DIR is honoured)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
cargo build --release -q --manifest-path "$root/Cargo.toml" -p optgate-sched --example poll_calls
bin=$target/release/examples/poll_calls
polls=5
export PATH="$here/fake-bin:$PATH"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

rows=""
measure() { # backend scenario accounting jobs what
    : >"$log"
    read -r kind jobs n ms calls states < <(
        CALL_LOG=$log FAKE_SCENARIO=$2 FAKE_ACCOUNTING=$3 FAKE_JOBS=$4 "$bin" "$1" "$4" "$polls"
    )
    programs=$(awk '{print $1}' "$log" | sort | uniq -c | awk '{printf "%s%s×%s", sep, $2, $1; sep=", "}')
    rows+="| $5 | $jobs | $calls | $programs | $ms | $states |"$'\n'
    printf '%-46s %5s jobs: calls per poll %-10s (%s) %7s ms/poll\n' "$5" "$jobs" "$calls" "$programs" "$ms"
}

for jobs in 1 100 1000; do
    measure slurm live on "$jobs" "Slurm, all jobs live (squeue)"
done
for jobs in 1 100 1000; do
    measure slurm half on "$jobs" "Slurm, half forgotten by squeue, accounting on"
done
for jobs in 1 100 1000; do
    measure slurm gone off "$jobs" "Slurm, all forgotten, accounting off"
done
for jobs in 1 100 1000; do
    measure flux live on "$jobs" "Flux, all jobs given to one flux jobs"
done

{
    echo "# Scheduler calls per poll"
    echo
    echo "Produced by \`benches/scheduler-calls/run.sh\` on $(date -u +%Y-%m-%d) ($(uname -sm), $(nproc) CPUs)."
    echo "Each row polls the tracked jobs $polls times through the real \`SlurmBackend\`/\`FluxBackend\`"
    echo "(spawning real processes) with logging stand-ins for \`squeue\`, \`sacct\` and \`flux\` first on"
    echo "PATH. \"Calls per poll\" lists the commands each of the $polls polls ran."
    echo
    echo "| scenario | jobs | calls per poll | commands in all | ms per poll | states per poll |"
    echo "|---|---:|---|---|---:|---|"
    printf '%s' "$rows"
    echo
    echo "(\"Half forgotten\": squeue lists the odd ids, so with a single job that job is live and"
    echo "no sacct is needed.)"
    echo
    echo "Reading: the number of commands per poll does not depend on the number of jobs."
    echo "A poll is one \`squeue --me -t all\` for every job; jobs squeue no longer lists cost one"
    echo "more \`sacct -j id1,id2,…\` for all of them together. A cluster without accounting is"
    echo "asked once: \`sacct\` says so on the first poll and is not called again (those jobs are"
    echo "\`unknown\` and judged by their run manifests). Flux: one \`flux jobs\` with every id."
    echo "The milliseconds are the stand-ins' own cost (bash/awk printing up to 1000 lines)"
    echo "plus optgate's parsing: no process per job, and nothing about Slurm's own speed."
} >"$here/RESULTS.md"
echo "wrote $here/RESULTS.md"
