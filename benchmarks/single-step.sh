#!/usr/bin/env bash
# Single steps (T = 1), as autoregressive decoding calls the layer: the fused CPU kernel
# through the module on Flex (`fused-cpu`) and alone (`lstm-cpu`), beside ONNX Runtime
# (and PyTorch when its Python has torch: PEERS_IMPLS="onnxruntime torch"), interleaved
# shape by shape, ROUNDS times, 2 threads, f32 inference, zero initial state. One JSON
# line per run (the fields of lstm-bench and of ../shared/peers/lstm_peers.py).
#
#   PYTHON=/path/to/python-with-onnxruntime ROUNDS=3 benchmarks/single-step.sh > steps.jsonl
#   benchmarks/single-step-table.py steps.jsonl
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
PEERS=${PEERS:-../shared/peers/lstm_peers.py}
cargo build --release -p lstm-bench >&2
for round in $(seq "${ROUNDS:-3}"); do
  for shape in ${SHAPES:-"1 256" "1 1024" "16 256" "64 512"}; do
    set -- $shape
    args="--mode infer --batch $1 --seq 1 --input $2 --hidden $2 --threads 2 --iters ${ITERS:-1000}"
    for impl in fused-cpu lstm-cpu; do
      ./target/release/lstm-bench --impl $impl $args
    done
    for impl in ${PEERS_IMPLS:-onnxruntime}; do
      "$PYTHON" "$PEERS" --impl $impl --device cpu $args
    done
  done
done
