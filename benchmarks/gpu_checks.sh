#!/usr/bin/env bash
# The GPU checks a maintainer reruns, one group per device call (each fits the call's 10 minutes).
#   bash benchmarks/gpu_checks.sh tests [FILE...]  # pytest -m gpu on tests/gpu or the files named: the whole suite (210
#                                      # tests) takes more than one call on a fresh machine (61 ran in 575 s on
#                                      # 2026-12-06): split it by file across calls; on 2 GPUs the TP tests run too
#   bash benchmarks/gpu_checks.sh suite     # the GPU suite without the 60-s OOM fault test (a warm follow-up call, ~3 min;
#                                      # a fresh machine's first call ran 23 tests in its 200 s: use `tests` there)
#   bash benchmarks/gpu_checks.sh sweep     # the default llama-3.2-1b sweep with both peers (run it with timeout_s 600)
#   bash benchmarks/gpu_checks.sh decode    # decode step: -O0/-O2 vs hf-compile at batch 1 and 64, llama-3.1-8b at 1 (~7 min)
#   bash benchmarks/gpu_checks.sh startup   # cold/warm compile, capture time and graph memory per cudagraph mode
#   bash benchmarks/gpu_checks.sh starts    # issue 28's start-up figures: -O2 cold / warm / new hash and -O3 cold, each a fresh process (~3 min);
#                                      # STARTS_VARIANTS="--warm-variant NAME=VAR=VALUE" adds 3 rounds of warm starts with and without
#   bash benchmarks/gpu_checks.sh profile   # where a -O2 decode step goes at batch 1 and 64 (host phases, GPU time, top kernels)
#   bash benchmarks/gpu_checks.sh tune      # the default ladder against a tuned one with half the graphs
#   bash benchmarks/gpu_checks.sh speculative  # k = 0/2/4 with the replay and n-gram drafters at batch 1 and 16, then a k = 0,2 sweep (~7 min)
#   bash benchmarks/gpu_checks.sh lora-roofline  # where LoRA's step cost goes: a batch-16 step's kernels per part with no
#                                      # adapters, 1 and 4 (rank 16), PDL off for per-kernel spans (~4 min)
#   bash benchmarks/gpu_checks.sh curve     # the step-time curve 1..512, tune --objective time against replays, graph memory predicted vs measured (~8 min)
#   bash benchmarks/gpu_checks.sh peers     # the decode table: llama-3.2-1b (or PEERS_MODEL=smollm2-135m, qwen2.5-0.5b, qwen2.5-7b)
#                                      # -O2 at batch 1 and 64 beside gpt-fast at its faster SDPA setting (~3-4 min)
#   bash benchmarks/gpu_checks.sh peers-8b  # the same for llama-3.1-8b (~5 min); both take DECODE_VARIANTS="--variant NAME=VAR=VALUE"
#                                      # and DECODE_ROUNDS=3 (each graphbench system in 3 processes, interleaved)
#   bash benchmarks/gpu_checks.sh decode-ab # the -O2 decode step in this tree against each carried .ab-NAME/src (`git
#                                      # archive REV src | tar -x -C .ab-NAME`: variant NAME), 3 processes a side, interleaved,
#                                      # with verdicts; AB_MODEL (smollm2-135m), AB_BATCHES (1,16,64), DECODE_ROUNDS (3)
#                                      # (~4 min for one tree); DECODE_COLD=1: each process its own cold start and
#                                      # kernel search (decode.py --cold; a qwen2.5-0.5b cold process ~70-80 s on an H100)
#   bash benchmarks/gpu_checks.sh roofline  # a decode step's kernels per layer part at batch 1 and 64, bytes, TB/s, gaps (~1 min);
#                                      # ROOFLINE_MODEL=smollm2-135m ROOFLINE_BATCHES=64 for another preset and batch
#   bash benchmarks/gpu_checks.sh lora      # LoRA's graph keys, capture, memory and step cost (benchmarks/lora.py), then the LoRA-share sweep (~6 min)
#   bash benchmarks/gpu_checks.sh acceptance  # issue 45's decode figures on an H200: each of ACC_MODELS (llama-3.2-1b,
#                                      # smollm2-135m, llama-3.1-8b, qwen2.5-0.5b) at batch 1 and 64 beside gpt-fast, as many as
#                                      # start in 400 s (~3-5 min a model; carry .peers)
#   bash benchmarks/gpu_checks.sh lora-acceptance  # LoRA's step cost, no adapters, 1 and 4, 3 processes each (~4 min)
#   bash benchmarks/gpu_checks.sh gate-memory  # the gate on graph memory: A/A (two sweeps of one config: PASS) and A/B
#                                      # (max_num_seqs 512 against 256, more rungs: graph memory FAILs), 4 processes a
#                                      # sweep, -O2 at C = 16 (~4 min on a fresh machine)
#   bash benchmarks/gpu_checks.sh startup-gate  # the gate on start-up: A/A (two sweeps, gated both ways) and A/B (a 0.6-s
#                                      # sleep in every engine start), llama-3.2-1b -O2, C = 1, 3 processes a sweep (~5 min)
#   bash benchmarks/gpu_checks.sh tune-curves  # six processes' step-time curves, tune's ladder verdicts from two sets of three
#                                      # (A/A: the sets agree) (~2 min on an H100 with TC_MAX=64)
#   bash benchmarks/gpu_checks.sh round-searches  # sweeps whose rounds each run on their own kernel search: A/A and gate both
#                                      # ways (~4 min); RS_SIDES="c slow": A/B against ~65 us of GPU time a step
#   bash benchmarks/gpu_checks.sh lora-ab   # LoRA's step cost (no adapters, 1, 4) in this tree and in .ab-base/src (`git archive REV src |
#                                      # tar -x -C .ab-base`, carried), 3 processes each (LORA_ROUNDS), interleaved, with
#                                      # verdicts (~8 min)
# docs/DEVELOPING.md says what each group backs in benchmarks/RESULTS.md. Logs and JSON go to $OUT (the device tool
# brings them back); copy the figures into benchmarks/RESULTS.md with the date and the local commit whose tree was
# sent (pass it as COMMIT=<sha>: the device's own checkout reports a stale HEAD).
# Groups used once for a finding now in benchmarks/RESULTS.md (paired calls on two GPUs, A/B of switches, probes)
# are in git: `git show 6b62522:bench/gpu_checks.sh`.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src:$PWD" PYTHONUNBUFFERED=1 GRAPHBENCH_CACHE_ROOT="${GRAPHBENCH_CACHE_ROOT:-/tmp/gbc}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT="${OUT:-/tmp/gpu-checks}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
lscpu -p=CPU,CORE,SOCKET 2>/dev/null | grep -v '^#' | tr '\n' ' ' >> "$OUT/env.txt"; echo >> "$OUT/env.txt"
python3 -c "import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)" >> "$OUT/env.txt"
echo "tree: ${COMMIT:-not given (COMMIT=<local commit>)}; device checkout HEAD (may be stale): $(git rev-parse --short HEAD 2>/dev/null)" >> "$OUT/env.txt"
# beside_gpt_fast MODEL SECONDS: MODEL's -O2 decode step at batch 1 and 64 beside gpt-fast (its model.py at
# .peers/gpt-fast), for at most SECONDS
beside_gpt_fast() {
  timeout "$2" python3 benchmarks/decode.py --model "$1" --batches 1,64 --levels 2 --peers gpt-fast ${DECODE_VARIANTS:-} \
    --rounds ${DECODE_ROUNDS:-1} --out "$OUT/decode-$1.json" --timeout 200 2>&1 | grep -v "^DEBUG" | tee "$OUT/decode-$1.log" | tail -10
}
[ "${1:-}" = tests ] && [ $# -eq 1 ] && set -- tests tests/gpu
case "${1:-}" in
  tests)  # -v names each test as it ends, and each failure's report lands in gpu-failures.log at once (a
          # limit that kills pytest takes its summary with it)
    GRAPHBENCH_FAILURE_LOG="$OUT/gpu-failures.log" timeout ${GPU_TESTS_TIMEOUT:-560} python3 -m pytest -m gpu -v \
      -p no:logging --durations=15 "${@:2}" 2>&1 | tee "$OUT/gpu-tests.log" | grep -v PASSED | tail -40 ;;
  suite)  # the GPU suite without the 60-s OOM fault test (a warm follow-up call with little time left)
    GRAPHBENCH_FAILURE_LOG="$OUT/gpu-failures.log" timeout ${GPU_TESTS_TIMEOUT:-200} python3 -m pytest -m gpu -v \
      -p no:logging --durations=10 tests/gpu --ignore=tests/gpu/test_faults_gpu.py 2>&1 | tee "$OUT/gpu-tests.log" \
      | grep -v PASSED | tail -25 ;;
  sweep)
    # Run it with timeout_s 600. The sweep must stop by 582 s after this script started (the lines above
    # take ~10 s: importing transformers for env.txt): an interrupted sweep then has ~7 s to write its
    # report and the tar below still fits the call's 600 s. A sweep stopped at its own 585 s once left the
    # tar 5 s, and the archive came back cut short (benchmarks/RESULTS.md, 2026-11-30, 8354a42).
    timeout ${SWEEP_TIMEOUT:-$(( SECONDS < 560 ? 582 - SECONDS : 22 ))} python3 -m graphbench sweep --model llama-3.2-1b \
      --results "$OUT/sweep" --report "$OUT/sweep-report" 2>&1 | tee "$OUT/sweep.log" | tail -40
    tar czf "$OUT/sweep.tgz" -C "$OUT" sweep sweep-report 2>/dev/null && rm -rf "$OUT/sweep" "$OUT/sweep-report" ;;
  decode)  # the README's decode figures: -O0 and -O2 against hf-compile at batch 1 and 64, then llama-3.1-8b at 1
    timeout 330 python3 benchmarks/decode.py --model llama-3.2-1b --batches 1,64 --levels 0,2 --peers hf-compile \
      --out "$OUT/decode.json" --timeout 300 2>&1 | grep -v "^DEBUG" | tee "$OUT/decode.log" | tail -8
    timeout 150 python3 benchmarks/decode.py --model llama-3.1-8b --batches 1 --levels 2 --peers "" \
      --out "$OUT/decode-8b.json" --timeout 140 2>&1 | grep -v "^DEBUG" | tee "$OUT/decode-8b.log" | tail -4 ;;
  startup)
    timeout 560 python3 benchmarks/startup.py --model llama-3.2-1b --max-num-seqs 256 --levels 0,1,3 --out "$OUT/startup.json" 2>&1 \
      | grep -v "^DEBUG" | tee "$OUT/startup.log" | tail -20 ;;
  starts)
    timeout 300 python3 benchmarks/startup.py --model llama-3.2-1b --max-num-seqs 256 --modes "" --levels 3 --out "$OUT/starts.json" \
      --profile "$OUT/warm-start.prof" ${STARTS_VARIANTS:-} 2>&1 \
      | grep -v "^DEBUG" | tee "$OUT/starts.log" | tail -16 ;;
  profile)
    timeout 200 python3 benchmarks/profile_step.py --model llama-3.2-1b --level 2 --batches 1,64 \
      --out "$OUT/profile-step.json" 2>&1 | grep -v "^DEBUG" | tee "$OUT/profile-step.log" | tail -45 ;;
  tune)
    # the default ladder for 256 sequences has 51 sizes: tuned:25 is about half the graphs
    timeout 580 python3 -m graphbench sweep --model llama-3.2-1b --levels 2 --ladders default,tuned:25 --peers none \
      --concurrency 3,11,24,45 --prompt-len uniform:64-256 --output-len uniform:32-128 --repeats 3 \
      --results "$OUT/tune" --report "$OUT/tune-report" 2>&1 | tee "$OUT/tune.log" | tail -30
    tar czf "$OUT/tune.tgz" -C "$OUT" tune tune-report 2>/dev/null ;;
  speculative)
    timeout 330 python3 benchmarks/speculative.py --model llama-3.2-1b --batches 1,16 --ks 0,2,4 --methods replay,ngram \
      --out "$OUT/speculative.json" 2>&1 | grep -v "^DEBUG" | tee "$OUT/speculative.log" | tail -14
    timeout $(( SECONDS < 560 ? 585 - SECONDS : 20 )) python3 -m graphbench sweep --model llama-3.2-1b --levels 2 --ladders default \
      --peers none --grid num_speculative_tokens=0,2 --concurrency 1,16 --prompt-kind repeated --repeats 3 \
      --results "$OUT/spec-sweep" --report "$OUT/spec-sweep-report" 2>&1 | tee "$OUT/spec-sweep.log" | tail -12
    tar czf "$OUT/spec-sweep.tgz" -C "$OUT" spec-sweep spec-sweep-report 2>/dev/null && rm -rf "$OUT/spec-sweep" "$OUT/spec-sweep-report" ;;
  lora)
    timeout 200 python3 benchmarks/lora.py --model llama-3.2-1b --rank 16 --concurrency 16 --out "$OUT/lora.json" 2>&1 \
      | grep -v -E "^DEBUG|[Ww]arn" | tee "$OUT/lora.log" | tail -16
    timeout $(( SECONDS < 560 ? 585 - SECONDS : 20 )) python3 -m graphbench sweep \
      --sweep-file src/graphbench/sample_configs/sweeps/lora-llama-1b.toml --results "$OUT/lora-sweep" \
      --report "$OUT/lora-sweep-report" 2>&1 | tee "$OUT/lora-sweep.log" | tail -12
    tar czf "$OUT/lora-sweep.tgz" -C "$OUT" lora-sweep lora-sweep-report 2>/dev/null && rm -rf "$OUT/lora-sweep" "$OUT/lora-sweep-report" ;;
  lora-ab)  # the tree before a LoRA kernel change at .ab-base/src
    [ -d .ab-base/src ] || { echo "lora-ab needs .ab-base/src (the tree to compare against)" >&2; exit 2; }
    timeout 585 python3 benchmarks/lora.py --model llama-3.2-1b --rank 16 --concurrency 16 --setups none,1,4 --rounds ${LORA_ROUNDS:-3} --repeats 2 \
      --variant "base=PYTHONPATH=$PWD/.ab-base/src:$PWD" --out "$OUT/lora-ab.json" 2>&1 | grep -v -E "^DEBUG|[Ww]arn" \
      | tee "$OUT/lora-ab.log" | tail -12 ;;
  acceptance)  # gpt-fast's model.py at .peers/gpt-fast (carried); each model starts only while ACC_START_BEFORE (400) s
               # have not passed, so a call runs what fits and the next call names the rest in ACC_MODELS
    for model in ${ACC_MODELS:-llama-3.2-1b smollm2-135m llama-3.1-8b qwen2.5-0.5b}; do
      [ $SECONDS -lt ${ACC_START_BEFORE:-400} ] || { echo "not started (no time left in this call): $model"; continue; }
      beside_gpt_fast $model $(( 590 - SECONDS ))
    done ;;
  lora-acceptance)  # LoRA's step cost (no adapters, 1, 4 adapters), every setup in 3 processes (~4 min)
    timeout 300 python3 benchmarks/lora.py --model llama-3.2-1b --rank 16 --concurrency 16 --setups none,1,4 --rounds 3 \
      --repeats 2 --out "$OUT/lora.json" 2>&1 | grep -v -E "^DEBUG|[Ww]arn" | tee "$OUT/lora.log" | tail -8 ;;
  gate-memory)  # A/A then A/B of the gate's graph-memory check; each gate's table and exit code in gate-*.log
    for side in a256 b256 c512; do
      timeout 200 python3 -m graphbench sweep --model llama-3.2-1b --levels 2 --ladders default --peers none \
        --concurrency 16 --repeats 1 --rounds 4 --max-num-seqs ${side:1} --results "$OUT/gm-$side" 2>&1 | tail -3
    done
    python3 -m graphbench gate -b "$OUT/gm-a256" -c "$OUT/gm-b256" > "$OUT/gate-aa.log" 2>&1; echo "A/A exit $?" | tee -a "$OUT/gate-aa.log"
    python3 -m graphbench gate -b "$OUT/gm-a256" -c "$OUT/gm-c512" --allow-mismatch > "$OUT/gate-ab.log" 2>&1
    echo "A/B exit $?" | tee -a "$OUT/gate-ab.log"; grep -h graph_memory "$OUT"/gate-a?.log
    tar czf "$OUT/gate-memory.tgz" -C "$OUT" gm-a256 gm-b256 gm-c512 2>/dev/null && rm -rf "$OUT"/gm-* ;;
  round-searches)  # sweeps whose rounds each run on a kernel search of their own, each later side gated against the
                   # first: RS_SIDES="a b" (default) an A/A, gated both ways; RS_SIDES="c slow" an A/B against ~65 us of GPU
                   # time a step; RS_MODEL (qwen2.5-0.5b); -O2, C = 1 and 64, 3 processes a sweep (~1.5-2 min a sweep on an H100)
    # the slow side: every Engine.step first spins the GPU RS_SLOW_CYCLES clock cycles on the step's stream (~60-70 us
    # at 120000 on an H100): device time a step, which asynchronous scheduling cannot hide as it hides a host delay
    model=${RS_MODEL:-qwen2.5-0.5b}; mkdir -p /tmp/slow-step
    printf '%s\n' "import torch" "from graphbench.runner import engine as _e" "_orig = _e.Engine.step" \
      "def _slow(self, *a, **k):" "    torch.cuda._sleep(${RS_SLOW_CYCLES:-120000})" "    return _orig(self, *a, **k)" \
      "_e.Engine.step = _slow" > /tmp/slow-step/sitecustomize.py
    for side in ${RS_SIDES:-a b}; do
      slow=(); [ "$side" = slow ] && slow=(env "PYTHONPATH=/tmp/slow-step:$PYTHONPATH")
      "${slow[@]}" timeout 285 python3 -m graphbench sweep --model $model --levels 2 --ladders default --peers none \
        --concurrency 1,64 --repeats 1 --rounds 3 --max-num-seqs 64 --results "$OUT/rs-$side" 2>&1 | grep -v "^DEBUG" \
        | tee "$OUT/rs-$side.log" | grep -E "kernel search|ok |failed" | tail -8
    done
    sides=(${RS_SIDES:-a b}); base="$OUT/rs-${sides[0]}"  # every later side gated against the first
    for side in "${sides[@]:1}"; do
      python3 -m graphbench gate -b "$base" -c "$OUT/rs-$side" > "$OUT/gate-${sides[0]}-$side.log" 2>&1
      echo "gate ${sides[0]} $side exit $?" | tee -a "$OUT/gate-${sides[0]}-$side.log"
      python3 -m graphbench compare "$base" "$OUT/rs-$side" > "$OUT/compare-${sides[0]}-$side.log" 2>&1
      [ "$side" = slow ] && continue  # an A/A is gated both ways
      python3 -m graphbench gate -b "$OUT/rs-$side" -c "$base" > "$OUT/gate-$side-${sides[0]}.log" 2>&1
      echo "gate $side ${sides[0]} exit $?" | tee -a "$OUT/gate-$side-${sides[0]}.log"
    done
    grep -h -E "PASS|FAIL|CANNOT|regress" "$OUT"/gate-*.log | head -12
    python3 - "$OUT"/rs-*/ <<'PY' | tee "$OUT/round-choices.txt"
