"""The engine flags every engine command accepts (generate, run, ...), defined once.

`@with_engine_options` adds them to a typer command and passes the command an `EngineConfig`
as its `engine_config` argument. No torch import here.
"""

import functools
import inspect
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from graphbench.ascii_numbers import INTEGER
from graphbench.config import EngineConfig, load_engine_config
from graphbench.errors import GraphbenchError
from graphbench.ladders.phases import parse_mixed_option

PANEL = "Engine options"


def parse_int_list(text: Optional[str], name: str) -> Optional[list[int]]:
    """'1,2,4' -> [1, 2, 4]; None stays None; '' or 'none' -> []."""
    if text is None:
        return None
    if text.strip().lower() in ("", "none"):
        return []
    parts = [part.strip() for part in text.split(",")]
    try:  # ASCII digits, no empty item (int() also takes '1_0' and other scripts' digits; past 4300: ValueError)
        if not all(INTEGER.fullmatch(part) for part in parts):
            raise ValueError(text)
        return [int(part) for part in parts]
    except ValueError:
        raise GraphbenchError(f"{name} must be comma-separated integers like 1,2,4; got {text!r}") from None


def parse_str_list(text: Optional[str]) -> Optional[list[str]]:
    if text is None:
        return None
    if text.strip().lower() in ("", "none"):
        return []
    return [part.strip() for part in text.split(",") if part.strip()]


def _opt(*decls: str, help: str) -> Any:
    return typer.Option(*decls, help=help, rich_help_panel=PANEL)


