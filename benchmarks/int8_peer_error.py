#!/usr/bin/env python3
"""ONNX Runtime's int8 error on the LSTM golden cases, beside which docs/numerics.md
puts ours ("int8 inference").

Each case's PyTorch weights become one ONNX `LSTM` node per layer (gates reordered from
PyTorch's i, f, g, o to ONNX's i, o, f, c; both biases; the initial state and the
lengths as the node's inputs), the model is quantized by ONNX Runtime's
`quantize_dynamic` (int8 weights: the node becomes `DynamicQuantizeLSTM`), run on the
case's input, and its `y`, `h_n` and `c_n` compared with the case's float64 reference by
the ∞-norm relative error of burn-lstm's tests (largest absolute difference over the
largest magnitude of the reference). The f32 model's error is printed beside it.

    python benchmarks/int8_peer_error.py ../shared/golden

Cases ONNX's LSTM cannot express are skipped and named: a projection (`proj_size`).
ONNX Runtime has no quantized GRU; PyTorch 2.15's `quantize_dynamic` returned `nn.LSTM`
unquantized on the machine this was written on (no int8 peer from it).
"""
import json
import logging
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from safetensors.numpy import load_file
from safetensors import safe_open


def reorder(w, hidden):
    """PyTorch's gate blocks i, f, g, o to ONNX's i, o, f, c (along the first axis)."""
    i, f, g, o = (w[k * hidden:(k + 1) * hidden] for k in range(4))
    return np.concatenate([i, o, f, g])


def model_of(t, cfg):
    layers, dirs, hidden = cfg["num_layers"], 2 if cfg["bidirectional"] else 1, cfg["hidden_size"]
    batch = cfg["batch"]
    nodes, inits, outputs, cur = [], [], [], "X"
    has_lengths = "lengths" in t
    for l in range(layers):
        sfx = [f"_l{l}", f"_l{l}_reverse"][:dirs]
        W = np.stack([reorder(t["weight_ih" + s], hidden) for s in sfx]).astype(np.float32)
        R = np.stack([reorder(t["weight_hh" + s], hidden) for s in sfx]).astype(np.float32)
        if cfg["bias"]:
            B = np.stack([np.concatenate([reorder(t["bias_ih" + s], hidden),
                                          reorder(t["bias_hh" + s], hidden)]) for s in sfx])
        else:
            B = np.zeros((dirs, 8 * hidden))
        inits += [numpy_helper.from_array(W, f"W{l}"), numpy_helper.from_array(R, f"R{l}"),
                  numpy_helper.from_array(B.astype(np.float32), f"B{l}")]
        h0 = t["h0"][l * dirs:(l + 1) * dirs] if "h0" in t else np.zeros((dirs, batch, hidden))
        c0 = t["c0"][l * dirs:(l + 1) * dirs] if "c0" in t else np.zeros((dirs, batch, hidden))
        inits += [numpy_helper.from_array(h0.astype(np.float32), f"H{l}"),
                  numpy_helper.from_array(c0.astype(np.float32), f"C{l}")]
        lens = "L" if has_lengths else ""
        nodes.append(helper.make_node(
            "LSTM", [cur, f"W{l}", f"R{l}", f"B{l}", lens, f"H{l}", f"C{l}"],
            [f"Y{l}", f"Yh{l}", f"Yc{l}"], hidden_size=hidden,
            direction="bidirectional" if dirs == 2 else "forward"))
        # Y is [T, dirs, B, H] -> [T, B, dirs * H].
        nodes.append(helper.make_node("Transpose", [f"Y{l}"], [f"Yt{l}"], perm=[0, 2, 1, 3]))
        nodes.append(helper.make_node("Reshape", [f"Yt{l}", "shape"], [f"Z{l}"]))
        cur = f"Z{l}"
        outputs += [f"Yh{l}", f"Yc{l}"]
    inits.append(numpy_helper.from_array(
        np.array([cfg["seq_len"], batch, -1], dtype=np.int64), "shape"))
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)]
    if has_lengths:
        inputs.append(helper.make_tensor_value_info("L", TensorProto.INT32, None))
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in [cur] + outputs]
    g = helper.make_graph(nodes, "lstm", inputs, outs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 9
    return m


def rel_err(actual, expected):
    scale = max(np.abs(expected).max(), 1e-12)
    return float(np.abs(actual - expected).max() / scale)


def run(model, t, cfg):
    x = t["x"]
    if cfg["batch_first"]:
        x = np.transpose(x, (1, 0, 2))
    feeds = {"X": x.astype(np.float32)}
    if "lengths" in t:
        feeds["L"] = t["lengths"].astype(np.int32)
    s = ort.InferenceSession(model.SerializeToString(), ort.SessionOptions(),
                             providers=["CPUExecutionProvider"])
    out = s.run(None, feeds)
    y = out[0]
    if cfg["batch_first"]:
        y = np.transpose(y, (1, 0, 2))
    h_n = np.concatenate(out[1::2])
    c_n = np.concatenate(out[2::2])
    return [rel_err(y, t["y"]), rel_err(h_n, t["h_n"]), rel_err(c_n, t["c_n"])]


def main(folder):
    # quantize_dynamic advises a pre-processing pass on every call (for CNNs).
    logging.getLogger().setLevel(logging.ERROR)
    print("| case | ORT int8 `y` | `h_n` | `c_n` | ORT f32 `y` | `h_n` | `c_n` |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".safetensors"):
            continue
        path = os.path.join(folder, name)
        with safe_open(path, "np") as f:
            cfg = json.loads(f.metadata()["config"])
        case = name[: -len(".safetensors")]
        if cfg.get("proj_size", 0):
            print(f"| {case} | (ONNX's LSTM has no projection) | | | | | |")
            continue
        t = load_file(path)
        f32 = model_of(t, cfg)
        d = tempfile.mkdtemp()
        src, dst = os.path.join(d, "f32.onnx"), os.path.join(d, "int8.onnx")
        onnx.save(f32, src)
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
        q = onnx.load(dst)
        assert any(n.op_type == "DynamicQuantizeLSTM" for n in q.graph.node), case
        e8, e32 = run(q, t, cfg), run(f32, t, cfg)
        print(f"| {case} | " + " | ".join(f"{e:.1e}" for e in e8 + e32) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/golden")
