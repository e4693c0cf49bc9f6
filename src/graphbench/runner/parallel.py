"""Tensor parallelism over torch.distributed: the process group, the collectives the model calls, and
how each weight is split across ranks (Megatron layout, as vLLM).

- qkv and gate/up projections are column-parallel (each rank: its query heads, its KV heads, its slice
  of the intermediate size); o_proj and down_proj are row-parallel, followed by an all-reduce.
- The embedding and lm_head are vocab-parallel (ceil(V / tp) rows per rank, zero-padded); the embedding
  output is all-reduced, the logits all-gathered.
- KV heads are split when there are at least tp of them, else replicated (rank r holds head r*KV//tp).

The all-reduce is a registered custom op, opaque to torch.compile (Inductor fuses the residual add +
RMSNorm that follows it) and recordable in CUDA graphs with NCCL.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass

import torch

from graphbench import env
from graphbench.config.arch import ArchConfig
from graphbench.errors import GraphbenchError
from graphbench.runner.op_registry import register_op

ENV_KEYS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class Shard:
    """This process's place in the tensor-parallel group."""

    rank: int = 0
    size: int = 1


_shard = Shard()
_objects_group = None  # a gloo group for Python objects (the default group is NCCL on GPUs)


def init_tensor_parallel(size: int, device_type: str) -> Shard:
    """Join (or create) the process group from the torchrun environment; one rank per device."""
    global _shard, _objects_group
    if size == 1:
        _shard = Shard()
        return _shard
    import torch.distributed as dist

    if not dist.is_initialized():
        missing = [k for k in ENV_KEYS if not env.is_set(k)]
        if missing:
            raise GraphbenchError(f"tensor parallelism needs the torchrun environment; {', '.join(missing)} not set")
        backend = "nccl" if device_type == "cuda" else "gloo"
        if device_type == "cuda":
            local = int(env.value("LOCAL_RANK", env.value("RANK")))
            if local >= torch.cuda.device_count():
                raise GraphbenchError(f"--tensor-parallel-size {size} needs {size} GPUs; "
                                      f"{torch.cuda.device_count()} visible")
            torch.cuda.set_device(local)
        dist.init_process_group(backend, timeout=datetime.timedelta(minutes=10))
    if dist.get_world_size() != size:
        raise GraphbenchError(f"tensor_parallel_size {size} but the process group has {dist.get_world_size()} ranks")
    _objects_group = dist.new_group(backend="gloo") if dist.get_backend() != "gloo" else None
    _shard = Shard(dist.get_rank(), size)
    return _shard


def broadcast_object(value=None):
    """Rank 0's value on every rank (pickled over gloo)."""
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0, group=_objects_group)
    return box[0]


def min_over_ranks(value: int) -> int:
    """The smallest of every rank's value (e.g. KV blocks: all ranks must schedule the same batches)."""
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=_objects_group)
    return int(t.item())


def close_tensor_parallel() -> None:
    global _shard, _objects_group
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _shard, _objects_group = Shard(), None


def _all_reduce(x: torch.Tensor) -> torch.Tensor:
    """Sum of x over the tensor-parallel ranks (a new tensor)."""
    import torch.distributed as dist

    out = x.clone()
    dist.all_reduce(out)
    return out


def _all_reduce_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


all_reduce = register_op("graphbench::all_reduce", _all_reduce, _all_reduce_fake)


def all_gather_last(x: torch.Tensor) -> torch.Tensor:
    """[..., n] on every rank -> [..., n * tp], rank order (for the vocab-parallel logits)."""
    import torch.distributed as dist

    parts = [torch.empty_like(x) for _ in range(_shard.size)]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts, dim=-1)


# -- how the weights are split ----------------------------------------------------------------

