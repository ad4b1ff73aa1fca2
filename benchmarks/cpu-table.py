#!/usr/bin/env python3
"""The CPU comparison table of docs/benchmarks.md from benchmarks/cpu-comparison.sh's output.

    benchmarks/cpu-table.py results.jsonl [results.err]

`results.jsonl` holds one JSON line per run (lstm-bench's and lstm_peers.py's fields); the
peak-memory lines ({"max_rss_kib": N}, written by GNU time) follow each run there or, when
stderr was redirected, sit in `results.err` in the same order. With several rounds
(ROUNDS=N in cpu-comparison.sh) every cell is the median over the rounds.
"""
import json
import statistics
import sys


def runs(results, rss_file=None):
    lines = [json.loads(l) for l in open(results) if l.strip().startswith("{")]
    rss = [json.loads(l)["max_rss_kib"] for l in open(rss_file) if '"max_rss_kib"' in l] if rss_file else []
    out = []
    measured = [d for d in lines if "impl" in d]
    inline = [d["max_rss_kib"] for d in lines if "max_rss_kib" in d]
    memory = rss if len(rss) == len(measured) else inline if len(inline) == len(measured) else []
    for i, d in enumerate(measured):
        d["rss_mib"] = memory[i] / 1024 if memory else None
        out.append(d)
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    cells = {}
    for d in runs(*sys.argv[1:]):
        key = (d["batch"], d["seq"], d["hidden"], d["layers"], d["mode"])
        cells.setdefault(key, {}).setdefault(d["impl"], []).append(d)

    def ms(rs):
        return statistics.median(r["seconds"] for r in rs) * 1e3 if rs else None

    def gflops(rs):
        return statistics.median(r["gflops"] for r in rs)

    def rss(rs):
        values = [r["rss_mib"] for r in rs or [] if r["rss_mib"] is not None]
        return "%.0f" % statistics.median(values) if values else ""

    print("| (B, T, I=H, layers) | mode | fused-cpu ms | lstm-cpu ms (GFLOP/s) | torch ms | ORT ms "
          "| fused vs best peer | alone vs best peer | portable ms | nn::Lstm ms | fused vs nn::Lstm "
          "| portable vs nn::Lstm | peak RSS fused / torch / ORT MiB |")
    print("| --- " * 13 + "|")
    for key in sorted(cells, key=lambda k: (k[4] != "infer", k[2], k[0])):
        c = cells[key]
        fused, alone, torch, ort = (ms(c.get(n)) for n in ("fused-cpu", "lstm-cpu", "torch", "onnxruntime"))
        portable, burn = ms(c.get("portable")), ms(c.get("burn-lstm"))
        peers = [t for t in (torch, ort) if t]
        best = min(peers) if peers else None
        show = lambda t: "%.3g" % t if t else ""
        vs = lambda num, den: "%.2f×" % (num / den) if num and den else ""
        rounds = len(c.get("fused-cpu", []))
        print(f"| {key[0]}, {key[1]}, {key[2]}, {key[3]} | {key[4]} | {show(fused)} "
              f"| {show(alone)}{' (%.0f)' % gflops(c['lstm-cpu']) if alone else ''} | {show(torch)} | {show(ort)} "
              f"| {vs(best, fused)} | {vs(best, alone)} | {show(portable)} | {show(burn)} "
              f"| {vs(burn, fused)} | {vs(burn, portable)} "
              f"| {rss(c.get('fused-cpu'))} / {rss(c.get('torch'))} / {rss(c.get('onnxruntime'))} |")
    if any(len(v) > 1 for c in cells.values() for v in c.values()):
        print(f"\nMedians over {rounds} rounds.")
    peaks = {}
    for d in (json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")):
        if "what" in d:
            peaks.setdefault((d["what"], d["threads"]), []).append(d["gflops"])
    if peaks:
        print("\nGFLOP/s, `cpu-peak` in the same run (median over rounds): "
              + "; ".join(f"{what} ({threads} thread{'s' if threads > 1 else ''}) "
                          f"{statistics.median(v):.0f}" for (what, threads), v in peaks.items()))


if __name__ == "__main__":
    main()
