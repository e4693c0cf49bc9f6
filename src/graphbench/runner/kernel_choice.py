"""Which of graphbench's kernels a projection runs, and with which blocks: the switches and thresholds
runner/linear.py (and the capture's warm-up, runner/model_runner.py) reads, each with the measurement that
set it, and the one-row GEMV's blocks per shape. (No torch import: the blocks are plain tuples.) linear.py
copies the names when imported: a test that switches one patches linear's copy."""

from __future__ import annotations

from graphbench.switches import switch_value

# GRAPHBENCH_GEMV=0: every linear is F.linear (to measure the GEMV's effect, or rule it out).
# The residual add + RMSNorm folded into the one-row GEMV in front of qkv was measured on the H200 and
# removed (batch-1 -O2 step, llama-3.2-1b 1.208 against 1.029 ms, llama-3.1-8b 5.51 against 4.28 ms;
# benchmarks/RESULTS.md, 2026-11-29, 497f9e6): with the many narrow programs a GEMV needs, each program re-reads
# the row and the norm weight and recomputes the norm. (The activation in the gate/up GEMV's epilogue lost
# then too, without PDL; with PDL it wins: GATED_GEMV below.)
GEMV_ENABLED = switch_value("GRAPHBENCH_GEMV") != "0"
# A linear of 2..64 rows whose shape kernels/skinny_gemm.py has measured blocks for runs it instead of cuBLAS
# (on the GPU; the interpreter runs it for every shape it applies to); GRAPHBENCH_SKINNY_GEMM=0: cuBLAS.
# In isolation it is within 5% of cuBLAS either way; in the recorded step it is launched with PDL, as
# cuBLAS's kernels are not: batch-64 -O2 step llama-3.2-1b 1.297 against 1.395 ms, llama-3.1-8b 5.358
# against 5.614 ms (benchmarks/RESULTS.md, 2026-12-01, 08fbf67).
SKINNY_GEMM = switch_value("GRAPHBENCH_SKINNY_GEMM") == "1"
# Where the skinny GEMM runs the MLP's gate/up projection, silu(gate) * up is computed in its epilogue
# (kernels/skinny_gemm.skinny_gate_up: a program streams its gate rows and the matching up rows), one launch
# and one [T, 2I] round trip fewer than the projection + silu-mul; GRAPHBENCH_GATED_SKINNY=0: two launches.
GATED_SKINNY = switch_value("GRAPHBENCH_GATED_SKINNY") == "1"
# From 17 rows: -O2 step on the H200 at batch 64 llama-3.2-1b 1.116 against 1.140 ms, llama-3.1-8b 5.005
# against 5.067; at batch 16 llama-3.1-8b 4.528 against 4.573 but llama-3.2-1b 1.082 against 1.059 (its
# 16-row tiles slower), so 16 rows and fewer take two launches (benchmarks/RESULTS.md, 2026-12-02, a82bb11).
GATED_MIN_ROWS = 16
# The most rows the skinny GEMM runs (a decode batch; kernels/skinny_gemm.MAX_ROWS, which the kernels' room
# keeps apart: it imports nothing of the engine); more rows: cuBLAS.
SKINNY_MAX_ROWS = 64
# At one row too (launch_gated_gemv: each program its gate rows and their up rows, the first tiles loaded
# before the PDL wait): -O2 batch-1 step on the H200 llama-3.2-1b 0.790 against 0.808 ms, llama-3.1-8b
# 4.036 against 4.059 (benchmarks/RESULTS.md, 2026-12-03, bd105f9). Without PDL (2026-11-29, 5ffed15) a gate/up
# GEMV with the activation in its epilogue had lost: 1.188 against 1.082 ms. GRAPHBENCH_GATED_GEMV=0: the
# GEMV and one silu-mul launch.
GATED_GEMV = switch_value("GRAPHBENCH_GATED_GEMV") == "1"


# The fastest (BLOCK_N, BLOCK_K, num_warps) of benchmarks/gemv.py's grid on the H200 for llama-3.2-1b's
# projections (benchmarks/RESULTS.md, 2026-11-29, 2cffcf6); other shapes use the rule below. down's from the
# grid launched with PDL, as the engine records it: 9.22 us against 11.22 for (2, 2048, 2), the best
# without PDL (benchmarks/RESULTS.md, 2026-12-02, a82bb11); qkv's stayed the best with PDL, o_proj's and
# gate_up's were within 2% of theirs (kept).
MEASURED_BEST = {
    (3072, 2048): (8, 1024, 8),  # qkv
    (2048, 2048): (4, 1024, 8),  # o_proj
    (16384, 2048): (2, 2048, 2),  # gate_up
    (2048, 8192): (1, 1024, 4),  # down
    (128256, 2048): (8, 256, 2),  # lm_head
}


def gemv_config(n: int, k: int) -> tuple[int, int, int]:
    """(BLOCK_N, BLOCK_K, num_warps): a measured best, else the rule those measurements suggest: many
    small programs for large matrices (gate_up, down), wider ones for the small projections (qkv,
    o_proj). BLOCK_K is the largest power of two dividing K, up to 4096 or 1024 (Qwen's 896 = 7 x 128
    gets 128). llama-3.1-8b's K = 4096 projections as one 4096-wide tile with 4 warps, against 2048 with
    2: batch-1 -O2 step 4.318 against 4.789 ms (benchmarks/RESULTS.md, 2026-12-01, 10fdf14); for
    llama-3.2-1b's measured blocks a whole-row tile was slower (0.927 against 0.916 ms)."""
    if (n, k) in MEASURED_BEST:
        return MEASURED_BEST[(n, k)]
    if n * k < 16 * 2**20:
        return 4, min(k & -k, 1024), 8
    # large: up to 4096 of K in one tile (under PDL a program's first tile loads before it waits for the
    # kernel before it), warps such that the float32 tile is <= 64 values a thread
    block_k = min(k & -k, 4096)
    return 2, block_k, max(2, block_k // 1024)
