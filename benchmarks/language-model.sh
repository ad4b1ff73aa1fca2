#!/usr/bin/env bash
# PyTorch's examples/word_language_model against ours (`language_model`, burn-lstm), on
# the same files, hyper-parameters, threads and machine, one after the other:
#
#   benchmarks/language-model.sh            # 1 epoch each, 2 threads (about 9 minutes on 2 cores)
#
# It lays out a data folder with the three files PyTorch's main.py reads (train.txt,
# valid.txt, test.txt: copies of examples/data/wikitext-2/, which trains on the first 90 %
# of WikiText-2's validation split, validates on its last 10 % and tests on its test
# split), runs PyTorch's main.py unchanged from ../shared/peers/word_language_model, then
# ours, and prints their median ms/batch, words/s, and validation and test perplexity
# side by side (docs/examples.md has a measured table and how it was made). PyTorch runs
# twice: as is (its CPU nn.LSTM through oneDNN) and with oneDNN off (its native LSTM
# kernel; TORCH_NATIVE=0 skips that run).
#
# Settings (environment):
#   PYTHON=python3       a Python with PyTorch (`pip install torch`, from PyPI)
#   PEER=../shared/peers/word_language_model   PyTorch's example (main.py, model.py, data.py)
#   EPOCHS=1  THREADS=2  LOG_INTERVAL=50  EMSIZE=200  NHID=200
#   TRAIN_LINES=N        a shorter run both sides make identically: train on the first N
#                        lines of train.txt only (valid.txt and test.txt unchanged)
#   PROFILE=1            also run ours once with --profile (where a step's time goes)
#   OUT=target/language-model-bench   logs, data folder and both saved models
#
# Threads: PyTorch's intra-op pool follows OMP_NUM_THREADS (torch.set_num_threads); ours
# follows BURN_LSTM_THREADS (the fused LSTM kernel) and RAYON_NUM_THREADS (Flex's matmul
# and element-wise ops). Both sides evaluate with PyTorch's eval_batch_size of 10.
# ms/batch is the median over the progress intervals (each of LOG_INTERVAL batches);
# words/s = batch_size * bptt / (ms/batch), the same formula for both (PyTorch's main.py
# prints no words/s).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
PEER=${PEER:-../shared/peers/word_language_model}
EPOCHS=${EPOCHS:-1}
THREADS=${THREADS:-2}
LOG_INTERVAL=${LOG_INTERVAL:-50}
EMSIZE=${EMSIZE:-200}
NHID=${NHID:-200}
OUT=${OUT:-target/language-model-bench}

if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  echo "language-model.sh: PyTorch is not installed for $PYTHON." >&2
  echo "  Install it from PyPI:  $PYTHON -m pip install torch" >&2
  echo "  (the CPU-only index download.pytorch.org is not reachable here; PyPI's wheel works)" >&2
  exit 2
fi
if [ ! -f "$PEER/main.py" ]; then
  echo "language-model.sh: PyTorch's example not found at $PEER (set PEER=...)" >&2
  exit 2
fi

mkdir -p "$OUT/data"
OUT=$(cd "$OUT" && pwd)
for f in train valid test; do
  cp "examples/data/wikitext-2/$f.txt" "$OUT/data/$f.txt"
done
if [ -n "${TRAIN_LINES:-}" ]; then
  head -n "$TRAIN_LINES" examples/data/wikitext-2/train.txt > "$OUT/data/train.txt"
fi

cargo build --release -p lstm-examples --example language_model >&2

ARGS="--data $OUT/data --epochs $EPOCHS --emsize $EMSIZE --nhid $NHID --log-interval $LOG_INTERVAL"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; threads: $THREADS"
  echo "python: $("$PYTHON" --version 2>&1); torch: $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  echo "rustc: $(rustc --version)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/environment.txt"

echo "== PyTorch: $PYTHON $PEER/main.py $ARGS --save $OUT/torch-model.pt" >&2
start=$(date +%s%N)
OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS "$PYTHON" "$PEER/main.py" $ARGS \
  --save "$OUT/torch-model.pt" 2>&1 | grep -v -i numpy | tee "$OUT/torch.log"
