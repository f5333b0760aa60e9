#!/usr/bin/env bash
# Fails when the repository could signal a process it did not start. The rule (see
# tests/support/mod.rs and crates/optgate-wrapper/src/signal.rs): process groups are signalled
# only with killpg on a group optgate or the test created, through `signal_group`; tests
# signal only their own children or a `support::CheckedProcess`; nothing
# runs the `kill` command with a negative number (procps reads `kill -KILL -1234` as options
# and can turn it into kill(-1): every process root may signal).
# Usage: tests/no-stray-signals.sh [DIR]   (default: the repository root). Exit 1 on a finding.
set -uo pipefail
cd "${1:-$(dirname "$0")/..}" || exit 2

findings=()

# Rust: the `kill` command, a hand-made negative pid, or killpg outside the guarded function.
while IFS= read -r hit; do
  [ -n "$hit" ] && findings+=("$hit  (the kill command from Rust)")
done < <(git grep -nF 'Command::new("kill")' -- '*.rs')
while IFS= read -r hit; do
  [ -n "$hit" ] && findings+=("$hit  (a negative pid)")
done < <(git grep -nE 'Pid::from_raw\(\s*-|libc::kill\(\s*-' -- '*.rs')
while IFS= read -r hit; do
  [ -n "$hit" ] && findings+=("$hit  (killpg outside optgate_wrapper::signal::signal_group)")
done < <(git grep -nE '(^|[^_[:alnum:]])killpg\(' -- '*.rs' ':!crates/optgate-wrapper/src/signal.rs')

# Tests: a signal goes to a child the test spawned (`Child::kill`, `Pid::from_raw(child.id()
# as i32)`) or through tests/support's `CheckedProcess` (start time checked first); a pid
# made from anything else (a number read from a pid file) bypasses that check.
test_files=('tests/*.rs' 'crates/*/tests/*.rs' 'crates/*/tests/**/*.rs' ':!tests/support/*')
while IFS= read -r hit; do
  [ -n "$hit" ] || continue
  line=${hit#*:*:}
  rest=$(printf '%s\n' "$line" | sed -E 's/Pid::from_raw\(\s*[[:alnum:]_.]*child\.id\(\) as i32\s*\)//g')
  if printf '%s\n' "$rest" | grep -qE 'Pid::from_raw\(|libc::kill\('; then
    findings+=("$hit  (a test signals a pid it neither spawned nor checked: use support::CheckedProcess)")
  fi
done < <(git grep -nE 'Pid::from_raw\(|libc::kill\(' -- "${test_files[@]}")

# Shell (scripts and snippets in any tracked text file but Rust and Markdown): `kill` with
# an argument that is a negative number, -$VAR or "-$VAR", or `--` (which only precedes one).
negative_arg() {
  local rest first=1 tok
  rest=$(printf '%s\n' "$1" | sed -E 's/^(.*[^[:alnum:]_.-])?kill[[:space:]]+//; s/[;&|)#].*//')
  for tok in $rest; do
    tok=${tok#\"}
    tok=${tok#\'}
    if [ $first = 1 ]; then
      first=0
      # -9, -KILL, -s, -0 name a signal; a long number or a variable is a pid.
      [[ $tok =~ ^-[0-9]{3,} || $tok =~ ^-\"?\$ ]] && return 0
      continue
    fi
    [[ $tok =~ ^-\"?[0-9$] || $tok == "--" ]] && return 0
  done
  return 1
}
while IFS= read -r hit; do
  [ -n "$hit" ] || continue
  negative_arg "${hit#*:*:}" && findings+=("$hit  (kill with a negative pid)")
done < <(git grep -nIE '(^|[^[:alnum:]_.-])kill[[:space:]]+-' -- ':!*.rs' ':!*.md' ':!tests/no-stray-signals.sh')

if [ ${#findings[@]} -gt 0 ]; then
  printf 'no-stray-signals: %s\n' "${findings[@]}"
  echo "no-stray-signals: FAILED: signal only process groups you started, through signal_group"
  exit 1
fi
echo "no-stray-signals: ok"
