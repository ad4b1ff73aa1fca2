#!/usr/bin/env bash
# The fused CPU kernel under a server's load (docs/fused-cpu.md, "Threads"): lstm-bench's
# `serve` with each thread setting of $THREADS_LIST ("default": the library's, every
# core a call; a number: set_cpu_threads(n); "shared": every core shared by the calls
# running, set_cpu_threads_shared(true)) for each count of callers of $CALLERS, in
# $ROUNDS interleaved rounds (the settings' order reversed in even rounds), one JSON
# line a run. Extra arguments go to every run (`--dtype int8`, `--cell gru`,
# `--max-rows 64`, ...; `serve --help` lists them); $SERVE_SECONDS of requests a run (10).
#   ROUNDS=3 CALLERS="1 8" benchmarks/serve.sh > serve.jsonl
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-3}"
callers_list="${CALLERS:-1 8}"
threads_list="${THREADS_LIST:-1 default shared}"
seconds="${SERVE_SECONDS:-10}"
cargo build --release -q -p lstm-bench --bin serve
serve=target/release/serve
for round in $(seq 1 "$rounds"); do
  order=$threads_list
  [ $((round % 2)) = 0 ] && order=$(echo "$threads_list" | tr ' ' '\n' | tac | tr '\n' ' ')
  for callers in $callers_list; do
    for threads in $order; do
      case "$threads" in
        default) flag=(--callers "$callers") ;;
        shared) flag=(--callers "$callers" --shared) ;;
        *) flag=(--callers "$callers" --threads "$threads") ;;
      esac
      "$serve" --seconds "$seconds" "${flag[@]}" "$@" |
        sed "s/^{/{\"round\":$round,/"
    done
  done
done
