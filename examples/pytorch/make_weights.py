"""Makes the PyTorch side of the `pytorch_weights` example.

    pip install torch safetensors
    python examples/pytorch/make_weights.py

Writes, next to the example's data:
  examples/data/pytorch_lstm.safetensors   the state dict of a 2-layer bidirectional
                                           nn.LSTM (input 4, hidden 8, batch_first)
  examples/data/pytorch_lstm_io.json       its config, an input and PyTorch's output and
                                           final state for that input
"""
import json
import pathlib

import torch
from safetensors.torch import save_file

torch.manual_seed(7)
config = dict(input_size=4, hidden_size=8, num_layers=2, bidirectional=True, batch_first=True)
lstm = torch.nn.LSTM(**config).eval()
x = torch.randn(2, 5, 4)
with torch.no_grad():
    y, (h_n, c_n) = lstm(x)

data = pathlib.Path(__file__).resolve().parent.parent / "data"
data.mkdir(exist_ok=True)
save_file({k: v.contiguous() for k, v in lstm.state_dict().items()}, data / "pytorch_lstm.safetensors")
io = dict(
    config=config,
    torch_version=torch.__version__,
    x=dict(shape=list(x.shape), values=x.flatten().tolist()),
    y=dict(shape=list(y.shape), values=y.flatten().tolist()),
    h_n=dict(shape=list(h_n.shape), values=h_n.flatten().tolist()),
    c_n=dict(shape=list(c_n.shape), values=c_n.flatten().tolist()),
)
(data / "pytorch_lstm_io.json").write_text(json.dumps(io, indent=1) + "\n")
print("wrote", data / "pytorch_lstm.safetensors", "and", data / "pytorch_lstm_io.json")
