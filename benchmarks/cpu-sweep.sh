#!/usr/bin/env bash
# The fused CPU kernel through the module (`fused-cpu` on Flex) against PyTorch and ONNX
# Runtime over shape classes beyond the headline shapes of docs/benchmarks.md: hidden
# sizes that are not multiples of 64 or 128, input size unlike hidden size, small batches,
# deep stacks, bidirectional with padded rows, a projection. 2 threads, f32, interleaved;
# one JSON line per run. Peers through ../shared/peers/lstm_peers.py, or
# benchmarks/lstm_variants.py where that cannot express the shape (lengths, projection).
#
#   PYTHON=/path/to/python-with-torch-onnxruntime benchmarks/cpu-sweep.sh > sweep.jsonl
#   ISA=avx2 benchmarks/cpu-sweep.sh > sweep-avx2.jsonl   # the AVX2 path on an AVX-512 machine
#   benchmarks/sweep-table.py sweep.jsonl
#   DTYPE=int8 benchmarks/cpu-sweep.sh > sweep-int8.jsonl   # int8 inference (below)
#   PEER_IMPLS=onnxruntime MODES=infer benchmarks/cpu-sweep.sh  # where torch is not installed
#
# ISA=avx2 caps our kernel (LSTM_CPU_ISA) and PyTorch's oneDNN (ONEDNN_MAX_CPU_ISA) to
# AVX2, and ONNX Runtime, which has no such switch, runs from a copy whose MLAS keeps its
# AVX2 kernels (benchmarks/ort_avx2.py; where that does not recognise the build, ORT keeps
# the machine's best and its runs say `"ort_isa":"native"`). ROUNDS=N repeats the
# sweep (the table shows medians, and ratios paired within each round). Even rounds run
# the peers of a class before ours, odd rounds after, so neither side always runs first.
#
# DTYPE=int8: inference only, our int8 kernel (`lstm-bench --impl lstm-cpu --dtype int8`,
# weights quantized once before the timed calls) beside our f32 kernel alone (`--impl
# lstm-cpu`) and ONNX Runtime's int8 LSTM (`lstm_peers.py --dtype int8`), which is run
# for the classes it can express: not `bidir-lengths` (no row lengths) nor `projection`
# (an ONNX LSTM has no projection; PyTorch's quantized LSTM refuses one). PyTorch's
# `quantize_dynamic` is no int8 peer: on the versions measured it left `nn.LSTM` in f32.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PEERS=${PEERS:-../shared/peers/lstm_peers.py}
ORT_ISA=native ORT_PATH=
if [ "${ISA:-}" = avx2 ]; then
  export LSTM_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2
  if ORT_PATH=$("$PYTHON" benchmarks/ort_avx2.py target/ort-avx2); then ORT_ISA=avx2; fi
fi
cargo build --release -p lstm-bench >&2
# class      B   T    I     H    layers  flags
SHAPES=(
  "hidden-96      16  50  96    96   1"
  "hidden-200     16  50  200   200  1"
  "hidden-300     16  50  300   300  1"
  "hidden-384     16  50  384   384  1"
  "hidden-600     8   50  600   600  1"
  "hidden-1000    8   35  1000  1000 1"
  "input-40-h256  16  50  40    256  1"
  "input-512-h128 16  50  512   128  1"
  "batch-1        1   100 256   256  1"
  "batch-2        2   100 256   256  1"
  "batch-8        8   100 256   256  1"
  "batch-32       32  50  256   256  1"
  "layers-3       16  50  80    256  3"
  "layers-4-h200  8   50  80    200  4"
  "bidir-lengths  16  50  128   128  2  --bidirectional --lengths varied"
  "projection     16  50  256   512  1  --proj-size 128"
)
for round in $(seq "${ROUNDS:-1}"); do
./target/release/cpu-peak --threads 2 | sed "s/^{/{\"isa_cap\":\"${ISA:-native}\",/"
# Not recorded: on the shared machine measured, the first run after cpu-peak's seconds
# of full load often ran 2-3× slow (docs/benchmarks.md).
./target/release/lstm-bench --impl fused-cpu --device cpu --batch 16 --seq 50 --input 96 \
  --hidden 96 --threads 2 --iters 200 > /dev/null
DTYPE=${DTYPE:-f32}
modes=${MODES:-"infer train"}; [ "$DTYPE" = int8 ] && modes=infer
for mode in $modes; do
  for shape in "${SHAPES[@]}"; do
    set -- $shape
    class=$1; extra="${*:7}"
    iters=15; [ "$5" -ge 600 ] && iters=7
    args="--device cpu --mode $mode --batch $2 --seq $3 --input $4 --hidden $5 --layers $6 --threads 2 --iters $iters $extra"
    tag() { sed "s/^{/{\"class\":\"$class\",\"isa_cap\":\"${ISA:-native}\",/"; }
    peers=$PEERS; [ -n "$extra" ] && peers=benchmarks/lstm_variants.py
    run_peers() {
      for impl in ${PEER_IMPLS:-torch onnxruntime}; do
        if [ "$impl" = onnxruntime ] && { [ "$mode" = train ] || [[ "$extra" == *proj* ]]; }; then continue; fi
        if [ "$impl" = onnxruntime ]; then
          PYTHONPATH=$ORT_PATH "$PYTHON" "$peers" --impl $impl $args | tag \
            | sed "s/^{/{\"ort_isa\":\"$ORT_ISA\",/"
        else
          "$PYTHON" "$peers" --impl $impl $args | tag
        fi
      done
    }
    if [ "$DTYPE" = int8 ]; then
      run_peers() {
        if [ -z "$extra" ] || [ "$extra" = --bidirectional ]; then
          PYTHONPATH=$ORT_PATH "$PYTHON" "$PEERS" --impl onnxruntime --dtype int8 $args | tag \
            | sed "s/^{/{\"ort_isa\":\"$ORT_ISA\",/"
        fi
      }
      run_ours() {
        ./target/release/lstm-bench --impl lstm-cpu --dtype int8 $args | tag
        ./target/release/lstm-bench --impl lstm-cpu --dtype f32 $args | tag
      }
    else
      run_ours() { ./target/release/lstm-bench --impl fused-cpu --backend flex $args | tag; }
    fi
    if [ $((round % 2)) = 0 ]; then run_peers; fi
    run_ours
    if [ $((round % 2)) = 1 ]; then run_peers; fi
  done
done
done  # rounds
