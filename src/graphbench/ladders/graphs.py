"""How many CUDA graphs a cudagraph mode records for a ladder (docs/MACHINERY.md §1.2, §1.3).

- NONE records nothing.
- PIECEWISE records one piecewise graph per ladder size (relaxed PIECEWISE keys).
- FULL records one full graph per ladder size (relaxed FULL keys only: decode and mixed batches
  share them).
- FULL_DECODE_ONLY records full graphs only for the uniform-decode sizes: multiples of
  ``decode_query_len`` between ``decode_query_len`` and ``decode_query_len * max_num_seqs``.
- FULL_AND_PIECEWISE records both: a piecewise graph per size plus a full graph per
  uniform-decode size.

Pure Python, no torch import.
"""

from __future__ import annotations

from collections.abc import Sequence

from graphbench.config.modes import CUDAGraphMode
from graphbench.errors import GraphbenchError
from graphbench.ladders.sizes import Ladder


def uniform_decode_sizes(
    sizes: Sequence[int] | Ladder, max_num_seqs: int, decode_query_len: int = 1
) -> tuple[int, ...]:
    """The ladder sizes that get a uniform-decode FULL key (num_reqs = size // decode_query_len)."""
    rungs = _rungs(sizes)
    _require_positive("max_num_seqs", max_num_seqs)
    _require_positive("decode_query_len", decode_query_len)
    top = decode_query_len * max_num_seqs
    return tuple(s for s in rungs if decode_query_len <= s <= top and s % decode_query_len == 0)


def num_graphs(
    mode: CUDAGraphMode | str,
    sizes: Sequence[int] | Ladder,
    max_num_seqs: int,
    decode_query_len: int = 1,
    mixed_sizes: Sequence[int] | None = None,
) -> int:
    """Number of graphs captured at startup for one cudagraph mode (without LoRA variants). mixed_sizes:
    the mixed/prefill ladder of the split layout (ladders/phases.py; None: `sizes` serves both phases)."""
    mode = CUDAGraphMode.parse(mode)
    rungs = _rungs(sizes)
    uniform = len(uniform_decode_sizes(rungs, max_num_seqs, decode_query_len))
    relaxed = rungs if mixed_sizes is None else mixed_key_sizes(mode, rungs, _rungs(mixed_sizes))
    mixed_count = len(relaxed) if mode.mixed_mode() != CUDAGraphMode.NONE else 0
    uniform_count = uniform if mode.decode_mode() == CUDAGraphMode.FULL and mode.separate_routine() else 0
    return mixed_count + uniform_count


def mixed_key_sizes(mode: CUDAGraphMode, decode_sizes: Sequence[int], mixed_sizes: Sequence[int]) -> tuple[int, ...]:
    """The sizes of a split layout's relaxed (mixed-batch) recordings: the mixed ladder where decode steps
    have recordings of their own (FULL_AND_PIECEWISE, FULL_DECODE_ONLY), else both ladders' rungs, so that
    a decode step still pads to its own ladder (PIECEWISE, FULL)."""
    if mode.separate_routine():
        return tuple(sorted(mixed_sizes))
    return tuple(sorted(set(decode_sizes) | set(mixed_sizes)))


def graphs_per_mode(
    sizes: Sequence[int] | Ladder, max_num_seqs: int, decode_query_len: int = 1,
    mixed_sizes: Sequence[int] | None = None,
) -> dict[CUDAGraphMode, int]:
    """num_graphs for every cudagraph mode, in declaration order."""
    return {mode: num_graphs(mode, sizes, max_num_seqs, decode_query_len, mixed_sizes) for mode in CUDAGraphMode}


def _rungs(sizes: Sequence[int] | Ladder) -> tuple[int, ...]:
    rungs = tuple(sizes.sizes if isinstance(sizes, Ladder) else sizes)
    for s in rungs:
        if isinstance(s, bool) or not isinstance(s, int) or s <= 0:
            raise GraphbenchError(f"capture sizes must be positive integers, got {s!r}")
    if len(set(rungs)) != len(rungs):
        raise GraphbenchError("capture sizes must not repeat")
    return rungs


def _require_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise GraphbenchError(f"{name} must be a positive integer, got {value!r}")
