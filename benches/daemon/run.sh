#!/usr/bin/env bash
# The daemon at scale: for each size in SIZES (experiments; default 100, 1000 and 10000,
# each of BLOCKS=50 blocks × 2 arms: 10,000, 100,000 and 1,000,000 runs, with a job per
# block, a look and a stored report per experiment), a release daemon serving that
# database, and `optgate status` (the list's first page), `optgate status ID` (one
# experiment with its 50 jobs) and `optgate --version` (the process alone) timed end to
# end (process start, connect, handshake, query, render) over REPEAT calls, plus the
# daemon's resident memory and its CPU time per call.
#
# Usage: benches/daemon/run.sh          (prints a Markdown section for RESULTS.md)
# Env:   OUT=/tmp/optgate-daemon-bench SIZES="100 1000 10000" BLOCKS=50 REPEAT=50,
#        CPU_CALLS=300 (calls over which the daemon's CPU time is read), CARGO_TARGET_DIR.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-/tmp/optgate-daemon-bench}
SIZES=${SIZES:-100 1000 10000}
BLOCKS=${BLOCKS:-50}
REPEAT=${REPEAT:-50}
CPU_CALLS=${CPU_CALLS:-300}
target=${CARGO_TARGET_DIR:-$root/target}

echo "building release binaries ..." >&2
(cd "$root" && cargo build --release -q -p optgate-cli && cargo build --release -q -p optgate-store --example populate)
bin="$target/release/optgate"
populate="$target/release/examples/populate"

# Median / p95 / min wall milliseconds of a list of microsecond times on stdin (on a
# loaded machine the min is the closest to the cost without waiting for a CPU).
stats() {
  sort -n | awk '{ v[NR] = $1 } END { printf "%.1f / %.1f / %.1f", v[int((NR + 1) / 2)] / 1000, v[int(NR * 0.95 + 0.5)] / 1000, v[1] / 1000 }'
}

# REPEAT rounds of the three commands, interleaved (a round runs each once), so a change
# in the machine's load weighs on all three alike: "list | one | version" cells.
timeall() {
  local one=$1 i c t0 dt
  local -a list=() single=() version=()
  "$bin" status >/dev/null && "$bin" status "$one" >/dev/null # warm the page cache
  for ((i = 0; i < REPEAT; i++)); do
    for c in list single version; do
      t0=$(date +%s%N)
      case $c in
      list) "$bin" status >/dev/null ;;
      single) "$bin" status "$one" >/dev/null ;;
      version) "$bin" --version >/dev/null ;;
      esac
      dt=$((($(date +%s%N) - t0) / 1000))
      case $c in
      list) list+=("$dt") ;;
      single) single+=("$dt") ;;
      version) version+=("$dt") ;;
      esac
    done
  done
  printf '%s | %s | %s' "$(printf '%s\n' "${list[@]}" | stats)" \
    "$(printf '%s\n' "${single[@]}" | stats)" "$(printf '%s\n' "${version[@]}" | stats)"
}

# The daemon's CPU time (user + system, every thread) per call of "$@", in µs, over
# CPU_CALLS calls: the run-queue wait of a loaded machine is not in it.
cpu_per_call() {
  local pid=$1 before after i hz
  shift
  hz=$(getconf CLK_TCK)
  before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  for ((i = 0; i < CPU_CALLS; i++)); do "$@" >/dev/null; done
  after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  echo $(((after - before) * 1000000 / hz / CPU_CALLS))
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
  local times cpu_list cpu_one
  times=$(timeall "$one")
  cpu_list=$(cpu_per_call "$pid" "$bin" status)
  cpu_one=$(cpu_per_call "$pid" "$bin" status "$one")
  printf '| %s | %s | %s MB, %.1f s | %s | %s / %s | %s / %s / %s |\n' \
    "$runs" "$experiments" "$db_mb" "$(echo "$fill / 1000" | bc -l)" "$times" \
    "$cpu_list" "$cpu_one" \
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
Times: median / p95 / min ms of $REPEAT calls each, end to end, the three commands interleaved. Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg).

| runs | experiments | database, filled in | \`optgate status\` (first page) | \`optgate status ID\` ($BLOCKS jobs) | \`optgate --version\` | daemon CPU µs per call: status / status ID | daemon RSS MB: idle / after / peak |
| --- | --- | --- | --- | --- | --- | --- | --- |
${rows%$'\n'}
MD
