#!/usr/bin/env bash
# Debug aid: where a warm start's "loaded" seconds go. Cold start, then a warm start under cProfile.
#   OUT=/tmp/x bash bench/debug/profile_warm_start.sh
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src:$PWD" GRAPHBENCH_CACHE_ROOT="$(mktemp -d)"
args=(--worker --model llama-3.2-1b --level 2 --max-num-seqs 256)
python3 bench/startup.py "${args[@]}" 2>/dev/null | grep RESULT | cut -c1-400
python3 -m cProfile -o "$OUT/warm.prof" bench/startup.py "${args[@]}" 2>/dev/null | grep RESULT | cut -c1-400
python3 -c "
import pstats,sys
s=pstats.Stats('$OUT/warm.prof'); s.sort_stats('cumulative').print_stats(60)
" > "$OUT/warm_profile.txt"
grep -E "aot_store|restore|load|triton|compile" "$OUT/warm_profile.txt" | head -40
