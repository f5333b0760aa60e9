#!/usr/bin/env python3
"""A tiny "training loop" traced with the real DFTracer Python API, for the Rust test.

Usage: traced_app.py OUT_DIR [EPOCHS STEPS]

Structure (known to the test): EPOCHS epochs (numbered from 1), each wrapped in an
`epoch` marker region (category "app", no epoch argument, so a reader must infer the
epoch from the marker's position), each with STEPS steps of
  dft_fn("data", name="load", epoch=e, step=s)     -- a little work
  dft_fn("compute", name="forward", epoch=e, step=s) -- more work
Every region is timed with time.perf_counter twice: just inside the `with` block (the
work only) and just outside it (work plus DFTracer's enter/exit), so the traced `dur`
must lie between the two. The sums go to OUT_DIR/measured.json.

Run with DFTRACER_ENABLE=1 DFTRACER_INIT=FUNCTION DFTRACER_INC_METADATA=1
DFTRACER_DATA_DIR=all DFTRACER_TRACE_COMPRESSION=1 (the test sets them).
"""

import json
import os
import sys
import time

from dftracer.python.logger import dft_fn, dftracer


def work(n):
    # Deterministic CPU work; its wall time varies with load, which is fine: the
    # test compares the trace with perf_counter taken around the same region.
    acc = 0
    for i in range(n):
        acc += i * i
    return acc


def main():
    out_dir = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    os.makedirs(out_dir, exist_ok=True)
    log = dftracer.initialize_log(logfile=os.path.join(out_dir, "trace"), data_dir=None, process_id=-1)

    measured = {"epochs": epochs, "steps": steps, "per_epoch": {}}
    for e in range(1, epochs + 1):
        rec = {"compute_inner_s": 0.0, "compute_outer_s": 0.0, "data_inner_s": 0.0, "data_outer_s": 0.0}
        e0 = time.perf_counter()
        with dft_fn("app", name="epoch"):
            for s in range(steps):
                for cat, name, n in (("data", "load", 20_000), ("compute", "forward", 150_000)):
                    t0 = time.perf_counter()
                    with dft_fn(cat, name=name, epoch=e, step=s):
                        t1 = time.perf_counter()
                        work(n)
                        t2 = time.perf_counter()
                    t3 = time.perf_counter()
                    rec[cat + "_inner_s"] += t2 - t1
                    rec[cat + "_outer_s"] += t3 - t0
        rec["epoch_outer_s"] = time.perf_counter() - e0
        measured["per_epoch"][str(e)] = rec

    log.finalize()
    with open(os.path.join(out_dir, "measured.json"), "w") as f:
        json.dump(measured, f, indent=1)


if __name__ == "__main__":
    main()
