"""Which of graphbench's kernels a projection runs, and with which blocks: the thresholds runner/linear.py
(and the capture's warm-up, runner/model_runner.py) reads, and the one-row GEMV's blocks per shape, each
with a line of why and its benchmarks/RESULTS.md section. (No torch import: the blocks are plain tuples.)

Settled (the losing paths are gone): one row runs the GEMV, with silu(gate) * up in the gate/up GEMV's
epilogue (RESULTS 2026-12-03, bd105f9); 2..64 rows of a measured shape run the skinny GEMM, launched with
PDL as cuBLAS's kernels are not (RESULTS 2026-12-01, 08fbf67); the residual add + RMSNorm is its own
launch, not folded into the GEMV (RESULTS 2026-11-29, 497f9e6).
"""

from __future__ import annotations

# From 17 rows the skinny GEMM computes silu(gate) * up in its epilogue; at 16 rows and fewer llama-3.2-1b's
# 16-row tiles were slower, so those take the GEMM and a silu-mul launch (RESULTS 2026-12-02, a82bb11).
GATED_MIN_ROWS = 16
# The most rows the skinny GEMM runs (a decode batch; kernels/skinny_gemm.MAX_ROWS, which the kernels' room
# keeps apart: it imports nothing of the engine); more rows: cuBLAS.
SKINNY_MAX_ROWS = 64


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
