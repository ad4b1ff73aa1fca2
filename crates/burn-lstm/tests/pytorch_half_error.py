"""PyTorch's own error in half precision on the golden cases, to set beside the bound of
`common/half_check.rs` (`KernelBound::HalfStates`) and the cuDNN op's errors that
`cudnn.rs`'s half tests print.

For every LSTM golden case (a directory of `.safetensors` files, default the public ones
beside this script): `torch.nn.LSTM` on CUDA (cuDNN) in f16 and in bf16, given the case's
parameters, input, states and upstream gradients rounded to the half type (as the Burn
tests round them), forward and backward; each result's infinity-norm relative error
against the case's float64 reference, in units of roundoff of the half type (2^-11 for
f16, 2^-8 for bf16), as the Rust tests measure it. One JSON line per case and type.

    python3 pytorch_half_error.py [GOLDEN_DIR ...]

Needs torch with CUDA and safetensors. `benchmarks/gpu-run.sh tests` runs it.
"""
import glob, json, os, sys

import torch
from safetensors import safe_open

UNIT = {"f16": 2.0 ** -11, "bf16": 2.0 ** -8}
DTYPE = {"f16": torch.float16, "bf16": torch.bfloat16}


def rel_err(actual, expected):
    scale = expected.abs().max().item()
    return (actual.double() - expected).abs().max().item() / (scale if scale > 0 else 1.0)


def run(path, name):
    with safe_open(path, "pt") as f:
        cfg = json.loads(f.metadata()["config"])
        t = {k: f.get_tensor(k) for k in f.keys()}
    if cfg.get("cell", "lstm") != "lstm":
        return None
    dtype, device = DTYPE[name], "cuda"
    m = torch.nn.LSTM(cfg["input_size"], cfg["hidden_size"], num_layers=cfg["num_layers"],
                      bidirectional=cfg["bidirectional"], batch_first=cfg["batch_first"],
                      proj_size=cfg["proj_size"], bias=cfg["bias"]).to(device, dtype)
    with torch.no_grad():
        for k, p in m.named_parameters():
            p.copy_(t[k].to(dtype))
    half = lambda k: t[k].to(dtype).to(device)
    x = half("x").requires_grad_()
    state = None
    if cfg["initial_state"]:
        h0, c0 = half("h0").requires_grad_(), half("c0").requires_grad_()
        state = (h0, c0)
    lengths = cfg.get("lengths")
    if lengths is not None:
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            x, torch.tensor(lengths), batch_first=cfg["batch_first"], enforce_sorted=False)
        yp, (hn, cn) = m(packed, state)
        y, _ = torch.nn.utils.rnn.pad_packed_sequence(
            yp, batch_first=cfg["batch_first"], total_length=cfg["seq_len"])
    else:
        y, (hn, cn) = m(x, state)
    loss = (y.float() * half("dy").float()).sum() + (hn.float() * half("dh_n").float()).sum() \
        + (cn.float() * half("dc_n").float()).sum()
    loss.backward()
    results = {"y": y, "h_n": hn, "c_n": cn, "grad.x": x.grad}
    if state is not None:
        results.update({"grad.h0": h0.grad, "grad.c0": c0.grad})
    for k, p in m.named_parameters():
        results["grad." + k] = p.grad
    u = UNIT[name]
    errors = {k: rel_err(v.detach().cpu(), t[k]) / u for k, v in results.items()}
    return {"case": os.path.basename(path)[:-len(".safetensors")], "dtype": name,
            "impl": "torch-cudnn", "cudnn": torch.backends.cudnn.version(),
            "max_ulps": round(max(errors.values()), 1),
            "ulps": {k: round(v, 1) for k, v in errors.items()}}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = sys.argv[1:] or [os.path.join(here, "fixtures", "golden")]
    paths = sorted(p for d in dirs for p in glob.glob(os.path.join(d, "*.safetensors")))
    for path in paths:
        for name in ("f16", "bf16"):
            line = run(path, name)
            if line is not None:
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
