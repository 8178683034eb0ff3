#!/usr/bin/env python3
"""Side-by-side table of capped-uplink-varying results: one column per
variant, the median over the runs given with the spread (least and most),
the issue's target beside each row. The delay and goodput targets are set
against the oracle of the same run (capped-uplink-oracle: the static shaper
moved by the lab to 90 % of each new cap in the instant the provider steps);
a variant with the MSS clamp (-mss) is set against the oracle with it.

    python3 bench/autorate/table.py bench/autorate/out/*.json
"""
import json
import statistics
import sys
from collections import defaultdict

ROWS = [
    ("added_p99_ms", "added RTT p99, ms", ""),
    ("p99_over_oracle", "  over the oracle's, same run", "<= 2"),
    ("added_p99_step1_ms", "  in the 1 Mbit/s step, ms", ""),
    ("goodput_share_min", "goodput over the cap, worst step", ""),
    ("goodput_over_oracle", "  over the oracle's, same run", ">= 1"),
    ("convergence_down_s", "within 10 % after a step down, s", "<= 5"),
    ("convergence_up_s", "within 10 % after the step up, s", "<= 10"),
    ("rate_rsd_max", "rate's relative std, flat step", "<= 0.05"),
    ("rate_at_min", "samples at --min", "0"),
    ("outage_rate_share_min", "reflector killed: lowest rate / cap", ">= 0.8"),
    ("changes", "rate changes", ""),
]


def oracle_of(name):
    return "capped-uplink-oracle-mss" if name.endswith("-mss") else "capped-uplink-oracle"


def main(paths):
    runs = defaultdict(lambda: defaultdict(list))
    order = []
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        derived = {v["name"]: dict(v["metrics"].get("derived", {})) for v in r["variants"]}
        for v in r["variants"]:
            name = v["name"]
            if name not in order:
                order.append(name)
            d = derived[name]
            o = derived.get(oracle_of(name), {})
            if name.startswith("capped-uplink-oracle"):
                o = {}
            if o.get("added_p99_ms") and "added_p99_ms" in d:
                d["p99_over_oracle"] = d["added_p99_ms"] / o["added_p99_ms"]
            if o.get("goodput_share_min") and "goodput_share_min" in d:
                d["goodput_over_oracle"] = d["goodput_share_min"] / o["goodput_share_min"]
            adj = v["metrics"].get("autorate", {}).get("adjustments")
            if adj:
                d["changes"] = sum(adj.values())
            for k, x in d.items():
                if isinstance(x, (int, float)):
                    runs[name][k].append(x)
    w = max(len(n) for n in order) + 2

    def fmt(x):
        return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"

    def cell(xs):
        if not xs:
            return "-"
        m = fmt(statistics.median(xs))
        if len(xs) > 1:
            m += f" [{fmt(min(xs))}-{fmt(max(xs))}]"
        return m

    cw = max(w, 22)
    print(f"{'':40}" + "".join(f"{n:>{cw}}" for n in order) + "   target")
    for key, label, target in ROWS:
        print(f"{label:40}" + "".join(f"{cell(runs[n].get(key)):>{cw}}" for n in order) + f"   {target}")
    print(f"\n{len(paths)} run(s): the median, and [least-most] over the runs")


if __name__ == "__main__":
    main(sys.argv[1:])
