#!/usr/bin/env bash
# Whether the working tree computes bit for bit what commit OLD computed: every golden
# case's outputs, final states and gradients, on every CPU kernel, backend, dtype (f32
# and f64) and instruction set this CPU has (the tests rerun themselves on the lower
# ones), LSTM and GRU.
#
#   benchmarks/bit-identical.sh OLD          # e.g. benchmarks/bit-identical.sh HEAD~3
#
# The tests are the working tree's; only the kernels' sources (SRC, default the three
# crates' src/ folders) are taken from OLD, in a copy of the working tree under OUT, so the two runs
# check the same values in the same way. For a change to the kernels that keeps their
# API (a refactor); OLD must build with the working tree's tests. Each checked value is
# hashed (tests/common/mod.rs, LSTM_VALUES_DIGEST); the script prints how many values
# it compared and every line that differs, and exits 1 if one does.
#
# Settings (environment):
#   SRC="crates/lstm-cpu/src crates/burn-lstm/src crates/cudnn-rnn/src"
#   OUT=target/bit-identical   the copy, its build folder (the first run builds the
#                              dependencies there once) and the two digest files; the
#                              working tree builds in target/ (or CARGO_TARGET_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: benchmarks/bit-identical.sh OLD-COMMIT}
SRC=${SRC:-"crates/lstm-cpu/src crates/burn-lstm/src crates/cudnn-rnn/src"}
OUT=${OUT:-target/bit-identical}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# Each run builds in a folder of its own: the copy's crates have the working tree's
# names and versions, so in one folder each build's artifacts would pass for the other's
# (same file names, and sources older than the artifacts).
NEW_TARGET=${CARGO_TARGET_DIR:-$PWD/target}
OLD_TARGET="$OUT/target"

run_golden() { # $1: source folder, $2: digest file, $3: build folder
  rm -f "$2"
  # The kernels and the glue rebuild from these sources whatever the folder held.
  (cd "$1" && CARGO_TARGET_DIR="$3" cargo clean -q -p lstm-cpu -p cudnn-rnn -p burn-lstm)
  (cd "$1" && CARGO_TARGET_DIR="$3" LSTM_VALUES_DIGEST="$2" cargo test -p burn-lstm \
    --test suite --test suite_f64 -- golden >&2)
  sort -o "$2" "$2"
}

echo "== the working tree" >&2
run_golden "$PWD" "$OUT/new.txt" "$NEW_TARGET"

echo "== $OLD's kernels with the working tree's tests" >&2
rm -rf "$OUT/old"
mkdir -p "$OUT/old"
git ls-files -z | xargs -0 cp --parents -t "$OUT/old" 2>/dev/null || true
# Only tracked files are copied: add new test files to git first.
for dir in $SRC; do
  rm -rf "${OUT:?}/old/$dir"
  mkdir -p "$OUT/old/$dir"
  git archive "$OLD" "$dir" | tar -x -C "$OUT/old"
done
run_golden "$OUT/old" "$OUT/old.txt" "$OLD_TARGET"

echo "values compared: $(wc -l < "$OUT/new.txt") (new), $(wc -l < "$OUT/old.txt") ($OLD)"
if diff "$OUT/old.txt" "$OUT/new.txt"; then
  echo "bit-identical: every value of every golden case"
else
  echo "DIFFERENT: the lines above (< $OLD, > working tree)" >&2
  exit 1
fi
