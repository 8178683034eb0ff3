#!/usr/bin/env python3
"""Side-by-side table of capped-uplink-varying results: one column per
variant, the median over the runs given (and every run's figure when there
are several), the issue's target beside each row.

    python3 bench/autorate/table.py bench/autorate/out/*.json
"""
import json
import statistics
import sys
from collections import defaultdict

ROWS = [
    ("added_p99_ms", "added RTT p99, ms", "<= 30"),
    ("added_p99_step1_ms", "  in the 1 Mbit/s step, ms", ""),
    ("goodput_share_min", "goodput over the cap, worst step", ">= 0.85"),
    ("convergence_down_s", "within 10 % after a step down, s", "<= 5"),
    ("convergence_up_s", "within 10 % after the step up, s", "<= 10"),
    ("rate_rsd_max", "rate's relative std, flat step", "<= 0.05"),
    ("rate_at_min", "samples at --min", "0"),
    ("outage_rate_share_min", "reflector killed: lowest rate / cap", ">= 0.8"),
    ("changes", "rate changes", ""),
]


def main(paths):
    runs = defaultdict(lambda: defaultdict(list))
    order = []
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        for v in r["variants"]:
            name = v["name"]
            if name not in order:
                order.append(name)
            d = dict(v["metrics"].get("derived", {}))
            adj = v["metrics"].get("autorate", {}).get("adjustments")
            if adj:
                d["changes"] = sum(adj.values())
            for k, x in d.items():
                runs[name][k].append(x)
    w = max(len(n) for n in order) + 2

    def fmt(x):
        return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"

    print(f"{'':40}" + "".join(f"{n:>{w}}" for n in order) + "   target")
    several = []
    for key, label, target in ROWS:
        cells = []
        for n in order:
            xs = runs[n].get(key)
            cells.append(fmt(statistics.median(xs)) if xs else "-")
            if xs and len(xs) > 1:
                several.append(f"{n:20} {label.strip():40} " + ", ".join(fmt(x) for x in xs))
        print(f"{label:40}" + "".join(f"{c:>{w}}" for c in cells) + f"   {target}")
    print(f"\n{len(paths)} run(s), medians; baseline is no fix, capped-uplink the static shaper at 2 Mbit/s")
    if several:
        print("\nevery run:")
        print("\n".join(several))

if __name__ == "__main__":
    main(sys.argv[1:])
