#!/usr/bin/env bash
# The daemon at scale: a database holding EXPERIMENTS × BLOCKS × 2 runs (default 100 ×
# 50 × 2 = 10,000 runs, with a job per block, a look and a stored report per experiment),
# a release daemon serving it, and `optgate status` timed end to end (process start,
# connect, handshake, query, render) over REPEAT calls, plus the daemon's resident memory.
#
# Usage: benches/daemon/run.sh          (prints a Markdown section for RESULTS.md)
# Env:   OUT=/tmp/optgate-daemon-bench EXPERIMENTS=100 BLOCKS=50 REPEAT=50, CARGO_TARGET_DIR.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-/tmp/optgate-daemon-bench}
EXPERIMENTS=${EXPERIMENTS:-100}
BLOCKS=${BLOCKS:-50}
REPEAT=${REPEAT:-50}
target=${CARGO_TARGET_DIR:-$root/target}

echo "building release binaries ..." >&2
(cd "$root" && cargo build --release -q -p optgate-cli && cargo build --release -q -p optgate-store --example populate)
bin="$target/release/optgate"
populate="$target/release/examples/populate"

home="$OUT/home"
export OPTGATE_HOME="$home"
"$bin" daemon stop >/dev/null 2>&1 || true
rm -rf "$OUT"
mkdir -p "$home"
runs=$("$populate" "$home/optgate.db" "$EXPERIMENTS" "$BLOCKS")
db_mb=$(du -m "$home/optgate.db" | cut -f1)

"$bin" daemon 2>/dev/null
pid=$(cat "$home/daemon.pid")
trap '"$bin" daemon stop >/dev/null 2>&1 || true' EXIT
rss_idle=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
one=$("$bin" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["experiments"][-1]["id"])')

# Wall milliseconds of REPEAT calls of "$@": median, p95, max.
timeit() {
  local i t0 t1
  local -a ms=()
  "$@" >/dev/null # warm the page cache
  for ((i = 0; i < REPEAT; i++)); do
    t0=$(date +%s%N)
    "$@" >/dev/null
    t1=$(date +%s%N)
    ms+=($(((t1 - t0) / 1000)))
  done
  printf '%s\n' "${ms[@]}" | sort -n | awk -v n="$REPEAT" '
    { v[NR] = $1 }
    END { printf "%.1f | %.1f | %.1f", v[int((n + 1) / 2)] / 1000, v[int(n * 0.95 + 0.5)] / 1000, v[n] / 1000 }'
}

table=$(timeit "$bin" status)
json=$(timeit "$bin" status --json)
single=$(timeit "$bin" status "$one" --json)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
lines=$("$bin" status | wc -l)

cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
cat <<MD
### $(date -u +%Y-%m-%d) — ${cpu:-unknown CPU}, $(nproc) cores, Linux $(uname -r)

Database: $EXPERIMENTS experiments × $BLOCKS blocks × 2 arms = **$runs runs** (plus $((EXPERIMENTS * BLOCKS)) jobs, $EXPERIMENTS looks and reports), $db_mb MB. Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg).

| command (end to end, $REPEAT calls) | median ms | p95 ms | max ms |
| --- | --- | --- | --- |
| \`optgate status\` (table, $((lines - 1)) rows) | $table |
| \`optgate status --json\` | $json |
| \`optgate status ID --json\` (one experiment, $BLOCKS jobs) | $single |

Daemon resident memory: $((rss_idle / 1024)) MB idle after start, $((rss / 1024)) MB after the calls, peak (VmHWM) $((hwm / 1024)) MB.
MD
