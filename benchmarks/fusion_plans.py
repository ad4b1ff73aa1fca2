"""Reads burn-fusion's full log (`BURN_FUSION_LOG=full`, on standard input) and prints
one JSON line: per tenth of the log's lines, the highest execution-plan id executed
(`[plan] cache hit: execute plan #N`), how many plan executions and how many
explorations (`[explorer] explore`, each a queue not served by a stored plan) it has. Plan ids that keep rising after the
first tenths, or explorations that do not fall to zero, mean burn-fusion keeps adding
plans over a long run, and each lookup scans more of them.

Usage: BURN_FUSION_LOG=full lstm-bench ... 2>&1 >/dev/null | python3 fusion_plans.py
"""
import json
import re
import sys

PLAN = re.compile(r"\[plan\] cache hit: execute plan #(\d+)")


def main():
    lines = sys.stdin.read().splitlines()
    tenths = []
    for k in range(10):
        part = lines[len(lines) * k // 10:len(lines) * (k + 1) // 10]
        plans = [int(m.group(1)) for m in map(PLAN.search, part) if m]
        tenths.append({
            "highest_plan": max(plans, default=None),
            "executions": len(plans),
            "explorations": sum("[explorer] explore" in line for line in part),
        })
    print(json.dumps({"what": "fusion-plans", "log_lines": len(lines), "tenths": tenths}))


if __name__ == "__main__":
    main()
