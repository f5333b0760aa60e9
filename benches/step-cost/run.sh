#!/usr/bin/env bash
# The step-cost benchmark: what `optgate step RUN_DIR -- APP` (the wrapper around every
# launched task) costs per task against a bare launch of APP, in the same run, launches of
# the two alternating (src/bin/step-cost.rs): wall time start to reap and CPU (user +
# system of everything the launch reaped). Bare exec of /bin/true and of a short real app
# (a ~50 ms shell loop); then, when Slurm / Flux answer, `srun -n2 true` against
# `srun -n2 optgate step … -- true` and `flux run -n2` likewise. Then the in-process part
# with criterion (benches/in_process.rs). Prints the Markdown rows RESULTS.md quotes.
#
# Usage: benches/step-cost/run.sh
# Env:   OUT=/tmp/optgate-step-cost  OPTGATE=<binary> (default: cargo build --release)
#        RUNS=200 (local launches per side)  LAUNCHER_RUNS=30 (srun / flux run per side)
#        CRITERION=1 (0: skip criterion)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-/tmp/optgate-step-cost}
RUNS=${RUNS:-200}
LAUNCHER_RUNS=${LAUNCHER_RUNS:-30}
CRITERION=${CRITERION:-1}
cd "$root"
cargo build --release -q -p optgate-step-cost --bin step-cost
if [ -z "${OPTGATE:-}" ]; then
    cargo build --release -q -p optgate-cli
    OPTGATE=$root/target/release/optgate
fi
cost=$root/target/release/step-cost
rm -rf "$OUT" && mkdir -p "$OUT/run"
app=(bash -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done')
step=("$OPTGATE" step "$OUT/run" --attempt 1 --)

echo "| launch | runs per side | bare, ms median (p10–p90) | wrapped, ms median (p10–p90) | wall, wrapped / bare | bare CPU, ms | wrapped CPU, ms | CPU, wrapped / bare |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
"$cost" "exec /bin/true" "$RUNS" /bin/true --vs "${step[@]}" /bin/true
# The wrapper's start-up alone: the binary loaded, run and ended (no fork, no record).
"$cost" "exec optgate --version in place of the wrapper" "$RUNS" /bin/true --vs "$OPTGATE" --version
"$cost" "exec short app (bash loop)" "$RUNS" "${app[@]}" --vs "${step[@]}" "${app[@]}"
if sinfo -h > /dev/null 2>&1; then
    # One allocation for all of them: each srun is then a step, no queue wait in it.
    salloc -Q -n2 "$cost" "srun -n2 true" "$LAUNCHER_RUNS" srun -n2 true --vs srun -n2 "${step[@]}" true
else
    echo "(Slurm does not answer: srun rows not measured)"
fi
if flux getattr size > /dev/null 2>&1; then
    "$cost" "flux run -n2 true" "$LAUNCHER_RUNS" flux run -n2 true --vs flux run -n2 "${step[@]}" true
else
    echo "(Flux does not answer: eval \"\$(schedulers/flux/setup-one-node.sh)\" first; flux rows not measured)"
fi
echo "task records written: $(find "$OUT/run" -name '*.json' | wc -l)"
if [ "$CRITERION" != 0 ]; then
    cargo bench -q -p optgate-step-cost --bench in_process
fi
