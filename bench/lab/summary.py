#!/usr/bin/env python3
"""Summarise lab results: per expectation, every run's figure, the median and
its margin to the threshold (positive: on the passing side).

    python3 bench/lab/summary.py bench/lab/out/*.json

Files named SCENARIO.WHERE.N.json (bench/lab/run.sh) are grouped by WHERE
(host, vm); other names go under "-".
"""
import json
import os
import statistics
import sys
from collections import defaultdict


def margin(op, value, x):
    if op in (">", ">="):
        return x - value
    if op in ("<", "<="):
        return value - x
    lo, hi = value
    return min(x - lo, hi - x)


def main(paths):
    rows = defaultdict(list)  # (where, scenario, variant, metric, op, value) -> [(observed, pass)]
    for p in paths:
        parts = os.path.basename(p).split(".")
        where = parts[1] if len(parts) >= 4 else "-"
        with open(p) as f:
            r = json.load(f)
        for v in r.get("variants", []):
            for e in v.get("expectations", []):
                val = tuple(e["value"]) if isinstance(e["value"], list) else e["value"]
                key = (where, r["scenario"], v["name"], e["metric"], e["op"], val)
                rows[key].append((e.get("observed"), e.get("pass")))
    print("%-5s %-20s %-16s %-28s %-14s %8s %8s %5s  %s" % ("where", "scenario", "variant", "metric", "expect", "median", "margin", "pass", "runs"))
    for key in sorted(rows, key=lambda k: (k[0], k[1], k[2], k[3])):
        where, sc, var, metric, op, val = key
        obs = [o for o, _ in rows[key] if o is not None]
        passed = sum(1 for _, ok in rows[key] if ok)
        want = "%s %s" % (op, "%g..%g" % val if isinstance(val, tuple) else "%g" % val)
        med = statistics.median(obs) if obs else float("nan")
        mar = margin(op, val, med) if obs else float("nan")
        runs = " ".join("%g" % o if o is not None else "not-run" for o, _ in rows[key])
        print("%-5s %-20s %-16s %-28s %-14s %8.4g %8.4g %2d/%-2d  %s" % (where, sc, var, metric.replace("derived.", ""), want, med, mar, passed, len(rows[key]), runs))


if __name__ == "__main__":
    main(sys.argv[1:])
