#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after benchmarks/gpu-kit.sh:
#   bash .device/gpu-run.sh tests    the ignored GPU tests (golden FP32/TF32/f64, a larger
#                                    padded stack vs the CPU kernel, checkpoint, memory)
#   bash .device/gpu-run.sh bench    cudnn-raw, cudnn, portable and burn-lstm on Burn's
#                                    Cuda against PyTorch's cuDNN LSTM, in exact FP32 and
#                                    in TF32, on the shapes of $SHAPES
#   bash .device/gpu-run.sh trace    one inference and one training step of --impl cudnn per
#                                    shape of $TRACE_SHAPES with BURN_LSTM_CUDNN_TRACE=1:
#                                    where the binding's host time goes, phase by phase
#   bash .device/gpu-run.sh example  the train example on CUDA (cuDNN, a fallback panics),
#                                    then the infer example on CPU from its checkpoint
#   bash .device/gpu-run.sh lm       the word-level language model (docs/examples.md) on
#                                    cuDNN against PyTorch's word_language_model on its
#                                    cuDNN, one epoch each at LM_SIZES ("650 0.5;1500 0.65":
#                                    width and dropout), then each CUDA-trained model
#                                    served on the CPU by `generate` (its test perplexity)
#   bash .device/gpu-run.sh ab       each cuDNN setting of the op's speed (algorithm
#                                    policy, event ordering, GPU weight cache, call reuse,
#                                    batch-major layout, one-operation flat buffer, the
#                                    runner threads kept awake),
#                                    on (the default) and off, the opt-in paths on (the
#                                    event ordering without CubeCL's flush, the
#                                    reserve-space pool), the op without fusion (also
#                                    with the runner threads left to sleep),
#                                    in the same call, with cudnn-raw and PyTorch beside it:
#                                    JSON lines prefixed `ab <dtype> <variant>`, which
#                                    benchmarks/ab_table.py lays out as tables (AB_SHAPES,
#                                    AB_DTYPES: f32 tf32 f16 bf16; about 9 minutes with
#                                    the defaults)
#   bash .device/gpu-run.sh profile  a sampling profile of the calls' host time by thread
#                                    and function, and the op's phases (PROFILE_SHAPES)
#   bash .device/gpu-run.sh event-drift  whether the driver slows down over 10,000 calls
#                                    ordered as the op orders them, without Burn
#                                    (event-drift, each ordering; under a minute)
#   bash .device/gpu-run.sh drift    whether calls slow down over thousands of training
#                                    calls: event-drift, then in the GPU memory
#                                    test's conditions, then with each setting off
#                                    in turn, then traced
#                                    and profiled (5 to 9 minutes: slowing calls take
#                                    longer)
#   bash .device/gpu-run.sh pending  what verifies the op's paths that are still off by
#                                    default (now BURN_LSTM_CUDNN_SKIP_FLUSH and
#                                    BURN_LSTM_CUDNN_RESERVE_POOL) and the newest default
#                                    (BURN_LSTM_KEEP_AWAKE): this machine's runner
#                                    wake-ups (runner-wake), the driver's drift under
#                                    each ordering (event-drift), their GPU tests (and the
#                                    several-threads one), traces with each on and with
#                                    the runners left to sleep, and ab of each on and
#                                    off, PyTorch beside, in f32 (about 4 minutes;
#                                    AB_DTYPES='f32 f16' for about 6)
#   bash .device/gpu-run.sh parity   the op through Burn at its defaults (fused and plain)
#                                    against cudnn-raw and PyTorch at the six shapes of
#                                    docs/benchmarks.md's H200 table of 2026-11-26, FP32,
#                                    TF32, f16 and bf16, inference and training (ab with
#                                    those knobs; about 6 minutes)
#   bash .device/gpu-run.sh all      tests and bench
# Knobs (environment): CELL (lstm, or gru: IMPLS="cudnn portable burn-lstm" then,
# cudnn-raw is LSTM only),
# SHAPES ("B T H L;…"), MODES, ITERS, IMPLS, TF32_IMPLS (may be
# empty), TORCH=0 (no PyTorch peer), SKIP and ONLY (test name filters), PARALLEL (tests
# at once), TEST_TIMEOUT, BENCH_TIMEOUT, AB_VARIANTS (a filter over the ab variants'
# names), AB_MODES (infer train), AB_LENGTHS (varied), AB_TIMEOUT (seconds a run, 60).
# Lines go to stdout and to $OUT/gpu-results.txt.
set -uo pipefail
phase="${1:-all}"
kit=.device
[ -d "$kit/bin" ] || tar -C "$kit" -xJf "$kit/kit.tar.xz" || exit 1
cudnn_lib=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0])")/lib
# cudarc loads the first of libcudnn.so, …, libcudnn.so.9 it finds; pip's cuDNN has only
# libcudnn.so.9, so a system libcudnn.so (another version) would win and mismatch pip's
# libcudnn_adv: a libcudnn.so link to pip's copy comes first.
mkdir -p /tmp/cudnn-link && ln -sf "$cudnn_lib/libcudnn.so.9" /tmp/cudnn-link/libcudnn.so
export LD_LIBRARY_PATH="/tmp/cudnn-link:$cudnn_lib:${LD_LIBRARY_PATH:-}"
export LSTM_GOLDEN_DIR="$PWD/$kit/golden"
# A cuDNN failure panics instead of falling back to the (slow on a fresh GPU, correct)
# portable kernel.
export BURN_LSTM_CUDNN_STRICT=1
# A panic names its place (the kit keeps symbol names, gpu-kit.sh).
export RUST_BACKTRACE=1
results="${OUT:-/tmp}/gpu-results.txt"
log() { tee -a "$results"; }

