"""Library side of `graphbench generate`."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphbench.config import EngineConfig
from graphbench.errors import GraphbenchError


@dataclass
class GenerateResult:
    outputs: list[dict]  # [{"prompt_token_ids": [...], "token_ids": [...]}] in prompt order
    summary: str
    notes: list[str] = field(default_factory=list)


def _check_prompts(config: EngineConfig, prompts: list[list[int]], max_tokens: int) -> None:
    """The checks the engine makes on each request that need no engine: vocabulary and context length."""
    from graphbench.config import load_arch
    from graphbench.runner.request import check_prompt

    arch = load_arch(config.model.model)
    max_model_len = config.scheduler.max_model_len or arch.max_position_embeddings
    for prompt in prompts:  # (the KV cache is not sized yet: its check comes with the engine)
        check_prompt(prompt, max_tokens, arch.vocab_size, max_model_len)


def run_generate(config: EngineConfig, prompts: list[list[int]], *, max_tokens: int, temperature: float,
                 top_p: float) -> GenerateResult:
    """Start an engine for config and generate max_tokens for each prompt."""
    from graphbench.runner.engine import Engine
    from graphbench.runner.request import SamplingParams

    if any(not p for p in prompts):
        raise GraphbenchError("--prompt-token-ids needs at least one token id per prompt")
    sampling = SamplingParams(max_tokens=max_tokens, temperature=temperature, top_p=top_p)
    _check_prompts(config, prompts, max_tokens)  # before a start-up that may compile for minutes
    engine = Engine(config)
    try:
        tokens = engine.generate(prompts, sampling)
    finally:
        engine.close()  # tensor-parallel workers stop here
    report = engine.report
    notes = [
        f"startup {report.total_seconds:.2f} s (weights {report.load_seconds:.2f} s); "
        f"KV cache {report.num_kv_tokens} tokens in {report.num_kv_blocks} blocks",
    ]
    notes += [f"{k}: {v}" for k, v in report.extra.items()]
    summary = f"{engine.config.summary()} on {engine.device_info.name or engine.device.type} ({engine.config.model.dtype})"
    outputs = [{"prompt_token_ids": p, "token_ids": t} for p, t in zip(prompts, tokens)]
    return GenerateResult(outputs, summary, notes)
