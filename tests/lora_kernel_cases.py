"""Cases for the Triton LoRA kernels (runner/kernels/lora_bgmv.py): a decoder layer's slot buffers filled
by LayerLoRA.load from dummy adapters, and each projection's delta checked against a float64 reference.

Used under the Triton interpreter (tests/test_lora_kernel.py, CPU) and on CUDA
(tests/gpu/test_lora_kernel_gpu.py). The buffers come from the loading code, so the kernels are checked
on the layout the engine gives them (block-diagonal qkv and gate/up B, padded ranks, missing targets).
"""

from __future__ import annotations

import torch

from graphbench.config.arch import ArchConfig
from graphbench.runner.lora.adapters import Adapter, dummy_adapter
from graphbench.runner.lora.weights import LayerLoRA

# q 96 and kv 32 rows: segment bounds inside a 128-row output block; intermediate 300: down's K has two
# shrink splits, neither a multiple of the block
TINY = ArchConfig("LlamaForCausalLM", hidden_size=96, intermediate_size=300, num_hidden_layers=1,
                  num_attention_heads=3, num_key_value_heads=1, head_dim=32, vocab_size=64)


# the same with K a multiple of the skinny GEMM's K tile (its LoRA epilogue, the add-norm + shrink launch)
SKINNY = ArchConfig("LlamaForCausalLM", hidden_size=96, intermediate_size=320, num_hidden_layers=1,
                    num_attention_heads=3, num_key_value_heads=1, head_dim=32, vocab_size=64)


def make_layer(arch: ArchConfig, max_rank: int, adapter_ranks: list[int], dtype: torch.dtype, device,
               seed: int = 0) -> LayerLoRA:
    """A layer's buffers with one dummy adapter a row; the last one lacks k, o, gate and up (zeros there)."""
    layer = LayerLoRA(arch, len(adapter_ranks), max_rank, dtype, device)
    for row, rank in enumerate(adapter_ranks):
        adapter = dummy_adapter(f"a{row}", rank, arch, seed + row)
        if row == len(adapter_ranks) - 1 and row > 0:
            adapter = Adapter(adapter.name, rank, {key: w for key, w in adapter.weights.items()
                                                   if key[1] in ("q_proj", "v_proj", "down_proj")})
        layer.load(row, adapter, 0)
    return layer


def projections(layer: LayerLoRA, arch: ArchConfig) -> dict[str, tuple]:
    """name -> (A, B, segments, input features)."""
    q = arch.num_attention_heads * arch.head_dim
    h, i = arch.hidden_size, arch.intermediate_size
    return {"qkv": (layer.qkv_a, layer.qkv_b, layer.qkv_segments, h), "o": (layer.o_a, layer.o_b, layer.out_segments, q),
            "gate_up": (layer.gate_up_a, layer.gate_up_b, layer.gate_up_segments, h),
            "down": (layer.down_a, layer.down_b, layer.out_segments, i)}


def reference(out: torch.Tensor, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """out + each token's delta, in float64 (rows with index -1 unchanged)."""
    ref = out.double().clone()
    for row in range(a.shape[0]):  # one adapter at a time: its tokens, one matmul each way
        mine = index == row
        ref[mine] += (x[mine].double() @ a[row].double().T) @ b[row].double().T
    return ref


def check_projection(launch, layer: LayerLoRA, arch: ArchConfig, name: str, index: torch.Tensor, seed: int,
                     rel_tol: float) -> float:
    """Run launch(out, x, a, b, index, segments) on strided x and out views inside guarded buffers;
    assert rows with an adapter match the reference, rows without one and the guards are untouched.
    Returns the largest error relative to the reference's magnitude."""
    a, b, segments, k = projections(layer, arch)[name]
    t, n = index.shape[0], b.shape[1]
    g = torch.Generator().manual_seed(seed)
    wide = torch.randn(t, k + 8, generator=g).to(a.dtype).to(a.device)
    x = wide[:, 3:3 + k]  # a column slice: row stride k + 8
    whole = torch.randn(t + 2, n + 5, generator=g).to(a.dtype).to(a.device)
    before = whole.clone()
    out = whole[1:1 + t, :n]  # guard rows above and below, guard columns to the right
    expected = reference(out, x, a, b, index)
    launch(out, x, a, b, index, segments)
    none = (index < 0).cpu()
    assert torch.equal(whole[0], before[0]) and torch.equal(whole[-1], before[-1]), f"{name}: guard rows written"
    assert torch.equal(whole[:, n:], before[:, n:]), f"{name}: guard columns written"
    assert torch.equal(out.cpu()[none], before[1:1 + t, :n].cpu()[none]), f"{name}: a row without adapter written"
    err = ((out.double() - expected).abs().max() / expected.abs().max().clamp_min(1e-6)).item()
    assert err <= rel_tol, f"{name}: relative error {err:.2e} > {rel_tol:.0e} (T {t}, rows {index.tolist()})"
    return err


def token_rows(num_tokens: int, num_rows: int, seed: int) -> torch.Tensor:
    """Each token's adapter row, -1 (none) included, as the step inputs give them (int32)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-1, num_rows, (num_tokens,), generator=g, dtype=torch.int32)
