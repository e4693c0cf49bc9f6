"""The paged KV cache's free-list block allocator (pure Python: the scheduler, and the trace replay of
`graphbench tune`, use it without torch)."""

from __future__ import annotations

from graphbench.errors import GraphbenchError


class BlockAllocator:
    """Hands out KV blocks; block 0.. num_blocks-1. Freed blocks are reused LIFO (warm in cache)."""

    def __init__(self, num_blocks: int):
        if num_blocks <= 0:
            raise GraphbenchError("the KV cache has no blocks: lower the model size or raise the memory budget")
        self.num_blocks = num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))

    @property
    def num_free(self) -> int:
        return len(self._free)

    def allocate(self, count: int) -> list[int] | None:
        """count blocks, or None (and nothing taken) when not enough are free."""
        if count > len(self._free):
            return None
        taken = self._free[-count:] if count else []
        del self._free[len(self._free) - count:]
        return taken[::-1]

    def free(self, blocks: list[int]) -> None:
        self._free.extend(reversed(blocks))
