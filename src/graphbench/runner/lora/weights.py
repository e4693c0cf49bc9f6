"""The adapters' static slot buffers, one module per decoder layer, and the batched LoRA delta.

Each projection's adapters are stacked over slots, slot 0 (no adapter) all zeros:
A [S, R', in], B [S, out, R'] with S = max_loras + 1. q/k/v share the fused qkv projection, so
their A's stack to R' = 3R rows and their B's form a block-diagonal [S, q + 2kv, 3R]; gate/up
likewise (R' = 2R). A smaller adapter rank is zero-padded to R = max_lora_rank. The buffers keep
their addresses: loading an adapter into a slot is a copy, which a CUDA-graph replay sees.

The delta of a flat batch, each token with its slot (one-hot [T, S]): y = x A_s^T for every slot
s, masked to each token's own slot, then y B_s^T summed over slots. Its cost is S times one
adapter's (S is small); the shapes are static, so it compiles and records like the rest.

The delta is added by a custom op (`graphbench::lora_add`, opaque to the compiler) that does nothing
while adapters are inactive: the model runner makes them inactive for a batch whose key has
has_lora False, so with cudagraph_specialize_lora the recordings of such batches hold no LoRA
kernel at all (their own graphs, and fewer operations), as vLLM's do.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from graphbench.config.arch import ArchConfig
from graphbench.runner.lora.adapters import Adapter
from graphbench.runner.op_registry import register_op

_ACTIVE = [True]


def set_adapters_active(active: bool) -> None:
    """From now on lora_add adds the deltas (True) or does nothing (False)."""
    _ACTIVE[0] = active


@contextmanager
def adapters_active(active: bool) -> Iterator[None]:
    """Inside: lora_add adds the deltas (True) or does nothing (False)."""
    before = _ACTIVE[0]
    set_adapters_active(active)
    try:
        yield
    finally:
        set_adapters_active(before)


def lora_delta(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, onehot: torch.Tensor) -> torch.Tensor:
    """x [T, in], a [S, R', in], b [S, out, R'], onehot [T, S] -> [T, out]."""
    y = torch.einsum("ti,sri->tsr", x, a) * onehot[:, :, None]  # [T, S, R']: each token's own slot only
    return torch.einsum("tsr,sor->to", y, b)


def _lora_add(out: torch.Tensor, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, onehot: torch.Tensor) -> None:
    if _ACTIVE[0]:
        out.add_(lora_delta(x, a, b, onehot))


def _lora_add_fake(out: torch.Tensor, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, onehot: torch.Tensor) -> None:
    return None


lora_add = register_op("graphbench::lora_add", _lora_add, _lora_add_fake, mutates_args=("out",))


class LayerLoRA(nn.Module):
    """One decoder layer's slot buffers (see the module docstring for the layout)."""

    def __init__(self, arch: ArchConfig, num_slots: int, rank: int, dtype: torch.dtype, device):
        super().__init__()
        q, kv = arch.num_attention_heads * arch.head_dim, arch.num_key_value_heads * arch.head_dim
        h, i, s, r = arch.hidden_size, arch.intermediate_size, num_slots, rank
        self.rank, self.q, self.kv, self.intermediate = r, q, kv, i
        shapes = {"qkv_a": (s, 3 * r, h), "qkv_b": (s, q + 2 * kv, 3 * r), "o_a": (s, r, q), "o_b": (s, h, r),
                  "gate_up_a": (s, 2 * r, h), "gate_up_b": (s, 2 * i, 2 * r), "down_a": (s, r, i), "down_b": (s, h, r)}
        for name, shape in shapes.items():
            self.register_buffer(name, torch.zeros(shape, dtype=dtype, device=device), persistent=False)

    @torch.no_grad()
    def load(self, slot: int, adapter: Adapter, layer: int) -> None:
        """Copy the adapter's weights of this layer into a slot (targets it lacks stay zero)."""
        r, q, kv, i = self.rank, self.q, self.kv, self.intermediate
        for buffer in (self.qkv_a, self.qkv_b, self.o_a, self.o_b, self.gate_up_a, self.gate_up_b,
                       self.down_a, self.down_b):
            buffer[slot].zero_()
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
            a_buf[slot, a_row:a_row + rank].copy_(a)
            b_buf[slot, b_lo:b_hi, b_col:b_col + rank].copy_(b)


def attach_lora(model, arch: ArchConfig, num_slots: int, rank: int, max_num_tokens: int) -> torch.Tensor:
    """Give every decoder layer its slot buffers and the model a [max_num_tokens] slot-per-token buffer
    (filled by the step inputs); returns that buffer."""
    weight = model.embed_tokens.weight
    for layer in model.layers:
        layer.lora = LayerLoRA(arch, num_slots, rank, weight.dtype, weight.device)
    model.register_buffer("lora_token_slots", torch.zeros(max_num_tokens, dtype=torch.int64, device=weight.device),
                          persistent=False)
    model.lora_num_slots = num_slots
    return model.lora_token_slots


def load_adapters(model, arch: ArchConfig, lora, max_num_tokens: int, seed: int) -> dict[str, int]:
    """Attach the slot buffers and load every configured adapter into its slot: name -> slot (1..)."""
    from graphbench.runner.lora.adapters import load_adapter

    attach_lora(model, arch, lora.num_slots, lora.max_lora_rank, max_num_tokens)
    slots = {}
    for slot, (name, source) in enumerate(lora.adapters(), start=1):
        adapter = load_adapter(name, source, arch, lora.max_lora_rank, seed + slot)
        for index, layer in enumerate(model.layers):
            layer.lora.load(slot, adapter, index)
        slots[name] = slot
    return slots

