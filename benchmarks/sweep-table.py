#!/usr/bin/env python3
"""The shape-class table of docs/benchmarks.md from benchmarks/cpu-sweep.sh's output.

    benchmarks/sweep-table.py sweep.jsonl [more.jsonl ...]

One row per (ISA cap, class, mode): the median seconds of fused-cpu (through the module,
on Flex), PyTorch and ONNX Runtime over the rounds, our ratio against the target's
peer: the faster of PyTorch and ONNX Runtime for inference, PyTorch for training
(ONNX Runtime does not train), marked with ✗ below 1.00, and our ratio against PyTorch
alone: under `ISA=avx2` the like-for-like one (PyTorch's oneDNN is capped to AVX2 as
our kernel is; ONNX Runtime has no such switch and keeps the machine's best).

The ratios are paired: each round's peer time over our time in the same round (the runs
of one class follow each other within seconds), then the median over the rounds, with
the lowest and highest round in brackets. A slow spell of the machine that lasts minutes
slows both sides of a pair, where a ratio of medians would set a slow round of ours
against a quick round of a peer. The k-th run of an implementation for a class in a file
is that file's round k.

Runs of `DTYPE=int8 benchmarks/cpu-sweep.sh` (lines with `"dtype":"int8"` or our f32
kernel alone, `lstm-cpu`) make a second table: our int8 kernel, our f32 kernel and ONNX
Runtime's int8 LSTM per class, with our f32 / our int8 and ORT / our int8.
"""
import json
import statistics
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cells, peaks, trips = {}, {}, {}
    for file_index, path in enumerate(sys.argv[1:]):
        for line in open(path):
            if not line.strip().startswith("{"):
                continue
            d = json.loads(line)
            if "what" in d:
                key = (d.get("isa_cap", "native"), d["what"], d["threads"])
                if "ns" in d:
                    trips.setdefault(key[0], []).append(d["ns"])
                else:
                    peaks.setdefault(key, []).append(d["gflops"])
                continue
            key = (d.get("isa_cap", "native"), d["class"], d["mode"])
            impl = d["impl"] + ("-int8" if d.get("dtype") == "int8" else "")
            if impl in ("lstm-cpu", "lstm-cpu-int8", "onnxruntime-int8"):
                key = key + ("int8",)
            runs = cells.setdefault(key, {}).setdefault(impl, [])
            # (file, round) pairs this run with the other implementations' runs.
            d["_round"] = (file_index, sum(1 for r in runs if r["_round"][0] == file_index))
            runs.append(d)
    print("| ISA | class (B, T, I, H, layers) | mode | fused-cpu ms | torch ms | ORT ms "
          "| vs target peer | vs torch |")
    print("| --- " * 8 + "|")
    order = {"infer": 0, "train": 1}
    int8_keys = [k for k in cells if len(k) == 4]
    for key in sorted(set(cells) - set(int8_keys), key=lambda k: (k[0], order[k[2]])):
        c = cells[key]
        ms = lambda n: statistics.median(r["seconds"] for r in c[n]) * 1e3 if n in c else None
        ours, torch, ort = ms("fused-cpu"), ms("torch"), ms("onnxruntime")
        peer_impls = ("torch", "onnxruntime") if key[2] == "infer" else ("torch",)
        ratio = paired(c, peer_impls)
        vs_torch = paired(c, ("torch",))
        d = c["fused-cpu"][0]
        shape = f"{d['batch']}, {d['seq']}, {d['input']}, {d['hidden']}, {d['layers']}"
        show = lambda t: "%.3g" % t if t else ""
        mark = "" if ratio is None or ratio[0] >= 1.0 else " ✗"
        print(f"| {key[0]} | {key[1]} ({shape}) | {key[2]} | {show(ours)} | {show(torch)} | {show(ort)} "
              f"| {show_ratio(ratio)}{mark} | {show_ratio(vs_torch)} |")
    if int8_keys:
        int8_table(cells, int8_keys)
    for isa in sorted({isa for isa, _, _ in peaks}):
        print(f"\nGFLOP/s, `cpu-peak` in the same run, ISA {isa} (median): "
              + "; ".join(f"{what} ({t} thread{'s' if t > 1 else ''}) {statistics.median(v):.0f}"
                          for (i, what, t), v in peaks.items() if i == isa))
        if isa in trips:
            # ~100 ns in the shared machine's quiet periods, ~400 in its slow spells.
            print(f"Team round trip (cpu-peak, ns): median {statistics.median(trips[isa]):.0f}, "
                  f"rounds {', '.join('%.0f' % ns for ns in trips[isa])}")


def int8_table(cells, keys):
    """The int8 classes: our int8 kernel against our f32 kernel and ONNX Runtime's int8."""
    print("\n| ISA | class (B, T, I, H, layers) | int8 ms | f32 ms | ORT int8 ms "
          "| f32 / int8 | ORT / int8 |")
    print("| --- " * 7 + "|")
    for key in sorted(keys):
        c = cells[key]
        if "lstm-cpu-int8" not in c:
            continue
        ms = lambda n: statistics.median(r["seconds"] for r in c[n]) * 1e3 if n in c else None
        d = c["lstm-cpu-int8"][0]
        shape = f"{d['batch']}, {d['seq']}, {d['input']}, {d['hidden']}, {d['layers']}"
        show = lambda t: "%.3g" % t if t else ""
        vs_f32 = paired(c, ("lstm-cpu",), "lstm-cpu-int8")
        vs_ort = paired(c, ("onnxruntime-int8",), "lstm-cpu-int8")
        mark = lambda r, target: "" if r is None or r[0] >= target else " ✗"
        print(f"| {key[0]} | {key[1]} ({shape}) | {show(ms('lstm-cpu-int8'))} "
              f"| {show(ms('lstm-cpu'))} | {show(ms('onnxruntime-int8'))} "
              f"| {show_ratio(vs_f32)}{mark(vs_f32, 1.5)} | {show_ratio(vs_ort)}{mark(vs_ort, 1.0)} |")


def paired(cell, peer_impls, ours="fused-cpu"):
    """Median over the rounds of (the fastest of `peer_impls` / `ours`) within each
    round, with the lowest and highest: (median, low, high), or None."""
    by_round = {}
    for impl in (ours,) + peer_impls:
        for run in cell.get(impl, []):
            by_round.setdefault(run["_round"], {})[impl] = run["seconds"]
    ratios = []
    for times in by_round.values():
        peers = [times[i] for i in peer_impls if i in times]
        if ours in times and peers:
            ratios.append(min(peers) / times[ours])
    if not ratios:
        return None
    return statistics.median(ratios), min(ratios), max(ratios)


def show_ratio(ratio):
    if ratio is None:
        return ""
    median, low, high = ratio
    spread = f" ({low:.2f}-{high:.2f})" if high > low else ""
    return f"{median:.2f}×{spread}"


if __name__ == "__main__":
    main()
