"""Continuous batching with chunked prefill, decodes first (pure Python).

Each step picks, within max_num_seqs and max_num_batched_tokens, how many new tokens every
running request computes; KV blocks are allocated as needed. When blocks run out, the most
recently admitted request is preempted (its blocks freed, recomputed later); a waiting request
that does not fit simply waits.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from graphbench.runner.block_allocator import BlockAllocator
from graphbench.runner.request import Request, RequestStatus


@dataclass(frozen=True, slots=True)
class BatchDescriptor:
    """The dispatcher's key for a step (docs/MACHINERY.md §1.2)."""

    num_tokens: int
    num_reqs: int | None
    uniform: bool = False
    has_lora: bool = False


@dataclass(slots=True)
class ScheduledBatch:
    """One step: requests in flat-batch order and the number of new tokens of each (a decoding
    request under speculative decoding: its last token and its drafts, 1 + len(drafts))."""

    requests: list[Request]
    num_new_tokens: list[int]
    descriptor: BatchDescriptor
    draft_token_ids: list[list[int]] | None = None  # per request (empty: no drafts); None: no drafting

    @property
    def num_tokens(self) -> int:
        return self.descriptor.num_tokens


class Scheduler:
    def __init__(
        self,
        allocator: BlockAllocator,
        block_size: int,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        decode_query_len: int = 1,
        enable_chunked_prefill: bool = True,
        drafts: Callable[[Request, int], list[int]] | None = None,
        lora: str | None = None,
    ):
        self.allocator = allocator
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.decode_query_len = decode_query_len
        self.enable_chunked_prefill = enable_chunked_prefill
        self.drafts = drafts  # speculative decoding: (decoding request, token budget) -> its drafts
        # adapters loaded: "specialize" (has_lora when any request has one) or "always" (every batch)
        self.lora = lora
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []

    def add(self, request: Request) -> None:
        request.status = RequestStatus.WAITING
        self.waiting.append(request)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> ScheduledBatch | None:
        """Pick this step's batch, or None when nothing can run."""
        budget = self.max_num_batched_tokens
        scheduled: list[Request] = []
        counts: list[int] = []
        drafted: list[list[int]] | None = [] if self.drafts is not None else None
        # Decodes first, then requests still in their (chunked) prefill, in admission order.
        # (this loop runs every step for every request: its properties are read inline, ~2 us a request
        # on the host, which at batch 64 is as busy as the GPU: benchmarks/host_step.py)
        decodes, prefills = [], []
        for r in self.running:
            num_uncomputed = len(r.prompt_token_ids) + len(r.output_token_ids) - r.num_computed_tokens
            (decodes if num_uncomputed <= 1 else prefills).append((num_uncomputed, r))
        block_size, running = self.block_size, RequestStatus.RUNNING
        for num_uncomputed, request in decodes + prefills:
            if request.status is not running or budget == 0:
                continue  # preempted below while making room (a status test: `in self.running` is O(n))
            if len(request.output_token_ids) >= request.sampling.max_tokens:
                continue  # all sampled: its last token is still on its way back from the device
            num_new = num_uncomputed if num_uncomputed < budget else budget
            drafts = self.drafts(request, budget) if drafted is not None and num_uncomputed == 1 else []
            total = num_new + len(drafts)
            # blocks to allocate (_blocks_needed, inline; most decode steps: none, the last block has room)
            if -(-(request.num_computed_tokens + total) // block_size) > len(request.block_ids) \
                    and not self._reserve(request, total, scheduled):
                continue
            scheduled.append(request)
            counts.append(total)
            if drafted is not None:
                drafted.append(drafts)
            budget -= total
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            request = self.waiting[0]
            num_new = request.num_uncomputed_tokens
            if num_new > budget:
                if not self.enable_chunked_prefill:
                    break
                num_new = budget
            if not self._allocate(request, num_new):
                break  # waits until blocks are freed
            self.waiting.popleft()
            request.status = RequestStatus.RUNNING
            self.running.append(request)
            scheduled.append(request)
            counts.append(num_new)
            if drafted is not None:
                drafted.append([])
            budget -= num_new
        if not scheduled:
            return None
        num_tokens = sum(counts)
        uniform = all(n == self.decode_query_len for n in counts)
        has_lora = self.lora == "always" or (self.lora == "specialize" and any(r.lora_slot for r in scheduled))
        return ScheduledBatch(scheduled, counts, BatchDescriptor(num_tokens, len(scheduled), uniform, has_lora), drafted)

    def _blocks_needed(self, request: Request, num_new: int) -> int:
        total = -(-(request.num_computed_tokens + num_new) // self.block_size)
        return max(0, total - len(request.block_ids))

    def _allocate(self, request: Request, num_new: int) -> bool:
        needed = self._blocks_needed(request, num_new)
        if needed == 0:  # most decode steps: the last block has room
            return True
        blocks = self.allocator.allocate(needed)
        if blocks is None:
            return False
        request.block_ids.extend(blocks)
        return True

    def _reserve(self, request: Request, num_new: int, scheduled: list[Request]) -> bool:
        """Allocate for a running request, preempting the newest others when out of blocks."""
        while not self._allocate(request, num_new):
            # (requests whose last token is in flight free their blocks next step: not victims)
            victims = [r for r in reversed(self.running)
                       if r is not request and r not in scheduled and not r.all_sampled]
            if not victims:
                self._preempt(request)
                return False
            self._preempt(victims[0])
        return True

    def _preempt(self, request: Request) -> None:
        self.running.remove(request)
        self.allocator.free(request.block_ids)
        request.block_ids = []
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        request.status = RequestStatus.WAITING
        self.waiting.appendleft(request)

    def update(self, batch: ScheduledBatch) -> None:
        """Advance computed counts after the step ran (sampled tokens are appended by the engine)."""
        for request, num_new in zip(batch.requests, batch.num_new_tokens):
            request.num_computed_tokens += num_new

    def reject(self, request: Request, num_rejected: int) -> None:
        """Drafts the target model rejected: their KV rows are not part of the sequence, and the blocks
        that held only them go back to the free list."""
        request.num_computed_tokens -= num_rejected
        keep = -(-request.num_computed_tokens // self.block_size)
        if len(request.block_ids) > keep:
            self.allocator.free(request.block_ids[keep:])
            request.block_ids = request.block_ids[:keep]  # a new list: the step inputs rewrite its table row

    def finish(self, request: Request) -> None:
        """Retire a request (done, or stopped by EOS a step late); frees its blocks."""
        if request.status == RequestStatus.WAITING:  # preempted before its stop token came back
            self.waiting.remove(request)
        else:
            self.running.remove(request)
        request.status = RequestStatus.FINISHED
        self.allocator.free(request.block_ids)
        request.block_ids = []
