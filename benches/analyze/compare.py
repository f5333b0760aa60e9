#!/usr/bin/env python3
# Checks that `optgate analyze --format json` and scipy_analyze.py computed the same
# analysis: every variant's p-values (raw and Holm-adjusted, to 1e-6), speed-up estimate
# and interval (1e-9 relative), first-epoch effect, App Impact and decision, plus the
# trend and outlier flags per arm. Prints every disagreement loudly, writes a summary
# JSON for run.sh, and exits 1 when anything disagrees. Standard library only.
"""Usage: compare.py OPTGATE.json SCIPY.json [SUMMARY.json]"""

import json
import math
import re
import sys

P_ABS = 1e-6     # p-values: absolute
EST_REL = 1e-9   # estimates: relative (with a tiny absolute floor for values near 0)
EST_FLOOR = 1e-12

OUTLIER_RE = re.compile(r"^(?P<arm>.+?): replicate (?P<rep>\d+) (?P<what>steady mean|epoch 1) ")
TREND_RE = re.compile(r"^(?P<arm>.+?): the steady window \S+ is not steady yet: .*?"
                      r"Mann–Kendall p = (?P<p>[^,]+),")


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    ours = json.load(open(sys.argv[1]))
    ref = json.load(open(sys.argv[2]))
    problems = []
    max_p = 0.0
    max_rel = 0.0
    checked = 0

    def num(label, a, b, kind):
        nonlocal max_p, max_rel, checked
        checked += 1
        if a is None or b is None:
            if a is not b:
                problems.append(f"{label}: optgate {a} vs scipy {b}")
            return
        diff = abs(a - b)
        if kind == "p":
            max_p = max(max_p, diff)
            ok = diff <= P_ABS
        else:
            rel = diff / max(abs(a), abs(b)) if max(abs(a), abs(b)) > 0 else 0.0
            max_rel = max(max_rel, rel)
            ok = diff <= EST_FLOOR or rel <= EST_REL
        if not ok:
            problems.append(f"{label}: optgate {a!r} vs scipy {b!r} (|diff| {diff:.3g})")

    by_name = {v["name"]: v for v in ours["variants"]}
    decisions = []
    for r in ref["variants"]:
        name = r["name"]
        o = by_name.pop(name, None)
        if o is None:
            problems.append(f"{name}: missing from optgate's output")
            continue
        for k in ("p_improvement", "p_no_worthwhile", "p_improvement_adjusted",
                  "p_no_worthwhile_adjusted", "min_achievable_p", "min_achievable_p_adjusted"):
            num(f"{name} {k}", o[k], r[k], "p")
        for k in ("estimate", "ci_low", "ci_high"):
            num(f"{name} speedup.{k}", o["speedup"][k], r["speedup"][k], "est")
        for k in ("baseline_s", "variant_s", "change_pct", "change_ci_low_pct",
                  "change_ci_high_pct"):
            num(f"{name} first_epoch.{k}", o["first_epoch"][k], r["first_epoch"][k], "est")
        num(f"{name} app_impact_pct", o["app_impact_pct"], r["app_impact_pct"], "est")
        if o["decision"] != r["decision"]:
            problems.append(f"{name} decision: optgate {o['decision']} ({o['reason']}) vs "
                            f"scipy {r['decision']}")
        decisions.append(o["decision"])
        is_exact = (o.get("p_method") or "").startswith("exact")
        if is_exact != (r["p_method"] == "exact"):
            problems.append(f"{name} p_method: optgate {o.get('p_method')!r} vs scipy "
                            f"{r['p_method']!r}")
    for name in by_name:
        problems.append(f"{name}: in optgate's output only")

    # Stability checks: which arms trend, which replicates are outliers.
    warnings = list(ours.get("warnings", []))
    for v in ours["variants"]:
        warnings += v.get("warnings", [])
    our_trend = {}
    our_out = set()
    for w in warnings:
        m = TREND_RE.match(w)
        if m:
            our_trend[m["arm"]] = m["p"]
            continue
        m = OUTLIER_RE.match(w)
        if m:
            our_out.add((m["arm"], int(m["rep"]), m["what"]))
    ref_trend = {arm: t for arm, t in ref["trend"].items() if t and t["flagged"]}
    for arm in sorted(set(our_trend) | set(ref_trend)):
        if (arm in our_trend) != (arm in ref_trend):
            problems.append(
                f"trend flag of {arm}: optgate {'p = ' + our_trend[arm] if arm in our_trend else 'none'}"
                f" vs scipy kendalltau p = {ref['trend'][arm]['p']:.4g}")
    ref_out = {(o["arm"], o["replicate"], o["what"]) for o in ref["outliers"]}
    for o in sorted(our_out ^ ref_out):
        side = "optgate only" if o in our_out else "scipy only"
        problems.append(f"outlier {o[0]} replicate {o[1]} {o[2]}: {side}")

    summary = {
        "agree": not problems,
        "variants": len(ref["variants"]),
        "numbers_checked": checked,
        "max_abs_p_diff": max_p,
        "max_rel_estimate_diff": max_rel,
        "trend_flags": sorted(our_trend),
        "outliers": len(our_out),
        "decisions": {d: decisions.count(d) for d in sorted(set(decisions))},
        "problems": problems,
    }
    if len(sys.argv) == 4:
        with open(sys.argv[3], "w") as f:
            json.dump(summary, f, indent=1)
    if problems:
        bar = "!" * 78
        print(f"{bar}\nDISAGREEMENT between optgate and SciPy ({len(problems)}):", file=sys.stderr)
        for p in problems:
            print(f"  * {p}", file=sys.stderr)
        print(bar, file=sys.stderr)
        sys.exit(1)
    print(f"optgate and SciPy agree: {len(ref['variants'])} variants, {checked} numbers "
          f"(max |p diff| {max_p:.2g}, max relative estimate diff {max_rel:.2g}), "
          f"{len(our_trend)} trend flag(s), {len(our_out)} outlier(s), decisions "
          f"{summary['decisions']}", file=sys.stderr)


if __name__ == "__main__":
    main()