{
  echo "kit built at $(cat "$kit/built-at" 2>/dev/null || echo 'an unknown commit')"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version 2>/dev/null | tail -1
  ls "$cudnn_lib" | grep -m1 -E '^libcudnn\.so\.[0-9]+\.'
  echo "other cuDNN on the loader's path:"; ldconfig -p | grep -E 'libcudnn(_adv)?\.so' | head -4
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'cudnn.allow_tf32 default', torch.backends.cudnn.allow_tf32)"
} 2>&1 | log

if [ "$phase" = tests ] || [ "$phase" = all ]; then
  # The portable kernel's golden run on Cuda is slow (CubeCL autotunes every new matmul
  # shape); SKIP and ONLY are extended regular expressions over test names (leave out,
  # keep only). Each test in its own process and time limit, so that one hang does not
  # hide the rest; PARALLEL of them at once (the memory test reads the whole device's
  # use: run it alone, ONLY=device_memory). Each test's lines stay together in the log.
  # CUDA_LAUNCH_BLOCKING=1: a failed kernel launch is reported by the call that made it,
  # not by a later synchronisation.
  logs=$(mktemp -d)
  # $1: a test of the `cudnn` binary, or `cudnn_f64` (every ignored test of that one).
  # A test's lines go to the log as soon as it ends (whole, under a lock), so a call cut
  # off at its time limit still brings back every test that finished.
  one_test() {
    local run=("$kit/bin/cudnn" --exact "$1")
    [ "$1" = cudnn_f64 ] && run=("$kit/bin/cudnn_f64")
    CUDA_LAUNCH_BLOCKING=1 timeout "${TEST_TIMEOUT:-240}" "${run[@]}" --ignored --nocapture \
      >"$logs/$1" 2>&1
    echo "exit $? $1" >>"$logs/$1"
    { flock 9 2>/dev/null; tee -a "$results" <"$logs/$1"; } 9>>"$logs/.lock"
  }
  export -f one_test
  export kit logs results
  tests=$("$kit/bin/cudnn" --ignored --list 2>/dev/null | sed -n 's/: test$//p' |
    grep -E "${ONLY:-.}" | { [ -n "${SKIP:-}" ] && grep -Ev "$SKIP" || cat; })
  [ -z "${ONLY:-}" ] && f64=1 || f64=0
  { [ "$f64" = 1 ] && echo cudnn_f64; echo "$tests"; } | grep . |
    xargs -P "${PARALLEL:-1}" -n 1 bash -c 'one_test "$1"' one_test
  # PyTorch's own half-precision error on the same cases (beside the half tests' lines).
  [ "$f64" = 1 ] && timeout 120 python3 crates/burn-lstm/tests/pytorch_half_error.py \
    "$kit/golden" 2>&1 | log
