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
#   OUT=target/bit-identical   the copy and the two digest files (the build folder is
#                              the repository's target/, or CARGO_TARGET_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: benchmarks/bit-identical.sh OLD-COMMIT}
SRC=${SRC:-"crates/lstm-cpu/src crates/burn-lstm/src crates/cudnn-rnn/src"}
OUT=${OUT:-target/bit-identical}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# One build folder for both runs: the dependencies build once.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

run_golden() { # $1: source folder, $2: digest file
  rm -f "$2"
  (cd "$1" && LSTM_VALUES_DIGEST="$2" cargo test -p burn-lstm \
    --test suite --test suite_f64 -- golden >&2)
  sort -o "$2" "$2"
}

echo "== the working tree" >&2
run_golden "$PWD" "$OUT/new.txt"

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
run_golden "$OUT/old" "$OUT/old.txt"

echo "values compared: $(wc -l < "$OUT/new.txt") (new), $(wc -l < "$OUT/old.txt") ($OLD)"
if diff "$OUT/old.txt" "$OUT/new.txt"; then
  echo "bit-identical: every value of every golden case"
else
  echo "DIFFERENT: the lines above (< $OLD, > working tree)" >&2
  exit 1
fi