torch_wall=$(( ($(date +%s%N) - start) / 1000000 ))

# PyTorch's CPU nn.LSTM trains through oneDNN by default; a second reference is its native
# kernel: the same main.py, unchanged, with torch.backends.mkldnn.enabled = False set before
# it runs (TORCH_NATIVE=0 skips it). Both are far slower while another process competes for
# the cores (OpenMP's threads wait on each other at every step): measure on an idle machine.
native_wall=0
if [ "${TORCH_NATIVE:-1}" = 1 ]; then
  echo "== PyTorch, oneDNN off: the same main.py with torch.backends.mkldnn.enabled = False" >&2
  start=$(date +%s%N)
  OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS "$PYTHON" - "$PEER/main.py" $ARGS \
    --save "$OUT/torch-native-model.pt" <<'PY' 2>&1 | grep -v -i numpy | tee "$OUT/torch-native.log"
import os, runpy, sys
import torch
torch.backends.mkldnn.enabled = False
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
PY
  native_wall=$(( ($(date +%s%N) - start) / 1000000 ))
fi

echo "== ours: target/release/examples/language_model $ARGS --save $OUT/burn-model" >&2
start=$(date +%s%N)
BURN_LSTM_THREADS=$THREADS RAYON_NUM_THREADS=$THREADS ./target/release/examples/language_model \
  $ARGS --save "$OUT/burn-model" | tee "$OUT/burn.log"
burn_wall=$(( ($(date +%s%N) - start) / 1000000 ))

if [ "${PROFILE:-0}" = 1 ]; then
  echo "== ours, --profile (phases synchronised)" >&2
  BURN_LSTM_THREADS=$THREADS RAYON_NUM_THREADS=$THREADS ./target/release/examples/language_model \
    $ARGS --profile --save "$OUT/burn-profile" | tee "$OUT/burn-profile.log"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/environment.txt"

"$PYTHON" - "$OUT" "$torch_wall" "$native_wall" "$burn_wall" <<'PY'
import json, os, re, statistics, sys

out, torch_wall, native_wall, burn_wall = sys.argv[1:5]
WORDS_PER_BATCH = 20 * 35  # --batch_size 20, --bptt 35 (both sides' defaults)

def parse(path):
    text = open(path).read()
    ms = [float(m) for m in re.findall(r"ms/batch\s+([0-9.]+)", text)]
    valid = [float(v) for v in re.findall(r"valid ppl\s+([0-9.]+)", text)]
    test = re.findall(r"End of training \| test loss\s+[0-9.]+ \| test ppl\s+([0-9.]+)", text)
    return ms, valid, float(test[-1]) if test else float("nan")

runs = [("PyTorch", "torch.log", torch_wall)]
if native_wall != "0":
    runs.append(("PyTorch, oneDNN off", "torch-native.log", native_wall))
runs.append(("burn-lstm", "burn.log", burn_wall))
rows = []
for name, log, wall in runs:
    ms, valid, test = parse(os.path.join(out, log))
    median = statistics.median(ms) if ms else float("nan")
    rows.append((name, median, WORDS_PER_BATCH * 1000 / median, min(valid), test, float(wall) / 1000, len(ms)))
burn_json = json.loads(open(os.path.join(out, "burn.log")).read().strip().splitlines()[-1])

print()
print("| | median ms/batch | words/s | valid ppl | test ppl | wall s (evaluation included) | intervals |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, ms, wps, valid, test, wall, n in rows:
    print(f"| {name} | {ms:.1f} | {wps:.0f} | {valid:.2f} | {test:.2f} | {wall:.0f} | {n} |")
b_ms = rows[-1][1]
ratios = ", ".join(f"{b_ms / ms:.2f}x of {name}'s" for name, ms, *_ in rows[:-1])
print(f"\nours, ms/batch: {ratios}; ours, whole-epoch words/s: "
      f"{burn_json['words_per_s']:.0f}; LSTM kernel: {burn_json['kernel']}")
PY
