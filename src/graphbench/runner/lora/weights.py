"""The adapters' static slot buffers, one module per decoder layer, and the batched LoRA delta.

Each projection's adapters are stacked over rows, one per resident adapter (the engine's slot s >= 1
is row s - 1): A [L, R', in], B [L, out, R'] with L = max_loras. q/k/v share the fused qkv
projection, so their A's stack to R' = 3R rows and their B's form a block-diagonal [L, q + 2kv, 3R];
gate/up likewise (R' = 2R). A smaller adapter rank is zero-padded to R = max_lora_rank. The buffers
keep their addresses: loading an adapter into a slot is a copy, which a CUDA-graph replay sees.

Each token of a flat batch has its adapter row in an int32 index [T] (-1: no adapter), filled by the
step inputs into the model's static buffer. On CUDA the delta is Triton launches over tokens
(runner/kernels/lora_shrink.py and lora_bgmv.py: shrink x A^T, then the expand, each token with its own adapter; rows
without one are not touched), the expand inside the projection's GEMM where it can be
(runner/lora/projection.py, whose custom ops the model calls). On the CPU it is the plain torch path
(lora_delta): x A_l^T B_l^T for every row l, each token keeping its own row's; its cost is L times one
adapter's (L is small).

The projection ops add nothing while adapters are inactive: the model runner makes them inactive for a
batch whose key has has_lora False, so with cudagraph_specialize_lora the recordings of such batches
hold no LoRA kernel at all (their own graphs, and fewer operations), as vLLM's do.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from graphbench.config.arch import ArchConfig
from graphbench.errors import GraphbenchError
from graphbench.runner.lora.adapters import Adapter

_ACTIVE = [True]


def set_adapters_active(active: bool) -> None:
    """From now on the LoRA projections add the deltas (True) or do nothing (False)."""
    _ACTIVE[0] = active


@contextmanager
def adapters_active(active: bool) -> Iterator[None]:
    """Inside: the LoRA projections add the deltas (True) or do nothing (False)."""
    before = _ACTIVE[0]
    set_adapters_active(active)
    try:
        yield
    finally:
        set_adapters_active(before)


_KERNEL = [True]


def use_lora_kernel(on: bool) -> None:
    """On CUDA, the LoRA projections run the Triton kernels (True, the default) or the torch path (False: for A/B
    measurements and tests; a recording keeps the path it was captured with)."""
    _KERNEL[0] = on


def lora_delta(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x [T, in], a [L, R', in], b [L, out, R'], index [T] (-1: none) -> [T, out], in plain torch ops: every row's
    delta over all tokens (a fixed loop: a recording of it needs no data-dependent shape), each token keeping
    its own row's. torch.where, not a product with a one-hot mask: 0 x inf is NaN, so a mask let another
    adapter's inf reach every token of the batch, those without an adapter too."""
    delta = x.new_zeros((x.shape[0], b.shape[1]))
    for row in range(a.shape[0]):
        delta = torch.where((index == row)[:, None], (x @ a[row].T) @ b[row].T, delta)
    return delta


@functools.cache
def _kernel():
    """The Triton launcher, imported on first use (the CPU path never needs Triton)."""
    from graphbench.runner.kernels.lora_bgmv import lora_add_triton

    return lora_add_triton


def adapters_are_active() -> bool:
    return _ACTIVE[0]


def kernel_in_use() -> bool:
    """use_lora_kernel's setting: the Triton kernels on CUDA (True) or the torch path."""
    return _KERNEL[0]


def add_delta(out: torch.Tensor, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, index: torch.Tensor,
              segments: list[int]) -> None:
    """out [T, out] += each token's delta of x [T, in] (a, b: the layer's buffers; index [T] int32; segments:
    the output rows of each block of B's block diagonal, e.g. [q, kv, kv]), after the projection."""
    if out.is_cuda and _KERNEL[0]:
        _kernel()(out, x, a, b, index, segments)
    else:
        out.add_(lora_delta(x, a, b, index))


