#!/usr/bin/env bash
# The fast tier, shown to need no cluster tool: every tool the cluster tier uses (Slurm,
# Flux, MPI, Chromium, xmllint, hpcc, LAMMPS) is replaced on PATH by a shim that records
# its call and fails, then plain `cargo test --workspace` runs. It must pass, and no shim
# may have been called. Extra arguments go to cargo test. Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
shims=$(mktemp -d)
trap 'rm -rf "$shims"' EXIT
calls=$shims/calls
: > "$calls"
for tool in sbatch squeue sacct scancel scontrol sinfo srun salloc flux \
  mpirun mpiexec mpicc mpicc.mpich chromium chromium-browser xmllint hpcc lmp lmp_serial; do
  printf '#!/bin/sh\necho "%s $*" >> %q\necho "fast tier: %s is a failing shim here" >&2\nexit 127\n' \
    "$tool" "$calls" "$tool" > "$shims/$tool"
  chmod +x "$shims/$tool"
done
# Nothing of a set-up cluster may leak in from the caller's environment.
unset FLUX_URI OPTGATE_FLUX_URI_4 OPTGATE_SLURM2_CONF OPTGATE_REQUIRE_LAMMPS OPTGATE_PYTHON \
  SLURM_CONF 2>/dev/null || true
start=$(date +%s)
PATH="$shims:$PATH" cargo test --workspace "$@"
echo "==> fast tier: $(( $(date +%s) - start )) s (build included)"
if [ -s "$calls" ]; then
  echo "==> fast tier: cluster tools were called:" >&2
  sort "$calls" | uniq -c | sort -rn | head -20 >&2
  exit 1
fi
echo "==> fast tier: no cluster tool called"
