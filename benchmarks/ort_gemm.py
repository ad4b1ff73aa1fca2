#!/usr/bin/env python3
"""ONNX Runtime's GEMM (MLAS) on the products `cpu-peak --gemm M,N,K` times: one JSON
line per shape, in GFLOP/s, for a kernel-to-kernel comparison beside the LSTM's.

Each shape runs as one session of REPEATS `MatMul` nodes that share one constant
`B` [K, N] (ONNX Runtime packs it once, as its LSTM packs its weights) over REPEATS
inputs `A` [M, K]: one run is REPEATS products, the median run over about 20 GFLOP is
timed. One intra-op thread unless `--threads`.

    $PYTHON benchmarks/ort_gemm.py 16,1200,300 288,1200,300
    ./target/release/cpu-peak --threads 1 --gemm 16,1200,300 --gemm 288,1200,300

Interleave the two in rounds (the hosts measured here drift for minutes) and compare
round by round.
"""
import argparse
import json
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def shape(text):
    m, n, k = (int(d) for d in text.split(","))
    if min(m, n, k) <= 0:
        raise argparse.ArgumentTypeError(f"expected M,N,K as three positive numbers, got {text!r}")
    return m, n, k


def gflops(m, n, k, repeats, threads):
    rng = np.random.default_rng(0)
    b = numpy_helper.from_array((rng.random((k, n)) - 0.5).astype(np.float32), "B")
    nodes = [helper.make_node("MatMul", [f"A{i}", "B"], [f"C{i}"]) for i in range(repeats)]
    inputs = [helper.make_tensor_value_info(f"A{i}", TensorProto.FLOAT, [m, k]) for i in range(repeats)]
    outputs = [helper.make_tensor_value_info(f"C{i}", TensorProto.FLOAT, [m, n]) for i in range(repeats)]
    graph = helper.make_graph(nodes, "gemm", inputs, outputs, initializer=[b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feed = {f"A{i}": (rng.random((m, k)) - 0.5).astype(np.float32) for i in range(repeats)}
    session.run(None, feed)
    flops = 2.0 * m * n * k * repeats
    runs = max(3, int(20e9 / flops))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - start)
    times.sort()
    return flops / times[len(times) // 2] / 1e9, runs


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shapes", nargs="+", type=shape, metavar="M,N,K")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=50, help="MatMul nodes a run (default 50)")
    a = p.parse_args()
    for m, n, k in a.shapes:
        value, runs = gflops(m, n, k, a.repeats, a.threads)
        print(json.dumps({"what": "ort gemm", "m": m, "n": n, "k": k, "threads": a.threads,
                          "runs": runs, "gflops": value}), flush=True)


if __name__ == "__main__":
    main()
