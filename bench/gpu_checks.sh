#!/usr/bin/env bash
# The GPU checks the open issues wait for, grouped so that each group fits one device call (< 10 min).
#   bash bench/gpu_checks.sh tests     # pytest -m gpu tests/gpu (kernels, parity, modes x levels, faults)
#   bash bench/gpu_checks.sh startup   # cold/warm compile, capture time and graph memory per mode (issue 4)
#   bash bench/gpu_checks.sh decode    # step time per -O level and peers, batch 1 and 64 (issues 3, 4, 7)
#   bash bench/gpu_checks.sh sweep     # the default llama-3.2-1b sweep with peers (issue 5: < 10 min)
#   bash bench/gpu_checks.sh suite     # the GPU suite without the OOM fault test (~3 min)
#   bash bench/gpu_checks.sh tune      # default vs a tuned ladder with half the graphs (issue 10)
#   bash bench/gpu_checks.sh tp        # 2 GPUs: TP=2 vs TP=1, llama-3.1-8b decode at TP 1 and 2 (issue 9)
#   bash bench/gpu_checks.sh gemv      # batch-1 projections in a CUDA graph: cuBLAS / Inductor / Triton GEMV, ~2 min
#   bash bench/gpu_checks.sh verify    # fused kernels vs torch, fixed capture memory, the GPU suite (~7 min)
#   bash bench/gpu_checks.sh decode7   # issue 7 in one run: -O0/-O2 vs hf-compile at 1 and 64, 8b at 1 (~7 min)
#   bash bench/gpu_checks.sh ab        # gemv_check, then -O2 decode with and without the fused one-row kernels
#                                      # (GRAPHBENCH_FUSED_GEMV=1/0), llama-3.2-1b at 1 and 64, llama-3.1-8b at 1
#   bash bench/gpu_checks.sh pair2     # on nvidia-h200-x2: ab (GPU 0, cores B) beside decode7 (GPU 1,
#                                      # cores A); everything packed into $OUT/pair2.tgz (the tool brings back 8 files)
#   bash bench/gpu_checks.sh final7    # on nvidia-h200-x2: the GPU suite + a step profile (GPU 0, cores B)
#                                      # beside decode7 + a C=64 spread run with clocks logged (GPU 1, cores A),
#                                      # packed into $OUT/final7.tgz, ~5 min
#   bash bench/gpu_checks.sh flags     # on nvidia-h200-x2: the three launch savers (off by default until measured),
#                                      # all on: gemv_check + the GPU suite (GPU 0) beside one decode run of -O2 with
#                                      # each, with all, and hf-compile (GPU 1); groups flagtests / flagdecode alone
#   bash bench/gpu_checks.sh session8  # on nvidia-h200-x2: whole GPU suite (GPU 0) beside issue 7's record, the launch probe
#                                      # and the eager steps' host time with GRAPHBENCH_DIRECT_LAUNCH=0/1 (GPU 1), ~7 min
#   bash bench/gpu_checks.sh session8b # on nvidia-h200-x2: session8 again with direct launches on by default (no A/B), ~4-5 min
#   bash bench/gpu_checks.sh session8c # on nvidia-h200-x2: GPU suite beside the C = 64 spread at token budgets 2048 / 8192, ~5 min
#   bash bench/gpu_checks.sh spread64  # one GPU: -O0..-O2 x both ladders at C = 64 (the sweep's spread points without -O3 and peers)
#   bash bench/gpu_checks.sh o3small   # one GPU: -O2 vs -O3 step time at batch 1/2/4/8, each with PDL on and off (~5 min)
#   bash bench/gpu_checks.sh o3check   # one GPU: the sweep's -O2/-O3 points (default ladder, no peers) + the mode x level GPU tests (~4 min)
#   bash bench/gpu_checks.sh o3ab      # on nvidia-h200-x2: -O3 cold start, GEMM candidates precompiled in threads vs the worker pool
#   bash bench/gpu_checks.sh session9  # one GPU: -O3 cold start sampled + its autotune log, then hostprobe (~7 min)
#   bash bench/gpu_checks.sh hostprobe # one GPU: launch costs (cuBLAS at prefill shapes) + stack samples of -O2 eager / -O1 piecewise steps
#   bash bench/gpu_checks.sh pdl       # on nvidia-h200-x2: GPU suite with GRAPHBENCH_PDL=1 (GPU 0) beside issue 7's run with a pdl variant (GPU 1)
#   bash bench/gpu_checks.sh session6a # on nvidia-h200-x2: flagtests, then -O2 at C = 64 x 5 (GPU 0) beside flagdecode (GPU 1), ~8 min
#   bash bench/gpu_checks.sh session6b # on nvidia-h200-x2: GPU suite + host/device time per step (GPU 0) beside issue 7's record (GPU 1)
#   bash bench/gpu_checks.sh session6c # on nvidia-h200-x2: host profile of launches (GPU 0) beside profile_step at 1 and 64 (GPU 1)
#   bash bench/gpu_checks.sh session6d # on nvidia-h200-x2: the default sweep (GPU 0) beside the GPU suite + host/device time per step (GPU 1)
#   bash bench/gpu_checks.sh session6e # one GPU: issue 7 in one run, in-kernel merge split size 1 and 2 tiles as variants
#   bash bench/gpu_checks.sh session6f # on nvidia-h200-x2: session6e (GPU 1) beside the C = 64 spread + hidden-sync probe (GPU 0)
#   bash bench/gpu_checks.sh pair3     # on nvidia-h200-x2: decode7 (GPU 1, cores A) beside -O2 at C=64 x 5 repeats
#                                      # for both ladders (GPU 0, cores B; slowest steps per repeat), ~4 min
#   bash bench/gpu_checks.sh pair      # on nvidia-h200-x2: gemv_check, then decode7 (GPU 1, cores A) beside
#                                      # the fixed-memory probe + GPU suite (GPU 0, cores B), ~9 min
#   bash bench/gpu_checks.sh o3profile # -O3's cold start sampled in every thread (~4 min)
#   bash bench/gpu_checks.sh probe     # why -O3's autotuning compiles serially (issue 5's sweep time), ~2 min
# Logs and JSON go to $OUT (the device tool brings them back); copy figures into bench/RESULTS.md.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src:$PWD" PYTHONUNBUFFERED=1 GRAPHBENCH_CACHE_ROOT="${GRAPHBENCH_CACHE_ROOT:-/tmp/gbc}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT="${OUT:-/tmp/gpu-checks}"; mkdir -p "$OUT"
# The two halves of the physical cores, each with its hyper-thread siblings (cores A, cores B): a paired call
# runs one job on each. (Sessions 5-6 used logical CPUs 0-15 / 16-31, which on a hyper-threaded host may
# be the two threads of the same cores: the jobs then slowed each other's host-bound steps.)
half_cores() {  # logical CPUs on half $1 (0 or 1) of the physical cores
  lscpu -p=CPU,CORE,SOCKET 2>/dev/null | grep -v '^#' | awk -F, -v h="$1" '
    { key = $3 ":" $2; if (!(key in idx)) { idx[key] = n++ } cpu[NR] = $1; of[NR] = key }
    END { for (i = 1; i <= NR; i++) if ((idx[of[i]] < n / 2) == (h == 0)) out = out (out == "" ? "" : ",") cpu[i]; print out }'
}
# Issue 7's record on cores $1 (at most 360 s): -O0/-O2 vs hf-compile at batch 1 and 64, then llama-3.1-8b at 1
record7() {
  taskset -c "$1" timeout 260 python3 bench/decode.py --model llama-3.2-1b --batches 1,64 --levels 0,2 \
    --peers hf-compile --out "$OUT/decode.json" --timeout 200 2>&1 | grep -v "^DEBUG" > "$OUT/decode7.out"
  taskset -c "$1" timeout 100 python3 bench/decode.py --model llama-3.1-8b --batches 1 --levels 2 --peers "" \
    --out "$OUT/decode-8b.json" --timeout 90 2>&1 | grep -v "^DEBUG" >> "$OUT/decode7.out"
}
CORES_A="${CORES_A:-$(half_cores 0)}"; CORES_B="${CORES_B:-$(half_cores 1)}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
echo "cores A: $CORES_A; cores B: $CORES_B" >> "$OUT/env.txt"
lscpu -p=CPU,CORE,SOCKET 2>/dev/null | grep -v '^#' | tr '\n' ' ' >> "$OUT/env.txt"; echo >> "$OUT/env.txt"
python3 -c "import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)" >> "$OUT/env.txt"
git rev-parse --short HEAD >> "$OUT/env.txt" 2>/dev/null
case "${1:-}" in
  tests)
    timeout ${GPU_TESTS_TIMEOUT:-560} python3 -m pytest -m gpu -q -p no:logging --durations=15 tests/gpu 2>&1 | tee "$OUT/gpu-tests.log" | tail -40 ;;
  startup)
    timeout 560 python3 bench/startup.py --model llama-3.2-1b --max-num-seqs 256 --levels 0,1,3 --out "$OUT/startup.json" 2>&1 \
      | grep -v "^DEBUG" | tee "$OUT/startup.log" | tail -20 ;;
  decode)
    timeout 560 python3 bench/decode.py --model llama-3.2-1b --batches 1,64 --levels 0,1,2,3 --peers hf-eager,hf-compile \
      --out "$OUT/decode.json" --timeout 240 2>&1 | grep -v "^DEBUG" | tee "$OUT/decode.log" | tail -25 ;;
  sweep)
    # run it with timeout_s 600. The sweep must stop by 582 s after this script started (the lines above
    # take ~10 s: importing transformers for env.txt): an interrupted sweep then has ~7 s to write its
    # report and the tar below still fits the call's 600 s. In session 9 a sweep stopped at its own
    # 585 s left the tar 5 s, and the archive came back cut short.
    timeout ${SWEEP_TIMEOUT:-$(( SECONDS < 560 ? 582 - SECONDS : 22 ))} python3 -m graphbench sweep --model llama-3.2-1b --results "$OUT/sweep" --report "$OUT/sweep-report" \
      2>&1 | tee "$OUT/sweep.log" | tail -40
    tar czf "$OUT/sweep.tgz" -C "$OUT" sweep sweep-report 2>/dev/null && rm -rf "$OUT/sweep" "$OUT/sweep-report" ;;
  suite)  # the GPU suite without the 60-s OOM fault test (a warm follow-up call with little time left)
    timeout ${GPU_TESTS_TIMEOUT:-200} python3 -m pytest -m gpu -q -p no:logging --durations=10 tests/gpu \
      --ignore=tests/gpu/test_faults_gpu.py 2>&1 | tee "$OUT/gpu-tests.log" | tail -25 ;;
  tune)
    # the default ladder for 256 sequences has 51 sizes: tuned:25 is about half the graphs
    timeout 580 python3 -m graphbench sweep --model llama-3.2-1b --levels 2 --ladders default,tuned:25 --peers none \
      --concurrency 3,11,24,45 --prompt-len uniform:64-256 --output-len uniform:32-128 --repeats 3 \
      --results "$OUT/tune" --report "$OUT/tune-report" 2>&1 | tee "$OUT/tune.log" | tail -30
    tar czf "$OUT/tune.tgz" -C "$OUT" tune tune-report 2>/dev/null ;;
  tp)  # on nvidia-h200-x2: TP=2 vs TP=1 tests, llama-3.1-8b decode at TP 1 and 2 (issue 9)
    timeout 240 python3 -m pytest -m gpu -q -p no:logging tests/gpu/test_tensor_parallel_gpu.py 2>&1 | tee "$OUT/tp-tests.log" | tail -5
    for tp in 1 2; do
      timeout 150 python3 bench/decode.py --model llama-3.1-8b --batches 1,64 --levels 0,2 --peers "" --tp $tp \
        --out "$OUT/decode-8b-tp$tp.json" --timeout 140 2>&1 | grep -v "^DEBUG" | tee "$OUT/decode-8b-tp$tp.log" | tail -6
    done ;;
  probe)  # Inductor's GEMM autotune precompile: serial or parallel? with and without early workers
    for early in 0 1; do
      GRAPHBENCH_EARLY_COMPILE_WORKERS=$early WAIT_FOR_WORKERS_S=$((early * 15)) timeout 150 \
        python3 bench/debug/autotune_precompile.py 2>&1 | grep -v "^DEBUG" | tee "$OUT/probe-early$early.log" | tail -8
    done ;;
  gemv)  # batch-1 projections in a CUDA graph: cuBLAS vs Inductor's reduction vs a Triton GEMV (issue 7)
    timeout 300 python3 bench/gemv.py --model llama-3.2-1b --out "$OUT/gemv.json" 2>&1 | grep -v "^DEBUG" | tee "$OUT/gemv.log" | tail -12 ;;
  verify)  # after kernel changes: the fused kernels against torch, the fixed capture memory, the GPU suite
    timeout 60 python3 bench/debug/gemv_check.py 2>&1 | tee "$OUT/gemv-check.log" | grep -E "BAD|CHECK"
    timeout 40 python3 bench/debug/graph_fixed_memory.py 2>&1 | tee "$OUT/graph-fixed-memory.log" | tail -6
    timeout ${GPU_TESTS_TIMEOUT:-420} python3 -m pytest -m gpu -q -p no:logging --durations=10 tests/gpu 2>&1 \
      | tee "$OUT/gpu-tests.log" | tail -25 ;;
  ab)
    timeout 60 python3 bench/debug/gemv_check.py 2>&1 | tee "$OUT/gemv-check.log" | grep -E "BAD|CHECK"
    for fused in 1 0; do
      GRAPHBENCH_FUSED_GEMV=$fused timeout 150 python3 bench/decode.py --model llama-3.2-1b --batches 1,64 --levels 2 \
        --peers "" --out "$OUT/decode-fused$fused.json" --timeout 140 2>&1 | grep -v "^DEBUG" | tail -3
      GRAPHBENCH_FUSED_GEMV=$fused timeout 150 python3 bench/decode.py --model llama-3.1-8b --batches 1 --levels 2 \
        --peers "" --out "$OUT/decode-8b-fused$fused.json" --timeout 140 2>&1 | grep -v "^DEBUG" | tail -2
    done ;;
  pair2)
    GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1 taskset -c "$CORES_A" bash "$0" decode7 > "$OUT/decode7.out" 2>&1 &
    GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0 taskset -c "$CORES_B" bash "$0" ab > "$OUT/ab.out" 2>&1
    wait; cat "$OUT/ab.out" "$OUT/decode7.out"
    tar czf /tmp/pair2.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/pair2.tgz "$OUT/" ;;
  final7)
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1
     taskset -c "$CORES_A" bash "$0" decode7 > "$OUT/decode7.out" 2>&1
     # the spread at C = 64: -O2 alone, 5 repeats, with the GPU's clocks and power every 100 ms beside it
     nvidia-smi -i 1 --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
       --format=csv -lms 100 > "$OUT/clocks.csv" 2>&1 & smi=$!
     taskset -c "$CORES_A" timeout 150 python3 -m graphbench sweep --model llama-3.2-1b --levels 2 --ladders default --peers none \
       --concurrency 64 --repeats 5 --results "$OUT/spread" --report "$OUT/spread-report" > "$OUT/spread.log" 2>&1
     kill $smi) &
    export GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0
    taskset -c "$CORES_B" timeout 330 python3 -m pytest -m gpu -q -p no:logging --durations=5 tests/gpu > "$OUT/tests.out" 2>&1
    taskset -c "$CORES_B" timeout 120 python3 bench/profile_step.py --model llama-3.2-1b --level 2 --batches 1,64 \
      --out "$OUT/profile-step.json" > "$OUT/profile-step.log" 2>&1
    wait; tail -12 "$OUT/tests.out"; cat "$OUT/decode7.out"; grep -v "^DEBUG" "$OUT/profile-step.log" | tail -45
    tar czf /tmp/final7.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/final7.tgz "$OUT/" ;;
  flagtests)  # the launch savers (off by default until measured), all on: gemv_check and the GPU tests
    export GRAPHBENCH_DECODE_WRITES_KV=1 GRAPHBENCH_GATE_UP_SILU=1 GRAPHBENCH_DECODE_MERGE_IN_KERNEL=1
    timeout 60 python3 bench/debug/gemv_check.py 2>&1 | tee "$OUT/gemv-check.log" | grep -E "BAD|CHECK"
    timeout 300 python3 -m pytest -m gpu -q -p no:logging tests/gpu 2>&1 | tee "$OUT/flags-tests.log" | tail -6 ;;
  flagdecode)  # one decode run: -O2 as it is, with each launch saver, with all of them, and hf-compile
    timeout 560 python3 bench/decode.py --model llama-3.2-1b --batches 1,64 --levels 2 --peers hf-compile \
      --variant kv=GRAPHBENCH_DECODE_WRITES_KV=1 --variant silu=GRAPHBENCH_GATE_UP_SILU=1 \
      --variant merge=GRAPHBENCH_DECODE_MERGE_IN_KERNEL=1 \
      --variant all=GRAPHBENCH_DECODE_WRITES_KV=1,GRAPHBENCH_GATE_UP_SILU=1,GRAPHBENCH_DECODE_MERGE_IN_KERNEL=1 \
      --out "$OUT/decode-flags.json" --timeout 150 2>&1 | grep -v "^DEBUG" | tee "$OUT/decode-flags.log" | tail -16 ;;
  flags)  # on nvidia-h200-x2: flagtests (GPU 0, cores B) beside flagdecode (GPU 1, cores A), ~7 min
    GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1 taskset -c "$CORES_A" bash "$0" flagdecode > "$OUT/flagdecode.out" 2>&1 &
    GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0 taskset -c "$CORES_B" bash "$0" flagtests > "$OUT/flagtests.out" 2>&1
    wait; cat "$OUT/flagtests.out" "$OUT/flagdecode.out"
    tar czf /tmp/flags.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/flags.tgz "$OUT/" ;;
  session8)  # on nvidia-h200-x2: the whole GPU suite, PDL on by default (GPU 0, cores B) beside issue 7's record
             # with PDL on by default, the launch-overhead probe and step_host_time with direct launches off/on
             # (GPU 1, cores A); one tgz, ~8-9 min (run it with timeout_s 600)
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1
     # (timeouts sum to 520 s: the tar below must run before the call's 600 s)
     record7 "$CORES_A"
     taskset -c "$CORES_A" timeout 40 python3 bench/debug/launch_overhead.py > "$OUT/launch-overhead.log" 2>&1
     for direct in 0 1; do  # the eager steps' host time with and without runner/launch.py's direct launches
       GRAPHBENCH_DIRECT_LAUNCH=$direct taskset -c "$CORES_A" timeout 60 python3 bench/debug/step_host_time.py \
         --model llama-3.2-1b --level 2 --concurrency 64 --busy-ms 20 --sample 3 --out "$OUT/step-host-direct$direct.json" \
         > "$OUT/step-host-direct$direct.log" 2>&1
     done) &
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0
     taskset -c "$CORES_B" timeout 520 python3 -m pytest -m gpu -q -p no:logging --durations=10 tests/gpu > "$OUT/tests.log" 2>&1)
    wait; tail -4 "$OUT/tests.log"; grep -v "^DEBUG" "$OUT/decode7.out" | tail -16; grep -v "^{" "$OUT/launch-overhead.log" | tail -8
    grep -h "mode NONE\|mode PIECEWISE" "$OUT"/step-host-direct*.log | head -12
    tar czf /tmp/session8.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/session8.tgz "$OUT/" ;;
  session8b)  # on nvidia-h200-x2, after direct launches became the default: the whole GPU suite (GPU 0, cores B)
              # beside issue 7's record, the launch probe and the eager steps' host time (GPU 1, cores A), ~4-5 min
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1
     record7 "$CORES_A"
     taskset -c "$CORES_A" timeout 40 python3 bench/debug/launch_overhead.py > "$OUT/launch-overhead.log" 2>&1
     taskset -c "$CORES_A" timeout 60 python3 bench/debug/step_host_time.py --model llama-3.2-1b --level 2 \
       --concurrency 64 --busy-ms 20 --out "$OUT/step-host.json" > "$OUT/step-host.log" 2>&1) &
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0
     taskset -c "$CORES_B" timeout 400 python3 -m pytest -m gpu -q -p no:logging --durations=10 tests/gpu > "$OUT/tests.log" 2>&1)
    wait; tail -4 "$OUT/tests.log"; grep -v "^DEBUG" "$OUT/decode7.out" | tail -16; grep -v "^{" "$OUT/launch-overhead.log" | tail -8
    grep -h "mode NONE\|mode PIECEWISE" "$OUT"/step-host.log | head -8
    tar czf /tmp/session8b.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/session8b.tgz "$OUT/" ;;
  session8c)  # on nvidia-h200-x2: the step's token budget (8192 by default on an H200 now, 2048 before): the
              # whole GPU suite (GPU 0, cores B) beside the C = 64 spread for -O0 and -O2 x both ladders x
              # budgets 2048 / 8192, 5 repeats, one sweep (GPU 1, cores A), ~5 min
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1
     taskset -c "$CORES_A" timeout 300 python3 -m graphbench sweep --model llama-3.2-1b --levels 0,2 --peers none \
       --concurrency 64 --repeats 5 --grid max_num_batched_tokens=2048,8192 --results "$OUT/budget" \
       --report "$OUT/budget-report" > "$OUT/budget.log" 2>&1) &
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0
     taskset -c "$CORES_B" timeout 330 python3 -m pytest -m gpu -q -p no:logging --durations=10 tests/gpu > "$OUT/tests.log" 2>&1)
    wait; tail -4 "$OUT/tests.log"; grep -v "^DEBUG" "$OUT/budget.log" | tail -30
    tar czf /tmp/session8c.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/session8c.tgz "$OUT/" ;;
  spread64)  # one GPU, alone: the default sweep's -O0..-O2 points at C = 64 only (3 repeats, no peers, no -O3), ~3-4 min
    timeout ${SPREAD_TIMEOUT:-270} python3 -m graphbench sweep --model llama-3.2-1b --levels 0,1,2 --peers none --concurrency 64 \
      --results "$OUT/spread64" --report "$OUT/spread64-report" > "$OUT/spread64.log" 2>&1
    grep -v "^DEBUG" "$OUT/spread64.log" | grep -v "━" | tail -14
    rm -f "$OUT"/spread64-report/*.png "$OUT"/spread64-report/report.html
    tar czf /tmp/spread64.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/spread64.tgz "$OUT/" ;;
  hostprobe)  # one GPU, ~3 min: where host time goes in the steps that follow the host: launch costs (cuBLAS at
              # prefill shapes included), then stack samples of -O2's eager and -O1's piecewise steps at C = 64
    timeout 60 python3 bench/debug/launch_overhead.py > "$OUT/launch-overhead.log" 2>&1
    grep -v "^{" "$OUT/launch-overhead.log" | tail -16
    timeout 90 python3 bench/debug/step_host_time.py --model llama-3.2-1b --level 2 --concurrency 64 --busy-ms 20 \
      --sample 3 --out "$OUT/step-host-O2.json" > "$OUT/step-host-O2.log" 2>&1
    timeout 90 python3 bench/debug/step_host_time.py --model llama-3.2-1b --level 1 --concurrency 64 --busy-ms 20 \
      --sample 3 --sample-mode PIECEWISE --out "$OUT/step-host-O1.json" > "$OUT/step-host-O1.log" 2>&1
    grep -h "mode \|innermost\|%" "$OUT"/step-host-O*.log | head -60
    tar czf /tmp/hostprobe.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/hostprobe.tgz "$OUT/" ;;
  pdl)  # on nvidia-h200-x2: programmatic dependent launch (GRAPHBENCH_PDL=1): gemv_check and the GPU suite with it on
        # (GPU 0, cores B) beside issue 7's run with a pdl variant (GPU 1, cores A), packed into one tgz, ~6 min
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1
     taskset -c "$CORES_A" timeout 300 python3 bench/decode.py --model llama-3.2-1b --batches 1,64 --levels 0,2 \
       --peers hf-compile --variant pdl=GRAPHBENCH_PDL=1 --out "$OUT/decode.json" --timeout 140 2>&1 \
       | grep -v "^DEBUG" > "$OUT/decode.log"
     taskset -c "$CORES_A" timeout 150 python3 bench/decode.py --model llama-3.1-8b --batches 1 --levels 2 --peers "" \
       --variant pdl=GRAPHBENCH_PDL=1 --out "$OUT/decode-8b.json" --timeout 70 2>&1 | grep -v "^DEBUG" > "$OUT/decode-8b.log") &
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0 GRAPHBENCH_PDL=1
     taskset -c "$CORES_B" timeout 60 python3 bench/debug/gemv_check.py > "$OUT/gemv-check.log" 2>&1
     taskset -c "$CORES_B" timeout 300 python3 -m pytest -m gpu -q -p no:logging tests/gpu > "$OUT/tests.log" 2>&1)
    wait; grep -E "BAD|CHECK" "$OUT/gemv-check.log"; tail -4 "$OUT/tests.log"; tail -12 "$OUT/decode.log"; tail -3 "$OUT/decode-8b.log"
    tar czf /tmp/pdl.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/pdl.tgz "$OUT/" ;;
  session6a)  # on nvidia-h200-x2: flagtests then -O2 at C = 64 x 5 repeats (GPU 0, cores B) beside flagdecode (GPU 1)
    GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1 taskset -c "$CORES_A" bash "$0" flagdecode > "$OUT/flagdecode.out" 2>&1 &
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0
     taskset -c "$CORES_B" bash "$0" flagtests > "$OUT/flagtests.out" 2>&1
     taskset -c "$CORES_B" timeout 200 python3 -m graphbench sweep --model llama-3.2-1b --levels 2 --peers none \
       --concurrency 64 --repeats 5 --results "$OUT/spread" --report "$OUT/spread-report" > "$OUT/spread.log" 2>&1)
    wait; cat "$OUT/flagtests.out" "$OUT/flagdecode.out"; grep -v "^DEBUG" "$OUT/spread.log" | tail -14
    tar czf /tmp/session6a.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/session6a.tgz "$OUT/" ;;
  session6b)  # on nvidia-h200-x2: gemv_check + GPU suite + host vs device time per step (GPU 0) beside issue 7's
              # record with the launch savers' A/B (GPU 1), ~5 min
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1
     taskset -c "$CORES_A" timeout 330 python3 bench/decode.py --model llama-3.2-1b --batches 1,64 --levels 0,2 --peers hf-compile \
       --variant nokv=GRAPHBENCH_DECODE_WRITES_KV=0 --variant nomerge=GRAPHBENCH_DECODE_MERGE_IN_KERNEL=0 \
       --out "$OUT/decode.json" --timeout 200 2>&1 | grep -v "^DEBUG" > "$OUT/decode.log"
     taskset -c "$CORES_A" timeout 150 python3 bench/decode.py --model llama-3.1-8b --batches 1 --levels 2 --peers "" \
       --out "$OUT/decode-8b.json" --timeout 140 2>&1 | grep -v "^DEBUG" > "$OUT/decode-8b.log") &
    export GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0
    taskset -c "$CORES_B" timeout 60 python3 bench/debug/gemv_check.py > "$OUT/gemv-check.log" 2>&1
    taskset -c "$CORES_B" timeout 300 python3 -m pytest -m gpu -q -p no:logging --durations=5 tests/gpu > "$OUT/tests.log" 2>&1
    taskset -c "$CORES_B" timeout 150 python3 bench/debug/step_host_time.py --model llama-3.2-1b --level 2 --concurrency 64 \
      --waves 3 --out "$OUT/step-host-time.json" > "$OUT/step-host-time.log" 2>&1
    wait; grep -E "BAD|CHECK" "$OUT/gemv-check.log"; tail -12 "$OUT/tests.log"; grep -v "^DEBUG" "$OUT/step-host-time.log" | tail -24
    tail -14 "$OUT/decode.log"; tail -3 "$OUT/decode-8b.log"
    tar czf /tmp/session6b.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/session6b.tgz "$OUT/" ;;
  session6c)  # on nvidia-h200-x2: where the host time of prefill / mixed / decode launches goes (GPU 0) beside a
              # per-kernel step profile at batch 1 and 64 (GPU 1), ~3 min
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1
     taskset -c "$CORES_A" timeout 200 python3 bench/profile_step.py --model llama-3.2-1b --level 2 --batches 1,64 \
       --out "$OUT/profile-step.json" 2>&1 | grep -v "^DEBUG" > "$OUT/profile-step.log") &
    export GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0
    taskset -c "$CORES_B" timeout 200 python3 bench/debug/step_host_time.py --model llama-3.2-1b --level 2 --concurrency 64 \
      --waves 2 --cprofile --out "$OUT/step-host-time.json" 2>&1 | grep -v "^DEBUG" > "$OUT/step-host-time.log"
    wait; head -12 "$OUT/step-host-time.log"; grep -A12 "^batch" "$OUT/profile-step.log" | grep -v "^ *-" | head -40
    tar czf /tmp/session6c.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/session6c.tgz "$OUT/" ;;
  session6d)  # on nvidia-h200-x2: the default sweep with both peers (GPU 0, cores B; issue 5's record) beside
              # the GPU suite and the host vs device time per step (GPU 1, cores A), < 10 min
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1
     taskset -c "$CORES_A" timeout 280 python3 -m pytest -m gpu -q -p no:logging --durations=5 tests/gpu > "$OUT/tests.log" 2>&1
     taskset -c "$CORES_A" timeout 100 python3 bench/debug/step_host_time.py --model llama-3.2-1b --level 2 --concurrency 64 \
       --waves 3 --out "$OUT/step-host-time.json" 2>&1 | grep -v "^DEBUG" > "$OUT/step-host-time.log") &
    export GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0
    taskset -c "$CORES_B" timeout 585 python3 -m graphbench sweep --model llama-3.2-1b --results "$OUT/sweep" \
      --report "$OUT/sweep-report" > "$OUT/sweep.log" 2>&1
    wait; tail -8 "$OUT/tests.log"; head -14 "$OUT/step-host-time.log"; grep -v "^DEBUG" "$OUT/sweep.log" | tail -30
    tar czf /tmp/session6d.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/session6d.tgz "$OUT/" ;;
  session6e)  # one GPU: issue 7 in one run with the split size of the in-kernel merge tried at 1 and 2 tiles, ~4 min
    timeout ${DECODE_TIMEOUT:-260} python3 bench/decode.py --model llama-3.2-1b --batches 1,64 --levels 0,2 --peers hf-compile \
      --variant min1=GRAPHBENCH_DECODE_MIN_TILES=1 --variant min2=GRAPHBENCH_DECODE_MIN_TILES=2 \
      --out "$OUT/decode.json" --timeout 120 2>&1 | grep -v "^DEBUG" > "$OUT/decode.log"
    timeout ${DECODE_8B_TIMEOUT:-100} python3 bench/decode.py --model llama-3.1-8b --batches 1 --levels 2 --peers "" \
      --out "$OUT/decode-8b.json" --timeout 75 2>&1 | grep -v "^DEBUG" > "$OUT/decode-8b.log"
    tail -14 "$OUT/decode.log"; tail -3 "$OUT/decode-8b.log" ;;
  session6f)  # on nvidia-h200-x2: session6e (GPU 1, cores A) beside the C = 64 spread of -O2 (5 repeats, both
              # ladders) and the hidden-sync probe (GPU 0, cores B), < 5.5 min
    (export GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1
     DECODE_TIMEOUT=215 DECODE_8B_TIMEOUT=80 taskset -c "$CORES_A" bash "$0" session6e > "$OUT/session6e.out" 2>&1) &
    export GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0
    taskset -c "$CORES_B" timeout 175 python3 -m graphbench sweep --model llama-3.2-1b --levels 2 --peers none \
      --concurrency 64 --repeats 5 --results "$OUT/spread" --report "$OUT/spread-report" > "$OUT/spread.log" 2>&1
    taskset -c "$CORES_B" timeout 80 python3 bench/debug/step_host_time.py --model llama-3.2-1b --level 2 --concurrency 64 \
      --waves 1 --busy-ms 20 --out "$OUT/step-busy.json" 2>&1 | grep -v "^DEBUG" > "$OUT/step-busy.log"
    wait; grep -v "^DEBUG" "$OUT/spread.log" | grep -v "━" | tail -6; tail -4 "$OUT/step-busy.log"; cat "$OUT/session6e.out"
    tar czf /tmp/session6f.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/session6f.tgz "$OUT/" ;;
  pair3)
    GRAPHBENCH_CACHE_ROOT=/tmp/gbc1 CUDA_VISIBLE_DEVICES=1 taskset -c "$CORES_A" bash "$0" decode7 > "$OUT/decode7.out" 2>&1 &
    GRAPHBENCH_CACHE_ROOT=/tmp/gbc0 CUDA_VISIBLE_DEVICES=0 taskset -c "$CORES_B" timeout 250 python3 -m graphbench sweep \
      --model llama-3.2-1b --levels 2 --peers none --concurrency 64 --repeats 5 --results "$OUT/spread" \
      --report "$OUT/spread-report" > "$OUT/spread.log" 2>&1
    wait; cat "$OUT/decode7.out"; grep -v "^DEBUG" "$OUT/spread.log" | tail -12
    tar czf /tmp/pair3.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/pair3.tgz "$OUT/" ;;
  pair)  # two GPUs, two disjoint halves of the cores: the timed run shares neither GPU nor cores
    timeout 60 python3 bench/debug/gemv_check.py 2>&1 | tee "$OUT/gemv-check.log" | grep -E "BAD|CHECK"
    CUDA_VISIBLE_DEVICES=1 taskset -c "$CORES_A" bash "$0" decode7 > "$OUT/decode7.out" 2>&1 &
    CUDA_VISIBLE_DEVICES=0 taskset -c "$CORES_B" bash -c "timeout 40 python3 bench/debug/graph_fixed_memory.py > '$OUT/graph-fixed-memory.log' 2>&1; \
      GPU_TESTS_TIMEOUT=420 bash '$0' tests > '$OUT/tests.out' 2>&1"
    wait; tail -6 "$OUT/graph-fixed-memory.log"; tail -15 "$OUT/tests.out"; cat "$OUT/decode7.out" ;;
  decode7)  # issue 7 in one run: -O0 and -O2 against hf-compile at batch 1 and 64, then llama-3.1-8b at batch 1
    timeout 330 python3 bench/decode.py --model llama-3.2-1b --batches 1,64 --levels 0,2 --peers hf-compile \
      --out "$OUT/decode.json" --timeout 300 2>&1 | grep -v "^DEBUG" | tee "$OUT/decode.log" | tail -8
    timeout 150 python3 bench/decode.py --model llama-3.1-8b --batches 1 --levels 2 --peers "" \
      --out "$OUT/decode-8b.json" --timeout 140 2>&1 | grep -v "^DEBUG" | tee "$OUT/decode-8b.log" | tail -4 ;;
  session9)  # one GPU, ~7 min: -O3's cold start sampled in every thread with Inductor's autotune log kept
             # (where the sweep's longest point goes), then hostprobe; one tgz (run it with timeout_s 600)
    OUT="$OUT" timeout 300 python3 bench/debug/sample_cold_start.py --level 3 --max-num-seqs 256 > "$OUT/o3.log" 2>&1
    echo "autotunes: $(grep -c 'AUTOTUNE benchmarking' "$OUT/o3.log")"; grep "AUTOTUNE benchmarking\|^cold start\|compile_sizes" "$OUT/o3.log" | head -40
    head -70 "$OUT/samples-O3.txt" | cut -c1-160
    OUT="$OUT/hostprobe" bash "$0" hostprobe > "$OUT/hostprobe.out" 2>&1
    tar czf /tmp/session9.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/session9.tgz "$OUT/" ;;
  o3ab)  # on nvidia-h200-x2, ~4 min: -O3's cold start with the autotune candidates precompiled in threads of the
          # process (GPU 0, cores B) and in Inductor's worker pool (GPU 1, cores A); one tgz
    for side in "0 threads $CORES_B" "1 pool $CORES_A"; do
      set -- $side
      (mkdir -p "$OUT/$2"; GRAPHBENCH_CACHE_ROOT=/tmp/gbc-$2 CUDA_VISIBLE_DEVICES=$1 GRAPHBENCH_AUTOTUNE_PRECOMPILE=$2 OUT="$OUT/$2" \
       taskset -c "$3" timeout 400 python3 bench/debug/sample_cold_start.py --level 3 --max-num-seqs 256 > "$OUT/$2/o3.log" 2>&1) &
    done
    wait
    for mode in threads pool; do
      echo "== $mode: $(grep -c 'AUTOTUNE benchmarking' "$OUT/$mode/o3.log") autotunes"; grep -o "compile_sizes_seconds=[0-9.]*\\|inductor_seconds=[0-9.]*\\|total_seconds=[0-9.]*" "$OUT/$mode/o3.log" | tr "\\n" " "; echo
      grep "AUTOTUNE benchmarking" "$OUT/$mode/o3.log" | head -4; head -14 "$OUT/$mode/samples-O3.txt" | cut -c1-120
    done
    tar czf /tmp/o3ab.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/o3ab.tgz "$OUT/" ;;
  o3check)  # one GPU, ~4 min: the sweep's -O2 and -O3 points (default ladder, no peers) with the GEMM candidates
             # precompiled in threads, then the GPU tests of every mode x level
    timeout 260 python3 -m graphbench sweep --model llama-3.2-1b --levels 2,3 --ladders default --peers none \
      --results "$OUT/o3check" --report "$OUT/o3check-report" > "$OUT/o3check.log" 2>&1
    grep -v "^DEBUG" "$OUT/o3check.log" | grep -v "━" | grep -v "^  \|AUTOTUNE\|^strides\|^dtypes\|^{\|Autotune Choices" | tail -16
    timeout 150 python3 -m pytest -m gpu -q -p no:logging tests/gpu -k level_match > "$OUT/o3check-tests.log" 2>&1; tail -3 "$OUT/o3check-tests.log"
    rm -f "$OUT"/o3check-report/*.png "$OUT"/o3check-report/report.html
    tar czf /tmp/o3check.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/o3check.tgz "$OUT/" ;;
  session10)  # one GPU, ~5 min: -O3's measured variant choice (compile/variant_choice.py): its GPU tests, the
              # -O3 mode tests, then -O2 against -O3 (measured choice) and -O3 with every variant (vLLM's)
    timeout 240 python3 -m pytest -m gpu -q -p no:logging -s tests/gpu/test_variant_choice_gpu.py \
      tests/gpu/test_graphs_gpu.py -k "choice or faster or always or (match_O0 and 3)" 2>&1 | grep -v "^DEBUG" \
      | tee "$OUT/variant-tests.log" | tail -12
    timeout 300 python3 bench/decode.py --model llama-3.2-1b --batches 1,2,4,8 --levels 2,3 --peers "" \
      --variant always=GRAPHBENCH_STATIC_VARIANTS=always --out "$OUT/o3choice.json" --timeout 200 2>&1 \
      | grep -v "^DEBUG" | tee "$OUT/o3choice.log" | tail -24 ;;
  memcheck)  # one GPU, ~4 min: the variant choice's recordings leave no memory behind; -O2 vs -O3 graph memory
    timeout 150 python3 -m pytest -m gpu -q -p no:logging -s tests/gpu/test_variant_choice_gpu.py 2>&1 \
      | grep -E "reserved|policy|passed|failed|Error|assert" | tee "$OUT/variant-tests.log" | tail -12
    for level in 2 3; do  # each in its own process: one engine's KV cache takes most of the GPU
      timeout 60 python3 -c "
from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine
r = Engine(load_engine_config(overrides={'model.model': 'llama-3.2-1b', 'optimization_level': $level,
                                         'compilation.max_autotune': False})).report
print(f'-O$level: graph memory {r.graph_memory_bytes / 2**20:.1f} MiB, pool {r.graph_pool_bytes / 2**20:.1f} MiB, '
      f'start {r.total_seconds:.1f} s, kept', [t['kept'] for t in r.static_variants.get('sizes', [])], flush=True)
" 2>&1 | grep -E "^-O|Error" | tee -a "$OUT/memcheck.log"
    done ;;
  o3small)  # one GPU, ~5 min: why -O3 is slower than -O2 at C = 4 (TPOT 1.28 against 1.15 ms). Its size 2/4/8
            # variants are Inductor's (autotuned GEMMs, Inductor's norms, no PDL) where -O2's dynamic piece
            # runs graphbench's add-norm kernels and cuBLAS with PDL. Step time at batch 1/2/4/8 for -O2 and
            # -O3, each also with PDL off: if -O2 without PDL matches -O3 at 2-8, PDL is the difference
    timeout 420 python3 bench/decode.py --model llama-3.2-1b --batches 1,2,4,8 --levels 2,3 --peers "" \
      --variant nopdl=GRAPHBENCH_PDL=0 --out "$OUT/o3small.json" --timeout 200 2>&1 | grep -v "^DEBUG" \
      | tee "$OUT/o3small.log" | tail -20 ;;
  o3profile)  # where -O3's cold start goes, in every thread (stack samples every 20 ms), ~4 min
    OUT="$OUT" timeout 300 python3 bench/debug/sample_cold_start.py --level 3 --max-num-seqs 256 2>&1 \
      | grep -v "^DEBUG" | tail -3; head -60 "$OUT/samples-O3.txt" ;;
  *) echo "usage: bash bench/gpu_checks.sh memcheck|session10|o3small|o3check|o3ab|session9|hostprobe|spread64|session8c|session8b|session8|suite|pdl|session6f|session6e|session6d|session6c|session6b|session6a|flags|flagtests|flagdecode|pair3|final7|ab|pair2|pair|tests|startup|decode|sweep|tune|tp|probe|gemv|verify|decode7|o3profile" >&2; exit 2 ;;
esac