fi

# PyTorch's peer script, with cuDNN's TF32 switched as asked ($1: 1 or 0).
torch_peer() {
  local tf32=$1
  shift
  python3 - "$@" <<PY
import sys, runpy, torch
torch.backends.cudnn.allow_tf32 = bool($tf32)
sys.argv = ["lstm_peers.py"] + sys.argv[1:]
runpy.run_path("$kit/lstm_peers.py", run_name="__main__")
PY
}

if [ "$phase" = example ]; then
  model="${OUT:-/tmp}/sunspots-model"
  data=examples/data/sunspots_monthly.csv
  BURN_LSTM_CUDNN_TRACE=1 timeout 300 "$kit/bin/train" --device cuda --data "$data" \
    --out "$model" --epochs "${EPOCHS:-5}" 2>/tmp/train-trace.txt | tail -4 | log
  echo "exit ${PIPESTATUS[0]} train --device cuda" | log
  echo "cuDNN calls traced: $(grep -c 'burn-lstm cuDNN forward' /tmp/train-trace.txt) forward," \
    "$(grep -c 'burn-lstm cuDNN backward' /tmp/train-trace.txt) backward" | log
  grep -v 'burn-lstm cuDNN' /tmp/train-trace.txt | tail -5 | log
  timeout 120 "$kit/bin/infer" "$model" --data "$data" --plot "${OUT:-/tmp}/forecast.svg" 2>&1 |
    tail -6 | log
  echo "exit ${PIPESTATUS[0]} infer (CPU)" | log
fi

if [ "$phase" = lm ]; then
  data=examples/data/wikitext-2
  IFS=';' read -r -a sizes <<<"${LM_SIZES:-650 0.5;1500 0.65}"
  for size in "${sizes[@]}"; do
    read -r width dropout <<<"$size"
    args="--data $data --epochs ${LM_EPOCHS:-1} --emsize $width --nhid $width"
    args="$args --dropout $dropout --log-interval 50"
    model="${OUT:-/tmp}/lm-$width"
    timeout 900 python3 "$kit/word_language_model/main.py" $args --accel \
      --save /tmp/torch-lm.pt 2>&1 |
      grep --line-buffered -E "ms/batch|valid ppl|test ppl" |
      sed -u "s/^/lm torch $width: /" | log
    timeout 900 "$kit/bin/language_model" --device cuda $args --save "$model" 2>&1 |
      grep --line-buffered -E "kernel|ms/batch|valid ppl|test ppl|^[{]" |
      sed -u "s/^/lm ours $width: /" | log
    echo "lm ours $width: exit ${PIPESTATUS[0]} language_model --device cuda" | log
    timeout 900 "$kit/bin/generate" "$model" --data "$data" --words 20 2>&1 | tail -4 |
      sed "s/^/lm cpu $width: /" | log
  done
fi

