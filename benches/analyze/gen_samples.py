#!/usr/bin/env python3
# Writes the deterministic (seeded) samples CSV that benches/analyze/run.sh feeds to both
# `optgate analyze` and scipy_analyze.py: a blocked experiment, baseline + N variants,
# per-epoch wall times. Standard library only, so the same seed gives the same file with
# any Python 3 (random.Random's Mersenne Twister and normalvariate are stable).
"""Synthetic per-epoch samples for the analyze benchmark.

Usage: gen_samples.py OUT.csv [--variants 20] [--replicates 30] [--epochs 100] [--seed N]

Columns: variant,replicate,epoch,seconds,block. Block b holds one run of every arm (run
block by block, the baseline first), so a block effect (the node, the time of day) is
shared by the arms of a block and cancels in the paired comparison.

The model, per arm a, block b, epoch e (seconds, "lower is better"):

    t = 10 s * factor_a * exp(g_b + u_ab + e_abe)      epochs 2..E (steady)
    t = 10 s * 1.6 * cold_a * exp(g_b + u_ab + w_abe)  epoch 1 (cold caches: slower)

    g_b ~ N(0, 0.015)   block effect, shared by the arms of the block
    u_ab ~ N(0, 0.005)  run effect (placement, frequency)
    e_abe ~ N(0, 0.02)  per-epoch noise: lognormal, about 2 %
    w_abe ~ N(0, 0.03)  epoch-1 noise

The variants cover what a gate sees: clear gains of 2-10 %, a gain right at the 1 %
min effect, a gain too small to be worth having, no change, regressions, a one-time cost
that is not repaid, a slow (cold) first replicate, a variant whose steady window keeps
slowing down, and one that is faster only in epoch 1.
"""

import argparse
import math
import random
import sys

# (steady factor, epoch-1 factor, special) for v01..v20; cycled for other counts.
VARIANTS = [
    (0.90, 1.0, None),         # 10 % faster
    (0.92, 1.0, None),
    (0.94, 1.0, None),
    (0.95, 1.0, None),
    (0.96, 1.0, None),
    (0.97, 1.0, None),
    (0.98, 1.0, None),         # 2 % faster
    (0.985, 1.0, None),        # 1.5 %: above the 1 % min effect, close to it
    (0.99, 1.0, None),         # right at the min effect: should stay undecided
    (0.995, 1.0, None),        # real but below the min effect: not worthwhile
    (1.00, 1.0, None),         # no change (x4)
    (1.00, 1.0, None),
    (1.00, 1.0, None),
    (1.00, 1.0, None),
    (1.01, 1.0, None),         # 1 % slower
    (1.03, 1.0, None),         # 3 % slower
    (0.95, 6.0, None),         # 5 % faster, but epoch 1 costs 6x: not repaid in 100 epochs
    (0.97, 1.0, "cold_first"), # replicate 1 is cold: slow epoch 1 and steady mean
    (0.96, 1.0, "drift"),      # steady window slows down by 3 % from start to end
    (1.00, 0.8, None),         # epoch 1 20 % faster, steady the same
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--variants", type=int, default=20)
    ap.add_argument("--replicates", type=int, default=30)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=20251129)
    a = ap.parse_args()
    if a.replicates < 1 or a.epochs < 2 or a.variants < 1:
        sys.exit("need at least 1 replicate, 2 epochs and 1 variant")

    rng = random.Random(a.seed)
    arms = [("baseline", (1.0, 1.0, None))]
    for i in range(a.variants):
        arms.append((f"v{i + 1:02d}", VARIANTS[i % len(VARIANTS)]))

    rows = 0
    with open(a.out, "w", newline="") as f:
        f.write("variant,replicate,epoch,seconds,block\n")
        for b in range(1, a.replicates + 1):
            g = rng.normalvariate(0.0, 0.015)
            for name, (factor, cold, special) in arms:
                u = rng.normalvariate(0.0, 0.005)
                cold_run = special == "cold_first" and b == 1
                for e in range(1, a.epochs + 1):
                    if e == 1:
                        t = 10.0 * 1.6 * cold * math.exp(g + u + rng.normalvariate(0.0, 0.03))
                        if cold_run:
                            t *= 1.4
                    else:
                        t = 10.0 * factor * math.exp(g + u + rng.normalvariate(0.0, 0.02))
                        if special == "drift":
                            t *= 1.0 + 0.03 * (e - 2) / max(1, a.epochs - 2)
                        if cold_run:
                            t *= 1.06
                    f.write(f"{name},{b},{e},{t:.6f},{b}\n")
                    rows += 1
    print(f"{a.out}: {len(arms)} arms x {a.replicates} replicates x {a.epochs} epochs "
          f"= {rows} rows (seed {a.seed})", file=sys.stderr)


if __name__ == "__main__":
    main()
