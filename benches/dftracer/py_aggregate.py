#!/usr/bin/env python3
"""The baseline of the DFTracer benchmark: the same aggregation as optgate's reader,
written the obvious way with the standard `json` module, reading trace text on stdin
(`zcat *.pfw.gz | python3 py_aggregate.py`).

Counts complete events (ph "X" or 1 with a dur) per category, name and args.epoch and
sums dur (microseconds, the generated traces' unit); prints the same compact JSON as
`trace_summary --counts` so run.sh can check that both agree.
"""

import json
import sys


def main():
    events = 0
    dur_us = 0
    by_cat = {}
    by_name = {}
    by_epoch = {}
    for raw in sys.stdin.buffer:
        line = raw.strip()
        # The bracketed generations open with "[" and may close with "]".
        if line.startswith(b"["):
            line = line[1:].strip()
        line = line.rstrip(b",]").strip()
        if not line:
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("ph") not in ("X", 1):
            continue
        dur = ev.get("dur")
        if dur is None:
            continue
        dur = float(dur)
        events += 1
        dur_us += dur
        cat = ev.get("cat", "")
        name = ev.get("name", "")
        by_cat[cat] = by_cat.get(cat, 0) + 1
        by_name[name] = by_name.get(name, 0) + 1
        args = ev.get("args")
        if isinstance(args, dict) and "epoch" in args:
            e = str(int(args["epoch"]))
            by_epoch[e] = by_epoch.get(e, 0) + 1
    out = {
        "by_category": by_cat,
        "by_epoch": by_epoch,
        "by_name": by_name,
        "dur_s": round(dur_us * 1e-6, 3),
        "events": events,
    }
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
