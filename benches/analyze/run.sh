#!/usr/bin/env bash
# Benchmarks `optgate analyze` against the alternative a user would write: the same
# analysis in Python with pandas/NumPy/SciPy (scipy_analyze.py). On a deterministic
# synthetic experiment (gen_samples.py: baseline + 20 variants x 30 blocked replicates x
# 100 epochs, written under $OUT, never committed) it first checks that both produce
# the same p-values, estimates and decisions (compare.py), then times both end to end,
# process start-up included, interleaved (measure.py), and prints a Markdown report
# (median wall and CPU time, ratios) for benches/analyze/RESULTS.md.
#
# Usage: benches/analyze/run.sh            (from anywhere)
# Env:   PYTHON=python3 (must import numpy, scipy, pandas; e.g. PYTHON=/tmp/bench-venv/bin/python)
#        OUT=/tmp/optgate-analyze-bench  RUNS=10  WARMUP=1
#        VARIANTS=20  REPLICATES=30  EPOCHS=100  SEED=20251129
#        OPTGATE=<binary> (skips the build; default: cargo build --release -p optgate-cli
#        into ${CARGO_TARGET_DIR:-<repo>/target})   HYPERFINE=1 (0: skip the cross-check)
# Exit:  0 agree and timed; 1 optgate and SciPy disagree (still timed and reported);
#        2 setup problem (no scipy, build failed).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PYTHON=${PYTHON:-python3}
OUT=${OUT:-/tmp/optgate-analyze-bench}
RUNS=${RUNS:-10}
WARMUP=${WARMUP:-1}
VARIANTS=${VARIANTS:-20}
REPLICATES=${REPLICATES:-30}
EPOCHS=${EPOCHS:-100}
SEED=${SEED:-20251129}
HYPERFINE=${HYPERFINE:-1}
target=${CARGO_TARGET_DIR:-$root/target}

die() { echo "run.sh: error: $*" >&2; exit 2; }

command -v "$PYTHON" > /dev/null || die "PYTHON=$PYTHON not found"
for mod in numpy scipy pandas; do
    "$PYTHON" -c "import $mod" 2> /dev/null || die "$PYTHON cannot import $mod; make a venv:
    python3 -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install numpy scipy pandas
    PYTHON=/tmp/bench-venv/bin/python $0"
done

if [ -n "${OPTGATE:-}" ]; then
    optgate=$OPTGATE
else
    echo "building optgate (release) into $target ..." >&2
    (cd "$root" && CARGO_TARGET_DIR=$target cargo build --release -q -p optgate-cli) \
        || die "cargo build --release -p optgate-cli failed"
    optgate=$target/release/optgate
fi
[ -x "$optgate" ] || die "no optgate binary at $optgate"

mkdir -p "$OUT"
csv=$OUT/samples-v${VARIANTS}-r${REPLICATES}-e${EPOCHS}-s${SEED}.csv
if [ ! -s "$csv" ]; then
    "$PYTHON" "$here/gen_samples.py" "$csv.tmp" --variants "$VARIANTS" \
        --replicates "$REPLICATES" --epochs "$EPOCHS" --seed "$SEED"
    mv "$csv.tmp" "$csv"
fi

q() { printf '%q' "$1"; }
cmd_optgate="$(q "$optgate") analyze $(q "$csv") --baseline baseline --format json"
cmd_scipy="$(q "$PYTHON") $(q "$here/scipy_analyze.py") $(q "$csv") --baseline baseline"
cmd_imports="$(q "$PYTHON") -c 'import numpy, pandas, scipy.stats'"

echo "checking that optgate and SciPy agree ..." >&2
$optgate analyze "$csv" --baseline baseline --format json > "$OUT/optgate.json"
"$PYTHON" "$here/scipy_analyze.py" "$csv" --baseline baseline > "$OUT/scipy.json"
agree=1
"$PYTHON" "$here/compare.py" "$OUT/optgate.json" "$OUT/scipy.json" "$OUT/compare.json" || agree=0

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "timing $RUNS runs of each (after $WARMUP warm-up), interleaved ..." >&2
"$PYTHON" "$here/measure.py" --runs "$RUNS" --warmup "$WARMUP" "$OUT/times.json" \
    "optgate analyze" "$cmd_optgate" \
    "SciPy script" "$cmd_scipy" \
    "python: imports only" "$cmd_imports"

rm -f "$OUT/hyperfine.json"
if [ "$HYPERFINE" != 0 ] && command -v hyperfine > /dev/null; then
    echo "cross-check with hyperfine ..." >&2
    hyperfine -N -w "$WARMUP" -r "$RUNS" --export-json "$OUT/hyperfine.json" \
        -n "optgate analyze" "$cmd_optgate" -n "SciPy script" "$cmd_scipy" >&2
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

"$PYTHON" - "$root" "$OUT" "$csv" "$optgate" "$agree" "$load_before" "$load_after" \
    "$cmd_optgate" "$cmd_scipy" "$cmd_imports" "$RUNS" "$WARMUP" <<'EOF' | tee "$OUT/report.md"
