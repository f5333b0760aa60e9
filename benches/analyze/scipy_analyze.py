#!/usr/bin/env python3
# The alternative a user would reach for instead of `optgate analyze`: the same analysis
# (STATISTICS.md, paired design) written plainly with pandas + NumPy + SciPy. It is the
# "Python" side of benches/analyze/run.sh, both as the timing reference and as the
# independent implementation whose numbers optgate's must match (compare.py).
"""Steady-state speed-up analysis of a samples CSV with pandas/NumPy/SciPy.

Usage: scipy_analyze.py SAMPLES.csv --baseline NAME [--alpha 0.05] [--min-effect-pct 1]

SAMPLES.csv: variant,replicate,epoch,seconds[,block] (lower is better). Pairs runs by
block when there is a block column, else by replicate. Prints JSON: per variant the
Hodges-Lehmann speed-up with its 1 - 2*alpha interval, the one-sided Wilcoxon p-values
(raw and Holm-adjusted), the first-epoch effect, App Impact and the decision; per arm
the Mann-Kendall trend check (scipy.stats.kendalltau against the epoch number) and the
MAD outliers.
"""

import argparse
import json
import sys

import numpy as np
import pandas as pd
import scipy
from scipy import stats

try:
    from statsmodels.stats.multitest import multipletests
except ImportError:  # statsmodels is optional: Holm is a few lines
    multipletests = None


def holm(p):
    p = np.asarray(p, dtype=float)
    if multipletests is not None:
        return multipletests(p, method="holm")[1]
    order = np.argsort(p, kind="stable")
    m = len(p)
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


def signed_rank_cdf(n):
    """P(W+ <= c), c = 0 .. n(n+1)/2, under H0 for n untied non-zero differences."""
    pmf = np.array([1.0])
    for r in range(1, n + 1):
        nxt = np.zeros(len(pmf) + r)
        nxt[: len(pmf)] += pmf  # rank r negative
        nxt[r:] += pmf          # rank r positive
        pmf = nxt / 2.0
    return np.cumsum(pmf)


def hodges_lehmann(d, alpha):
    """Median of the Walsh averages and the distribution-free 1 - 2*alpha interval
    A_(k), A_(M+1-k), k - 1 the largest c with P(W+ <= c) <= alpha."""
    d = np.asarray(d, dtype=float)
    n = len(d)
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2.0)
    est = float(np.median(walsh))
    k = int(np.searchsorted(signed_rank_cdf(n), alpha, side="right"))
    if k == 0:
        return est, None, None
    return est, float(walsh[k - 1]), float(walsh[len(walsh) - k])


def wilcoxon_both(dd):
    """One-sided p-values of H1: median > 0 and H1: median < 0, as STATISTICS.md:
    exact without ties and zeros, else normal approximation with corrections."""
    nz = dd[dd != 0]
    exact = len(nz) == len(dd) and len(np.unique(np.abs(nz))) == len(nz)
    method = "exact" if exact else "asymptotic"
    if len(nz) == 0:
        return 1.0, 1.0, "degenerate"
    g = stats.wilcoxon(dd, alternative="greater", method=method, zero_method="wilcox",
                       correction=True).pvalue
    l = stats.wilcoxon(dd, alternative="less", method=method, zero_method="wilcox",
                       correction=True).pvalue
    return float(g), float(l), method


def trend(series, min_effect_pct):
    """Mann-Kendall (Kendall's tau of the series against time) and Sen's slope."""
    y = np.asarray(series, dtype=float)
    if len(y) < 4:
        return None
    p = float(stats.kendalltau(np.arange(len(y)), y).pvalue)
    slope = float(stats.theilslopes(y).slope)
    drift = 100.0 * abs(slope) * (len(y) - 1) / float(np.median(y))
    return {"p": p, "flagged": p < 0.05, "drift_pct": drift,
            "material": bool(p < 0.05 and drift >= max(min_effect_pct, 0.0))}


