"""The Triton LoRA kernels (runner/kernels/lora_bgmv.py) under the Triton interpreter, against a float64
reference and the torch path, on the buffers LayerLoRA.load fills (tests/lora_kernel_cases.py)."""

from __future__ import annotations

from tests.interpreted import ROOT, run_interpreted

CODE = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import torch
from graphbench.runner.kernels.lora_bgmv import lora_add_triton, lora_blocks
from graphbench.runner.lora.weights import lora_delta
from tests.lora_kernel_cases import TINY, check_projection, make_layer, token_rows

def launch(out, x, a, b, index, segments):
    lora_add_triton(out, x, a, b, index, segments, interpret=True)

# block sizes: 16 tokens up to 64, then 64; K splits of 256 columns; ranks padded to 16
assert lora_blocks(1, 2048, 48, 3) == dict(BLOCK_T=16, BLOCK_K=64, K_SPLIT=256, SPLIT_K=8, BLOCK_R=64,
                                           BLOCK_RS=16, BLOCK_N=128, shrink_warps=4, expand_warps=4)
assert lora_blocks(70, 300, 8, 1)["BLOCK_T"] == 64 and lora_blocks(70, 300, 8, 1)["SPLIT_K"] == 2
seed = 0
# (max rank, adapters' ranks, dtype, tolerance, token counts): T 1, a partial 16-block, a partial 64-block
for max_rank, ranks, dtype, tol, counts in ((16, [8, 16, 16], torch.float32, 1e-5, (1, 17, 70)),
                                            (8, [8, 8], torch.bfloat16, 2e-2, (5,))):
    layer = make_layer(TINY, max_rank, ranks, dtype, "cpu", seed=max_rank)
    for t in counts:
        for name in ("qkv", "o", "gate_up", "down"):
            seed += 1
            check_projection(launch, layer, TINY, name, token_rows(t, len(ranks), seed), seed, tol)
# one adapter for every token, and no adapter at all (nothing written)
layer = make_layer(TINY, 16, [16, 8], torch.float32, "cpu", seed=3)
check_projection(launch, layer, TINY, "qkv", torch.ones(9, dtype=torch.int32), 99, 1e-5)
check_projection(launch, layer, TINY, "down", torch.full((4,), -1, dtype=torch.int32), 98, 0.0)
# the kernels and the torch path agree (float32)
x, index = torch.randn(6, 96), torch.tensor([0, -1, 1, 1, -1, 0], dtype=torch.int32)
out = torch.zeros(6, 160)
launch(out, x, layer.qkv_a, layer.qkv_b, index, layer.qkv_segments)
assert torch.allclose(out, lora_delta(x, layer.qkv_a, layer.qkv_b, index), rtol=1e-5, atol=1e-5)
# the expand reads only a row's own segment of B: NaN in the zeros beside the diagonal blocks changes nothing
poisoned = layer.qkv_b.clone()
for lo, hi, r0 in ((0, 96, 0), (96, 128, 16), (128, 160, 32)):
    poisoned[:, lo:hi, :r0], poisoned[:, lo:hi, r0 + 16:] = float("nan"), float("nan")
again = torch.zeros(6, 160)
launch(again, x, layer.qkv_a, poisoned, index, layer.qkv_segments)
assert torch.equal(again, out)
print("ok")
"""


def test_lora_kernels_match_the_reference_in_the_interpreter():
    run_interpreted(CODE)
