"""Runs one scheduled batch through the model: inputs into static buffers, forward, logits, sampling."""

from __future__ import annotations

import torch

from graphbench.runner.attention.backend import AttentionBackend
from graphbench.runner.attention.op import ForwardContext, forward_context
from graphbench.runner.inputs import StepInputs
from graphbench.runner.kv_cache import KVCache
from graphbench.runner.model import CausalLM
from graphbench.runner.sampler import sample
from graphbench.runner.scheduler import ScheduledBatch


class ModelRunner:
    def __init__(self, model: CausalLM, kv_cache: KVCache, backend: AttentionBackend, inputs: StepInputs,
                 seed: int):
        self.model = model
        self.kv_cache = kv_cache
        self.backend = backend
        self.inputs = inputs
        self.device = inputs.device
        self.scale = model.arch.head_dim ** -0.5
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        max_reqs = inputs.max_num_reqs
        self._temperatures = torch.zeros(max_reqs, dtype=torch.float32, device=self.device)
        self._top_ps = torch.ones(max_reqs, dtype=torch.float32, device=self.device)

    def forward(self, num_tokens: int, meta) -> torch.Tensor:
        """Eager forward over the first num_tokens rows of the static buffers -> hidden[T, H]."""
        ctx = ForwardContext(meta, self.kv_cache.layers, self.backend, self.scale)
        with forward_context(ctx):
            return self.model(self.inputs.input_ids[:num_tokens], self.inputs.positions[:num_tokens])

    @torch.inference_mode()
    def execute(self, batch: ScheduledBatch) -> list[int]:
        """Run one step; return one sampled token per request (ignored for partial prefills)."""
        meta = self.inputs.prepare(batch)
        hidden = self.forward(batch.num_tokens, meta)
        num_reqs = len(batch.requests)
        logits = self.model.compute_logits(hidden[self.inputs.logits_indices[:num_reqs]])
        temps = [r.sampling.temperature for r in batch.requests]
        all_greedy = all(t == 0 for t in temps)
        if not all_greedy:
            self._temperatures[:num_reqs].copy_(torch.tensor(temps, dtype=torch.float32))
            self._top_ps[:num_reqs].copy_(torch.tensor([r.sampling.top_p for r in batch.requests]))
        tokens = sample(logits, self._temperatures[:num_reqs], self._top_ps[:num_reqs], self.generator, all_greedy)
        return tokens.tolist()