if [ "$phase" = pending ]; then
  # The paths still off by default, switched on, and the newest default switched off:
  # this machine's round trip to a CubeCL runner thread against its idle time (what
  # BURN_LSTM_KEEP_AWAKE is about), without and with a thread flushing its queue every
  # 50 µs as that setting does; the paths' GPU tests (each in its process); trace lines
  # per call that name the ordering's steps and time the address read (default, the
  # runners left to sleep, the other two on); and ab against the default. Runs the
  # phases below with their knobs set (a knob given by the caller wins).
  for poke in "" --poke-every-us=50; do
    timeout 60 "$kit/bin/runner-wake" --calls 100 $poke 2>&1 | sed 's/^/runner-wake /' | log
  done
  bash "$0" event-drift
  ONLY="${ONLY:-the_event_ordering_without_a_flush|the_reserve_space_pool|the_runner_threads_kept_awake|cubecl_work_around_the_op_from_several_threads}" \
    PARALLEL="${PARALLEL:-4}" bash "$0" tests
  for trace_env in "" "BURN_LSTM_KEEP_AWAKE=0" "BURN_LSTM_CUDNN_SKIP_FLUSH=1 BURN_LSTM_CUDNN_RESERVE_POOL=1"; do
    TRACE_ENV="${TRACE_ENV-$trace_env}" \
      TRACE_SHAPES="${TRACE_SHAPES:-1 100 128 1;16 50 128 1}" ITERS=3 bash "$0" trace
  done
  AB_VARIANTS="${AB_VARIANTS:-default|skip-flush=1|reserve-pool=1|keep-awake=0|plain|plain-keep-awake=0}" \
    AB_DTYPES="${AB_DTYPES:-f32}" AB_SHAPES="${AB_SHAPES:-1 100 128 1;16 50 128 1;20 35 1500 2}" \
    RAW_ALGOS="${RAW_ALGOS:-auto}" RAW_ENV="${RAW_ENV-BURN_LSTM_CUDNN_RESERVE_POOL=1}" bash "$0" ab
fi

if [ "$phase" = parity ]; then
  # Where the op stands against PyTorch at its defaults: ab's default and plain variants,
  # cudnn-raw with PyTorch's algorithm choice (f32 and tf32), PyTorch, on the six shapes
  # of the H200 table of 2026-11-26 (a knob given by the caller wins).
  AB_VARIANTS="${AB_VARIANTS:-default|plain}" AB_DTYPES="${AB_DTYPES:-f32 tf32 f16 bf16}" \
    AB_SHAPES="${AB_SHAPES:-1 100 128 1;64 100 512 1;20 35 1500 2;128 25 1024 1;8 200 256 2 bi;256 50 512 1}" \
    RAW_ALGOS="${RAW_ALGOS:-auto}" bash "$0" ab
fi

if [ "$phase" = event-drift ]; then
  # Whether the driver slows down over 10,000 calls ordered as the op orders them
  # (event-drift.rs: no Burn, no cuDNN RNN; seconds a run): each ordering in a process
  # of its own, the event orderings also with every launch waited for
  # (CUDA_LAUNCH_BLOCKING=1, as the GPU memory test runs). Read each summary's
  # last_over_first.
  for variant in unordered host-sync events-before context-events; do
    timeout 60 "$kit/bin/event-drift" --variant "$variant" 2>&1 | sed "s/^/event-drift $variant /" | log
  done
  for variant in events-before context-events; do
    CUDA_LAUNCH_BLOCKING=1 timeout 60 "$kit/bin/event-drift" --variant "$variant" 2>&1 |
      sed "s/^/event-drift launch-blocking $variant /" | log
  done
  # The context-wide wait with streams that never run work (CubeCL's collective and
  # cleanup streams, a finished thread's stream): whether waits pile up on them.
  timeout 60 "$kit/bin/event-drift" --variant context-events --idle-streams 4 2>&1 |
    sed "s/^/event-drift idle-streams context-events /" | log
  CUDA_LAUNCH_BLOCKING=1 timeout 60 "$kit/bin/event-drift" --variant context-events --idle-streams 4 2>&1 |
    sed "s/^/event-drift launch-blocking idle-streams context-events /" | log
