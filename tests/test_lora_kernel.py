"""The Triton LoRA kernels (runner/kernels/lora_bgmv.py) under the Triton interpreter, against a float64
reference and the torch path, on the buffers LayerLoRA.load fills (tests/lora_kernel_cases.py)."""

from __future__ import annotations

from tests.interpreted import ROOT, run_interpreted

CODE = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import torch
from graphbench.runner.kernels.lora_bgmv import lora_add_triton
from graphbench.runner.kernels.lora_blocks import lora_blocks
from graphbench.runner.lora.weights import lora_delta
from tests.lora_kernel_cases import TINY, check_projection, make_layer, token_rows

def launch(out, x, a, b, index, segments):
    lora_add_triton(out, x, a, b, index, segments, interpret=True)

# block sizes: 16 tokens up to 64, then 64; K splits of 256 columns, one tile in a decode block, 64-column
# tiles in a prefill block; ranks padded to 16; slots side by side in one dot up to 32 rank columns in the
# expand, 64 in a decode shrink (qkv's shrink: one slot of 3 x 16; its expand: two of 16; o's shrink: four)
assert lora_blocks(1, 2048, 48, 3, 4) == dict(BLOCK_T=16, BLOCK_K=256, K_SPLIT=256, SPLIT_K=8, BLOCK_R=64,
                                              SUM_COLS=64, SHRINK_GROUP=1, BLOCK_RS=16, GROUP=2, BLOCK_N=128, shrink_warps=4,
                                              expand_warps=4)
assert lora_blocks(1, 2048, 16, 1, 3)["SHRINK_GROUP"] == 4 and lora_blocks(1, 2048, 16, 1, 1)["GROUP"] == 1
assert lora_blocks(1, 2048, 16, 1, 8)["SHRINK_GROUP"] == 4 and lora_blocks(1, 2048, 32, 1, 8)["SHRINK_GROUP"] == 2
assert lora_blocks(1, 2048, 192, 3, 8)["GROUP"] == 1 and lora_blocks(1, 2048, 64, 1, 8)["SHRINK_GROUP"] == 1
assert lora_blocks(70, 300, 8, 1, 1)["BLOCK_T"] == 64 and lora_blocks(70, 300, 8, 1, 1)["SPLIT_K"] == 2
assert lora_blocks(512, 2048, 192, 3, 1)["SUM_COLS"] == 16  # a prefill block's splits summed 16 columns at a time
assert lora_blocks(70, 2048, 8, 1, 1)["BLOCK_K"] == 64 and lora_blocks(5, 40, 8, 1, 1)["BLOCK_K"] == 64
assert lora_blocks(70, 300, 16, 1, 4)["GROUP"] == lora_blocks(70, 300, 16, 1, 4)["SHRINK_GROUP"] == 1  # prefill
seed = 0
# (max rank, adapters' ranks, dtype, tolerance, token counts): T 1, a partial 16-block, a partial 64-block
for max_rank, ranks, dtype, tol, counts in ((16, [8, 16, 16], torch.float32, 1e-5, (1, 17, 70)),
                                            (8, [8, 8], torch.bfloat16, 2e-2, (5,))):
    layer = make_layer(TINY, max_rank, ranks, dtype, "cpu", seed=max_rank)
    for t in counts:
        for name in ("qkv", "o", "gate_up", "down"):
            seed += 1
            check_projection(launch, layer, TINY, name, token_rows(t, len(ranks), seed), seed, tol)
# six adapters: three groups of two slots in the expand, two of four in o's and down's shrink, six of one in
# qkv's shrink
layer = make_layer(TINY, 16, [16, 8, 16, 4, 16, 8], torch.float32, "cpu", seed=5)
for name in ("qkv", "o", "gate_up", "down"):
    seed += 1
    check_projection(launch, layer, TINY, name, token_rows(21, 6, seed), seed, 1e-5)
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


# the subprocess's first lines: this checkout's tests importable
PREAMBLE = f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport torch\n"