def outliers(values):
    """Modified z-scores 0.6745 (x - median) / MAD; |z| > 3.5 is an outlier."""
    x = values.to_numpy(dtype=float)
    mad = stats.median_abs_deviation(x)
    if mad == 0:
        return []
    z = 0.6745 * (x - np.median(x)) / mad
    return [(int(r), float(zi)) for r, zi in zip(values.index, z) if abs(zi) > 3.5]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("samples")
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--min-effect-pct", type=float, default=1.0)
    a = ap.parse_args()
    alpha = a.alpha
    delta = np.log1p(a.min_effect_pct / 100.0)

    df = pd.read_csv(a.samples)
    key = "block" if "block" in df.columns else "replicate"
    arms = list(dict.fromkeys(df["variant"]))  # order of first appearance
    if a.baseline not in arms:
        sys.exit(f"baseline {a.baseline!r} not in {a.samples}")
    variants = [v for v in arms if v != a.baseline]
    E = int(df["epoch"].max())

    steady_rows = df[df["epoch"] >= 2]
    # Per run (arm x block): steady value = mean over epochs 2..E; epoch-1 value.
    S = steady_rows.groupby(["variant", key])["seconds"].mean().unstack("variant")
    F = df[df["epoch"] == 1].pivot(index=key, columns="variant", values="seconds")
    replicate_of = df.drop_duplicates(["variant", key]).set_index(["variant", key])["replicate"]

    # Stability: Mann-Kendall on each arm's per-epoch medians, MAD outliers per arm.
    med = steady_rows.groupby(["variant", "epoch"])["seconds"].median().unstack("epoch")
    trends = {arm: trend(med.loc[arm].to_numpy(), a.min_effect_pct) for arm in arms}
    flagged = []
    for arm in arms:
        for label, col in (("steady mean", S[arm]), ("epoch 1", F[arm])):
            for k, z in outliers(col.dropna()):
                flagged.append({"arm": arm, "replicate": int(replicate_of[(arm, k)]),
                                "what": label, "z": z})

    rows = []
    b = a.baseline
    for v in variants:
        pair = S[[b, v]].dropna()
        n = len(pair)
        d = np.log(pair[b].to_numpy()) - np.log(pair[v].to_numpy())
        p_imp, p_nw, method = wilcoxon_both(d - delta)
        hl, lo, hi = hodges_lehmann(d, alpha)

        f = F.loc[pair.index, [b, v]]
        hl1, lo1, hi1 = hodges_lehmann(np.log(f[b].to_numpy()) - np.log(f[v].to_numpy()), alpha)
        change = lambda x: None if x is None else 100.0 * (np.exp(-x) - 1.0)

        T = f + (E - 1) * pair  # projected production time per run
        app = 100.0 * (1.0 - np.median(T[v]) / np.median(T[b]))
        rows.append({
            "name": v, "n": n, "p_method": method,
            "speedup": {"estimate": float(np.exp(hl)),
                        "ci_low": None if lo is None else float(np.exp(lo)),
                        "ci_high": None if hi is None else float(np.exp(hi))},
            "p_improvement": p_imp, "p_no_worthwhile": p_nw,
            "min_achievable_p": 0.5 ** n,
            "first_epoch": {"baseline_s": float(np.median(f[b])),
                            "variant_s": float(np.median(f[v])),
                            "change_pct": float(change(hl1)),
                            "change_ci_low_pct": change(hi1),
                            "change_ci_high_pct": change(lo1)},
            "app_impact_pct": float(app),
        })

    m = len(rows)
    for r, ai, an in zip(rows, holm([r["p_improvement"] for r in rows]),
                         holm([r["p_no_worthwhile"] for r in rows])):
        r["p_improvement_adjusted"] = float(ai)
        r["p_no_worthwhile_adjusted"] = float(an)
        r["min_achievable_p_adjusted"] = min(1.0, m * r["min_achievable_p"])
        blocked = any(t and t["material"] for t in (trends[b], trends[r["name"]]))
        if r["n"] < 5 or blocked or r["min_achievable_p_adjusted"] >= alpha:
            r["decision"] = "inconclusive"
        elif ai < alpha:
            r["decision"] = "accept" if r["app_impact_pct"] > 0 else "reject"
        elif an < alpha:
            r["decision"] = "reject"
        else:
            r["decision"] = "inconclusive"

    json.dump({
        "tool": f"python {sys.version.split()[0]}, numpy {np.__version__}, "
                f"scipy {scipy.__version__}, pandas {pd.__version__}",
        "holm": "statsmodels" if multipletests is not None else "numpy",
        "baseline": b, "alpha": alpha, "min_effect_pct": a.min_effect_pct,
        "epochs_measured": E, "variants": rows, "trend": trends, "outliers": flagged,
    }, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
