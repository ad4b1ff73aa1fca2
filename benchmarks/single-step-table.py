#!/usr/bin/env python3
"""The table of benchmarks/single-step.sh's JSON lines: per (batch, hidden), the median
microseconds of each implementation over the rounds, and ours (fused-cpu) against each
peer (median of the per-round ratios, with their range)."""
import json, statistics, sys
from collections import defaultdict

runs = defaultdict(lambda: defaultdict(list))
order = []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    key = (r["batch"], r["hidden"])
    if key not in order:
        order.append(key)
    runs[key][r["impl"]].append(r["seconds"] * 1e6)

peers = [p for p in ("onnxruntime", "torch") if any(p in runs[k] for k in order)]
head = ["(B, T, I=H)", "ours µs", "kernel alone µs"] + [f"{p} µs" for p in peers] + [f"ours vs {p}" for p in peers]
print("| " + " | ".join(head) + " |")
print("|" + " --- |" * len(head))
for key in order:
    r = runs[key]
    ours = r["fused-cpu"]
    cells = [f"({key[0]}, 1, {key[1]})", f"{statistics.median(ours):.1f}", f"{statistics.median(r['lstm-cpu']):.1f}"]
    cells += [f"{statistics.median(r[p]):.1f}" if p in r else "" for p in peers]
    for p in peers:
        if p not in r:
            cells.append("")
            continue
        ratios = [peer / mine for peer, mine in zip(r[p], ours)]
        cells.append(f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}-{max(ratios):.2f})")
    print("| " + " | ".join(cells) + " |")
