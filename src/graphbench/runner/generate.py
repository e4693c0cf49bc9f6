"""Library side of `graphbench generate`: start an engine, generate, and say what ran.

The header names the cudagraph mode the engine resolved (on the CPU every graph mode resolves to
NONE), and a note the requested mode and why it was changed. While the engine starts, `progress`
gets the phase it is in: the engine has no progress hook, so its log records mark the phases
(`StartupPhases`); records it would have shown (warnings) still reach the handlers they reached.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from graphbench.config import CompileMode, CUDAGraphMode, EngineConfig
from graphbench.errors import GraphbenchError

ENGINE_LOG = "graphbench.engine"


@dataclass
class GenerateResult:
    outputs: list[dict]  # [{"prompt_token_ids": [...], "token_ids": [...]}] in prompt order
    summary: str  # model, level, resolved cudagraph mode, limits, device
    notes: list[str] = field(default_factory=list)
    startup: dict = field(default_factory=dict)  # the start-up report as a result keeps it (records.startup_record)
    runtime_modes: dict = field(default_factory=dict)  # steps per kind and runtime mode (records.runtime_modes_by_kind)
    steps: list[dict] = field(default_factory=list)  # per step: kind, tokens, requests, padded tokens, mode, ms


def mode_note(cudagraph_mode: dict) -> str:
    """'' when the engine ran the mode asked for, else 'cudagraph mode: requested X, resolved Y: reason'."""
    requested, resolved = cudagraph_mode.get("requested"), cudagraph_mode.get("resolved")
    if requested == resolved:
        return ""
    reason = cudagraph_mode.get("reason")
    return f"cudagraph mode: requested {requested}, resolved {resolved}" + (f": {reason}" if reason else "")


class StartupPhases(logging.Handler):
    """Turns the engine's start-up log records into phase names for `progress`; forwards the records at
    or above `passes` (those the logger let through before) to where they went before."""

    def __init__(self, progress: Callable[[str], None], graphs: bool, passes: int, parent: logging.Logger):
        super().__init__(logging.DEBUG)
        self.progress, self.graphs, self.passes, self.parent = progress, graphs, passes, parent

    def emit(self, record: logging.LogRecord) -> None:
        message = str(record.msg)
        if message.startswith("cudagraph mode ") and len(record.args or ()) >= 2:
            self.graphs = record.args[1] != CUDAGraphMode.NONE.value  # the resolved mode
        elif message.startswith("Using cache directory") and record.args:
            from graphbench.runner.compile.cache import COMPLETE_MARKER

            cached = (Path(str(record.args[0])) / COMPLETE_MARKER).is_file()
            self.progress("loading the compiled forward (torch.compile cache)" if cached
                          else "compiling (torch.compile, first start of this config)")
        elif message.startswith("torch.compile") and self.graphs:
            self.progress("capturing CUDA graphs")
        if record.levelno >= self.passes:
            self.parent.handle(record)


@contextmanager
def startup_phases(config: EngineConfig, progress: Callable[[str], None]) -> Iterator[None]:
    """Report the start-up phases of an engine started for config inside the block."""
    from graphbench.runner.device import resolve_device

    resolved = config.resolve()
    compiles = resolved.compilation.mode == CompileMode.COMPILE
    on_cuda = resolve_device(config.model.device).type == "cuda"  # elsewhere every graph mode is NONE
    graphs = on_cuda and resolved.compilation.cudagraph_mode != CUDAGraphMode.NONE
    progress("loading weights, sizing the KV cache" + (", capturing CUDA graphs" if graphs and not compiles else ""))
    logger = logging.getLogger(ENGINE_LOG)
    passes, level, propagate = logger.getEffectiveLevel(), logger.level, logger.propagate
    handler = StartupPhases(progress, graphs, passes, logger.parent or logging.getLogger())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # the phase records are INFO; only this handler sees what is new
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def _check_prompts(config: EngineConfig, prompts: list[list[int]], max_tokens: int) -> None:
    """The checks the engine makes on each request that need no engine: vocabulary and context length."""
    from graphbench.config import load_arch
    from graphbench.runner.request import check_prompt

    arch = load_arch(config.model.model)
    max_model_len = config.scheduler.max_model_len or arch.max_position_embeddings
    for prompt in prompts:  # (the KV cache is not sized yet: its check comes with the engine)
        check_prompt(prompt, max_tokens, arch.vocab_size, max_model_len)


def run_generate(config: EngineConfig, prompts: list[list[int]] | None = None, *, max_tokens: int,
                 temperature: float | None = None, top_p: float | None = None,
                 progress: Callable[[str], None] = lambda phase: None, loras: list[str | None] | None = None,
                 texts: list[str] | None = None, chat: bool = False, ignore_eos: bool = False) -> GenerateResult:
    """Start an engine for config and generate up to max_tokens for each prompt (token ids, or texts through
    the checkpoint's tokenizer, as chat messages with chat); a request ends at the checkpoint's eos tokens
    unless ignore_eos; temperature and top_p default to its generation_config's. progress gets each phase."""
    from graphbench.checkpoints.text import load_text, stop_tokens
    from graphbench.runner.engine import Engine
    from graphbench.runner.loader import check_start_inputs
    from graphbench.runner.records import runtime_modes_by_kind, startup_record, step_kind
    from graphbench.runner.request import SamplingParams

    text = load_text(config.model.model) if texts else None
    if chat and text is None:
        raise GraphbenchError("--chat needs --prompt TEXT (a user message)")
    if text is not None:
        prompts = [text.encode(t, chat) for t in texts]
    if not prompts or any(not p for p in prompts):
        raise GraphbenchError("--prompt-token-ids needs at least one token id per prompt")
    stops = () if ignore_eos else (text.stop_token_ids if text else stop_tokens(config.model.model))
    defaults = text.defaults if text else {}
    sampling = SamplingParams(max_tokens=max_tokens, ignore_eos=not stops, stop_token_ids=stops,
                              temperature=defaults.get("temperature", 0.0) if temperature is None else temperature,
                              top_p=defaults.get("top_p", 1.0) if top_p is None else top_p)
    loras = loras or [None] * len(prompts)
    known = [name for name, _ in config.lora.adapters()]
    unknown = [name for name in loras if name is not None and name not in known]
    if unknown:
        raise GraphbenchError(f"unknown LoRA adapter {unknown[0]!r} in --prompt-token-ids (--lora-modules gives: "
                              f"{', '.join(known) or 'none'})")
    _check_prompts(config, prompts, max_tokens)  # before a start-up that may compile for minutes
    check_start_inputs(config)  # (its progress lines would come before a bad checkpoint's error)
    with startup_phases(config, progress):
        engine = Engine(config)
    progress(f"generating {max_tokens} tokens for {len(prompts)} prompt(s)")
    try:
        if engine.speculative is not None and engine.speculative.method == "replay":
            from graphbench.runner.speculative.decoding import make_replay_reference

            progress("replay drafter: a greedy reference pass of the prompts")
            make_replay_reference(engine, prompts, [max_tokens] * len(prompts))
        drafting_before = copy.copy(engine.speculative.stats) if engine.speculative is not None else None
        first_step = len(engine.records)  # (the replay drafter's reference pass is not what generate ran)
        requests = engine.generate_requests(prompts, sampling, loras)
    finally:
        engine.close()  # tensor-parallel workers stop here
    report = engine.report
    notes = [note] if (note := mode_note(report.cudagraph_mode)) else []
    notes += [f"{k}: {v}" for k, v in report.extra.items()]
    if engine.speculative is not None:
        s = engine.speculative.stats.minus(drafting_before).to_dict()  # (not the reference pass's)
        notes.append(f"speculative k={engine.speculative.k} {engine.speculative.method}: acceptance "
                     f"{100 * s['acceptance_rate']:.1f}% of {s['num_proposed']} proposed drafts (filler "
                     f"{s['num_filled']} positions apart), {s['mean_tokens_per_verification']:.2f} tokens a "
                     "verification step")
    cfg = engine.config
    summary = (f"{cfg.model.model} -O{cfg.optimization_level} {report.cudagraph_mode.get('resolved', '?')} "
               f"seqs={cfg.scheduler.max_num_seqs} ladder={len(engine.dispatcher.capture_sizes)} "
               f"on {engine.device_info.name or engine.device.type} ({cfg.model.dtype})")
    outputs = [{"prompt_token_ids": r.prompt_token_ids, "token_ids": r.output_token_ids,
                "finish_reason": r.finish_reason, **({"lora": lora} if lora else {}),
                **({"prompt": t, "text": text.decode(r.output_token_ids)} if text else {})}
               for r, lora, t in zip(requests, loras, texts or [None] * len(requests))]
    records = engine.records[first_step:]
    startup = startup_record(report, engine.dispatcher.capture_sizes, engine.dispatcher.mixed_sizes, cold=False,
                             total_s=report.total_seconds)
    steps = [{"kind": step_kind(r), "num_tokens": r.descriptor.num_tokens, "num_reqs": r.descriptor.num_reqs,
              "padded_tokens": r.padded_tokens, "runtime_mode": r.runtime_mode, "ms": 1e3 * r.seconds} for r in records]
    return GenerateResult(outputs, summary, notes, startup, runtime_modes_by_kind(records), steps)
