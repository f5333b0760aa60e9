#!/usr/bin/env bash
# The decision-cost benchmark: fixed n = 5, 10, 20, the daemon's sequential rule as shipped
# and the staged rule on a simulated app (3 epochs, warm-up, log-normal run noise, block
# effects), through the daemon's own look code. Writes RESULTS.md, oc.svg and cost.svg
# next to this script. Seeded: the same REPS give the same files.
#
# Usage: benches/decision-cost/run.sh
# Env:   REPS=1000 (experiments in the cells the checks read) REPS_AT_ZERO=2000 (at 0 %)
#        REPS_OTHER=300 (every other cell), CARGO_TARGET_DIR.
# Release profile: check 2's frontier (benches/decision-cost/src/frontier.rs) runs millions of
# looks in the benchmark crate itself, which the dev profile leaves unoptimised. About 4
# minutes on one core after the build.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
REPS=${REPS:-1000}
REPS_AT_ZERO=${REPS_AT_ZERO:-2000}
REPS_OTHER=${REPS_OTHER:-300}
cd "$root"
cargo run --release -q -p optgate-decision-cost -- "$here" "$REPS" "$REPS_AT_ZERO" "$REPS_OTHER"
