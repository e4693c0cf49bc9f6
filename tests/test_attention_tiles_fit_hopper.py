"""The attention kernels' tiles fit a Hopper SM's shared memory at every head_dim the engine takes.

The tile sizes come from the shapes alone (attention_config, decode_config) and have no fallback: a
config whose buffers exceed the 227 KiB a block may use on sm_90 fails at the first launch on an H100 or
H200. Triton compiles for that target without a GPU (its ptxas ships in the wheel), so the CPU suite
checks the shared memory each config asks for. head_dim 256 (a 64 x 256 K and V tile, 3 stages in prefill)
is the largest a checkpoint may bring.
"""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")

HOPPER_SHARED_LIMIT = 232448  # bytes a block may opt into on sm_90 (227 KiB)
NUM_SMS = 132  # an H100 SXM (the H200 has the same count)
INT_POINTERS = {"qsl_ptr", "seq_lens_ptr", "block_tables_ptr", "slot_ptr", "count_ptr"}
FLOAT32_POINTERS = {"part_ptr", "lse_ptr", "cos_sin_ptr"}


def _signature(fn, constexprs: dict) -> dict:
    sig = {}
    for name in fn.arg_names:
        if name in constexprs:
            sig[name] = "constexpr"
        elif name in INT_POINTERS:
            sig[name] = "*i32"
        elif name in FLOAT32_POINTERS:
            sig[name] = "*fp32"
        elif name.endswith("_ptr"):
            sig[name] = "*bf16"
        else:
            sig[name] = "fp32" if name == "scale" else "i32"
    return sig


def _shared_bytes(fn, constexprs: dict, num_warps: int, num_stages: int, cache_dir) -> int:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source = ASTSource(fn=fn, signature=_signature(fn, constexprs), constexprs=constexprs)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TRITON_CACHE_DIR", str(cache_dir))
        kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                                options=dict(num_warps=num_warps, num_stages=num_stages))
    return kernel.metadata.shared


def _common(head_dim: int, group: int) -> dict:
    from graphbench.runner.kernels.util import next_power_of_2

    return dict(GROUP=group, HEAD_DIM=head_dim, BLOCK_D=max(16, next_power_of_2(head_dim)), BLOCK_SIZE=16,
                PRECISION="tf32", INTERPRET=False)


@pytest.mark.parametrize("head_dim,group", [(256, 1), (256, 8), (128, 8)])
@pytest.mark.parametrize("tokens,requests", [(2048, 4), (64, 64)], ids=["prefill", "mixed"])
def test_the_unified_kernels_tiles_fit(head_dim, group, tokens, requests, tmp_path):
    import torch
    from graphbench.runner.kernels import paged_attention as pa

    cfg = pa.attention_config(tokens, requests, 8 * group, 8, head_dim, torch.bfloat16, NUM_SMS)
    constexprs = dict(_common(head_dim, group), BLOCK_M=cfg["BLOCK_M"], BLOCK_Q=cfg["BLOCK_M"] // group,
                      TILE_N=cfg["TILE_N"], NUM_SPLITS=cfg["NUM_SPLITS"])
    shared = _shared_bytes(pa._attention_kernel, constexprs, cfg["num_warps"], cfg["num_stages"], tmp_path)
    assert 0 < shared <= HOPPER_SHARED_LIMIT, (cfg, shared)


@pytest.mark.parametrize("head_dim,group", [(256, 1), (256, 8)])
@pytest.mark.parametrize("rows", [1, 64])
def test_the_decode_kernels_tiles_fit(head_dim, group, rows, tmp_path):
    import torch
    from graphbench.runner.kernels import paged_decode as pd
    from graphbench.runner.kernels.util import next_power_of_2

    cfg = pd.decode_config(rows, 8, head_dim, torch.bfloat16, NUM_SMS)
    constexprs = dict(_common(head_dim, group), BLOCK_M=max(16, next_power_of_2(group)),
                      TILE_N=cfg["TILE_N"], SPLIT=cfg["NUM_SPLITS"] > 1, MIN_TILES=pd.MIN_TILES_PER_SPLIT,
                      ROTARY=True, EARLY_TILE=rows * 8 <= NUM_SMS, PDL=True)
    shared = _shared_bytes(pd._decode_kernel, constexprs, cfg["num_warps"], cfg["num_stages"], tmp_path)
    assert 0 < shared <= HOPPER_SHARED_LIMIT, (cfg, shared)
