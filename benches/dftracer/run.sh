#!/usr/bin/env bash
# Benchmarks optgate's DFTracer reader against `zcat | python3 json` and DFTracer's own
# dftracer_event_count, on a deterministic synthetic trace of >= 1 GB of JSON text
# (gzip'd, one file per rank, generated once under $OUT, never committed).
#
# Usage: benches/dftracer/run.sh            (from anywhere; prints a Markdown report)
# Env:   OUT=/tmp/optgate-dft-bench  RANKS=32  MB_PER_RANK=34  REPEAT=3 (best of, fast tools)
#        VENV=<repo>/.venv (for dftracer_event_count; skipped with a note if absent)
#        CARGO_TARGET_DIR as usual.
# "MB/s per core" = uncompressed MB / CPU seconds (user+sys of every process the tool
# started), so tools using different numbers of threads compare fairly; the machine
# may be shared, and CPU time is much less sensitive to that than wall time.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-/tmp/optgate-dft-bench}
RANKS=${RANKS:-32}
MB_PER_RANK=${MB_PER_RANK:-34}
REPEAT=${REPEAT:-3}
VENV=${VENV:-$root/.venv}
target=${CARGO_TARGET_DIR:-$root/target}
cores=$(nproc)

echo "building release examples ..." >&2
(cd "$root" && cargo build --release -q -p optgate-dftracer --examples)
gen="$target/release/examples/gen_trace"
summary="$target/release/examples/trace_summary"

traces="$OUT/traces-r${RANKS}-m${MB_PER_RANK}"
if [ ! -s "$traces/.text-bytes" ]; then
    echo "generating $RANKS ranks x $MB_PER_RANK MB into $traces ..." >&2
    rm -rf "$traces"
    mkdir -p "$traces"
    "$gen" "$traces" --ranks "$RANKS" --mb-per-rank "$MB_PER_RANK" > "$traces/.text-bytes.tmp"
    mv "$traces/.text-bytes.tmp" "$traces/.text-bytes"
fi
text_bytes=$(cat "$traces/.text-bytes")
gz_bytes=$(cat "$traces"/*.pfw.gz | wc -c)
results="$OUT/measurements.jsonl"
: > "$results"

measure() { # label repeat command [stdout-file]
    local label=$1 n=$2 cmd=$3 out=${4:-}
    for _ in $(seq 1 "$n"); do
        python3 "$here/measure.py" "$label" "$cmd" $out >> "$results"
    done
}

echo "timing optgate ..." >&2
measure "optgate (scan parser), 1 thread" "$REPEAT" "$summary --threads 1 $traces" "$OUT/optgate.json"
measure "optgate (scan parser), $cores threads" "$REPEAT" "$summary --threads $cores $traces"
echo "timing zcat alone and zcat | python3 json (slow) ..." >&2
measure "zcat > /dev/null (decompression only)" "$REPEAT" "zcat $traces/*.pfw.gz > /dev/null"
measure "zcat | python3 json" 1 "zcat $traces/*.pfw.gz | python3 $here/py_aggregate.py" "$OUT/python.json"

event_count="$VENV/bin/dftracer_event_count"
if [ -x "$event_count" ]; then
    echo "timing dftracer_event_count (cold index, then warm) ..." >&2
    idx="$OUT/dftracer-index"
    measure "dftracer_event_count, cold (builds its index)" 1 \
        "rm -rf $idx && mkdir -p $idx && $event_count -d $traces --index-dir $idx" "$OUT/event_count.txt"
    measure "dftracer_event_count, warm (count read from its index)" "$REPEAT" "$event_count -d $traces --index-dir $idx"
else
    echo "note: $event_count not found; create it with: python3 -m venv $VENV && $VENV/bin/pip install dftracer==2.2.0" >&2
fi

python3 - "$results" "$text_bytes" "$gz_bytes" "$RANKS" "$OUT" <<'EOF'
import json, os, platform, subprocess, sys, datetime
path, text_bytes, gz_bytes, ranks, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
rows = {}
for line in open(path):
    r = json.loads(line)
    if r["rc"] != 0:
        sys.exit(f"{r['label']} failed (rc {r['rc']})")
    best = rows.setdefault(r["label"], {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "runs": 0})
    best["wall_s"] = min(best["wall_s"], r["wall_s"])
    best["cpu_s"] = min(best["cpu_s"], r["cpu_s"])
    best["runs"] += 1

ours = json.load(open(os.path.join(out, "optgate.json")))
py = json.load(open(os.path.join(out, "python.json")))
agree = ours == py
ec_path = os.path.join(out, "event_count.txt")
ec = open(ec_path).read().split()[-1] if os.path.exists(ec_path) else None

mb = text_bytes / 1e6
py_rate = mb / rows["zcat | python3 json"]["cpu_s"]
ec_cold = rows.get("dftracer_event_count, cold (builds its index)")
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
load = open("/proc/loadavg").read().split()[:3]
print(f"### {datetime.date.today().isoformat()} — {model}, {os.cpu_count()} cores, Linux {platform.release()}")
print()
print(f"Input: {ranks} ranks, {mb:.0f} MB of JSON text ({ours['events']:,} events), "
      f"{gz_bytes / 1e6:.0f} MB gzip'd. Load average at the end: {' '.join(load)}.")
print()
print("| tool | runs | wall s | CPU s | MB/s (wall) | MB/s per core | per core vs python |")
print("|---|---:|---:|---:|---:|---:|---:|")
for label, r in rows.items():
    per_core = mb / r["cpu_s"]
    cell = label.replace("|", "\\|")
    print(f"| {cell} | {r['runs']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {mb / r['wall_s']:.0f} | "
          f"{per_core:.0f} | {per_core / py_rate:.1f}x |")
print()
print(f"optgate and python agree on every count: {'yes' if agree else 'NO'}; "
      f"dftracer_event_count says {ec} events (optgate: {ours['events']}).")
if ec_cold:
    r = rows["optgate (scan parser), 1 thread"]
    print(f"optgate per core vs dftracer_event_count (cold): {(mb / r['cpu_s']) / (mb / ec_cold['cpu_s']):.1f}x")
if not agree:
    sys.exit("optgate and python disagree")
EOF
