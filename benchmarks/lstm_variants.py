#!/usr/bin/env python3
"""The peers on what shared/peers/lstm_peers.py cannot express: a projection (LSTMP,
PyTorch's proj_size) and right-padded rows (variable lengths). Same flags, timing and JSON
as lstm_peers.py (whose `flops` and `timed` it imports), plus

  --proj-size P        PyTorch only (ONNX's LSTM operator has no projection)
  --lengths varied     row b has T - (b * 7919) % (T // 2 + 1) valid steps (lstm-bench's
                       formula): PyTorch through pack_padded_sequence, ONNX Runtime
                       through the operator's sequence_lens
  --gap-us U           sleep U microseconds (untimed) before each timed call, as
                       lstm-bench --gap-us does: calls spaced like a server's requests

  PEERS=../shared/peers/lstm_peers.py python benchmarks/lstm_variants.py --impl torch ...
"""
import argparse, json, os, statistics, sys, time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(os.environ.get("PEERS", "../shared/peers/lstm_peers.py"))))
from lstm_peers import flops, timed  # noqa: E402


def spaced(fn, a):
    """lstm_peers.timed, or with --gap-us, its timing with an untimed sleep before each call."""
    if a.gap_us == 0:
        return timed(fn, lambda: None, a.iters)
    for _ in range(3):
        fn()
    ts = []
    for _ in range(a.iters):
        time.sleep(a.gap_us / 1e6)
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def lengths(a):
    if a.lengths == "none":
        return None
    return [a.seq - (b * 7919) % (a.seq // 2 + 1) for b in range(a.batch)]


def run_torch(a):
    import torch
    torch.set_num_threads(a.threads)
    m = torch.nn.LSTM(a.input, a.hidden, num_layers=a.layers, bidirectional=a.bidirectional,
                      batch_first=True, proj_size=a.proj_size)
    x = torch.randn(a.batch, a.seq, a.input)
    lens = lengths(a)

    def forward():
        if lens is None:
            return m(x)[0]
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
        y, _ = m(packed)
        return torch.nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=a.seq)[0]

    if a.mode == "infer":
        m.eval()

        def step():
            with torch.inference_mode():
                forward()
    else:
        x.requires_grad_()

        def step():
            forward().sum().backward()
    return spaced(step, a)


def run_ort(a):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    assert a.mode == "infer", "onnxruntime: inference only"
    assert a.proj_size == 0, "onnxruntime: ONNX's LSTM operator has no projection"
    rng = np.random.default_rng(0)
    d = 2 if a.bidirectional else 1
    lens = lengths(a)
    nodes, inits, cur, inp = [], [], "X", a.input
    for l in range(a.layers):
        W = (rng.standard_normal((d, 4 * a.hidden, inp)) * 0.05).astype(np.float32)
        R = (rng.standard_normal((d, 4 * a.hidden, a.hidden)) * 0.05).astype(np.float32)
        B = (rng.standard_normal((d, 8 * a.hidden)) * 0.05).astype(np.float32)
        inits += [numpy_helper.from_array(W, f"W{l}"), numpy_helper.from_array(R, f"R{l}"),
                  numpy_helper.from_array(B, f"B{l}")]
        ins = [cur, f"W{l}", f"R{l}", f"B{l}"] + (["L"] if lens is not None else [])
        nodes.append(helper.make_node("LSTM", ins, [f"Y{l}"], hidden_size=a.hidden,
                                      direction="bidirectional" if d == 2 else "forward"))
        nodes.append(helper.make_node("Transpose", [f"Y{l}"], [f"Yt{l}"], perm=[0, 2, 1, 3]))
        nodes.append(helper.make_node("Reshape", [f"Yt{l}", "shape"], [f"Z{l}"]))
        cur, inp = f"Z{l}", a.hidden * d
    inits.append(numpy_helper.from_array(np.array([a.seq, a.batch, -1], dtype=np.int64), "shape"))
    if lens is not None:
        inits.append(numpy_helper.from_array(np.array(lens, dtype=np.int32), "L"))
    g = helper.make_graph(nodes, "lstm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [a.seq, a.batch, a.input])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 9
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = rng.standard_normal((a.seq, a.batch, a.input)).astype(np.float32)
    return spaced(lambda: s.run(None, {"X": x}), a)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--impl", required=True, choices=["torch", "onnxruntime"])
    p.add_argument("--device", default="cpu", choices=["cpu"])
    p.add_argument("--mode", default="infer", choices=["infer", "train"])
    for k in ("batch", "seq", "input", "hidden"):
        p.add_argument("--" + k, type=int, required=True)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--bidirectional", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--proj-size", type=int, default=0)
    p.add_argument("--lengths", default="none", choices=["none", "varied"])
    p.add_argument("--gap-us", type=int, default=0)
    a = p.parse_args()
    a.cell = "lstm"
    sec = {"torch": run_torch, "onnxruntime": run_ort}[a.impl](a)
    print(json.dumps(dict(impl=a.impl, device=a.device, mode=a.mode, batch=a.batch, seq=a.seq, input=a.input,
                          hidden=a.hidden, layers=a.layers, bidirectional=a.bidirectional, threads=a.threads,
                          dtype="f32", cell="lstm", proj_size=a.proj_size, lengths=a.lengths, gap_us=a.gap_us,
                          seconds=sec, seq_steps_per_s=a.batch * a.seq / sec,
                          gflops=flops(a, a.mode == "train") / sec / 1e9)))
