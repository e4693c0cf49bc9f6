"""Which recording runs a step (docs/MACHINERY.md §1.2), and which mode an attention backend allows (§1.4).

Pure Python: exhaustively testable on the CPU.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from graphbench.config.modes import CUDAGraphMode
from graphbench.errors import GraphbenchError
from graphbench.ladders.graphs import mixed_key_sizes
from graphbench.runner.attention.backend import CudagraphSupport
from graphbench.runner.scheduler import BatchDescriptor

NONE, PIECEWISE, FULL = CUDAGraphMode.NONE, CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL


@dataclass(frozen=True, slots=True)
class ModeResolution:
    """The mode asked for, the mode that runs, and why they differ (empty when they do not)."""

    requested: CUDAGraphMode
    resolved: CUDAGraphMode
    reason: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"requested": self.requested.value, "resolved": self.resolved.value, "reason": self.reason}


def resolve_cudagraph_mode(
    requested: CUDAGraphMode,
    support: CudagraphSupport,
    *,
    compiling: bool,
    attention_split: bool,
    decode_query_len: int = 1,
    device_type: str = "cuda",
    backend_name: str = "",
) -> ModeResolution:
    """Downgrade the requested mode to what the device and attention backend can record (vLLM rules)."""
    mode, reasons = requested, []
    if mode == NONE:
        return ModeResolution(requested, NONE)
    if device_type != "cuda":
        return ModeResolution(requested, NONE, f"CUDA graphs need a CUDA device; running on {device_type}")
    piecewise_ok = compiling and attention_split
    who = f"attention backend {backend_name or '?'} ({support.name})"
    if mode.has_piecewise_graphs() and not piecewise_ok:
        if compiling:  # no split: the one piece is the whole forward, i.e. a full graph (as vLLM)
            new = FULL
            why = "splitting_ops is empty, so the only piece is the whole forward"
        else:
            new = CUDAGraphMode.FULL_DECODE_ONLY if mode.decode_mode() == FULL else NONE
            why = "compilation is off"
        reasons.append(f"piecewise graphs need the compiler to split at attention ({why}): {mode.value} -> {new.value}")
        mode = new
    if mode.mixed_mode() == FULL and support != CudagraphSupport.ALWAYS:
        if support == CudagraphSupport.NEVER:
            raise GraphbenchError(
                f"cudagraph mode {mode.value} records attention in every batch, but {who} cannot be recorded; "
                "use PIECEWISE (with compilation) or NONE, or another attention backend")
        mode = CUDAGraphMode.FULL_AND_PIECEWISE if piecewise_ok else CUDAGraphMode.FULL_DECODE_ONLY
        reasons.append(f"{who} cannot record mixed batches: {requested.value} -> {mode.value}")
    if mode.decode_mode() == FULL and support == CudagraphSupport.NEVER:
        new = PIECEWISE if piecewise_ok else NONE
        reasons.append(f"{who} cannot be recorded: {mode.value} -> {new.value}")
        mode = new
    if (mode.decode_mode() == FULL and mode.separate_routine() and decode_query_len > 1
            and support < CudagraphSupport.UNIFORM_BATCH):
        new = PIECEWISE if piecewise_ok else NONE
        reasons.append(f"{who} cannot record uniform batches of {decode_query_len} tokens: {mode.value} -> {new.value}")
        mode = new
    return ModeResolution(requested, mode, "; ".join(reasons))


class CudagraphDispatcher:
    """Maps a step's BatchDescriptor to (runtime mode, padded descriptor) over the captured keys.

    capture_sizes is the ladder (vLLM's one ladder, or the decode ladder of the split layout); mixed_sizes
    the split layout's mixed/prefill ladder in tokens (ladders/phases.py), None when the one ladder serves
    both phases. Uniform FULL keys come from the decode ladder, relaxed keys from graphs.mixed_key_sizes;
    in the split layout each phase pads to its own ladder in every mode (a uniform step to a decode rung, a
    mixed step to a mixed rung, eager when its ladder has none above it)."""

    def __init__(self, mode: CUDAGraphMode, capture_sizes: list[int], max_num_seqs: int,
                 decode_query_len: int = 1, has_lora: bool = False, specialize_lora: bool = True,
                 mixed_sizes: list[int] | None = None):
        self.mode = mode
        self.capture_sizes = sorted(capture_sizes) if mode != NONE else []
        self.mixed_sizes = None if mixed_sizes is None or mode == NONE else sorted(mixed_sizes)
        relaxed_sizes = (self.capture_sizes if self.mixed_sizes is None
                         else mixed_key_sizes(mode, self.capture_sizes, self.mixed_sizes))
        self.decode_query_len = decode_query_len
        self.keys: dict[CUDAGraphMode, set[BatchDescriptor]] = {FULL: set(), PIECEWISE: set()}
        # adapters loaded: recordings with and without them (specialised), or only with them
        lora_options = ((False, True) if specialize_lora else (True,)) if has_lora else (False,)
        for lora in lora_options:
            if mode.mixed_mode() != NONE:
                for size in relaxed_sizes:
                    self.keys[mode.mixed_mode()].add(BatchDescriptor(size, None, False, lora))
            if mode.decode_mode() == FULL and mode.separate_routine():
                for size in self.uniform_sizes(max_num_seqs):
                    self.keys[FULL].add(BatchDescriptor(size, size // decode_query_len, True, lora))
        self.max_capture_size = max((d.num_tokens for keys in self.keys.values() for d in keys), default=0)

    def uniform_sizes(self, max_num_seqs: int) -> list[int]:
        dql = self.decode_query_len
        return [s for s in self.capture_sizes if dql <= s <= dql * max_num_seqs and s % dql == 0]

    def padded_size(self, num_tokens: int, sizes: list[int] | None = None) -> int | None:
        """Smallest size >= num_tokens of `sizes` (default: the ladder), or None (eager)."""
        sizes = self.capture_sizes if sizes is None else sizes
        i = bisect_left(sizes, num_tokens)
        return sizes[i] if i < len(sizes) else None

    def dispatch(self, desc: BatchDescriptor) -> tuple[CUDAGraphMode, BatchDescriptor]:
        """Exact FULL key, then relaxed FULL, then relaxed PIECEWISE, else eager (unpadded)."""
        if self.mode == NONE or desc.num_tokens > self.max_capture_size:
            return NONE, desc
        # the step's own phase's ladder (two ladders: relaxed keys hold both where decode has no routine of its own)
        mixed = self.mixed_sizes is not None and not desc.uniform
        padded = self.padded_size(desc.num_tokens, self.mixed_sizes if mixed else None)
        if padded is None:
            return NONE, desc
        if desc.uniform:
            exact = BatchDescriptor(padded, padded // self.decode_query_len, True, desc.has_lora)
            if exact in self.keys[FULL]:
                return FULL, exact
        relaxed = BatchDescriptor(padded, None, False, desc.has_lora)
        if relaxed in self.keys[FULL]:
            return FULL, relaxed
        if relaxed in self.keys[PIECEWISE]:
            return PIECEWISE, relaxed
        return NONE, desc

    def capture_list(self, sizes: list[int] | None = None) -> list[tuple[CUDAGraphMode, BatchDescriptor]]:
        """Every key to record, largest first (smaller ones then reuse the pool); sizes: only the keys of
        these token counts (capture on demand: what start-up records)."""
        items = [(m, d) for m in (FULL, PIECEWISE) for d in self.keys[m]
                 if sizes is None or d.num_tokens in sizes]
        return sorted(items, key=lambda item: (-item[1].num_tokens, item[0] != FULL, not item[1].uniform, item[1].has_lora))

    def num_graphs(self) -> dict[str, int]:
        return {m.value: len(keys) for m, keys in self.keys.items()}