fi

if [ "$phase" = drift ]; then
  bash "$0" event-drift
  # Whether calls slow down over a long run: DRIFT_ITERS training calls at DRIFT_SHAPES
  # (by default the memory test's stack: 16 rows of up to 20 steps, padded, 64 wide, 2
  # layers, bidirectional); read each line's first_tenth_seconds beside its
  # last_tenth_seconds (a run over its 150 s prints no line). First the memory test's
  # own conditions (dropout 0.1 between the layers, every launch waited for:
  # CUDA_LAUNCH_BLOCKING=1, as `tests` runs it; the device waited for every 250 calls
  # only, `--sync-every 250`, where the test reads a value every thousand), which say
  # whether lstm-bench shows the slowdown at all (one difference stays: the rows' lengths
  # follow lstm-bench's formula); then each of the op's settings off in turn (and the
  # opt-in ones on), without fusion (`plain`) and without Burn (`cudnn-raw`), every call
  # waited for.
  IFS=';' read -r -a shapes <<<"${DRIFT_SHAPES:-16 20 64 2 bi}"
  read -r b t h l bi <<<"${shapes[0]}"
  flags=(--impl cudnn --device cuda --mode train --batch "$b" --seq "$t" --input "$h" --hidden "$h" --layers "$l" --lengths varied --iters "${DRIFT_ITERS:-4000}")
  [ "${bi:-}" = bi ] && flags+=(--bidirectional)
  # The test's stack: input 32, hidden 64, 2 layers, bidirectional, 16 padded rows.
  memory_test=(--impl cudnn --device cuda --mode train --batch 16 --seq 20 --input 32 --hidden 64 --layers 2 --bidirectional --lengths varied --dropout 0.1 --sync-every 250 --iters "$(( (${DRIFT_ITERS:-4000} + 249) / 250 ))")
  echo "ab f32 memory-test $(CUDA_LAUNCH_BLOCKING=1 timeout 150 "$kit/bin/lstm-bench" "${memory_test[@]}" 2>&1 | tail -1)" | log
  AB_VARIANTS="${AB_VARIANTS:-default|skip-flush=1|reserve-pool=1|keep-awake=0|batch-major=0|flat-join=0|algo=standard|events=0|cache=0|reuse=0|none|plain}" \
    ITERS="${DRIFT_ITERS:-4000}" AB_TIMEOUT=150 AB_LENGTHS=varied AB_MODES=train \
    AB_DTYPES=f32 TORCH=0 AB_SHAPES="${DRIFT_SHAPES:-16 20 64 2 bi}" RAW_ALGOS=auto \
    bash "$0" ab
  # Then at the first shape: the event before each call but the host's wait after it
  # (context-wait=0: no cuCtxWaitEvent), dropout alone, and the default settings twice
  # more: with every launch waited for (CUDA_LAUNCH_BLOCKING=1), and traced and
  # profiled: the op's phases, first tenth against last (trace_phases.py, in the working
  # tree beside the kit), and where all threads' host time went
  # ($OUT/profile-drift.txt).
  echo "ab f32 context-wait=0 $(BURN_LSTM_CUDNN_CONTEXT_WAIT=0 timeout 150 "$kit/bin/lstm-bench" "${flags[@]}" 2>&1 | tail -1)" | log
  echo "ab f32 dropout=0.1 $(timeout 150 "$kit/bin/lstm-bench" "${flags[@]}" --dropout 0.1 2>&1 | tail -1)" | log
  echo "ab f32 launch-blocking $(CUDA_LAUNCH_BLOCKING=1 timeout 150 "$kit/bin/lstm-bench" "${flags[@]}" 2>&1 | tail -1)" | log
  # Whether burn-fusion keeps adding execution plans (each lookup scans the plans that
  # start alike): the plan ids it executes and its explorations, per tenth of the log.
  fusion_flags=()
  for flag in "${flags[@]}"; do
    if [ "${skip:-}" = 1 ]; then skip=; continue; fi
    if [ "$flag" = --iters ]; then skip=1; continue; fi
    fusion_flags+=("$flag")
  done
  echo "drift fusion plans $(BURN_FUSION_LOG=full timeout 150 "$kit/bin/lstm-bench" "${fusion_flags[@]}" --iters 1000 2>&1 >/dev/null |
    python3 benchmarks/fusion_plans.py)" | log
  echo "drift trace, the op's phases (ms), first and last tenth of the calls:" | log
  BURN_LSTM_CUDNN_TRACE=1 LSTM_BENCH_PROFILE="${OUT:-/tmp}/profile-drift.txt" timeout 200 \
    "$kit/bin/lstm-bench" "${flags[@]}" 2>&1 >/dev/null |
    python3 benchmarks/trace_phases.py | log
