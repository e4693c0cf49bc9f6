"""LoRA adapters in the batch: which adapters, how many resident, the largest rank, and whether
batches with and without adapters get their own CUDA-graph recordings (vLLM's
cudagraph_specialize_lora)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from graphbench.config.hashing import hash_factors
from graphbench.config.validate import require_int
from graphbench.errors import GraphbenchError

MAX_LORAS = 64
MAX_LORA_RANK = 256
DUMMY = re.compile(r"^dummy:r=(\d+)(?:,n=(\d+))?$")  # seeded random adapters: rank r, n of them (default 1)
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def parse_module(text: str) -> list[tuple[str, str]]:
    """'NAME=PATH', 'NAME=dummy:r=16' or 'dummy:r=16,n=4' (adapters dummy0..dummy3) -> [(name, source)]."""
    if not isinstance(text, str) or not text.strip():
        raise GraphbenchError(f"a LoRA module is NAME=PATH or dummy:r=RANK[,n=COUNT], got {text!r}")
    text = text.strip()
    if DUMMY.match(text):
        count = int(DUMMY.match(text).group(2) or 1)
        if not 1 <= count <= MAX_LORAS:
            raise GraphbenchError(f"dummy adapters: n must be in 1..{MAX_LORAS}, got {count}")
        rank = DUMMY.match(text).group(1)
        return [(f"dummy{i}" if count > 1 else "dummy", f"dummy:r={rank}") for i in range(count)]
    name, sep, source = text.partition("=")
    if not sep or not NAME.match(name) or not source:
        raise GraphbenchError(f"a LoRA module is NAME=PATH or dummy:r=RANK[,n=COUNT] (NAME: letters, digits, ._-), "
                              f"got {text!r}")
    if source.startswith("dummy:") and not (DUMMY.match(source) and DUMMY.match(source).group(2) is None):
        # (",n=COUNT" names its adapters dummy0.. itself: under one NAME it would be dropped unread; a folder
        # whose name merely starts with "dummy", e.g. dummy-lora, is a path)
        raise GraphbenchError(f"a named dummy adapter is NAME=dummy:r=RANK (several: dummy:r=RANK,n=COUNT "
                              f"without a name), got {source!r}")
    return [(name, source)]


def dummy_rank(source: str) -> int | None:
    match = DUMMY.match(source)
    return int(match.group(1)) if match else None


@dataclass(slots=True)
class LoRAConfig:
    """modules: adapters loaded at start-up, each resident in its own slot; max_loras slots (default: as
    many as modules); max_lora_rank: the slots' rank (smaller adapters are zero-padded)."""

    modules: list[str] = field(default_factory=list)
    max_loras: int | None = None
    max_lora_rank: int = 16
    cudagraph_specialize_lora: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.modules, str):
            self.modules = [m for m in self.modules.split(";") if m.strip()] if self.modules != "none" else []
        if not isinstance(self.modules, (list, tuple)):
            raise GraphbenchError(f"lora modules must be a list of NAME=PATH, got {self.modules!r}")
        adapters = self.adapters()
        names = [n for n, _ in adapters]
        if len(set(names)) != len(names):
            raise GraphbenchError(f"LoRA adapter names must be unique, got {', '.join(names)}")
        require_int("max_loras", self.max_loras)
        require_int("max_lora_rank", self.max_lora_rank)
        if not 1 <= self.max_lora_rank <= MAX_LORA_RANK:
            raise GraphbenchError(f"max_lora_rank must be in 1..{MAX_LORA_RANK}, got {self.max_lora_rank}")
        if self.max_loras is not None and not 1 <= self.max_loras <= MAX_LORAS:
            raise GraphbenchError(f"max_loras must be in 1..{MAX_LORAS}, got {self.max_loras}")
        if self.max_loras is not None and len(adapters) > self.max_loras:
            raise GraphbenchError(f"{len(adapters)} LoRA adapters do not fit in max_loras {self.max_loras} slots")
        for name, source in adapters:
            rank = dummy_rank(source)
            if rank is not None and not 1 <= rank <= self.max_lora_rank:
                raise GraphbenchError(f"dummy adapter {name}: rank must be in 1..max_lora_rank "
                                      f"{self.max_lora_rank}, got {rank}")
        if not isinstance(self.cudagraph_specialize_lora, bool):
            raise GraphbenchError(f"cudagraph_specialize_lora must be true or false, got {self.cudagraph_specialize_lora!r}")

    def adapters(self) -> list[tuple[str, str]]:
        return [a for text in self.modules for a in parse_module(text)]

    @property
    def enabled(self) -> bool:
        return bool(self.modules)

    @property
    def num_slots(self) -> int:
        """Adapter slots in the static buffers, slot 0 (no adapter) included."""
        return 1 + (self.max_loras or len(self.adapters()))

    def compute_hash(self) -> str:
        return hash_factors([self.enabled, self.num_slots, self.max_lora_rank, self.cudagraph_specialize_lora])
