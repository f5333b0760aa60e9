#!/usr/bin/env bash
# The daemon at scale: for each size in SIZES (experiments; default 100, 1000 and 10000,
# each of BLOCKS=50 blocks × 2 arms: 10,000, 100,000 and 1,000,000 runs, with a job per
# block, a look and a stored report per experiment), a release daemon serving that
# database, and `optgate status` (the list's first page), `optgate status ID` (one
# experiment with its 50 jobs) and `optgate --version` (the process alone) timed end to
# end (process start, connect, handshake, query, render) over REPEAT calls, plus the
# daemon's resident memory.
#
# Usage: benches/daemon/run.sh          (prints a Markdown section for RESULTS.md)
# Env:   OUT=/tmp/optgate-daemon-bench SIZES="100 1000 10000" BLOCKS=50 REPEAT=50,
#        CARGO_TARGET_DIR.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-/tmp/optgate-daemon-bench}
SIZES=${SIZES:-100 1000 10000}
BLOCKS=${BLOCKS:-50}
REPEAT=${REPEAT:-50}
target=${CARGO_TARGET_DIR:-$root/target}

echo "building release binaries ..." >&2
(cd "$root" && cargo build --release -q -p optgate-cli && cargo build --release -q -p optgate-store --example populate)
bin="$target/release/optgate"
populate="$target/release/examples/populate"

# Wall milliseconds of REPEAT calls of "$@": median / p95.
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
    END { printf "%.1f / %.1f", v[int((n + 1) / 2)] / 1000, v[int(n * 0.95 + 0.5)] / 1000 }'
}

kb() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$2/status"; }

# One size: populate, start the daemon, time the three commands, read its memory; one
# Markdown table row.
measure() {
  local experiments=$1 home="$OUT/home-$1" t0 runs fill db_mb pid idle one
  export OPTGATE_HOME="$home"
  trap '"$bin" daemon stop >/dev/null 2>&1 || true' EXIT
  "$bin" daemon stop >/dev/null 2>&1 || true
  rm -rf "$home"
  mkdir -p "$home"
  t0=$(date +%s%N)
  runs=$("$populate" "$home/optgate.db" "$experiments" "$BLOCKS")
  fill=$((($(date +%s%N) - t0) / 1000000))
  db_mb=$(du -m "$home/optgate.db" | cut -f1)
  "$bin" daemon 2>/dev/null
  pid=$(cat "$home/daemon.pid")
  idle=$(kb VmRSS "$pid")
  one="20260101-000000-0000" # the oldest, deepest in the list
  local list single version
  list=$(timeit "$bin" status)
  single=$(timeit "$bin" status "$one")
  version=$(timeit "$bin" --version)
  printf '| %s | %s | %s MB, %.1f s | %s | %s | %s | %s / %s / %s |\n' \
    "$runs" "$experiments" "$db_mb" "$(echo "$fill / 1000" | bc -l)" \
    "$list" "$single" "$version" \
    "$((idle / 1024))" "$(($(kb VmRSS "$pid") / 1024))" "$(($(kb VmHWM "$pid") / 1024))"
  "$bin" daemon stop >/dev/null 2>&1 || true
  rm -rf "$home"
}

rows=""
for n in $SIZES; do
  rows+=$(measure "$n")$'\n'
done

cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
cat <<MD
### $(date -u +%Y-%m-%d) — ${cpu:-unknown CPU}, $(nproc) cores, Linux $(uname -r)

Each experiment: $BLOCKS blocks × 2 arms, $BLOCKS finished jobs, a look, a ~20 KB report.
Times: median / p95 ms of $REPEAT calls, end to end. Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg).

| runs | experiments | database, filled in | \`optgate status\` (first page) | \`optgate status ID\` ($BLOCKS jobs) | \`optgate --version\` | daemon RSS MB: idle / after / peak |
| --- | --- | --- | --- | --- | --- | --- |
${rows%$'\n'}
MD
