#!/usr/bin/env python3
"""Runs one shell command and reports its wall time and the CPU time (user + system)
of everything it started, as one JSON line: what run.sh needs for MB/s per core.

Usage: measure.py LABEL 'shell command' [STDOUT_FILE]
"""

import json
import resource
import subprocess
import sys
import time


def main():
    label, cmd = sys.argv[1], sys.argv[2]
    out_path = sys.argv[3] if len(sys.argv) > 3 else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out_path:
        with open(out_path, "wb") as f:
            f.write(proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr.decode(errors="replace"))
    print(json.dumps({"label": label, "wall_s": wall, "cpu_s": cpu, "rc": proc.returncode}))


if __name__ == "__main__":
    main()
