#!/usr/bin/env python3
"""The shape-class table of docs/benchmarks.md from benchmarks/cpu-sweep.sh's output.

    benchmarks/sweep-table.py sweep.jsonl [more.jsonl ...]

One row per (ISA cap, class, mode): the median seconds of fused-cpu (through the module,
on Flex), PyTorch and ONNX Runtime over the rounds, our ratio against the target's
peer: the faster of PyTorch and ONNX Runtime for inference, PyTorch for training
(ONNX Runtime does not train), marked with ✗ below 1.00, and our ratio against PyTorch
alone: under `ISA=avx2` the like-for-like one (PyTorch's oneDNN is capped to AVX2 as
our kernel is; ONNX Runtime has no such switch and keeps the machine's best).
"""
import json
import statistics
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cells, peaks = {}, {}
    for path in sys.argv[1:]:
        for line in open(path):
            if not line.strip().startswith("{"):
                continue
            d = json.loads(line)
            if "what" in d:
                key = (d.get("isa_cap", "native"), d["what"], d["threads"])
                peaks.setdefault(key, []).append(d["gflops"])
                continue
            key = (d.get("isa_cap", "native"), d["class"], d["mode"])
            cells.setdefault(key, {}).setdefault(d["impl"], []).append(d)
    print("| ISA | class (B, T, I, H, layers) | mode | fused-cpu ms | torch ms | ORT ms "
          "| vs target peer | vs torch |")
    print("| --- " * 8 + "|")
    order = {"infer": 0, "train": 1}
    for key in sorted(cells, key=lambda k: (k[0], order[k[2]])):
        c = cells[key]
        ms = lambda n: statistics.median(r["seconds"] for r in c[n]) * 1e3 if n in c else None
        ours, torch, ort = ms("fused-cpu"), ms("torch"), ms("onnxruntime")
        peers = [t for t in ((torch, ort) if key[2] == "infer" else (torch,)) if t]
        ratio = min(peers) / ours if peers and ours else None
        vs_torch = torch / ours if torch and ours else None
        d = c["fused-cpu"][0]
        shape = f"{d['batch']}, {d['seq']}, {d['input']}, {d['hidden']}, {d['layers']}"
        show = lambda t: "%.3g" % t if t else ""
        mark = "" if ratio is None or ratio >= 1.0 else " ✗"
        print(f"| {key[0]} | {key[1]} ({shape}) | {key[2]} | {show(ours)} | {show(torch)} | {show(ort)} "
              f"| {'%.2f×' % ratio if ratio else ''}{mark} | {'%.2f×' % vs_torch if vs_torch else ''} |")
    for isa in sorted({isa for isa, _, _ in peaks}):
        print(f"\nGFLOP/s, `cpu-peak` in the same run, ISA {isa} (median): "
              + "; ".join(f"{what} ({t} thread{'s' if t > 1 else ''}) {statistics.median(v):.0f}"
                          for (i, what, t), v in peaks.items() if i == isa))


if __name__ == "__main__":
    main()
