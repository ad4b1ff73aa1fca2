#!/usr/bin/env python3
"""Lays out benchmarks/serve.sh's JSON lines as a Markdown table: for each count of
callers and each thread setting, the median over the rounds of requests a second, p50
and p99 latency, and the requests a second over those of one thread a call in the same
round (median over the rounds; the lowest and highest round in brackets).

    benchmarks/serve-table.py serve.jsonl
"""

import json
import statistics
import sys
from collections import defaultdict


def setting(line):
    threads = "default" if line["threads_set"] is None else f"{line['threads_set']} a call"
    if line["threads_shared"]:
        return "shared" if line["threads_set"] is None else f"{threads}, shared"
    return threads


# What must be equal for two runs to share a table: lines of other models or requests
# are refused rather than mixed.
SAME = ("cell", "backend", "dtype", "input", "hidden", "layers", "max_rows", "max_steps")


def main(paths):
    runs = defaultdict(dict)  # (callers, round) -> setting -> line
    first = None
    for path in paths:
        with open(path) as f:
            for text in f:
                if not text.strip():
                    continue
                line = json.loads(text)
                first = first or line
                other = [k for k in SAME if line[k] != first[k]]
                if other:
                    sys.exit(f"serve-table: runs of other {', '.join(other)} in one table: one file per model")
                runs[(line["callers"], line["round"])][setting(line)] = line
    order = {"1 a call": 0, "default": 1, "shared": 2}
    print("| callers | threads | requests/s | p50 ms | p99 ms | requests/s ÷ one thread a call's |")
    print("| --- | --- | --- | --- | --- | --- |")
    for callers in sorted({c for c, _ in runs}):
        rounds = [settings for (c, _), settings in sorted(runs.items()) if c == callers]
        names = sorted({s for settings in rounds for s in settings}, key=lambda s: order.get(s, 9))
        for name in names:
            lines = [r[name] for r in rounds if name in r]
            med = lambda key: statistics.median(line[key] for line in lines)
            ratios = [
                r[name]["requests_per_s"] / r["1 a call"]["requests_per_s"]
                for r in rounds
                if name in r and "1 a call" in r
            ]
            ratio = (
                f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}-{max(ratios):.2f})"
                if ratios and name != "1 a call"
                else ""
            )
            print(
                f"| {callers} | {name} | {med('requests_per_s'):.1f} | {med('p50_ms'):.1f} "
                f"| {med('p99_ms'):.1f} | {ratio} |"
            )


if __name__ == "__main__":
    main(sys.argv[1:] or ["/dev/stdin"])
