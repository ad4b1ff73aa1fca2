#!/usr/bin/env python3
"""Tables of `gpu-run.sh ab` (and `pending`, `drift`) results: one markdown table per
data type and mode, a row per shape, a column per variant in milliseconds (the median of
the run's calls), then each variant's speed against `default` (default's time / the
variant's: above 1 is faster), `cudnn-raw`'s time over `default`'s (the op within 5 % of
cuDNN without Burn: 0.95 or more) and PyTorch's time over `default`'s (above 1: the op
is faster than PyTorch).

    python3 benchmarks/ab_table.py gpu-results.txt        # or on stdin

Reads the lines `ab <dtype> <variant> <JSON line>`; a line whose run printed no JSON (a
time limit, an error) shows as `-`. Nothing here is timed: it only lays out what the GPU
run measured.
"""

import json
import sys

SHAPE_KEYS = ("batch", "seq", "input", "hidden", "layers", "bidirectional")


def parse(line):
    """The (dtype, variant, result) of an `ab` line, result None without JSON; or None."""
    parts = line.strip().split(" ", 3)
    if len(parts) < 3 or parts[0] != "ab":
        return None
    dtype, variant = parts[1], parts[2]
    text = parts[3] if len(parts) == 4 else ""
    try:
        result = json.loads(text) if text.startswith("{") else None
    except json.JSONDecodeError:
        result = None
    if result is not None and "seconds" not in result:
        result = None
    return dtype, variant, result


def shape_name(result):
    """`B, T, I=H, layers` as docs/benchmarks.md writes it, `bi` for two directions."""
    shape = f"{result['batch']}, {result['seq']}, {result['input']}"
    if result["hidden"] != result["input"]:
        shape += f"→{result['hidden']}"
    shape += f", {result['layers']}"
    if result.get("bidirectional"):
        shape += ", bi"
    return shape


def collect(lines):
    """{(dtype, mode): {shape key: {variant: seconds or None}}} and the variants in order.

    A line without JSON belongs to the shape of the line before it (the script prints a
    shape's variants together)."""
    tables, variants, last = {}, [], None
    for line in lines:
        parsed = parse(line)
        if parsed is None:
            continue
        dtype, variant, result = parsed
        if variant not in variants:
            variants.append(variant)
        if result is not None:
            key = tuple(result.get(k) for k in SHAPE_KEYS)
            last = (dtype, result.get("mode", "?"), key, shape_name(result))
        if last is None or last[0] != dtype:
            continue
        _, mode, key, name = last
        rows = tables.setdefault((dtype, mode), {})
        row = rows.setdefault(key, {"shape": name})
        row[variant] = None if result is None else result["seconds"]
    return tables, variants


def ms(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def ratio(numerator, denominator):
    if numerator is None or denominator is None or denominator == 0:
        return "-"
    return f"{numerator / denominator:.2f}×"


def render(tables, variants):
    """The markdown tables, one per (dtype, mode), as a string."""
    out = []
    for (dtype, mode), rows in tables.items():
        present = [v for v in variants if any(v in row for row in rows.values())]
        others = [v for v in present if v not in ("default", "torch")]
        # default first, the op's other variants, cuDNN without Burn, PyTorch last.
        others.sort(key=lambda v: v.startswith("raw"))
        present = [v for v in ["default"] + others + ["torch"] if v in present]
        header = ["(B, T, I=H, layers)"] + present
        header += [f"{v} vs default" for v in others if not v.startswith("raw")]
        header += [f"{v} / default" for v in others if v.startswith("raw")]
        header += ["PyTorch / default"]
        out.append(f"{dtype} {mode} (ms; ratios above 1: faster than default / than PyTorch)")
        out.append("")
        out.append("| " + " | ".join(header) + " |")
        out.append("| " + " | ".join("---" for _ in header) + " |")
        for row in rows.values():
            default = row.get("default")
            cells = [row["shape"]] + [ms(row.get(v)) for v in present]
            cells += [
                ratio(default, row.get(v)) for v in others if not v.startswith("raw")
            ]
            cells += [ratio(row.get(v), default) for v in others if v.startswith("raw")]
            cells.append(ratio(row.get("torch"), default))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main():
    source = open(sys.argv[1], encoding="utf-8") if len(sys.argv) > 1 else sys.stdin
    with source:
        tables, variants = collect(source)
    if not tables:
        sys.exit("ab_table: no `ab` lines with results")
    print(render(tables, variants))


if __name__ == "__main__":
    main()
