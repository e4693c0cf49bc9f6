# Probe (run once on 2026-12-07; finding in benchmarks/RESULTS.md): qwen2.5-0.5b b1 with start-up's norm_gate_up choice as timed, and flipped
export PYTHONPATH=$PWD/src:$PWD GRAPHBENCH_CACHE_ROOT=/tmp/gbc PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader; date
timeout 200 python3 benchmarks/decode.py --model qwen2.5-0.5b --batches 1 --levels 2 --peers "" --rounds 1 --out $OUT/cold.json 2>&1 | grep -v ^DEBUG | tail -4; date
k=$(python3 -c "import json;d=json.load(open('$OUT/cold.json'));print([c['kernel'] for r in d['results'] for c in ((r.get('startup') or {}).get('kernel_choices') or {}).get('choices',[]) if c['op']=='norm_gate_up'][0])")
echo "cold chose $k"
if [ "$k" = unfused ]; then python3 benchmarks/probes/patch_choices.py /tmp/gbc /tmp/gbcX norm_gate_up 9728 norm_gated_gemv 8,128,4
else python3 benchmarks/probes/patch_choices.py /tmp/gbc /tmp/gbcX norm_gate_up 9728 unfused -; fi
timeout 330 python3 benchmarks/decode.py --model qwen2.5-0.5b --batches 1 --levels 2 --peers "" --rounds ${ROUNDS:-3} --variant flip=GRAPHBENCH_CACHE_ROOT=/tmp/gbcX --out $OUT/flip.json --timeout 120 2>&1 | grep -v ^DEBUG | tee $OUT/flip.log | tail -12; date
