#!/usr/bin/env bash
# Sets up a one-node Slurm cluster on this machine: `setup.sh --nodes 1` (kept for old
# instructions and scripts). See setup.sh for what it does and the environment it reads.
exec "$(dirname "$0")/setup.sh" --nodes 1 "$@"
