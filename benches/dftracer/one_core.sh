#!/usr/bin/env bash
# The one-core side-by-side: one DFTracer .pfw.gz file (one gzip member),
# each tool pinned to one core, CPU seconds (user + sys, every process it starts), best
# of REPEAT, with the ratio to GNU zcat measured in the same run. Prints Markdown rows.
#
# Usage: benches/dftracer/one_core.sh FILE.pfw.gz [BASELINE_TRACE_SUMMARY]
# Env:   REPEAT=5  CORE=1  CARGO_TARGET_DIR as usual.
#        BASELINE_TRACE_SUMMARY: an older build's trace_summary, timed as "before".
# Tools that are not installed (igzip from isal, libdeflate-gunzip from libdeflate-tools)
# are left out with a note. The Python aggregation runs once (it takes seconds).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
file=${1:?usage: one_core.sh FILE.pfw.gz [BASELINE_TRACE_SUMMARY]}
baseline=${2:-}
REPEAT=${REPEAT:-5}
CORE=${CORE:-1}
target=${CARGO_TARGET_DIR:-$root/target}
(cd "$root" && cargo build --release -q -p optgate-dftracer --examples)
summary="$target/release/examples/trace_summary"
results=$(mktemp)
trap 'rm -f "$results"' EXIT

measure() { # label repeat command
    local label=$1 n=$2 cmd=$3
    for _ in $(seq 1 "$n"); do
        python3 "$here/measure.py" "$label" "taskset -c $CORE $cmd" >> "$results"
    done
}

measure "GNU zcat > /dev/null" "$REPEAT" "zcat $file > /dev/null"
if command -v igzip > /dev/null; then
    measure "igzip -dc > /dev/null (ISA-L)" "$REPEAT" "igzip -dc $file > /dev/null"
else
    echo "note: igzip not installed (Debian: isal)" >&2
fi
if command -v libdeflate-gunzip > /dev/null; then
    measure "libdeflate-gunzip -c > /dev/null" "$REPEAT" "libdeflate-gunzip -c $file > /dev/null"
else
    echo "note: libdeflate-gunzip not installed (Debian: libdeflate-tools)" >&2
fi
if [ -n "$baseline" ]; then
    measure "optgate trace summary, before" "$REPEAT" "$baseline --threads 1 $file > /dev/null"
fi
measure "optgate trace summary" "$REPEAT" "$summary --threads 1 $file > /dev/null"
measure "zcat | python3 json (py_aggregate.py)" 1 "sh -c 'zcat $file | python3 $here/py_aggregate.py > /dev/null'"

text_bytes=$(zcat "$file" | wc -c)
python3 - "$results" "$text_bytes" "$file" <<'EOF'
import json, os, sys
path, text_bytes, file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {}
for line in open(path):
    r = json.loads(line)
    if r["rc"] != 0:
        sys.exit(f"{r['label']} failed (rc {r['rc']})")
    row = rows.setdefault(r["label"], {"cpu": [], "wall": []})
    row["cpu"].append(r["cpu_s"])
    row["wall"].append(r["wall_s"])
zcat = min(rows["GNU zcat > /dev/null"]["cpu"])
load = open("/proc/loadavg").read().split()[:3]
print(f"{os.path.basename(file)}: {text_bytes / 1e6:.1f} MB of text, "
      f"{os.path.getsize(file) / 1e6:.1f} MB gzip'd; load average at the end {' '.join(load)}")
print()
print("| tool, one core | runs | CPU s (best) | CPU s (all) | vs zcat | GB/s per core |")
print("|---|---:|---:|---:|---:|---:|")
for label, r in rows.items():
    best = min(r["cpu"])
    runs = " ".join(f"{c:.2f}" for c in r["cpu"])
    cell = label.replace("|", "\\|")
    print(f"| {cell} | {len(r['cpu'])} | {best:.3f} | {runs} | {best / zcat:.2f} | "
          f"{text_bytes / 1e9 / best:.2f} |")
EOF