EPILOGUE = PREAMBLE + """
from graphbench.runner.kernels.gemv import launch_silu_mul
from graphbench.runner.kernels.lora_bgmv import lora_add_triton
from graphbench.runner.kernels.lora_shrink import lora_shrink
from graphbench.runner.kernels.skinny_gemm import skinny_gate_up, skinny_gemm
from tests.lora_kernel_cases import SKINNY as ARCH, make_layer, projections, token_rows

layer = make_layer(ARCH, 16, [16, 8, 16], torch.bfloat16, "cpu", seed=5)
g = torch.Generator().manual_seed(7)
for t in (5, 17):
    index = token_rows(t, 3, t)
    index[0] = -1  # a row without an adapter, always
    for name, (a, b, segments, k) in projections(layer, ARCH).items():
        x = torch.randn(t, k, generator=g).to(torch.bfloat16)
        w = torch.randn(b.shape[1], k, generator=g).to(torch.bfloat16)
        bias = torch.randn(b.shape[1], generator=g).to(torch.bfloat16) if name == "qkv" else None
        shrunk = lora_shrink(x, a, b, index, segments, interpret=True)
        if name == "gate_up":  # the projection, the expand-add, the silu-mul: three launches against one
            for config in ((32, 32, 4, 1), (64, 32, 4, 1)):
                gate_up = skinny_gemm(x, w, None, (32, 32, 1, 4, 1))
                lora_add_triton(gate_up, x, a, b, index, segments, interpret=True)
                want = torch.empty(t, b.shape[1] // 2, dtype=torch.bfloat16)
                launch_silu_mul(gate_up, want)
                got = skinny_gate_up(x, w, config, lora=shrunk)
                assert torch.equal(got, want), (t, config, (got.float() - want.float()).abs().max())
            continue
        for config in ((32, 32, 1, 4, 1), (64, 32, k // 32, 4, 1)):  # one K split, and every tile its own split
            want = skinny_gemm(x, w, bias, config)
            lora_add_triton(want, x, a, b, index, segments, interpret=True)
            got = skinny_gemm(x, w, bias, config, lora=shrunk)
            assert torch.equal(got, want), (name, t, config, (got.float() - want.float()).abs().max())
        assert torch.equal(got[0], skinny_gemm(x, w, bias, config)[0])  # no adapter: the projection alone
# gate/up's one walk for both deltas over 3 shrink splits (K 640) and 5 adapters (three groups of two slots)
from graphbench.config.arch import ArchConfig
wide = ArchConfig("LlamaForCausalLM", hidden_size=640, intermediate_size=64, num_hidden_layers=1,
                  num_attention_heads=5, num_key_value_heads=1, head_dim=128, vocab_size=64)
layer = make_layer(wide, 16, [16, 8, 16, 4, 16], torch.bfloat16, "cpu", seed=8)
a, b, segments, k = projections(layer, wide)["gate_up"]
for t in (6, 16):
    index = token_rows(t, 5, t)
    index[1] = -1
    x = torch.randn(t, k, generator=g).to(torch.bfloat16)
    w = torch.randn(b.shape[1], k, generator=g).to(torch.bfloat16)
    shrunk = lora_shrink(x, a, b, index, segments, interpret=True)
    # three splits summed by the last to finish, which zeroes its count again for the next launch
    from graphbench.runner.kernels.lora_blocks import lora_blocks
    from graphbench.runner.kernels.lora_shrink import _split_counts
    assert lora_blocks(t, k, b.shape[2], 2, 5)["SPLIT_K"] == 3 and _split_counts
    assert all(int(c.abs().sum()) == 0 for c in _split_counts.values())
    gate_up = skinny_gemm(x, w, None, (32, 32, 1, 4, 1))
    lora_add_triton(gate_up, x, a, b, index, segments, interpret=True)
    want = torch.empty(t, b.shape[1] // 2, dtype=torch.bfloat16)
    launch_silu_mul(gate_up, want)
    assert torch.equal(skinny_gate_up(x, w, (32, 32, 4, 1), lora=shrunk), want), t
print("ok")
"""


def test_the_skinny_gemm_adds_the_lora_delta_in_its_epilogue_as_the_expand_launch_does():
    run_interpreted(EPILOGUE)


NORM_SHRINK = PREAMBLE + """
from graphbench.runner.kernels.add_rmsnorm import launch_add_rmsnorm
from graphbench.runner.kernels.lora_row_shrink import add_rmsnorm_shrink, row_shrink
from graphbench.runner.kernels.skinny_gemm import skinny_gemm
from tests.lora_kernel_cases import SKINNY as ARCH, make_layer, reference, token_rows

layer = make_layer(ARCH, 16, [16, 8, 16], torch.bfloat16, "cpu", seed=9)
g = torch.Generator().manual_seed(3)
for t in (5, 17):
    index = token_rows(t, 3, t + 1)
    index[0] = -1
    x, res = (torch.randn(t, 96, generator=g).to(torch.bfloat16) for _ in range(2))
    nw = (1 + 0.1 * torch.randn(96, generator=g)).to(torch.bfloat16)
    want_out, want_h = torch.empty_like(x), torch.empty_like(x)
    launch_add_rmsnorm(x, res, nw, 1e-6, want_out, want_h)
    for a, b, segments in ((layer.qkv_a, layer.qkv_b, layer.qkv_segments),
                           (layer.gate_up_a, layer.gate_up_b, layer.gate_up_segments)):
        out, h = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
        shrunk = add_rmsnorm_shrink(x, res, nw, 1e-6, out, h, a, b, index, segments)
        assert torch.equal(out, want_out) and torch.equal(h, want_h), t  # the add-norm's outputs, bit for bit
        ref = torch.stack([want_out[i].double() @ a[max(int(r), 0)].double().T * (r >= 0) for i, r in enumerate(index)])
        assert torch.allclose(shrunk.v.double(), ref, rtol=1e-5, atol=1e-5), t
        alone = row_shrink(out, a, b, index, segments)  # the shrink's own launch sums as the add-norm's does
        assert torch.equal(alone.v, shrunk.v), t
        w = torch.randn(b.shape[1], 96, generator=g).to(torch.bfloat16)
        got = skinny_gemm(out, w, None, (32, 32, 1, 4, 1), lora=shrunk)  # expanded in the GEMM's epilogue
        expected = reference(skinny_gemm(out, w, None, (32, 32, 1, 4, 1)), out, a, b, index).float()
        assert ((got.float() - expected).abs().max() / expected.abs().max()) < 1e-2, t
        assert torch.equal(got[0], skinny_gemm(out, w, None, (32, 32, 1, 4, 1))[0])  # no adapter: untouched
print("ok")
"""


def test_the_row_shrinks_alone_and_after_the_add_norm():
    run_interpreted(NORM_SHRINK)
