#!/usr/bin/env python3
"""Summarises the cuDNN op's trace (BURN_LSTM_CUDNN_TRACE=1 lines on stdin) phase by
phase: for each kind of call (training forward, inference forward, backward) and each of
its phases, the median milliseconds of the first tenth of the calls and of the last
tenth, as one JSON line per kind. A phase whose last-tenth median is well above its
first-tenth one is where a slowing run spends its extra time; phases that stay level put
it outside the op (fusion, CubeCL, the driver).

    BURN_LSTM_CUDNN_TRACE=1 lstm-bench ... 2>&1 >/dev/null | python3 trace_phases.py

Lines that are not trace lines are skipped.
"""

import json
import re
import statistics
import sys

# "burn-lstm cuDNN <label>: <phase> <ms> ms, <phase> <ms> ms (algorithm: ...)"
LINE = re.compile(r"^burn-lstm cuDNN ([^:]+): (.*?) \(algorithm: ")
PHASE = re.compile(r"^(.*) ([0-9.]+) ms$")


def parse(line):
    """The (label, [(phase, ms), ...]) of a trace line, or None."""
    match = LINE.match(line.strip())
    if not match:
        return None
    phases = []
    for part in match.group(2).split(", "):
        phase = PHASE.match(part)
        if not phase:
            return None
        phases.append((phase.group(1), float(phase.group(2))))
    return match.group(1), phases


def summarise(lines):
    """One dict per label: its call count and, per phase in the order first seen, the
    medians of the first and of the last tenth of its calls (at least one call each)."""
    calls = {}
    for line in lines:
        parsed = parse(line)
        if parsed:
            calls.setdefault(parsed[0], []).append(parsed[1])
    summaries = []
    for label, rows in calls.items():
        tenth = max(1, len(rows) // 10)
        order = []
        for row in rows:
            order.extend(name for name, _ in row if name not in order)

        def median(part, name):
            values = [ms for row in part for phase, ms in row if phase == name]
            return round(statistics.median(values), 4) if values else None

        summaries.append(
            {
                "trace": label,
                "calls": len(rows),
                "first_tenth_ms": {name: median(rows[:tenth], name) for name in order},
                "last_tenth_ms": {name: median(rows[-tenth:], name) for name in order},
            }
        )
    return summaries


if __name__ == "__main__":
    for summary in summarise(sys.stdin):
        print(json.dumps(summary))
