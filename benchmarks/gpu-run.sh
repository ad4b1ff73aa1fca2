#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after benchmarks/gpu-kit.sh:
# the ignored GPU tests, then the cuDNN op, our portable kernel and Burn's nn::Lstm on
# Cuda against PyTorch's cuDNN LSTM in the same call (JSON lines to stdout and $OUT).
set -uo pipefail
kit=.device
cudnn_lib=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0])")/lib
export LD_LIBRARY_PATH="$cudnn_lib:${LD_LIBRARY_PATH:-}"
export LSTM_GOLDEN_DIR="$PWD/$kit/golden"
results="${OUT:-/tmp}/gpu-results.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$results"
for test in cudnn cudnn_f64; do
  "$kit/bin/$test" --ignored --nocapture --test-threads 1 2>&1 | tee -a "$results"
done
shapes=("1 100 128 1" "16 50 256 1" "64 100 512 1" "20 35 1500 2")
for mode in infer train; do
  for shape in "${shapes[@]}"; do
    read -r b t h l <<<"$shape"
    flags=(--device cuda --mode "$mode" --batch "$b" --seq "$t" --input "$h" --hidden "$h" --layers "$l" --iters 20)
    for impl in cudnn portable burn-lstm; do
      timeout 120 "$kit/bin/lstm-bench" --impl "$impl" "${flags[@]}" 2>&1 | tail -1 | tee -a "$results"
    done
    [ -f "$kit/lstm_peers.py" ] && timeout 120 python3 "$kit/lstm_peers.py" --impl torch "${flags[@]}" 2>&1 | tail -1 | tee -a "$results"
  done
done