class LayerLoRA(nn.Module):
    """One decoder layer's slot buffers (see the module docstring for the layout)."""

    def __init__(self, arch: ArchConfig, num_rows: int, rank: int, dtype: torch.dtype, device):
        super().__init__()
        q, kv = arch.num_attention_heads * arch.head_dim, arch.num_key_value_heads * arch.head_dim
        h, i, s, r = arch.hidden_size, arch.intermediate_size, num_rows, rank
        self.rank, self.q, self.kv, self.intermediate = r, q, kv, i
        # each B's output rows per block of its block diagonal (the projections' segments)
        self.qkv_segments, self.gate_up_segments, self.out_segments = [q, kv, kv], [i, i], [h]
        shapes = {"qkv_a": (s, 3 * r, h), "qkv_b": (s, q + 2 * kv, 3 * r), "o_a": (s, r, q), "o_b": (s, h, r),
                  "gate_up_a": (s, 2 * r, h), "gate_up_b": (s, 2 * i, 2 * r), "down_a": (s, r, i), "down_b": (s, h, r)}
        for name, shape in shapes.items():
            self.register_buffer(name, torch.zeros(shape, dtype=dtype, device=device), persistent=False)

    @torch.no_grad()
    def load(self, row: int, adapter: Adapter, layer: int) -> None:
        """Copy the adapter's weights of this layer into a buffer row (targets it lacks stay zero)."""
        r, q, kv, i = self.rank, self.q, self.kv, self.intermediate
        for buffer in (self.qkv_a, self.qkv_b, self.o_a, self.o_b, self.gate_up_a, self.gate_up_b,
                       self.down_a, self.down_b):
            buffer[row].zero_()
        # target -> (A buffer, A row offset, B buffer, B row range, B column offset)
        places = {"q_proj": (self.qkv_a, 0, self.qkv_b, (0, q), 0),
                  "k_proj": (self.qkv_a, r, self.qkv_b, (q, q + kv), r),
                  "v_proj": (self.qkv_a, 2 * r, self.qkv_b, (q + kv, q + 2 * kv), 2 * r),
                  "o_proj": (self.o_a, 0, self.o_b, (0, self.o_b.shape[1]), 0),
                  "gate_proj": (self.gate_up_a, 0, self.gate_up_b, (0, i), 0),
                  "up_proj": (self.gate_up_a, r, self.gate_up_b, (i, 2 * i), r),
                  "down_proj": (self.down_a, 0, self.down_b, (0, self.down_b.shape[1]), 0)}
        for target, (a_buf, a_row, b_buf, (b_lo, b_hi), b_col) in places.items():
            pair = adapter.weights.get((layer, target))
            if pair is None:
                continue
            a, b = pair
            rank = a.shape[0]
            a_buf[row, a_row:a_row + rank].copy_(a)
            b_buf[row, b_lo:b_hi, b_col:b_col + rank].copy_(b)
            if not (a_buf[row].isfinite().all() and b_buf[row].isfinite().all()):
                # (finite in float32, beyond float16's range: a kernel's dot over a group of slots would carry
                # the inf to the other slots' tokens)
                raise GraphbenchError(f"LoRA adapter {adapter.name!r}: {target}'s weights of layer {layer} overflow "
                                      f"{a_buf.dtype} (the model's dtype); run the model in bfloat16 or float32")


def attach_lora(model, arch: ArchConfig, num_rows: int, rank: int, max_num_tokens: int) -> torch.Tensor:
    """Give every decoder layer its buffers for num_rows adapters and the model a [max_num_tokens] int32
    buffer of each token's adapter row (-1: none; filled by the step inputs); returns that buffer."""
    weight = model.embed_tokens.weight
    for layer in model.layers:
        layer.lora = LayerLoRA(arch, num_rows, rank, weight.dtype, weight.device)
    model.register_buffer("lora_token_slots", torch.full((max_num_tokens,), -1, dtype=torch.int32,
                                                         device=weight.device), persistent=False)
    model.lora_num_slots = num_rows
    return model.lora_token_slots


def load_adapters(model, arch: ArchConfig, lora, max_num_tokens: int, seed: int) -> dict[str, int]:
    """Attach the slot buffers and load every configured adapter into its slot: name -> slot (1..; its
    buffer row is slot - 1)."""
    from graphbench.runner.lora.adapters import load_adapter

    attach_lora(model, arch, lora.num_slots - 1, lora.max_lora_rank, max_num_tokens)
    slots = {}
    for slot, (name, source) in enumerate(lora.adapters(), start=1):
        adapter = load_adapter(name, source, arch, lora.max_lora_rank, seed + slot)
        for index, layer in enumerate(model.layers):
            layer.lora.load(slot - 1, adapter, index)
        slots[name] = slot
    return slots