import datetime, json, os, platform, statistics, subprocess, sys
(root, out, csv, optgate, agree, load_before, load_after,
 cmd_o, cmd_s, cmd_i, runs, warmup) = sys.argv[1:]
import numpy, scipy, pandas
try:
    import statsmodels
    sm = f"statsmodels {statsmodels.__version__} (Holm)"
except ImportError:
    sm = "no statsmodels (Holm in NumPy, 6 lines)"

def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return "?"

times = json.load(open(os.path.join(out, "times.json")))
cmp = json.load(open(os.path.join(out, "compare.json")))
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
              if l.startswith("model name")), platform.processor())
rows = open(csv).read().count("\n") - 1
med = {k: (statistics.median(v["wall_s"]), statistics.median(v["cpu_s"]),
           max(v["maxrss_kb"]) / 1024, min(v["wall_s"]), max(v["wall_s"]))
       for k, v in times.items()}
ow, oc = med["optgate analyze"][:2]
sw, sc = med["SciPy script"][:2]

print(f"### {datetime.date.today().isoformat()} — {model}, {os.cpu_count()} cores, "
      f"Linux {platform.release()}")
print()
print(f"Input: `{os.path.basename(csv)}`: {rows:,} rows, {os.path.getsize(csv) / 1e6:.1f} MB "
      f"(baseline + {cmp['variants']} variants). Load average {load_before} before the "
      f"timing, {load_after} after.")
print()
dirty = sh('git', '-C', root, 'status', '--porcelain', '--untracked-files=no')
print(f"* optgate: {sh(optgate, '--version')}, {sh('rustc', '--version')}, commit "
      f"{sh('git', '-C', root, 'rev-parse', '--short', 'HEAD')}"
      f"{' (+ uncommitted changes)' if dirty else ''}")
print(f"* Python {platform.python_version()}, NumPy {numpy.__version__}, SciPy "
      f"{scipy.__version__}, pandas {pandas.__version__}, {sm}")
print(f"* {runs} timed runs of each after {warmup} warm-up, interleaved; wall = spawn to exit, "
      f"CPU = user + system of the process and its children")
print()
print("```")
for c in (cmd_o, cmd_s, cmd_i):
    print(c)
print("```")
print()
print("| command | median wall s | min–max wall s | median CPU s | max RSS MB | SciPy ÷ this (wall) | SciPy ÷ this (CPU) |")
print("|---|---:|---:|---:|---:|---:|---:|")
for k, (w, c, rss, lo, hi) in med.items():
    print(f"| {k} | {w:.3f} | {lo:.3f}–{hi:.3f} | {c:.3f} | {rss:.0f} | {sw / w:.1f}x | {sc / c:.1f}x |")
print()
hf = os.path.join(out, "hyperfine.json")
if os.path.exists(hf):
    r = {x["command"]: x for x in json.load(open(hf))["results"]}
    parts = [f"{k}: median wall {x['median']:.3f} s, mean user+sys {x['user'] + x['system']:.3f} s"
             for k, x in r.items()]
    print(f"hyperfine {sh('hyperfine', '--version').split()[-1]} (same commands, not interleaved): "
          + "; ".join(parts) + ".")
    print()
print(f"**optgate is {sw / ow:.1f}x faster in wall time and {sc / oc:.1f}x in CPU time** "
      f"than the SciPy script (medians, start-up included).")
print()
iw, ic = med["python: imports only"][:2]
print(f"Most of the SciPy script's time is Python start-up and `import numpy, pandas, "
      f"scipy.stats` ({ic:.2f} of {sc:.2f} CPU s). Without it, its analysis proper takes about "
      f"{sc - ic:.3f} CPU s, {(sc - ic) / oc:.1f}x optgate's whole run (start-up, CSV parsing "
      f"and JSON output included).")
print()
if cmp["agree"]:
    print(f"Results agree: all {cmp['variants']} variants, {cmp['numbers_checked']} numbers "
          f"(p-values raw/Holm-adjusted/min achievable, speed-up estimate and interval, "
          f"first-epoch effect, App Impact); largest |p difference| {cmp['max_abs_p_diff']:.2g} "
          f"(tolerance 1e-6), largest relative estimate difference "
          f"{cmp['max_rel_estimate_diff']:.2g} (tolerance 1e-9); same decisions "
          f"{cmp['decisions']}, same trend flags {cmp['trend_flags']}, same "
          f"{cmp['outliers']} outlier flags.")
else:
    print(f"**Results DISAGREE** ({len(cmp['problems'])} problems):")
    print()
    for p in cmp["problems"]:
        print(f"* {p}")
EOF

if [ "$agree" != 1 ]; then
    echo "run.sh: optgate and SciPy DISAGREE (see above and $OUT/compare.json)" >&2
    exit 1
fi
