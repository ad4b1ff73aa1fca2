#!/usr/bin/env bash
# One run, every CPU implementation on the shapes of docs/benchmarks.md, interleaved, 2
# threads, f32: the fused CPU kernel alone (`lstm-cpu`, plain slices) and through the
# module (`fused-cpu`), the portable kernel and Burn's nn::Lstm, each through Flex and
# through NdArray (BACKENDS="flex ndarray"), and the peers
# (PyTorch, ONNX Runtime) through ../shared/peers/lstm_peers.py. Each line is the JSON of
# one run; {"max_rss_kib": ...}, the peak memory of that process (GNU time), goes to
# stderr in the same order. Each round starts with `cpu-peak` (what limits the kernel).
#
#   PYTHON=/path/to/python-with-torch-onnxruntime benchmarks/cpu-comparison.sh \
#     > results.jsonl 2> results.err
#   benchmarks/cpu-table.py results.jsonl results.err   # the table of docs/benchmarks.md
# CELL=gru times GRUs instead (`--cell gru` of lstm-bench and of the peer script; Burn's
# nn::Gru for burn-lstm).
# ROUNDS=N repeats the whole sweep N times (the machine's speed drifts for minutes at a
# time; the table then shows medians over the rounds).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
PEERS=${PEERS:-../shared/peers/lstm_peers.py}
cargo build --release -p lstm-bench >&2
for round in $(seq "${ROUNDS:-1}"); do
# The machine's multiply-add peak and lstm-cpu's GEMM on the steps of these shapes, in
# the same minutes ({"what": ...} lines; cpu-table.py prints them under the table).
./target/release/cpu-peak --threads 2
for mode in infer train; do
  for shape in "1 100 128 1" "16 50 256 1" "64 100 512 1" "20 35 1500 2"; do
    set -- $shape
    iters=20; [ "$3" -ge 512 ] && iters=7
    args="--cell ${CELL:-lstm} --device cpu --mode $mode --batch $1 --seq $2 --input $3 --hidden $3 --layers $4 --threads 2 --iters $iters"
    /usr/bin/time -f '{"max_rss_kib":%M}' ./target/release/lstm-bench --impl lstm-cpu $args
    for impl in ${IMPLS:-fused-cpu portable burn-lstm}; do
      for backend in ${BACKENDS:-flex ndarray}; do
        # nn::Lstm at 1500 wide takes minutes per call.
        if [ "$impl" = burn-lstm ] && [ "$3" = 1500 ]; then continue; fi
        /usr/bin/time -f '{"max_rss_kib":%M}' ./target/release/lstm-bench --impl $impl --backend $backend $args
      done
    done
    for impl in torch onnxruntime; do
      if [ "$impl" = onnxruntime ] && [ "$mode" = train ]; then continue; fi
      /usr/bin/time -f '{"max_rss_kib":%M}' "$PYTHON" "$PEERS" --impl $impl $args
    done
  done
done
done  # rounds