# name -> (annotation, dotted config key or None, converter)
ENGINE_OPTIONS: dict[str, tuple[Any, Optional[str], Callable[[Any], Any]]] = {
    "config": (Annotated[Optional[Path], _opt("--config", help="Engine config TOML (see sample_configs/).")], None, lambda v: v),
    "model": (Annotated[Optional[str], _opt("--model", "-m", help="Preset name (tiny-llama, llama-3.2-1b, ...) or checkpoint folder.")], "model.model", lambda v: v),
    "optimization_level": (Annotated[Optional[int], _opt("-O", "--optimization-level", help="-O0..-O3 preset; fills only unset fields (default 2).")], "optimization_level", lambda v: v),
    "cudagraph_mode": (Annotated[Optional[str], _opt("--cudagraph-mode", help="NONE, PIECEWISE, FULL, FULL_DECODE_ONLY or FULL_AND_PIECEWISE.")], "compilation.cudagraph_mode", lambda v: v),
    "compile": (Annotated[Optional[str], _opt("--compilation-mode", help="none or compile (default from -O).")], "compilation.mode", lambda v: v),
    "capture_sizes": (Annotated[Optional[str], _opt("--capture-sizes", help="Explicit capture ladder, e.g. 1,2,4,8.")], "compilation.cudagraph_capture_sizes", lambda v: parse_int_list(v, "--capture-sizes")),
    "max_capture_size": (Annotated[Optional[int], _opt("--max-capture-size", help="Top of the default ladder.")], "compilation.max_cudagraph_capture_size", lambda v: v),
    "startup_capture_sizes": (Annotated[Optional[str], _opt("--startup-capture-sizes", help="Capture on demand: record only these sizes at start-up, e.g. 1,2,4,8 (all: every key, the default); the others when a step first needs one (--deferred-capture).")], "compilation.startup_capture_sizes", lambda v: "all" if v.strip() == "all" else parse_int_list(v, "--startup-capture-sizes")),
    "deferred_capture": (Annotated[Optional[str], _opt("--deferred-capture", help="What a size left out of --startup-capture-sizes does: first_use (recorded when a step first needs it; that step waits) or never (such steps run eager).")], "compilation.deferred_capture", lambda v: v),
    "mixed_ladder": (Annotated[Optional[str], _opt("--mixed-ladder", help="Mixed/prefill steps' own ladder in tokens: shared (vLLM's one ladder, default), tokens (SGLang's 4..4096), none (eager), or sizes like 4,8,16.")], "compilation.mixed_capture_sizes", lambda v: parse_mixed_option(v)),
    "performance_mode": (Annotated[Optional[str], _opt("--performance-mode", help="default or interactivity (every size 1..32).")], "compilation.performance_mode", lambda v: v),
    "compile_sizes": (Annotated[Optional[str], _opt("--compile-sizes", help="Sizes compiled for their concrete shape, e.g. 1,2,4.")], "compilation.compile_sizes", lambda v: parse_int_list(v, "--compile-sizes")),
    "splitting_ops": (Annotated[Optional[str], _opt("--splitting-ops", help="Ops to split the graph at ('none' = no split).")], "compilation.splitting_ops", parse_str_list),
    "max_num_seqs": (Annotated[Optional[int], _opt("--max-num-seqs", help="Most requests in one step (default 256).")], "scheduler.max_num_seqs", lambda v: v),
    "max_num_batched_tokens": (Annotated[Optional[int], _opt("--max-num-batched-tokens", help="Most tokens in one step (default: 8192 on a GPU of >= 70 GiB other than an A100, else 2048, as vLLM's server).")], "scheduler.max_num_batched_tokens", lambda v: v),
    "max_model_len": (Annotated[Optional[int], _opt("--max-model-len", help="Longest prompt + output (default: the model's).")], "scheduler.max_model_len", lambda v: v),
    "block_size": (Annotated[Optional[int], _opt("--block-size", help="KV-cache block size in tokens (default 16).")], "cache.block_size", lambda v: v),
    "gpu_memory_utilization": (Annotated[Optional[float], _opt("--gpu-memory-utilization", help="Fraction of GPU memory to use (default 0.9).")], "cache.gpu_memory_utilization", lambda v: v),
    "kv_sizing": (Annotated[Optional[str], _opt("--kv-sizing", help="When the KV cache is sized: before_capture (default; the CUDA graphs take memory beyond its budget) or after_capture (graphs first, the cache takes what they left).")], "cache.kv_sizing", lambda v: v),
    "num_kv_blocks": (Annotated[Optional[int], _opt("--num-kv-blocks", help="Explicit KV-cache block count.")], "cache.num_blocks", lambda v: v),
    "num_speculative_tokens": (Annotated[Optional[int], _opt("--num-speculative-tokens", help="Speculative tokens per step (decode query length 1+k).")], "speculative.num_speculative_tokens", lambda v: v),
    "speculative_method": (Annotated[Optional[str], _opt("--speculative-method", help="Drafter with --num-speculative-tokens: ngram (prompt lookup, default) or replay (an earlier greedy run's tokens).")], "speculative.method", lambda v: v),
    "prompt_lookup_min": (Annotated[Optional[int], _opt("--prompt-lookup-min", help="ngram: shortest suffix matched (default 2).")], "speculative.prompt_lookup_min", lambda v: v),
    "prompt_lookup_max": (Annotated[Optional[int], _opt("--prompt-lookup-max", help="ngram: longest suffix matched (default 4).")], "speculative.prompt_lookup_max", lambda v: v),
    "replay_acceptance": (Annotated[Optional[float], _opt("--replay-acceptance", help="replay: share of proposed tokens left uncorrupted (default 1).")], "speculative.replay_acceptance", lambda v: v),
    "lora_modules": (Annotated[Optional[list[str]], _opt("--lora-modules", help="LoRA adapter NAME=PATH (PEFT folder) or dummy:r=16[,n=4] (seeded); repeat for more.")], "lora.modules", list),
    "max_loras": (Annotated[Optional[int], _opt("--max-loras", help="Adapter slots (default: one per --lora-modules adapter).")], "lora.max_loras", lambda v: v),
    "max_lora_rank": (Annotated[Optional[int], _opt("--max-lora-rank", help="Largest adapter rank (default 16).")], "lora.max_lora_rank", lambda v: v),
    "cudagraph_specialize_lora": (Annotated[Optional[bool], _opt("--cudagraph-specialize-lora/--no-cudagraph-specialize-lora", help="Own CUDA-graph recordings for batches without adapters (default on).")], "lora.cudagraph_specialize_lora", lambda v: v),
    "dtype": (Annotated[Optional[str], _opt("--dtype", help="auto, float32, bfloat16 or float16.")], "model.dtype", lambda v: v),
    "load_format": (Annotated[Optional[str], _opt("--load-format", help="auto, dummy (seeded random) or safetensors.")], "model.load_format", lambda v: v),
    "device": (Annotated[Optional[str], _opt("--device", help="auto, cuda or cpu.")], "model.device", lambda v: v),
    "attention_backend": (Annotated[Optional[str], _opt("--attention-backend", help="auto, triton or reference.")], "model.attention_backend", lambda v: v),
    "kernels": (Annotated[Optional[str], _opt("--kernels", help="graphbench (its Triton kernels where they apply, default) or torch (every projection and norm as torch ops: what the kernels buy).")], "model.kernels", lambda v: v),
    "seed": (Annotated[Optional[int], _opt("--seed", help="Seed for dummy weights and sampling.")], "model.seed", lambda v: v),
    "tensor_parallel_size": (Annotated[Optional[int], _opt("--tensor-parallel-size", "--tp", help="Ranks of tensor parallelism (one process per GPU; gloo on the CPU).")], "parallel.tensor_parallel_size", lambda v: v),
    "cpu_threads": (Annotated[Optional[int], _opt("--cpu-threads", help="torch's intra-op threads on the CPU (default 1: steady beside other processes).")], "parallel.cpu_threads", lambda v: v),
}


def build_engine_config(values: dict[str, Any]) -> EngineConfig:
    """EngineConfig from the parsed engine flags (None = not given)."""
    overrides = {}
    for name, (_annotation, key, convert) in ENGINE_OPTIONS.items():
        if key is not None and values.get(name) is not None:
            overrides[key] = convert(values[name])
    return load_engine_config(values.get("config"), overrides)


def with_engine_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: add the engine flags to a command; it receives `engine_config: EngineConfig`."""
    signature = inspect.signature(func)
    own = [p for p in signature.parameters.values() if p.name != "engine_config"]
    extra = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
        for name, (annotation, _key, _convert) in ENGINE_OPTIONS.items()
    ]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        values = {name: kwargs.pop(name, None) for name in ENGINE_OPTIONS}
        return func(engine_config=build_engine_config(values), **kwargs)

    wrapper.__signature__ = signature.replace(parameters=own + extra)  # type: ignore[attr-defined]
    return wrapper