import sys
from graphbench.reports.rounds import startups_of
from graphbench.reports.store import load_results
for folder in sys.argv[1:]:  # each process's kernel choices: where they came from, and the shapes the rounds chose apart
    sets = {}
    for r in sorted(load_results([folder], merge=False).results, key=lambda r: r["sweep"]["round"]["index"]):
        start = startups_of(r)[-1]["kernel_choices"]
        sets[r["sweep"]["round"]["index"]] = {(c["op"], c["n"], c["k"], c["rows"]): (c["kernel"], tuple(c["blocks"])) for c in start["choices"]}
        warm = startups_of(r)[-1]
        print(folder, "round", r["sweep"]["round"]["index"], start["source"], start.get("search", ""), f"{start['seconds']:.2f} s;",
              f"warm start {warm.get('total_s', 0):.2f} s, capture {warm.get('capture_s', 0):.2f} s, primed {warm.get('primed_s')}")
    shapes = set().union(*sets.values())
    apart = [s for s in sorted(shapes) if len({v.get(s) for v in sets.values()}) > 1]
    print(folder, f"{len(apart)} of {len(shapes)} shapes chosen apart across rounds:", apart)
PY
    tar czf "$OUT/round-searches.tgz" -C "$OUT" $(cd "$OUT" && ls -d rs-*/) && rm -rf "$OUT"/rs-*/ ;;
  startup-gate)  # the gate on start-up: sweeps a and b (A/A, gated both ways) and slow (A/B: Engine.__init__ sleeps
                 # STARTUP_SLEEP_S, 0.6 s, patched when the engine module is imported so compile workers are untouched);
                 # llama-3.2-1b -O2, C = 1, 3 processes a sweep (~1.5-2 min a sweep on an H100, 2 sides and the gates a call on a
                 # slower one: 4 took 504 s on 2026-12-07); STARTUP_SRC=.ab-NAME/src
                 # runs every side on another tree (carried); SG_SIDES="a p:.ab-NAME/src b ..." gives a side its own
                 # tree, SG_PAIRS="a:b b:a ..." the gates (baseline:current); each process's warm start in startups.txt
    src=${STARTUP_SRC:-src}; mkdir -p /tmp/slow-start
    printf '%s\n' "import importlib.abc, importlib.util, sys, time" "class _Patch(importlib.abc.MetaPathFinder):" \
      "    def find_spec(self, name, path, target=None):" "        if name != 'graphbench.runner.engine':" "            return None" \
      "        sys.meta_path.remove(self)" "        spec = importlib.util.find_spec(name)" "        real = spec.loader.exec_module" \
      "        def exec_module(module):" "            real(module)" "            init = module.Engine.__init__" \
      "            def slow(self, *a, **k):" "                time.sleep(${STARTUP_SLEEP_S:-0.6})" "                init(self, *a, **k)" \
      "            module.Engine.__init__ = slow" "        spec.loader.exec_module = exec_module" "        return spec" \
      "sys.meta_path.insert(0, _Patch())" > /tmp/slow-start/sitecustomize.py
    sg=/tmp/startup-gate; rm -rf $sg; mkdir -p $sg  # results outside $OUT: a call returns a few dozen files at most
    for spec in ${SG_SIDES:-a slow b}; do
      side=${spec%%:*}; tree=$src; [ "$side" = "$spec" ] || tree=${spec#*:}
      pp="$PWD/$tree:$PWD"; [ $side = slow ] && pp="/tmp/slow-start:$pp"
      PYTHONPATH="$pp" timeout 180 python3 -m graphbench sweep --model llama-3.2-1b --levels 2 --ladders default --peers none \
        --concurrency 1 --repeats 1 --rounds 3 --results "$sg/sg-$side" 2>&1 | grep -v "^DEBUG" > "$OUT/sg-$side.log"
      echo "$side ($tree) exit $? at $SECONDS s"
      # each side's result files and starts kept as it ends, so a call cut short keeps the sides before
      tar czf "$OUT/sg-$side.tgz" -C $sg --exclude=report --exclude=.sweep "sg-$side"
      PYTHONPATH="$PWD/$src:$PWD" python3 - "$sg/sg-$side" <<'PY' | tee -a "$OUT/startups.txt"
import sys
from graphbench.reports.rounds import startups_of
from graphbench.reports.store import load_results
for r in sorted(load_results(sys.argv[1:], merge=False).results, key=lambda r: r["sweep"]["round"]["index"]):
    s = startups_of(r)[-1]  # the process's measured (last) start: total, capture, load, the unmeasured one before it
    print(sys.argv[1].split("/")[-1], "round", r["sweep"]["round"]["index"], f"warm start {s['total_s']:.2f} s,",
          f"capture {s['capture_s']:.2f}, load {s['load_s']:.2f}, primed {s.get('primed_s')}")
PY
    done
    for pair in ${SG_PAIRS:-a:b b:a a:slow}; do
      set -- ${pair/:/ }; PYTHONPATH="$PWD/$src:$PWD" python3 -m graphbench gate -b "$sg/sg-$1" -c "$sg/sg-$2" > "$OUT/gate-$1-$2.log" 2>&1
      echo "gate $1 $2 exit $?: $(grep -h startup_s "$OUT/gate-$1-$2.log" | head -1 | tr -s ' ' | cut -c1-160)"
    done ;;
  lora-roofline)
    for spec in none dummy:r=16 dummy:r=16,n=4; do
      name=${spec//[:=,]/-}; lora=(); [ "$spec" = none ] || lora=(--lora "$spec")
      GRAPHBENCH_PDL=0 timeout 180 python3 benchmarks/roofline.py --model llama-3.2-1b --level 2 --batches 16 "${lora[@]}" \
        --out "$OUT/roofline-lora-$name.json" 2>&1 | grep -v -E "^DEBUG|[Ww]arn" | tee "$OUT/roofline-lora-$name.log" | tail -16
    done ;;
  curve)
    timeout 400 python3 benchmarks/tune_time.py --model llama-3.2-1b --max-size 512 --graphs 16 --out-dir "$OUT/tune-time" 2>&1 \
      | grep -v -E "^DEBUG|[Ww]arn" | tee "$OUT/tune-time.log" | tail -16
    timeout $(( SECONDS < 560 ? 585 - SECONDS : 20 )) python3 benchmarks/graph_memory.py --model llama-3.2-1b \
      --out "$OUT/graph-memory.json" 2>&1 | grep -v -E "^DEBUG|[Ww]arn" | tee "$OUT/graph-memory.log" | tail -8 ;;
  tune-curves)  # six processes' step-time curves (llama-3.2-1b -O2, sizes 1..TC_MAX, default 256), then tune --objective time
                # on sets a (1-3) and b (4-6) at 1, 4 and 16 graphs: the A/A is that both sets call the same verdicts against
                # the tuned ladder; the A/B is the one-graph ladder (every batch padded to the top), called slower in both
    tc=/tmp/tune-curves; rm -rf $tc; mkdir -p $tc  # outside $OUT (a call returns a dozen files at most), tarred at the end
    top=${TC_MAX:-256}
    for i in 1 2 3 4 5 6; do
      timeout 150 python3 -m graphbench curve --model llama-3.2-1b -O 2 --max-size $top --no-plot --out "$tc/curve-$i.json" \
        2>&1 | grep -v "^DEBUG" | tail -1; echo "curve $i at $SECONDS s"
    done
    for set in a b; do
      flags=(); for i in $([ $set = a ] && echo 1 2 3 || echo 4 5 6); do flags+=(--curve "$tc/curve-$i.json"); done
      for graphs in 1 4 16; do
        python3 -m graphbench tune --model uniform:1-$top --max-num-seqs $top --top $top --objective time --max-graphs $graphs \
          "${flags[@]}" > "$tc/tune-$set-g$graphs.log" 2>&1; echo "set $set, $graphs graphs:"; grep -h "against tuned" "$tc/tune-$set-g$graphs.log"
      done
    done
    tar czf "$OUT/tune-curves.tgz" -C /tmp tune-curves ;;
  peers|peers-8b)  # gpt-fast's model.py must be at .peers/gpt-fast (a checkout; carry it to the device)
    model=${PEERS_MODEL:-llama-3.2-1b}; [ "$1" = peers-8b ] && model=llama-3.1-8b
    beside_gpt_fast $model ${PEERS_TIMEOUT:-400} ;;
  decode-ab)  # kernel changes against this tree, each its own variant
    trees=(); for d in .ab-*/src; do [ -d "$d" ] && trees+=(--variant "$(basename "$(dirname "$d")" | cut -c5-)=PYTHONPATH=$PWD/$d:$PWD"); done
    [ ${#trees[@]} -gt 0 ] || { echo "decode-ab needs a carried .ab-NAME/src (a tree to compare against)" >&2; exit 2; }
    model=${AB_MODEL:-smollm2-135m}
    timeout ${AB_TIMEOUT:-400} python3 benchmarks/decode.py --model $model --batches ${AB_BATCHES:-1,16,64} --levels 2 \
      --peers "" --rounds ${DECODE_ROUNDS:-3} ${DECODE_COLD:+--cold} "${trees[@]}" \
      --out "$OUT/decode-ab-$model.json" --timeout 200 2>&1 | grep -v "^DEBUG" | tee "$OUT/decode-ab-$model.log" | tail -14 ;;
  roofline)  # per-kernel spans need PDL off (with PDL a kernel's span counts its wait); the second run is as the engine runs
    model=${ROOFLINE_MODEL:-llama-3.2-1b}; batches=${ROOFLINE_BATCHES:-1,64}
    GRAPHBENCH_PDL=0 timeout 200 python3 benchmarks/roofline.py --model $model --level 2 --batches $batches \
      --out "$OUT/roofline-$model-nopdl.json" 2>&1 | grep -v -E "^DEBUG|[Ww]arn" | tee "$OUT/roofline-$model.log" | tail -30
    timeout 150 python3 benchmarks/roofline.py --model $model --level 2 --batches $batches \
      --out "$OUT/roofline-$model-pdl.json" 2>&1 | grep -E "^batch" ;;
  *) echo "usage: bash benchmarks/gpu_checks.sh tests|suite|sweep|decode|startup|starts|profile|tune|speculative|lora|acceptance|lora-acceptance|lora-ab|lora-roofline|curve|decode-ab|roofline|peers|peers-8b|gate-memory|round-searches" >&2; exit 2 ;;
esac