def local_arch(arch: ArchConfig, shard: Shard) -> ArchConfig:
    """The per-rank shape: its query heads, KV heads and intermediate size (vocab stays global)."""
    tp = shard.size
    if tp == 1:
        return arch
    problems = []
    if arch.num_attention_heads % tp:
        problems.append(f"{arch.num_attention_heads} attention heads")
    if arch.intermediate_size % tp:
        problems.append(f"intermediate size {arch.intermediate_size}")
    kv = arch.num_key_value_heads
    if (kv % tp if kv >= tp else tp % kv):
        problems.append(f"{kv} KV heads")
    if problems:
        raise GraphbenchError(f"--tensor-parallel-size {tp} must divide the model's {' and '.join(problems)}")
    return dataclasses.replace(arch, num_attention_heads=arch.num_attention_heads // tp,
                               num_key_value_heads=max(1, kv // tp), intermediate_size=arch.intermediate_size // tp)


def vocab_rows(vocab_size: int, shard: Shard) -> tuple[int, int]:
    """(first global row, rows per rank) of the vocab-parallel embedding and lm_head."""
    per_rank = -(-vocab_size // shard.size)
    return shard.rank * per_rank, per_rank


def _rows(full: torch.Tensor, start: int, count: int, dim: int = 0) -> torch.Tensor:
    return full.narrow(dim, start, count)


def qkv_rows(which: str, arch: ArchConfig, shard: Shard) -> tuple[int, int]:
    """(first row, row count) of this rank's part of the q, k or v projection (which: "q", "k" or "v")."""
    hd, tp, r = arch.head_dim, shard.size, shard.rank
    if which == "q":
        heads = arch.num_attention_heads // tp
        return r * heads * hd, heads * hd
    kv = arch.num_key_value_heads
    first, count = (r * (kv // tp), kv // tp) if kv >= tp else (r * kv // tp, 1)  # replicated when kv < tp
    return first * hd, count * hd


def shard_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, arch: ArchConfig, shard: Shard,
              dim: int = 0) -> list[torch.Tensor]:
    """This rank's rows of the q, k and v projections (weights or biases)."""
    return [_rows(t, *qkv_rows(which, arch, shard), dim) for which, t in zip("qkv", (q, k, v))]


def _vocab_part(full: torch.Tensor, arch: ArchConfig, shard: Shard) -> torch.Tensor:
    """This rank's rows of a [V, ...] tensor, zero-padded to ceil(V / tp) rows."""
    start, per_rank = vocab_rows(arch.vocab_size, shard)
    out = full.new_zeros((per_rank,) + tuple(full.shape[1:]))
    rows = max(0, min(per_rank, arch.vocab_size - start))
    out[:rows] = full[start:start + rows]
    return out


def _inter_part(full: torch.Tensor, arch: ArchConfig, shard: Shard) -> torch.Tensor:
    """This rank's rows of a gate or up projection."""
    rows = arch.intermediate_size // shard.size
    return _rows(full, shard.rank * rows, rows)


def _column_part(full: torch.Tensor, shard: Shard) -> torch.Tensor:
    """This rank's input columns of a row-parallel layer (o_proj, down_proj)."""
    cols = full.shape[1] // shard.size
    return _rows(full, shard.rank * cols, cols, dim=1)


def _is_vocab(name: str) -> bool:
    return name.endswith(("embed_tokens.weight", "lm_head.weight"))


def _is_row_parallel(name: str) -> bool:
    return name.endswith(("o_proj.weight", "down_proj.weight"))


def shard_param(name: str, full: torch.Tensor, arch: ArchConfig, shard: Shard) -> torch.Tensor:
    """This rank's part of a full (TP=1 layout) parameter of graphbench's model, by parameter name."""
    if shard.size == 1:
        return full
    if _is_vocab(name):
        return _vocab_part(full, arch, shard)
    if ".qkv_proj." in name:
        q_rows, kv_rows = arch.num_attention_heads * arch.head_dim, arch.num_key_value_heads * arch.head_dim
        q, k, v = full.split([q_rows, kv_rows, kv_rows], dim=0)
        return torch.cat(shard_qkv(q, k, v, arch, shard))
    if ".gate_up_proj." in name:
        gate, up = full.chunk(2, dim=0)
        return torch.cat([_inter_part(gate, arch, shard), _inter_part(up, arch, shard)])
    if _is_row_parallel(name):
        return _column_part(full, shard)
    return full  # norms: replicated


def shard_checkpoint_tensor(hf_name: str, tensor: torch.Tensor, arch: ArchConfig, shard: Shard) -> torch.Tensor:
    """This rank's part of an HF checkpoint tensor (separate q/k/v and gate/up projections)."""
    if shard.size == 1:
        return tensor
    name = hf_name.removeprefix("model.")
    if _is_vocab(name):
        return _vocab_part(tensor, arch, shard)
    for which in "qkv":
        if f".self_attn.{which}_proj." in name:
            return _rows(tensor, *qkv_rows(which, arch, shard))
    if ".mlp.gate_proj." in name or ".mlp.up_proj." in name:
        return _inter_part(tensor, arch, shard)
    if _is_row_parallel(name):
        return _column_part(tensor, shard)
    return tensor


def full_shape(name: str, local: torch.Tensor, arch: ArchConfig, shard: Shard) -> tuple[int, ...]:
    """The TP=1 shape of a parameter whose per-rank part is `local`."""
    if shard.size == 1:
        return tuple(local.shape)
    if _is_vocab(name):
        return (arch.vocab_size,) + tuple(local.shape[1:])
    if ".qkv_proj." in name:
        rows = (arch.num_attention_heads + 2 * arch.num_key_value_heads) * arch.head_dim
        return (rows,) + tuple(local.shape[1:])
    if ".gate_up_proj." in name:
        return (2 * arch.intermediate_size,) + tuple(local.shape[1:])
    if _is_row_parallel(name):
        return (local.shape[0], local.shape[1] * shard.size)
    return tuple(local.shape)
