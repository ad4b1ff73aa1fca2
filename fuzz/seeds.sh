#!/usr/bin/env bash
# Fills fuzz/corpus/<target>/ with the seeds each fuzz target starts from: the test
# fixtures of its format, and for burn_record the module saved with each recorder.
# docs/dev/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")"
fixtures=../crates/burn-lstm/tests/fixtures
mkdir -p corpus/pytorch corpus/keras corpus/onnx corpus/burn_record
cp "$fixtures"/pytorch/*.pt "$fixtures"/pytorch/*.safetensors corpus/pytorch/
cp "$fixtures"/keras/*.h5 "$fixtures"/keras/*.keras corpus/keras/
# The walk of 16,384 linked groups takes about 0.6 s a load under the fuzzer's
# instrumentation, and its mutants as long: with it the keras target ran 10 inputs a
# second instead of hundreds. Its own test covers it (import/keras.rs).
rm corpus/keras/k3_nested_fanout.weights.h5
cp "$fixtures"/onnx/*.onnx corpus/onnx/
BURN_LSTM_FUZZ_SEEDS=corpus/burn_record cargo +nightly fuzz run --fuzz-dir . -O -s none \
  burn_record corpus/burn_record -- -runs=0