fi

if [ "$phase" = trace ]; then
  IFS=';' read -r -a shapes <<<"${TRACE_SHAPES:-20 35 1500 2;64 100 512 1}"
  # TRACE_ENV: settings for the traced calls ("NAME=value ...").
  read -r -a trace_env <<<"${TRACE_ENV:-}"
  for shape in "${shapes[@]}"; do
    read -r b t h l <<<"$shape"
    for mode in infer train; do
      echo "trace $mode $shape ${TRACE_ENV:-} (the last call's phases, then the JSON line):" | log
      env "${trace_env[@]}" BURN_LSTM_CUDNN_TRACE=1 timeout 120 "$kit/bin/lstm-bench" --impl cudnn --device cuda \
        --mode "$mode" --batch "$b" --seq "$t" --input "$h" --hidden "$h" --layers "$l" \
        --iters "${ITERS:-20}" 2>&1 | tail -3 | log
    done
  done
fi

if [ "$phase" = bench ] || [ "$phase" = all ]; then
  IFS=';' read -r -a shapes <<<"${SHAPES:-64 100 512 1;20 35 1500 2;128 25 1024 1;16 50 256 1}"
  for mode in ${MODES:-infer train}; do
    for shape in "${shapes[@]}"; do
      read -r b t h l <<<"$shape"
      flags=(--cell "${CELL:-lstm}" --device cuda --mode "$mode" --batch "$b" --seq "$t" --input "$h" --hidden "$h" --layers "$l" --iters "${ITERS:-20}")
      for impl in ${IMPLS:-cudnn-raw cudnn portable burn-lstm}; do
        echo "fp32 $(LSTM_BENCH_TF32=0 timeout "${BENCH_TIMEOUT:-120}" "$kit/bin/lstm-bench" --impl "$impl" "${flags[@]}" 2>&1 | tail -1)" | log
      done
      [ "${TORCH:-1}" = 1 ] && echo "fp32 $(torch_peer 0 --impl torch "${flags[@]}" 2>&1 | tail -1)" | log
      for impl in ${TF32_IMPLS-cudnn-raw cudnn}; do
        echo "tf32 $(LSTM_BENCH_TF32=1 timeout 120 "$kit/bin/lstm-bench" --impl "$impl" "${flags[@]}" 2>&1 | tail -1)" | log
      done
      [ "${TORCH:-1}" = 1 ] && echo "tf32 $(torch_peer 1 --impl torch "${flags[@]}" 2>&1 | tail -1)" | log
    done
  done
fi

