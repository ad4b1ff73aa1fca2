#!/usr/bin/env python3
"""Interleaved A/B of several commands on the same benchmark arguments.

On shared, noisy machines (a VM whose neighbours come and go for minutes) only runs
taken side by side mean anything: this runs every variant once per round, in
alternating order (forward in even rounds, backward in odd ones), and prints each
variant's minimum and median time and its ratios to the first variant, paired round by
round. A ratio above 1 means the variant is faster than the first.

Each variant is `NAME=COMMAND`; the shared arguments are appended to every command,
which must print a JSON line with `seconds` (lstm-bench, ../shared/peers/lstm_peers.py,
benchmarks/lstm_variants.py):

    benchmarks/ab.py --rounds 9 \\
        --args "--device cpu --mode infer --batch 8 --seq 100 --input 256 --hidden 256 --threads 2 --iters 30" \\
        old="/tmp/lstm-bench-old --impl fused-cpu" new="target/release/lstm-bench --impl fused-cpu" \\
        ort="python3 ../shared/peers/lstm_peers.py --impl onnxruntime"

Environment variables go in front of a command (`units="LSTM_CPU_SPLIT=units ..."`).
Single-threaded runs (`--threads 1`) separate a change of the code from a change of the
team's behaviour; the minimum is the least disturbed by neighbours.
"""

import argparse
import json
import statistics
import subprocess
import sys


def seconds(command: str) -> float:
    """Runs `command` in a shell and returns the `seconds` of its last JSON line."""
    done = subprocess.run(command, shell=True, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        sys.exit(f"`{command}` failed ({done.returncode}):\n{done.stderr}")
    return json.loads(lines[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="runs of each variant")
    parser.add_argument("--args", default="", help="arguments appended to every command")
    parser.add_argument("variants", nargs="+", metavar="NAME=COMMAND")
    options = parser.parse_args()
    variants = []
    for variant in options.variants:
        name, sep, command = variant.partition("=")
        if not sep or not name or not command:
            parser.error(f"a variant is NAME=COMMAND, got {variant!r}")
        variants.append((name, f"{command} {options.args}"))
    times = {name: [] for name, _ in variants}
    for round_ in range(options.rounds):
        order = variants if round_ % 2 == 0 else variants[::-1]
        for name, command in order:
            times[name].append(seconds(command) * 1e3)
    base = variants[0][0]
    print(options.args)
    for name, _ in variants:
        mine = times[name]
        paired = [b / m for b, m in zip(times[base], mine)]
        print(
            f"  {name:10s} min {min(mine):8.3f} ms  median {statistics.median(mine):8.3f} ms"
            f"  {base}/{name}: min {min(times[base]) / min(mine):.3f}×,"
            f" paired median {statistics.median(paired):.3f}×"
            f" ({min(paired):.3f}-{max(paired):.3f})"
        )


if __name__ == "__main__":
    main()
