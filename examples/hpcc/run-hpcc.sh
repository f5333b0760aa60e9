#!/bin/sh
# One run of Debian's HPC Challenge benchmark (package `hpcc` 1.5.0) in the run directory:
# the committed input (hpccinf.txt: 1 process, N = 1000) is copied in, hpcc writes every
# figure of merit to hpccoutf.txt, which the experiment's metrics read.
set -eu
cp -- "$OPTGATE_WORKDIR/hpccinf.txt" ./hpccinf.txt
rm -f hpccoutf.txt
# hpcc is linked against Open MPI; run as one process (an MPI singleton), no mpirun needed.
exec hpcc
