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
    measured = runs(*sys.argv[1:])
    # lstm-bench and the peer script name the cell (`--cell`); older lines are LSTMs.
    kinds = {d.get("cell", "lstm") for d in measured}
    if len(kinds) > 1:
        sys.exit(f"one cell per table, these results hold {sorted(kinds)}")
    burn_nn = "nn::Gru" if kinds == {"gru"} else "nn::Lstm"
    for d in measured:
        key = (d["batch"], d["seq"], d["hidden"], d["layers"], d["mode"])
        # Implementations through Burn are named with their backend: `fused-cpu@flex`.
        name = d["impl"] + ("@" + d["backend"] if d.get("backend") in ("flex", "ndarray") else "")
        cells.setdefault(key, {}).setdefault(name, []).append(d)

    def ms(rs):
        return statistics.median(r["seconds"] for r in rs) * 1e3 if rs else None

    def gflops(rs):
        return statistics.median(r["gflops"] for r in rs)

    def rss(rs):
        values = [r["rss_mib"] for r in rs or [] if r["rss_mib"] is not None]
        return "%.0f" % statistics.median(values) if values else ""

    print("| (B, T, I=H, layers) | mode | fused Flex ms | fused NdArray ms | Flex vs NdArray "
          "| lstm-cpu ms (GFLOP/s) | torch ms | ORT ms | fused Flex vs best peer "
          f"| portable Flex / NdArray ms | {burn_nn} Flex / NdArray ms "
          "| peak RSS fused Flex / NdArray / torch / ORT MiB |")
    print("| --- " * 12 + "|")
    for key in sorted(cells, key=lambda k: (k[4] != "infer", k[2], k[0])):
        c = cells[key]
        get = lambda n: ms(c.get(n))
        flex, nd, alone = get("fused-cpu@flex"), get("fused-cpu@ndarray"), get("lstm-cpu")
        torch, ort = get("torch"), get("onnxruntime")
        peers = [t for t in (torch, ort) if t]
        best = min(peers) if peers else None
        show = lambda t: "%.3g" % t if t else ""
        vs = lambda num, den: "%.2f×" % (num / den) if num and den else ""
        rounds = max(len(v) for v in c.values())
        print(f"| {key[0]}, {key[1]}, {key[2]}, {key[3]} | {key[4]} | {show(flex)} | {show(nd)} "
              f"| {vs(nd, flex)} "
              f"| {show(alone)}{' (%.0f)' % gflops(c['lstm-cpu']) if alone else ''} | {show(torch)} | {show(ort)} "
              f"| {vs(best, flex)} "
              f"| {show(get('portable@flex'))} / {show(get('portable@ndarray'))} "
              f"| {show(get('burn-lstm@flex'))} / {show(get('burn-lstm@ndarray'))} "
              f"| {rss(c.get('fused-cpu@flex'))} / {rss(c.get('fused-cpu@ndarray'))} "
              f"/ {rss(c.get('torch'))} / {rss(c.get('onnxruntime'))} |")
    if any(len(v) > 1 for c in cells.values() for v in c.values()):
        print(f"\nMedians over {rounds} rounds.")
    peaks, trips = {}, []
    for d in (json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")):
        if "what" in d and "gflops" in d:
            peaks.setdefault((d["what"], d["threads"]), []).append(d["gflops"])
        elif "what" in d and "ns" in d:
            trips.append(d["ns"])
    if peaks:
        print("\nGFLOP/s, `cpu-peak` in the same run (median over rounds): "
              + "; ".join(f"{what} ({threads} thread{'s' if threads > 1 else ''}) "
                          f"{statistics.median(v):.0f}" for (what, threads), v in peaks.items()))
    if trips:
        print(f"Team round trip (cpu-peak, ns): median {statistics.median(trips):.0f}, "
              f"rounds {', '.join('%.0f' % ns for ns in trips)}")


if __name__ == "__main__":
    main()
