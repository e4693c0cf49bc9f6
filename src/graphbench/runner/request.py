"""Requests and sampling parameters (pure Python)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from graphbench.errors import GraphbenchError

MAX_TEMPERATURE = 100.0  # beyond it sampling is uniform noise; inf and NaN would sample garbage
MAX_OUTPUT_TOKENS = 1 << 20


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Greedy when temperature == 0. A request ends at any of stop_token_ids (the checkpoint's eos tokens,
    see checkpoints/text.py) unless ignore_eos; benchmarks ignore them and run exactly max_tokens."""

    max_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    ignore_eos: bool = True
    stop_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens <= 0:
            raise GraphbenchError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or not 0 <= self.temperature <= MAX_TEMPERATURE:  # (NaN fails this too)
            raise GraphbenchError(f"temperature must be a number in [0, {MAX_TEMPERATURE:g}], got {self.temperature!r}")
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise GraphbenchError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if self.max_tokens > MAX_OUTPUT_TOKENS:
            raise GraphbenchError(f"max_tokens must be at most {MAX_OUTPUT_TOKENS}, got {self.max_tokens}")
        stops = tuple(self.stop_token_ids) if isinstance(self.stop_token_ids, (list, tuple)) else None
        if stops is None or not all(type(t) is int and t >= 0 for t in stops):
            raise GraphbenchError(f"stop_token_ids must be token ids, got {self.stop_token_ids!r}")
        object.__setattr__(self, "stop_token_ids", stops)


# Placeholder for a sampled token still on the device (asynchronous scheduling resolves it a step later).
PENDING_TOKEN = -1


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Request:
    """One sequence: prompt + generated tokens, how many are in the KV cache, its blocks."""

    request_id: int
    prompt_token_ids: list[int]
    sampling: SamplingParams
    arrival_time: float = 0.0
    output_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    block_ids: list[int] = field(default_factory=list)
    status: RequestStatus = RequestStatus.WAITING
    num_preemptions: int = 0
    lora_slot: int = 0  # the adapter's slot in the LoRA buffers (0: no adapter)
    # row of the last launched step's sampled ids holding this request's PENDING_TOKEN, if any
    pending_row: int | None = None
    # timestamps (perf_counter seconds) for the measurement layer
    first_token_time: float | None = None
    token_times: list[float] = field(default_factory=list)
    finish_time: float | None = None
    finish_reason: str | None = None  # "stop" (a stop token, kept as the last output token) or "length"

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def num_uncomputed_tokens(self) -> int:
        return self.num_tokens - self.num_computed_tokens

    @property
    def all_sampled(self) -> bool:
        """Every output token has been sampled (some may still be pending): schedule it no more."""
        return len(self.output_token_ids) >= self.sampling.max_tokens

    @property
    def is_finished(self) -> bool:
        return self.status == RequestStatus.FINISHED

    def stops_at(self, token: int) -> bool:
        """Whether this sampled token ends the request (a stop token, not ignored)."""
        return not self.sampling.ignore_eos and token in self.sampling.stop_token_ids


def check_prompt(prompt_token_ids: list[int], max_tokens: int, vocab_size: int, max_model_len: int,
                 block_size: int | None = None, num_kv_blocks: int | None = None) -> None:
    """Reject a prompt that can never run: empty, outside the vocabulary, longer than the model's
    context with its max_tokens, or needing more KV blocks than the cache holds (when it is sized)."""
    if not prompt_token_ids:
        raise GraphbenchError("a prompt needs at least one token")
    bad = [t for t in prompt_token_ids if not isinstance(t, int) or not 0 <= t < vocab_size]
    if bad:
        raise GraphbenchError(f"prompt token {bad[0]!r} is outside the vocabulary (0..{vocab_size - 1})")
    total = len(prompt_token_ids) + max_tokens
    if total > max_model_len:
        raise GraphbenchError(
            f"prompt of {len(prompt_token_ids)} tokens + max_tokens {max_tokens} = {total} exceeds "
            f"max_model_len {max_model_len}")
    if block_size is None or num_kv_blocks is None:
        return
    blocks = -(-total // block_size)
    if blocks > num_kv_blocks:
        raise GraphbenchError(
            f"a request of {total} tokens needs {blocks} KV blocks but the cache holds only "
            f"{num_kv_blocks} ({num_kv_blocks * block_size} tokens)")
