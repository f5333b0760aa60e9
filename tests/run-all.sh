#!/usr/bin/env bash
# Runs every test of optgate on this machine, setting up what the tests need first
# (idempotent): a C compiler with OpenMP, a one-node and a two-node Slurm, and a Python virtual
# environment with the `dftracer` package. Then lint (fmt, clippy) and the test suite.
# The README's test command; CI (.ci/run) calls it on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# CI builds once from nothing: incremental caches only cost disk there.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
disk() { echo "==> disk: $(df -h --output=avail,size . | tail -1 | awk '{print $1 " free of " $2}') ($1)"; }
disk start

need_apt=()
command -v cc >/dev/null || need_apt+=(gcc)
command -v flock >/dev/null || need_apt+=(util-linux)
command -v python3 >/dev/null || need_apt+=(python3 python3-venv)
# Debian's MPICH: the hybrid MPI+OpenMP example (examples/hybrid-stencil) and its tests.
command -v mpicc >/dev/null || need_apt+=(mpich libmpich-dev)
# The HTML report in a real headless browser, the JUnit output against its schema
# (tests/cluster_apps/shared_reports.rs).
command -v chromium >/dev/null || need_apt+=(chromium)
command -v xmllint >/dev/null || need_apt+=(libxml2-utils)
# Debian's HPC Challenge suite and both BLAS libraries: experiments/hpcc-blas.yaml and its test.
command -v hpcc >/dev/null || need_apt+=(hpcc)
[ -e /usr/lib/x86_64-linux-gnu/blas/libblas.so.3 ] || need_apt+=(libblas3)
# Debian's LAMMPS: experiments/lammps-melt.yaml and tests/cluster_apps/lammps.rs (which fails,
# rather than skips, without it here: OPTGATE_REQUIRE_LAMMPS below).
command -v lmp >/dev/null || need_apt+=(lammps)
# Building ISA-L from source (isal-sys, optgate-dftracer's `igzip` feature: gzip inflate for
# `optgate trace`): the assembler and autotools its build runs.
command -v nasm >/dev/null || need_apt+=(nasm)
command -v make >/dev/null || need_apt+=(make)
command -v autoreconf >/dev/null || need_apt+=(autoconf)
command -v automake >/dev/null || need_apt+=(automake)
command -v libtoolize >/dev/null || need_apt+=(libtool)
[ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ] || need_apt+=(libopenblas0-pthread)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> installing ${need_apt[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
# hpcc and lammps pull in Open MPI, which takes over `mpicc`/`mpirun`; the MPI examples use
# MPICH.
if [ -e /usr/bin/mpicc.mpich ]; then
  update-alternatives --quiet --set mpi /usr/bin/mpicc.mpich
  update-alternatives --quiet --set mpirun /usr/bin/mpirun.mpich
fi

export OPTGATE_REQUIRE_LAMMPS=1

if [ -x schedulers/slurm/setup.sh ]; then
  echo "==> one-node Slurm"
  schedulers/slurm/setup.sh --nodes 1
  echo "==> two-node Slurm beside it (own conf, ports, state; its nodes share this machine's cores)"
  OPTGATE_SLURM_CONF=/etc/optgate-slurm2/slurm.conf OPTGATE_SLURM_DIR=/var/lib/optgate-slurm2 \
    OPTGATE_SLURM_CLUSTER=two OPTGATE_SLURMCTLD_PORT=6917 OPTGATE_SLURMD_PORT=6918 \
    OPTGATE_SLURM_NODE_PREFIX=node OPTGATE_SLURM_NET=10.212 schedulers/slurm/setup.sh --nodes 2
  export OPTGATE_SLURM2_CONF=/etc/optgate-slurm2/slurm.conf # tests/cluster_slurm/multinode.rs
fi

if [ -x schedulers/flux/setup-one-node.sh ]; then
  echo "==> one-node Flux"
  # Prints `export FLUX_URI=…` (and PATH when needed) for the instance; cargo test sees it.
  flux_env=$(schedulers/flux/setup-one-node.sh)
  eval "$flux_env"
  echo "==> 4-broker Flux (4 fake nodes on this machine)"
  # Prints `export OPTGATE_FLUX_URI_4=…`; FLUX_URI stays the one-broker instance's.
  eval "$(schedulers/flux/setup-one-node.sh --brokers 4)"
fi

if [ -f tests/python-requirements.txt ]; then
  echo "==> Python venv (.venv) for the DFTracer tests"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q -r tests/python-requirements.txt
  export OPTGATE_PYTHON="$root/.venv/bin/python"
fi

disk "before the build"
echo "==> no test or code path signals a process it did not start"
tests/no-stray-signals.sh
echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy"
cargo clippy --workspace --all-targets --all-features -- -D warnings
echo "==> cargo test (both tiers: the fast one and, with the cluster feature, the cluster one)"
cargo test --workspace --all-targets --all-features
disk end
