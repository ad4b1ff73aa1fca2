#!/usr/bin/env bash
# Builds, on this machine (Rust, no GPU), what the GPU machine (GPU, no Rust) runs:
# the cuDNN test binaries, lstm-bench, the train/infer/language_model examples with
# `--features cuda` (generate without), PyTorch's word_language_model,
# the golden cases and the
# peer script, packed (xz: the binaries are ~120 MB without debug info, over the 64 MiB a
# device call carries) into .device/kit.tar.xz beside gpu-run.sh (.device/ is git-ignored).
# Then, with the device tool:
#   run(command="bash .device/gpu-run.sh all", carry=[".device"])
# KIT=op builds only what the op's phases need (lstm-bench and the cuDNN test binaries:
# tests, bench, trace, ab, profile, drift), about 9 minutes on 2 cores instead of 30.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/gpu-kit
rm -rf "$out" .device && mkdir -p "$out/bin" "$out/golden" .device
# The commit the kit is built from, taken before the build reads the sources ("-dirty"
# with uncommitted changes): gpu-run.sh prints it first, so that every figure of a run
# names the code it measured.
git describe --always --dirty --abbrev=12 > "$out/built-at"
cargo build --release -p lstm-bench --features cuda,profile
cp target/release/lstm-bench target/release/runner-wake target/release/event-drift "$out/bin/"
for test in cudnn cudnn_f64; do
  exe=$(cargo test --release -p burn-lstm --features cuda --test "$test" --no-run \
          --message-format=json 2>/dev/null |
        python3 -c "import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get('reason')=='compiler-artifact' and m['target']['name']=='$test' and m.get('executable'): print(m['executable'])")
  cp "$exe" "$out/bin/$test"
done
if [ "${KIT:-all}" != op ]; then
  # The train and infer examples with cuDNN (`gpu-run.sh example`).
  cargo build --release -p lstm-examples --features cuda --example train --example infer \
    --example language_model
  cp target/release/examples/train target/release/examples/infer \
    target/release/examples/language_model "$out/bin/"
  # The language model served on the CPU (`gpu-run.sh lm`): built without CUDA, as a user
  # serving a CUDA-trained checkpoint would build it.
  cargo build --release -p lstm-examples --example generate
  cp target/release/examples/generate "$out/bin/"
fi
# Debug info goes, symbol names stay: a panic's backtrace on the GPU machine (gpu-run.sh
# sets RUST_BACKTRACE=1) names its functions. A device call carries 64 MiB in all, the
# tracked files of the working tree included: if the packed kit would not fit beside
# them, the symbols go too (said below).
strip --strip-debug "$out"/bin/*
# Both cells' cases in one folder (LSTM_GOLDEN_DIR there; the tests tell them apart).
cp crates/burn-lstm/tests/fixtures/golden/*.safetensors \
  crates/burn-lstm/tests/fixtures/golden-gru/*.safetensors "$out/golden/"
peers="${PEERS:-../shared/peers/lstm_peers.py}"
[ -f "$peers" ] && cp "$peers" "$out/"
# PyTorch's word_language_model, unchanged (`gpu-run.sh lm`).
lm_peer="${LM_PEER:-../shared/peers/word_language_model}"
if [ -f "$lm_peer/main.py" ]; then
  mkdir -p "$out/word_language_model"
  cp "$lm_peer"/{main.py,model.py,data.py,LICENSE} "$out/word_language_model/"
fi
tree_bytes=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s}')
budget=$((63 * 1024 * 1024 - tree_bytes - 64 * 1024))
pack() { tar -C "$out" -cf - . | xz -T0 -9 > .device/kit.tar.xz; }
pack
if [ "$(stat -c %s .device/kit.tar.xz)" -gt "$budget" ]; then
  echo "gpu-kit: with symbol names the kit passes the $((budget / 1048576)) MiB left beside the" \
    "working tree's files: stripping them (no readable backtraces)"
  strip "$out"/bin/*
  pack
fi
if [ "$(stat -c %s .device/kit.tar.xz)" -gt "$budget" ]; then
  echo "gpu-kit: the kit passes the $((budget / 1048576)) MiB left beside the working tree's" \
    "files even without symbols: build KIT=op, or pack fewer binaries" >&2
  exit 1
fi
cp benchmarks/gpu-run.sh .device/
du -sh .device
