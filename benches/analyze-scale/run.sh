#!/usr/bin/env bash
# The analyze-scale benchmark: `optgate analyze` at the documented maxima (a samples file of
# 1,000,000 rows: 2 arms x 5 replicates x 100,000 epochs), and the trend checks that made it
# quadratic in epochs against the code that replaced them, in the same run (criterion,
# benches/scale.rs). Then the release binary end to end on generated files of 10k, 30k and
# 100k epochs and of 66 arms x 1000 replicates (benches/analyze/gen_samples.py, written under
# $OUT, never committed), and
# `optgate plan` of the maximum 10,000 runs. Prints what RESULTS.md quotes.
#
# Usage: benches/analyze-scale/run.sh
# Env:   OUT=/tmp/optgate-analyze-scale  OPTGATE=<binary> (default: cargo build --release)
#        OLD_OPTGATE=<binary of an earlier commit> (timed beside it when set)
#        CRITERION=1 (0: skip the criterion groups)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-/tmp/optgate-analyze-scale}
CRITERION=${CRITERION:-1}
mkdir -p "$OUT"
cd "$root"

if [ "$CRITERION" != 0 ]; then
    cargo bench -q -p optgate-analyze-scale --bench scale
fi
if [ -z "${OPTGATE:-}" ]; then
    cargo build --release -q -p optgate-cli
    OPTGATE=$root/target/release/optgate
fi

time_it() { # label, command...
    local start end
    start=$(date +%s.%N)
    "${@:2}" > /dev/null
    end=$(date +%s.%N)
    printf '%s: %.2f s\n' "$1" "$(echo "$end - $start" | bc)"
}

for epochs in 10000 30000 100000; do
    csv=$OUT/samples-v1-r5-e$epochs.csv
    [ -s "$csv" ] || python3 "$root/benches/analyze/gen_samples.py" "$csv" \
        --variants 1 --replicates 5 --epochs "$epochs"
    for bin in "$OPTGATE" ${OLD_OPTGATE:+"$OLD_OPTGATE"}; do
        time_it "analyze $epochs epochs ($bin)" \
            "$bin" analyze "$csv" --baseline baseline --format json
    done
done

csv=$OUT/samples-v65-r1000-e15.csv
[ -s "$csv" ] || python3 "$root/benches/analyze/gen_samples.py" "$csv" \
    --variants 65 --replicates 1000 --epochs 15
for bin in "$OPTGATE" ${OLD_OPTGATE:+"$OLD_OPTGATE"}; do
    time_it "analyze 66 arms x 1000 replicates x 15 epochs ($bin)" \
        "$bin" analyze "$csv" --baseline baseline --format json
done

plan=$OUT/plan-max.yaml
sed -e "s|^workdir: .*|workdir: $root/examples/openmp-stencil|" \
    -e 's|^replicates: .*|replicates: 1000|' \
    -e '/^variants:/q' "$root/experiments/quickstart-slurm.yaml" > "$plan"
for i in 0 1 2 3 4 5 6 7 8; do
    printf '  - name: v%s\n    dimension: l2_threading_model\n    description: variant %s\n    env: { X_%s: "%s" }\n' \
        "$i" "$i" "$i" "$i" >> "$plan"
done
for bin in "$OPTGATE" ${OLD_OPTGATE:+"$OLD_OPTGATE"}; do
    rm -rf "$OUT/plan"
    time_it "plan 1000 blocks x 10 arms = 10,000 runs, Slurm ($bin)" \
        "$bin" plan "$plan" --out "$OUT/plan"
done
