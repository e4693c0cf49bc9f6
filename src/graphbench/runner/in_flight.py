"""A launched step whose sampled ids are on their way to the host, and what taking them gives."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from graphbench.config.modes import CUDAGraphMode
from graphbench.runner.kernels.util import NAN_MARK
from graphbench.runner.sampler import raise_nan_logits
from graphbench.runner.scheduler import ScheduledBatch


@dataclass
class StepResult:
    tokens: list[int]
    runtime_mode: CUDAGraphMode
    padded_tokens: int


class InFlightStep:
    """A launched step: its sampled ids are on their way to pinned host memory."""

    def __init__(self, batch: ScheduledBatch, host_ids: torch.Tensor, event, mode: CUDAGraphMode, padded: int):
        self.batch, self.host_ids, self.event = batch, host_ids, event
        self.runtime_mode, self.padded_tokens = mode, padded
        self.fills: list[tuple] = []  # (request, sampled row, index in its output) for the engine

    def result(self) -> StepResult:
        """Wait for the step's tokens (only this step's copy, not the whole device)."""
        if self.event is not None:
            self.event.synchronize()
        tokens = self.host_ids.tolist()
        if tokens and max(tokens) >= NAN_MARK:
            raise_nan_logits([r for r, t in zip(self.batch.requests, tokens) if t >= NAN_MARK])
        return StepResult(tokens, self.runtime_mode, self.padded_tokens)