if [ "$phase" = ab ]; then
  # Each setting of the op's speed (all on by default; the runner threads kept awake
  # on machines with 8 hardware threads or more), off one at a time and all off,
  # and each opt-in path not yet on by default switched on (`skip-flush=1`,
  # `reserve-pool=1`), in one
  # call: same machine, same warm GPU, PyTorch beside it. A variant is a list of
  # settings; `default` sets none. cudnn-raw reads BURN_LSTM_CUDNN_ALGO too (the floor
  # the op through Burn can reach); `plain` is the op on Burn's Cuda backend without
  # fusion. AB_DTYPES: f32, tf32 (f32 data, TF32 math, PyTorch's allow_tf32 likewise),
  # f16, bf16; all but f32 run only the `default`, `skip-flush=1`, `reserve-pool=1`,
  # `keep-awake=0`, `none`, `batch-major=0`, `flat-join=0` and `plain` variants. A shape is "B T H layers", "bi" after it for a
  # bidirectional stack; AB_LENGTHS: lstm-bench's --lengths (varied; not with PyTorch).
  # RAW_ALGOS: cudnn-raw's algorithms ("standard auto"); RAW_ENV: settings cudnn-raw
  # runs with ("NAME=value ...", appended to its variant's name with `+`). AB_BASELINE: another build's
  # lstm-bench (an earlier commit's, run with the settings of AB_BASELINE_ENV), timed as
  # variant `baseline`.
  IFS=';' read -r -a shapes <<<"${AB_SHAPES:-1 100 128 1;16 50 128 1;64 100 512 1;20 35 1500 2;256 50 512 1}"
  variants=(
    "default:"
    "skip-flush=1:BURN_LSTM_CUDNN_SKIP_FLUSH=1"
    "reserve-pool=1:BURN_LSTM_CUDNN_RESERVE_POOL=1"
    "keep-awake=0:BURN_LSTM_KEEP_AWAKE=0"
    "batch-major=0:BURN_LSTM_CUDNN_BATCH_MAJOR=0"
    "flat-join=0:BURN_LSTM_FUSION_FLAT_JOIN=0"
    "algo=standard:BURN_LSTM_CUDNN_ALGO=standard"
    "events=0:BURN_LSTM_CUDNN_EVENTS=0"
    "cache=0:BURN_LSTM_GPU_WEIGHT_CACHE=0"
    "reuse=0:BURN_LSTM_CUDNN_REUSE=0"
    "none:BURN_LSTM_CUDNN_ALGO=standard BURN_LSTM_CUDNN_EVENTS=0 BURN_LSTM_GPU_WEIGHT_CACHE=0 BURN_LSTM_CUDNN_REUSE=0 BURN_LSTM_CUDNN_BATCH_MAJOR=0 BURN_LSTM_FUSION_FLAT_JOIN=0 BURN_LSTM_KEEP_AWAKE=0"
  )
  for dtype in ${AB_DTYPES:-f32 f16}; do
    tf32=0 data=$dtype
    [ "$dtype" = tf32 ] && tf32=1 data=f32
    for mode in ${AB_MODES:-infer train}; do
      for shape in "${shapes[@]}"; do
        read -r b t h l bi <<<"$shape"
        flags=(--device cuda --dtype "$data" --mode "$mode" --batch "$b" --seq "$t" --input "$h" --hidden "$h" --layers "$l" --iters "${ITERS:-20}")
        [ "${bi:-}" = bi ] && flags+=(--bidirectional)
        # PyTorch's peer takes no lengths (drift runs it without PyTorch).
        [ -n "${AB_LENGTHS:-}" ] && flags+=(--lengths "$AB_LENGTHS")
        for variant in "${variants[@]}"; do
          name=${variant%%:*}
          [[ "$name" =~ ^(${AB_VARIANTS:-.*})$ ]] || continue
          [ "$dtype" != f32 ] && [[ ! "$name" =~ ^(default|skip-flush=1|reserve-pool=1|keep-awake=0|none|batch-major=0|flat-join=0)$ ]] && continue
          # The reserve-space pool serves training calls only.
          [ "$mode" = infer ] && [ "$name" = reserve-pool=1 ] && continue
          read -r -a settings <<<"${variant#*:}"
          echo "ab $dtype $name $(env LSTM_BENCH_TF32=$tf32 "${settings[@]}" timeout "${AB_TIMEOUT:-60}" "$kit/bin/lstm-bench" --impl cudnn "${flags[@]}" 2>&1 | tail -1)" | log
        done
        if [ -n "${AB_BASELINE:-}" ] && [[ baseline =~ ^(${AB_VARIANTS:-.*})$ ]]; then
          read -r -a baseline_env <<<"${AB_BASELINE_ENV:-}"
          echo "ab $dtype baseline $(env LSTM_BENCH_TF32=$tf32 "${baseline_env[@]}" timeout "${AB_TIMEOUT:-60}" "$AB_BASELINE" --impl cudnn "${flags[@]}" 2>&1 | tail -1)" | log
        fi
        # The op without fusion: as it is, and with CubeCL's device thread left to sleep
        # (f32 only).
        for variant in "plain:" "plain-keep-awake=0:BURN_LSTM_KEEP_AWAKE=0"; do
          name=${variant%%:*}
          [[ "$name" =~ ^(${AB_VARIANTS:-.*})$ ]] || continue
          [ "$dtype" != f32 ] && [ "$name" != plain ] && continue
          read -r -a settings <<<"${variant#*:}"
          echo "ab $dtype $name $(env LSTM_BENCH_TF32=$tf32 "${settings[@]}" timeout "${AB_TIMEOUT:-60}" "$kit/bin/lstm-bench" --impl cudnn-plain "${flags[@]}" 2>&1 | tail -1)" | log
        done
        if [ "$data" = f32 ]; then
          read -r -a raw_env <<<"${RAW_ENV:-}"
          raw_label=${RAW_ENV:++${RAW_ENV// /+}}
          for algo in ${RAW_ALGOS:-standard auto}; do
            echo "ab $dtype raw-algo=$algo$raw_label $(env "${raw_env[@]}" LSTM_BENCH_TF32=$tf32 BURN_LSTM_CUDNN_ALGO=$algo timeout "${AB_TIMEOUT:-60}" "$kit/bin/lstm-bench" --impl cudnn-raw "${flags[@]}" 2>&1 | tail -1)" | log
          done
        fi
        [ "${TORCH:-1}" = 1 ] && echo "ab $dtype torch $(torch_peer "$tf32" --impl torch "${flags[@]}" 2>&1 | tail -1)" | log
      done
    done
  done
  # The call's ab lines so far as markdown tables (benchmarks/ab_table.py, in the working
  # tree beside the kit), a file that comes back with the results.
  python3 benchmarks/ab_table.py "$results" >"${OUT:-/tmp}/ab-tables.md" 2>&1
fi

if [ "$phase" = profile ]; then
  # Where the host time of one call goes, by thread and function (lstm-bench's
  # LSTM_BENCH_PROFILE, a sampling profile of CPU time): Burn's fusion thread, CubeCL's
  # device thread and the caller, at PROFILE_SHAPES, inference and training, each call
  # also traced (BURN_LSTM_CUDNN_TRACE=1: the op's own phases). Files: $OUT/profile-*.txt.
  IFS=';' read -r -a shapes <<<"${PROFILE_SHAPES:-1 100 128 1}"
  for shape in "${shapes[@]}"; do
    read -r b t h l <<<"$shape"
    for mode in infer train; do
      file="${OUT:-/tmp}/profile-$mode-${b}x${t}x${h}x${l}.txt"
      echo "profile $mode $shape -> $(basename "$file"):" | log
      BURN_LSTM_CUDNN_TRACE=1 LSTM_BENCH_PROFILE="$file" timeout 120 "$kit/bin/lstm-bench" \
        --impl cudnn --device cuda --mode "$mode" --batch "$b" --seq "$t" --input "$h" \
        --hidden "$h" --layers "$l" --iters "${PROFILE_ITERS:-3000}" 2>&1 | tail -3 | log
    done
  done
fi
