#!/bin/sh
# One run of Debian's HPC Challenge benchmark (package `hpcc` 1.5.0) in the run directory:
# the committed input (hpccinf.txt: 1 process, N = 1000) is copied in, hpcc writes every
# figure of merit to hpccoutf.txt, which the experiment's metrics read.
# HPCC_RESIDUAL_THRESHOLD, when set (a plain number), replaces HPL's residual threshold
# (16.0): a tiny one makes HPL's check print FAILED, as tests/cluster_apps/hpcc.rs needs.
set -eu
cp -- "$OPTGATE_WORKDIR/hpccinf.txt" ./hpccinf.txt
rm -f hpccoutf.txt
if [ -n "${HPCC_RESIDUAL_THRESHOLD:-}" ]; then
  case "$HPCC_RESIDUAL_THRESHOLD" in
    *[!0-9.eE+-]*) echo "HPCC_RESIDUAL_THRESHOLD must be a number" >&2; exit 2 ;;
  esac
  sed -i "13s/^[^ ]*/$HPCC_RESIDUAL_THRESHOLD/" hpccinf.txt
fi
# hpcc is linked against Open MPI; run as one process (an MPI singleton), no mpirun needed.
exec hpcc
