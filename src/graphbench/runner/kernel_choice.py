"""Which kernel runs a projection, and with which blocks: chosen per (op, N, K, row class) by timing the
candidates on the GPU at start-up (runner/kernel_timing.py), kept in the compile-cache entry so that a
warm start loads the choice instead of timing again. No torch import: choices and candidates are tuples.

An op is "linear" (x @ w.T) or "gate_up" (silu(x @ gate.T) * (x @ up.T) from w = [gate; up]); "norm_linear"
and "norm_gate_up" are the same after the layer's residual add + RMSNorm, at one row: "unfused" (the add-norm
launch, then the op's own choice) or "norm_gemv" / "norm_gated_gemv" (kernels/norm_gemv.py: one launch). A row class
is the tile of rows the skinny GEMM computes (1: the one-row GEMV; 16, 32, 64: the skinny GEMM's BLOCK_M);
more rows always run cuBLAS. The kernels a choice names:
- "gemv" (blocks BLOCK_N, BLOCK_K, num_warps, and where a neighbour's search added them the stages: weight
  tiles a program has in flight, 1 to MAX_GEMV_STAGES, 1 without), "gated_gemv" (the same, its activation in
  the epilogue);
- "skinny" (BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages), "gated_skinny" (BLOCK_N, BLOCK_K, num_warps,
  num_stages);
- "torch" (F.linear: cuBLAS). For gate_up, "skinny" and "torch" are followed by a silu-mul launch.

Without a measurement (the Triton interpreter, -O0 without a compile-cache entry, model.kernels = torch)
the rules below apply: one row runs the GEMV where K has a power-of-two tile of at least 128, more rows run
cuBLAS on the GPU (where nothing was timed, cuBLAS is the safe choice) and the skinny GEMM in the
interpreter (where the tests check what it computes).

Settled and not measured again: the residual add + RMSNorm is not folded into the skinny GEMM (2026-12-03,
b54438c). Folded into the one-row GEMV it lost on llama-3.2-1b's and llama-3.1-8b's shapes (RESULTS, 2026-11-29,
497f9e6), so the rule keeps it apart; where it is timed, the faster runs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from graphbench.runner.kernels.util import next_power_of_2, tile_fits

ROW_CLASSES = (1, 16, 32, 64)
MAX_ROWS = ROW_CLASSES[-1]  # kernels/skinny_gemm.MAX_ROWS (the kernels' room imports nothing of the engine)
SKINNY_BLOCK_K = 128  # the rule's K tile of the skinny GEMM
MAX_GEMV_STAGES = 3  # kernels/gemv.MAX_STAGES
OPS = ("linear", "gate_up", "norm_linear", "norm_gate_up")
KERNELS = {"linear": ("gemv", "skinny", "torch"), "gate_up": ("gated_gemv", "gated_skinny", "skinny", "torch"),
           "norm_linear": ("norm_gemv", "unfused"), "norm_gate_up": ("norm_gated_gemv", "unfused")}
NORM_OPS = {"linear": "norm_linear", "gate_up": "norm_gate_up"}  # the op after an add-norm -> its choice's op
# the kernel that adds a LoRA delta in its epilogue, per op (runner/lora/projection.py; cuBLAS has no epilogue)
EPILOGUE_KERNELS = {"linear": "skinny", "gate_up": "gated_skinny"}


@dataclass(frozen=True, slots=True)
class KernelChoice:
    op: str
    n: int  # the weight's rows (gate_up: gate and up together)
    k: int
    rows: int  # the row class
    kernel: str
    blocks: tuple[int, ...] = ()
    us: float | None = None  # the chosen kernel's measured time, None where a rule chose
    torch_us: float | None = None  # cuBLAS's (+ silu-mul for gate_up) in the same measurement
    candidates: int = 0  # how many were timed
    # where another kernel won: the fastest timed blocks of the op's LoRA-epilogue kernel (EPILOGUE_KERNELS),
    # which a step with adapters runs instead of the chosen one (empty: none timed; the skinny rule's then)
    epilogue_blocks: tuple[int, ...] = ()

    def key(self) -> tuple[str, int, int, int]:
        return self.op, self.n, self.k, self.rows

    def to_dict(self) -> dict:
        return {"op": self.op, "n": self.n, "k": self.k, "rows": self.rows, "kernel": self.kernel,
                "blocks": list(self.blocks), "us": self.us, "torch_us": self.torch_us, "candidates": self.candidates,
                "epilogue_blocks": list(self.epilogue_blocks)}

    @classmethod
    def from_dict(cls, data: dict) -> "KernelChoice":
        """A stored choice; ValueError where it is not one this code can run."""
        op, kernel, blocks = data["op"], data["kernel"], tuple(int(b) for b in data["blocks"])
        rows, n, k = int(data["rows"]), int(data["n"]), int(data["k"])
        if op not in OPS or kernel not in KERNELS[op] or rows not in ROW_CLASSES or min(n, k) < 1:
            raise ValueError(f"not a kernel choice: {data}")
        if not blocks_fit(kernel, blocks, n, k, rows):
            raise ValueError(f"blocks {blocks} do not fit {kernel} for {n}x{k} at {rows} rows")
        epilogue = tuple(int(b) for b in data.get("epilogue_blocks", ()))
        if epilogue and (op not in EPILOGUE_KERNELS or not blocks_fit(EPILOGUE_KERNELS[op], epilogue, n, k, rows)):
            raise ValueError(f"epilogue blocks {epilogue} do not fit {op} for {n}x{k} at {rows} rows")
        return cls(op, n, k, rows, kernel, blocks, data.get("us"), data.get("torch_us"), int(data.get("candidates", 0)),
                   epilogue)


def row_class(rows: int) -> int | None:
    """The row class of a projection over `rows` rows (None above the skinny GEMM's 64: cuBLAS)."""
    for cls in ROW_CLASSES:
        if rows <= cls:
            return cls
    return None


def blocks_fit(kernel: str, blocks: tuple[int, ...], n: int, k: int, rows: int) -> bool:
    """Whether the kernel can run a [n, k] weight at this row class with these blocks (K divides into the
    GEMM's tiles and splits: they do not mask along K; a one-row kernel's tile may also cover the whole row)."""
    if kernel in ("torch", "unfused"):
        return blocks == ()
    if not blocks or not all(isinstance(b, int) and b >= 1 for b in blocks) or not _power_of_two(blocks[1]):
        return False  # (tiles are powers of two; a stored 0 would divide by zero below)
    warps, stages = (blocks[2], 1) if len(blocks) == 3 else blocks[-2:]
    if warps not in (1, 2, 4, 8, 16) or stages > 8 or not _power_of_two(blocks[0]):
        return False
    if kernel in ("gemv", "gated_gemv"):  # (block_n, block_k, warps[, stages])
        return rows == 1 and len(blocks) in (3, 4) and tile_fits(k, blocks[1]) and stages <= MAX_GEMV_STAGES
    if kernel in ("norm_gemv", "norm_gated_gemv"):
        return rows == 1 and len(blocks) == 3 and tile_fits(k, blocks[1])
    if kernel == "skinny":
        return rows > 1 and len(blocks) == 5 and blocks[2] <= 8 and k % (blocks[1] * blocks[2]) == 0
    if kernel == "gated_skinny":
        return rows > 1 and len(blocks) == 4 and k % blocks[1] == 0 and n % 2 == 0
    return False


def _power_of_two(value: int) -> bool:
    return value & (value - 1) == 0


# -- the rules (nothing measured) -------------------------------------------------------------------------

def gemv_rule(n: int, k: int) -> tuple[int, int, int]:
    """(BLOCK_N, BLOCK_K, num_warps) of the one-row GEMV without a measurement: many small programs for large
    matrices, wider ones for small projections; BLOCK_K the largest power of two dividing K, up to 4096 (1024
    for small matrices). What llama-3.2-1b's and llama-3.1-8b's grids suggested (benchmarks/RESULTS.md,
    2026-11-29, 2cffcf6; 2026-12-01, 10fdf14)."""
    if n * k < 16 * 2**20:
        return 4, min(k & -k, 1024), 8
    block_k = min(k & -k, 4096)
    return 2, block_k, max(2, block_k // 1024)


def split_count(n: int, k: int, num_sms: int, block_n: int = 64, block_k: int = SKINNY_BLOCK_K) -> int:
    """Splits of K (at most 8, each a whole number of block_k tiles): the most that keep the column blocks
    and their splits within about two programs an SM."""
    blocks = -(-n // block_n)
    return max(s for s in range(1, 9) if s == 1 or (k % (s * block_k) == 0 and blocks * s <= 2 * num_sms))


def skinny_rule(n: int, k: int, num_sms: int) -> tuple[int, int, int, int, int]:
    """(BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages) of the skinny GEMM without a measurement."""
    return 64, SKINNY_BLOCK_K, split_count(n, k, num_sms), 4, 4


# the SMs the interpreter's skinny-GEMM rule assumes (an H100's / H200's); on the GPU the rules never split K
INTERPRETER_SMS = 132


@functools.cache  # (a projection asks at every eager call: one object per key, not one per call)
def rule_choice(op: str, n: int, k: int, rows: int, on_gpu: bool, num_sms: int = INTERPRETER_SMS) -> KernelChoice:
    """The kernel a projection runs when nothing was measured for it (the module docstring)."""
    if op in NORM_OPS.values():
        return KernelChoice(op, n, k, rows, "unfused")
    if rows == 1:
        blocks = gemv_rule(n, k)
        if blocks[1] < 128:
            return KernelChoice(op, n, k, 1, "torch")
        if op == "gate_up":
            return KernelChoice(op, n, k, 1, "gated_gemv", (max(1, blocks[0] // 2), blocks[1], blocks[2]))
        return KernelChoice(op, n, k, 1, "gemv", blocks)
    if on_gpu or k % SKINNY_BLOCK_K:
        return KernelChoice(op, n, k, rows, "torch")
    blocks = skinny_rule(n, k, num_sms)
    if op == "gate_up" and rows > 16:
        return KernelChoice(op, n, k, rows, "gated_skinny", (max(16, blocks[0] // 2), blocks[1], blocks[3], blocks[4]))
    return KernelChoice(op, n, k, rows, "skinny", blocks)


# -- what the engine runs ---------------------------------------------------------------------------------

_chosen: dict[tuple[str, int, int, int], KernelChoice] = {}


def install(choices: list[KernelChoice]) -> None:
    """Make these the choices the projections run (for the life of the process; a key measured again is
    replaced)."""
    _chosen.update((c.key(), c) for c in choices)


def installed() -> list[KernelChoice]:
    """The choices installed in this process (every engine's: a choice is the GPU's and the shape's)."""
    return list(_chosen.values())


def forget_all() -> None:
    """Drop every installed choice (tests)."""
    _chosen.clear()


def choice_for(op: str, n: int, k: int, rows: int, on_gpu: bool, num_sms: int = INTERPRETER_SMS) -> KernelChoice:
    """The kernel for `rows` rows of op on a [n, k] weight: the measured choice, else the rule (above 64
    rows: cuBLAS, as the rule for the GPU's many rows)."""
    cls = row_class(rows)
    if cls is None:
        return rule_choice(op, n, k, MAX_ROWS, True)
    return _chosen.get((op, n, k, cls)) or rule_choice(op, n, k, cls, on_gpu, num_sms)


# -- what start-up times: a coarse grid, then the best's neighbours ------------------------------------------
# Each candidate is a Triton compile (~0.1-0.3 s) before it is timed: two short rounds instead of the whole
# grid keep a cold start's timing to seconds.

def gemv_candidates(n: int, k: int) -> list[tuple[int, int, int]]:
    """One-row GEMV blocks to time first: the two largest power-of-two K tiles dividing K (at least 64), and
    the whole row where K is no power of two (in pieces, every weight loaded before the PDL wait); 1 to
    64 rows a program, the warps closest to 32 weight values a thread; and the rule's where its K tile is one of
    at least 64 (K = 200 or 1000 leaves the rule an 8-wide tile, a loop of 25 or 125 steps of 32 weight values
    for 256 threads: never faster, one more compile and timing at each cold start)."""
    tiles = [b for b in (4096, 2048, 1024, 512, 256, 128, 64) if k % b == 0][:2]
    if next_power_of_2(k) not in tiles and next_power_of_2(k) <= 8192:  # (qwen2.5-0.5b's down: 4864 in 8192)
        tiles.append(next_power_of_2(k))
    out = [(block_n, block_k, _warps_for(block_n * block_k, 32)) for block_k in tiles for block_n in (1, 2, 4, 8, 16, 32, 64)
           if 256 <= block_n * block_k <= 16384]
    rule = gemv_rule(n, k)
    if rule[1] >= 64 and rule not in out:
        out.append(rule)
    return out


def gated_gemv_candidates(n: int, k: int) -> list[tuple[int, int, int]]:
    """The gate/up GEMV's (BLOCK_N columns, each a gate row and an up row): the GEMV's over the whole
    [gate; up] weight with half the columns a program (the same weight bytes a program)."""
    return sorted({(max(1, bn // 2), bk, w) for bn, bk, w in gemv_candidates(n, k)})


def gemv_neighbours(best: tuple[int, ...], k: int | None = None) -> list[tuple[int, ...]]:
    """The best coarse GEMV blocks with half and twice its warps (8 to 64 values a thread); given K, where
    the K loop runs 4 or more tiles, also with 2 and 3 stages (the next tiles' loads in flight while one is
    summed: without, each waits for its own)."""
    block_n, block_k, warps = best[:3]
    stages = tuple(best[3:])
    out = [(block_n, block_k, w, *stages) for w in (warps // 2, warps * 2)
           if 2 <= w <= 8 and 8 <= block_n * block_k // (32 * w) <= 64]
    if k is not None and not stages and k // block_k >= 4:
        out += [(block_n, block_k, warps, s) for s in (2, 3)]
    return out


def _warps_for(values: int, per_thread: int) -> int:
    """2, 4 or 8 warps: the count closest to `per_thread` values a thread."""
    return min((2, 4, 8), key=lambda w: abs(values / (32 * w) - per_thread))


def skinny_candidates(n: int, k: int, num_sms: int) -> list[tuple[int, int, int, int, int]]:
    """Skinny GEMM blocks to time first: 32 to 128 columns a program, K tiles of 64 and 128, the splits of
    K that fill the GPU for that tile, 4 warps and 4 stages."""
    return [(block_n, block_k, split_count(n, k, num_sms, block_n, block_k), 4, 4)
            for block_n in (32, 64, 128) for block_k in (64, 128) if k % block_k == 0]


def skinny_neighbours(best: tuple[int, int, int, int, int], k: int) -> list[tuple[int, int, int, int, int]]:
    """The best coarse skinny blocks with half and twice its splits, and with 3 and 5 stages (every best of
    the grids searched for the llama shapes had 4 warps and 3 or 5 stages: RESULTS 2026-12-01, 10fdf14)."""
    block_n, block_k, splits, warps, stages = best
    out = [(block_n, block_k, s, warps, stages) for s in (splits // 2, splits * 2)
           if 1 <= s <= 8 and k % (block_k * s) == 0]
    return out + [(block_n, block_k, splits, warps, st) for st in (3, 5)]


def gated_skinny_candidates(k: int) -> list[tuple[int, int, int, int]]:
    """Gated skinny GEMM blocks to time: 16 to 64 columns (gate and up rows) a program, K tiles of 64 and
    128, 4 warps and 4 stages; then the best's stages as skinny_neighbours."""
    return [(block_n, block_k, 4, 4) for block_n in (16, 32, 64) for block_k in (64, 128) if k % block_k == 0]


def gated_skinny_neighbours(best: tuple[int, int, int, int]) -> list[tuple[int, int, int, int]]:
    return [(best[0], best[1], best[2], st) for st in (3, 5)]
