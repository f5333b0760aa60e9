#!/usr/bin/env python3
# Timing harness of benches/analyze/run.sh: runs each command N times, interleaved
# (round i runs every command once, in an order that alternates, so drifting load on a
# shared machine hits both sides alike), and records per run the wall time from spawn to
# exit and the CPU time (user + system, from wait4's rusage of the child and its own
# children). Process start-up is included: that is what a user pays. Standard library only.
"""Usage: measure.py --runs N --warmup W OUT.json LABEL CMD [LABEL CMD ...]

CMD is split with shlex and executed directly (no shell, stdout to /dev/null; stderr is
kept). OUT.json: {label: {"cmd", "wall_s": [...], "cpu_s": [...], "maxrss_kb": [...]}}.
Exits non-zero if any run fails.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time


def run_once(argv):
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return proc.returncode, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("out")
    ap.add_argument("pairs", nargs="+")
    a = ap.parse_args()
    if len(a.pairs) % 2:
        sys.exit("expected LABEL CMD pairs")
    cmds = [(a.pairs[i], a.pairs[i + 1]) for i in range(0, len(a.pairs), 2)]
    res = {label: {"cmd": cmd, "wall_s": [], "cpu_s": [], "maxrss_kb": []}
           for label, cmd in cmds}
    for i in range(a.warmup + a.runs):
        order = cmds if i % 2 == 0 else cmds[::-1]
        for label, cmd in order:
            rc, wall, cpu, rss = run_once(shlex.split(cmd))
            if rc != 0:
                sys.exit(f"{label} failed with exit code {rc}: {cmd}")
            if i >= a.warmup:
                r = res[label]
                r["wall_s"].append(wall)
                r["cpu_s"].append(cpu)
                r["maxrss_kb"].append(rss)
        print(f"  round {i + 1}/{a.warmup + a.runs}{' (warm-up)' if i < a.warmup else ''}",
              file=sys.stderr)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
